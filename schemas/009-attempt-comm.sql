-- 009-attempt-comm.sql: what an attempt's ranks reported of their
-- communication per parallel dimension (tp, pp, dp; dtclient_step_dims),
-- kept with the attempt's goodput row (002) so that it outlives the
-- attempt: a JSON object {"steps": N, "tp": {"bytes": .., "comm_ms": ..,
-- "exposed_ms": ..}, "pp": {..}, "dp": {..}}, the means per step over the
-- N steps the goodput accounting sampled (one per new step it saw), each
-- step's figures the mean over the ranks that reported them.  NULL: no
-- rank reported them (orchestrator/report.c writes it).
ALTER TABLE attempt_goodput ADD COLUMN comm_dims TEXT
    CHECK (comm_dims IS NULL OR json_valid (comm_dims));
