-- 007-integrity-state.sql: what the controller's integrity guard
-- (orchestrator/jobs/integrity.c) remembers about a job across attempts,
-- so that its own restart forgets none of it: a fault that caused a
-- rollback and awaits its attribution by the re-run, the step from which
-- committed checkpoints are to be marked bad at the next attempt, and the
-- steps whose batches every later attempt skips.  One row per job that
-- has any; 'state' is a JSON object (integritypolicy.h, integ_state_encode).
CREATE TABLE job_integrity (
    job_id  INTEGER PRIMARY KEY REFERENCES jobs (id),
    state   TEXT NOT NULL CHECK (json_valid (state))
);
