-- 006-mfu.sql: what an attempt's trainers say about their FLOPs, for the
-- model FLOP utilisation (orchestrator/jobs/commbound.c).  Each rank
-- reports once (event "perf", schemas/agent-api.md) the model FLOPs of
-- its share of one training step and the peak FLOP/s it is measured
-- against; the attempt keeps their sums over the ranks that reported:
-- model_flops, the model FLOPs of one step of the whole job; peak_flops,
-- the peak FLOP/s of those ranks (NULL: a rank named no peak);
-- peak_source, where the peak came from (the ranks' word, or 'mixed').
-- NULL everywhere: the trainer reports nothing (no MFU).
ALTER TABLE attempts ADD COLUMN model_flops REAL;
ALTER TABLE attempts ADD COLUMN peak_flops REAL;
ALTER TABLE attempts ADD COLUMN peak_source TEXT;
