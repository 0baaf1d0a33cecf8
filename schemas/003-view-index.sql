-- 003-view-index.sql: the job view reads an attempt's nodes in their order,
-- the first 256 of them (STORE_VIEW_NODES_MAX).  With only the primary key
-- (job_id, attempt, node), SQLite sorted every node of the attempt first:
-- 4 ms for 5,000 nodes, on every status query of such a job.  This index
-- gives the order directly.
CREATE INDEX attempt_nodes_order ON attempt_nodes (job_id, attempt, node_order, node);
