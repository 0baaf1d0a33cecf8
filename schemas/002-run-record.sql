-- 002-run-record.sql: goodput accounting of attempts (issue 10).
--
-- One row per attempt with the timing facts the controller learns from
-- heartbeats and cannot read back from the other tables: when training
-- began and when the last step was seen, the steps reached, a fixed-size
-- step-time histogram (for p50/p90/p99 without keeping every step), and
-- the heartbeat samples that saw a rank busy with a checkpoint.  Written by
-- orchestrator/report.c in batched transactions (about once per second), so
-- the table grows with the number of attempts, not of steps.  Times are
-- milliseconds since the epoch (UTC).  Provenance lives in
-- attempts.provenance (001), filled by orchestrator/provenance.c.

CREATE TABLE attempt_goodput (
    job_id          INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    train_start     INTEGER,        -- estimated start of the first step of the attempt
    first_step      INTEGER,        -- first step seen in a heartbeat
    first_step_time INTEGER,        -- when it was seen
    last_step       INTEGER,        -- steps reached (every rank had finished it)
    last_step_time  INTEGER,        -- when it was seen
    hb_samples      INTEGER NOT NULL DEFAULT 0, -- heartbeats seen while training
    busy_samples    INTEGER NOT NULL DEFAULT 0, -- of those, with a rank busy (checkpoint)
    step_samples    INTEGER NOT NULL DEFAULT 0, -- step times recorded in hist
    step_ms_sum     REAL    NOT NULL DEFAULT 0,
    batch_samples   INTEGER,        -- samples of one step summed over the ranks
    hist            TEXT,           -- JSON: {"base_ms":..,"ratio":..,"counts":[[bucket,n],...]}
    updated         INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
