/* store_sql.c: the SQL statements of dtctld, one per enum stmt_id
 * (store_int.h), each prepared once on first use (store_stmt). */
#include <config.h>
#include "orchestrator/store.h"
#include "orchestrator/store_int.h"

/* The API's view of a node (GET /v1/nodes, GET /v1/nodes/{name}): its
 * health, "ok" unless suspect, and the newest failure blamed on it
 * (node_health rows other than admin clears). */
#define SQL_NODE_SELECT                                                                  \
    "SELECT name, state, CASE WHEN state = 'suspect' THEN 'suspect' ELSE 'ok' END AS "   \
    "health,"                                                                            \
    " addr, first_seen, last_seen, job_id AS job, attempt, failures, suspect_since, "    \
    "note,"                                                                              \
    " (SELECT max (h.time) FROM node_health h WHERE h.node = nodes.name"                 \
    "   AND h.kind != 'cleared') AS last_failure_time,"                                  \
    " (SELECT h.kind FROM node_health h WHERE h.node = nodes.name AND h.kind != "        \
    "'cleared'"                                                                          \
    "   ORDER BY h.time DESC, h.id DESC LIMIT 1) AS last_cause,"                         \
    " hostinfo"

const char *const store_sql[S_COUNT] = {
    [S_GOODPUT_PUT] =
      "INSERT OR REPLACE INTO attempt_goodput (job_id, attempt, train_start, first_step,"
      " first_step_time, last_step, last_step_time, hb_samples, busy_samples, "
      "step_samples,"
      " step_ms_sum, batch_samples, hist, updated, comm_dims)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)",
    [S_GOODPUT_LOAD] =
      "SELECT train_start, first_step, first_step_time, last_step, last_step_time,"
      " hb_samples, busy_samples, step_samples, step_ms_sum, batch_samples, hist,"
      " comm_dims FROM attempt_goodput WHERE job_id = ?1 AND attempt = ?2",
    /* Left the queue: became starting (the allocation began). */
    [S_ATT_LEFT_QUEUE] =
      "SELECT min (time) FROM events WHERE job_id = ?1 AND attempt = ?2"
      " AND kind = 'attempt_state' AND json_extract (data, '$.to') = 'starting'",
    /* Created by a manual resubmission: the job went back to pending
     * during the attempt before. */
    [S_ATT_RESUBMITTED] =
      "SELECT count (*) FROM events WHERE job_id = ?1 AND attempt = ?2 - 1"
      " AND kind = 'job_state' AND json_extract (data, '$.to') = 'pending'",
    [S_ATT_RESULT_TIME] = "SELECT max (time) FROM events WHERE job_id = ?1 AND attempt = "
                          "?2 AND kind = 'result'",
    [S_EVENT] =
      "INSERT INTO events (time, job_id, attempt, kind, node, rank, detail, data)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_JOB_INSERT] =
      "INSERT INTO jobs (name, uid, gid, user, state, reason, spec, submit_time,"
      " start_time, end_time, attempts, restarts, exclude, last_step, last_loss,"
      " throughput, metrics_stride, failure, result)"
      " VALUES (?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,"
      " ?18, ?19, ?20)",
    [S_JOB_UPDATE] =
      "UPDATE jobs SET name = ?2, uid = ?3, gid = ?4, user = ?5, state = ?6, reason = ?7,"
      " spec = ?8, submit_time = ?9, start_time = ?10, end_time = ?11, attempts = ?12,"
      " restarts = ?13, exclude = ?14, last_step = ?15, last_loss = ?16, throughput = "
      "?17,"
      " metrics_stride = ?18, failure = ?19, result = ?20 WHERE id = ?1",
    [S_ATT_INSERT] =
      "INSERT INTO attempts (job_id, attempt, state, token, launcher, handle, "
      "slurm_job_id,"
      " batch_host, nodelist, num_nodes, spare_nodes, ranks_per_node, world_size, "
      "exclude,"
      " resume_step, resume_dir, resume_sha256, master_addr, master_port, cause,"
      " cause_node, cause_rank, detail, evidence, fail_time, exit_code, submit_time,"
      " start_time, end_time, provenance, restart_path, model_flops, peak_flops,"
      " peak_source, tp, pp, reform, hot_spare)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
      "?17,"
      " ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28, ?29, ?30,"
      " CASE WHEN ?31 = 'reform' THEN 'in_place' WHEN ?31 = 'hot_spare' THEN 'spare'"
      " ELSE ?31 END, ?32, ?33, ?34, ?35, ?36, ?31 IS 'reform', ?31 IS 'hot_spare')",
    [S_ATT_UPDATE] =
      "UPDATE attempts SET state = ?3, token = ?4, launcher = ?5, handle = ?6,"
      " slurm_job_id = ?7, batch_host = ?8, nodelist = ?9, num_nodes = ?10,"
      " spare_nodes = ?11, ranks_per_node = ?12, world_size = ?13, exclude = ?14,"
      " resume_step = ?15, resume_dir = ?16, resume_sha256 = ?17, master_addr = ?18,"
      " master_port = ?19, cause = ?20, cause_node = ?21, cause_rank = ?22, detail = ?23,"
      " evidence = ?24, fail_time = ?25, exit_code = ?26, submit_time = ?27,"
      " start_time = ?28, end_time = ?29, provenance = ?30, restart_path ="
      " CASE WHEN ?31 = 'reform' THEN 'in_place' WHEN ?31 = 'hot_spare' THEN 'spare'"
      " ELSE ?31 END, reform = ?31 IS 'reform', hot_spare = ?31 IS 'hot_spare',"
      " model_flops = ?32, peak_flops = ?33, peak_source = ?34, tp = ?35, pp = ?36"
      " WHERE job_id = ?1 AND attempt = ?2",
    [S_ATTNODE_PUT] =
      "INSERT OR REPLACE INTO attempt_nodes (job_id, attempt, node, node_order, "
      "node_rank,"
      " spare, addr, port, pid, state, register_time, last_heartbeat, hostinfo)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    [S_NODE_SEEN] =
      "INSERT INTO nodes (name, state, addr, hostinfo, first_seen, last_seen, job_id, "
      "attempt)"
      " VALUES (?1, 'up', ?2, ?3, ?4, ?4, ?5, ?6)"
      " ON CONFLICT (name) DO UPDATE SET addr = coalesce (?2, addr),"
      " hostinfo = coalesce (?3, hostinfo), last_seen = ?4, job_id = ?5, attempt = ?6,"
      " state = CASE WHEN state = 'suspect' THEN state ELSE 'up' END",
    [S_NODE_STATE] =
      "UPDATE nodes SET state = ?2, note = coalesce (?3, note),"
      " suspect_since = CASE WHEN ?2 = 'suspect' THEN ?4 ELSE NULL END WHERE name = ?1",
    [S_NODE_FAIL_HEALTH] =
      "INSERT INTO node_health (node, time, job_id, attempt, kind, detail)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    [S_NODE_FAIL_COUNT] =
      "INSERT INTO nodes (name, state, first_seen, last_seen, failures)"
      " VALUES (?1, 'up', ?2, ?2, 1)"
      " ON CONFLICT (name) DO UPDATE SET failures = failures + 1",
    [S_RANK_PUT] =
      "INSERT OR REPLACE INTO ranks (job_id, attempt, rank, node, local_rank, pid, state,"
      " client, step, loss, samples, compute_ms, comm_ms, straggler_score, exit_code,"
      " signal, updated)"
      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, "
      "?17)",
    [S_METRIC_PUT] =
      "INSERT OR REPLACE INTO metrics (job_id, step, attempt, time, loss, samples_per_s,"
      " compute_ms, comm_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [S_METRIC_COUNT] = "SELECT count(*) FROM metrics WHERE job_id = ?1",
    [S_METRIC_THIN] =
      "DELETE FROM metrics WHERE job_id = ?1 AND EXISTS (SELECT 1 FROM metrics m"
      " WHERE m.job_id = metrics.job_id AND m.step / ?2 = metrics.step / ?2"
      " AND m.step < metrics.step)",
    [S_CKPT_PENDING] =
      "INSERT INTO checkpoints (job_id, step, attempt, state, dir, world_size, "
      "create_time)"
      " VALUES (?1, ?2, ?3, 'pending', ?4, ?5, ?6)"
      " ON CONFLICT (job_id, step) DO UPDATE SET attempt = ?3, state = 'pending',"
      " dir = ?4, world_size = ?5, create_time = ?6, shards = 0, bytes = 0,"
      " manifest_sha256 = NULL, commit_time = NULL WHERE state != 'committed'",
    [S_SHARD_PUT] =
      "INSERT OR REPLACE INTO checkpoint_shards (job_id, step, rank, attempt, node, path,"
      " bytes, crc32c, time) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [S_CKPT_SHARDS] =
      "SELECT count(*), coalesce (sum (s.bytes), 0) FROM checkpoint_shards s"
      " JOIN checkpoints c ON c.job_id = s.job_id AND c.step = s.step"
      " WHERE s.job_id = ?1 AND s.step = ?2 AND s.attempt = c.attempt",
    [S_CKPT_STATE] =
      "UPDATE checkpoints SET state = ?3, manifest_sha256 = coalesce (?4, "
      "manifest_sha256),"
      " commit_time = coalesce (?5, commit_time),"
      " shards = (SELECT count(*) FROM checkpoint_shards s WHERE s.job_id = ?1"
      "   AND s.step = ?2 AND s.attempt = checkpoints.attempt),"
      " bytes = (SELECT coalesce (sum (bytes), 0) FROM checkpoint_shards s"
      "   WHERE s.job_id = ?1 AND s.step = ?2 AND s.attempt = checkpoints.attempt)"
      " WHERE job_id = ?1 AND step = ?2",
    [S_CKPT_LATEST] =
      "SELECT step, dir, manifest_sha256 FROM checkpoints"
      " WHERE job_id = ?1 AND state = 'committed' ORDER BY step DESC LIMIT 1",
    [S_CKPT_COMMITTED] =
      "SELECT step FROM checkpoints WHERE job_id = ?1 AND state = 'committed'"
      " ORDER BY step DESC LIMIT -1 OFFSET ?2",
    [S_CKPT_GETSTATE] = "SELECT state FROM checkpoints WHERE job_id = ?1 AND step = ?2",
    [S_CKPT_SHARDS_LIST] =
      "SELECT s.rank, s.path, s.bytes, s.crc32c, s.node FROM checkpoint_shards s"
      " JOIN checkpoints c ON c.job_id = s.job_id AND c.step = s.step"
      " WHERE s.job_id = ?1 AND s.step = ?2 AND s.attempt = c.attempt ORDER BY s.rank",
    [S_ATT_BY_TOKEN] = "SELECT job_id, attempt, state FROM attempts WHERE token = ?1",
    [S_JOB_LOAD] =
      "SELECT id, name, uid, gid, user, state, reason, spec, submit_time, start_time,"
      " end_time, attempts, restarts, exclude, last_step, last_loss, throughput,"
      " metrics_stride, failure, result FROM jobs WHERE id = ?1",
    [S_ATT_LOAD] =
      "SELECT job_id, attempt, state, token, launcher, handle, slurm_job_id, batch_host,"
      " nodelist, num_nodes, spare_nodes, ranks_per_node, world_size, exclude, "
      "resume_step,"
      " resume_dir, resume_sha256, master_addr, master_port, cause, cause_node, "
      "cause_rank,"
      " detail, evidence, fail_time, exit_code, submit_time, start_time, end_time,"
      " provenance, CASE WHEN reform = 1 THEN 'reform' WHEN hot_spare = 1 THEN "
      "'hot_spare'"
      " ELSE restart_path END,"
      " model_flops, peak_flops, peak_source, tp, pp FROM "
      "attempts"
      " WHERE job_id = ?1 AND attempt = ?2",
    [S_LIVE_JOBS] =
      "SELECT id FROM jobs WHERE state IN ('pending', 'running', 'restarting')"
      " UNION SELECT job_id FROM attempts"
      " WHERE state IN ('submitted', 'starting', 'running', 'ending') ORDER BY 1",
    [S_JOB_VIEW] =
      "SELECT id, name, user, uid, gid, state, reason, submit_time, start_time, end_time,"
      " spec, attempts AS attempt, restarts, last_step AS step, last_loss AS loss,"
      " throughput, exclude,"
      " (SELECT max (step) FROM checkpoints c WHERE c.job_id = jobs.id"
      "   AND c.state = 'committed') AS last_checkpoint,"
      " (SELECT coalesce (commit_time, create_time) FROM checkpoints c"
      "   WHERE c.job_id = jobs.id AND c.state = 'committed' ORDER BY step DESC LIMIT 1)"
      "   AS last_checkpoint_time,"
      /* The job's pinned numerics (its first attempt's), and the first
       * attempt that ran with others (012-numerics.sql; strict mode's
       * refused attempts did not run on). */
      " (SELECT a.numerics FROM attempts a WHERE a.job_id = jobs.id"
      "   AND a.numerics IS NOT NULL ORDER BY a.attempt LIMIT 1) AS numerics,"
      " (SELECT min (a.attempt) FROM attempts a WHERE a.job_id = jobs.id"
      "   AND a.numerics_changed = 1 AND coalesce (a.cause, '') != 'numerics_changed')"
      "   AS numerics_changed_from,"
      " failure, result FROM jobs WHERE id = ?1",
    [S_ATT_VIEW] =
      "SELECT job_id AS job, attempt, state, cause, cause_node, cause_rank, detail, "
      "evidence,"
      " fail_time, exit_code, submit_time, start_time, end_time, launcher, handle,"
      " slurm_job_id, batch_host, nodelist, num_nodes, spare_nodes, ranks_per_node,"
      " world_size, exclude, resume_step, master_addr, master_port,"
      " CASE WHEN reform = 1 THEN 'reform' WHEN hot_spare = 1 THEN 'hot_spare'"
      " ELSE restart_path END AS restart_path,"
      /* MFU over the attempt: its model FLOPs per step over its peak
       * FLOP/s times its mean step time (report.c's step-time samples). */
      " model_flops, peak_flops, peak_source, numerics, numerics_changed,"
      " (SELECT attempts.model_flops * g.step_samples * 1000.0"
      "   / (attempts.peak_flops * g.step_ms_sum) FROM attempt_goodput g"
      "   WHERE g.job_id = attempts.job_id AND g.attempt = attempts.attempt"
      "   AND g.step_ms_sum > 0 AND attempts.peak_flops > 0) AS mfu,"
      /* The layout: data parallel over what tp and pp leave. */
      " CASE WHEN tp IS NULL OR pp IS NULL THEN NULL"
      "   ELSE json_object ('tp', tp, 'pp', pp, 'dp', world_size / (tp * pp)) END"
      "   AS layout,"
      /* Communication per parallel dimension, kept by report.c. */
      " (SELECT g.comm_dims FROM attempt_goodput g WHERE g.job_id = attempts.job_id"
      "   AND g.attempt = attempts.attempt) AS comm_dims,"
      /* A huge attempt's provenance comes trimmed from the memo (below). */
      /* (with what the trainers computed, once reported: the numerics) */
      " CASE WHEN ?2 >= 0 AND length (provenance) > ?3 THEN NULL"
      "   WHEN numerics IS NOT NULL AND json_valid (provenance)"
      "   THEN json_set (provenance, '$.numerics', json (numerics)) ELSE provenance END"
      " AS provenance, ?2 >= 0 AND length (provenance) > ?3 AS provenance_big"
      " FROM attempts WHERE job_id = ?1 ORDER BY attempt",
    /* The provenance of one attempt with its first ?3 nodes: SQLite's JSON
     * functions skim the text, where building the whole tree in jansson
     * took 10-30 ms for 5,000 nodes. */
    [S_ATT_PROV_VIEW] =
      "SELECT CASE WHEN json_array_length (provenance, '$.machine.nodes') > ?3"
      "  THEN json_set (provenance, '$.machine.nodes', json ((SELECT json_group_array "
      "(value)"
      "   FROM json_each (attempts.provenance, '$.machine.nodes') WHERE key < ?3)),"
      "   '$.machine.nodes_truncated', json ('true'))"
      "  ELSE provenance END FROM (SELECT CASE WHEN numerics IS NOT NULL"
      "   AND json_valid (provenance) THEN json_set (provenance, '$.numerics',"
      "   json (numerics)) ELSE provenance END AS provenance FROM attempts"
      "   WHERE job_id = ?1 AND attempt = ?2) AS attempts",
    [S_ATTNODES_VIEW] =
      "SELECT node, node_order, node_rank, spare, addr, port, pid, state,"
      " register_time, last_heartbeat AS last_heartbeat_time"
      " FROM attempt_nodes WHERE job_id = ?1 AND attempt = ?2 ORDER BY node_order, node"
      " LIMIT ?3",
    [S_EVENTS_VIEW] = "SELECT id, time, job_id AS job, attempt, kind, node, rank, "
                      "detail, data FROM events"
                      " WHERE job_id = ?1 AND id > ?2 ORDER BY id LIMIT ?3",
    [S_CKPTS_VIEW] =
      "SELECT step, attempt, state, dir, world_size, shards, bytes, manifest_sha256,"
      " create_time AS time, commit_time FROM checkpoints WHERE job_id = ?1"
      " ORDER BY step DESC",
    [S_METRICS_VIEW] =
      "SELECT step, time, attempt, loss, samples_per_s, compute_ms, comm_ms FROM metrics"
      " WHERE job_id = ?1 ORDER BY step",
    /* For plots (store_plot.c): rows and step range, then
     * single rows found through the primary key. */
    [S_METRICS_RANGE] =
      /* min and max apart: together SQLite walks every row of the job for
       * them (28 ms for 100,000 rows, where each alone is one seek) */
    "SELECT (SELECT count(*) FROM metrics WHERE job_id = ?1),"
    " (SELECT min(step) FROM metrics WHERE job_id = ?1),"
    " (SELECT max(step) FROM metrics WHERE job_id = ?1)",
    [S_METRIC_AT] =
      "SELECT step, time, attempt, loss, samples_per_s, compute_ms, comm_ms FROM metrics"
      " WHERE job_id = ?1 AND step >= ?2 ORDER BY step LIMIT 1",
    [S_METRIC_BEFORE] =
      "SELECT step, time, attempt, loss, samples_per_s, compute_ms, comm_ms FROM metrics"
      " WHERE job_id = ?1 AND step < ?2 ORDER BY step DESC LIMIT 1",
    [S_METRIC_CHANGE] =
      "SELECT step, time, attempt, loss, samples_per_s, compute_ms, comm_ms FROM metrics"
      " WHERE job_id = ?1 AND step > ?2 AND step < ?3 AND attempt != ?4 ORDER BY step"
      " LIMIT 1",
    [S_RANKS_VIEW] =
      "SELECT rank, node, local_rank, pid, state, client, step, loss, samples, "
      "compute_ms,"
      " comm_ms, straggler_score, exit_code, signal, updated AS last_seen FROM ranks"
      " WHERE job_id = ?1 AND attempt = ?2 ORDER BY rank",
    [S_NODES_VIEW] = SQL_NODE_SELECT " FROM nodes ORDER BY name",
    [S_JOB_COUNTS] = "SELECT state, count(*) FROM jobs GROUP BY state",
    [S_ATT_COUNTS] = "SELECT state, count(*) FROM attempts GROUP BY state",
    [S_FAIL_COUNTS] = "SELECT cause, count(*) FROM attempts WHERE cause IS NOT NULL"
                      " AND state IN ('failed', 'ending') GROUP BY cause",
    [S_CKPT_COUNT] = "SELECT count(*) FROM checkpoints WHERE state = 'committed'",
    /* Node health: the failures that count, within the window, since the
     * last clear, of an infrastructure cause unless ?3 (SuspectCauses=any);
     * how many jobs, and of how many users. */
    [S_NODE_FAIL_JOBS] =
      "SELECT count(DISTINCT h.job_id), count(DISTINCT coalesce (j.uid, -1)) FROM "
      "node_health h"
      " LEFT JOIN jobs j ON j.id = h.job_id WHERE h.node = ?1"
      " AND h.kind != 'cleared' AND h.time >= ?2 AND h.time > coalesce ((SELECT max "
      "(c.time)"
      "   FROM node_health c WHERE c.node = ?1 AND c.kind = 'cleared'), 0)"
      " AND (?3 OR h.kind IN ('node_lost', 'slurm_node_fail'))",
    [S_NODE_SUSPECT] = "UPDATE nodes SET state = 'suspect', suspect_since = ?2, note = ?3"
                       " WHERE name = ?1 AND state != 'suspect'",
    [S_NODE_EXISTS] = "SELECT count(*) FROM nodes WHERE name = ?1",
    [S_NODE_CLEAR] =
      "UPDATE nodes SET state = 'up', suspect_since = NULL, note = ?2 WHERE name = ?1",
    [S_NODE_CLEARED_EVENT] =
      "INSERT INTO node_health (node, time, kind, detail) VALUES (?1, ?2, 'cleared', ?3)",
    [S_NODES_SUSPECT] = "SELECT name FROM nodes WHERE state = 'suspect' ORDER BY name",
    [S_CKPT_IN_STATE] =
      "SELECT step FROM checkpoints WHERE job_id = ?1 AND state = ?2 ORDER BY step",
    /* GET /v1/nodes/{name}: the node as in S_NODES_VIEW ... */
    [S_NODE_VIEW] = SQL_NODE_SELECT " FROM nodes WHERE name = ?1",
    /* ... its health history, newest first: failures blamed on it (kind
     * "failure", the cause as recorded) and admin clears (kind "cleared",
     * detail says who).  since_clear: the failure happened after the last
     * clear, so it still counts towards making the node suspect (see
     * S_NODE_FAIL_JOBS, which uses the same comparison). */
    [S_NODE_HISTORY] =
      "SELECT id, time, CASE WHEN kind = 'cleared' THEN 'cleared' ELSE 'failure' END AS "
      "kind,"
      " job_id AS job, attempt, CASE WHEN kind = 'cleared' THEN NULL ELSE kind END AS "
      "cause,"
      " detail, (kind != 'cleared' AND time > coalesce ((SELECT max (c.time)"
      "   FROM node_health c WHERE c.node = ?1 AND c.kind = 'cleared'), 0)) AS "
      "since_clear"
      " FROM node_health WHERE node = ?1 ORDER BY time DESC, id DESC LIMIT ?2",
    /* ... and its latest clear, if any. */
    [S_NODE_LAST_CLEAR] =
      "SELECT time, detail FROM node_health WHERE node = ?1 AND kind = 'cleared'"
      " ORDER BY time DESC, id DESC LIMIT 1",
};
