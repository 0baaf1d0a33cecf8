-- 001-initial.sql: the first schema of the dtctld database.
--
-- Times are integers: milliseconds since the epoch (UTC).  JSON columns hold
-- compact JSON text.  The state CHECKs mirror orchestrator/fsm.c; the code,
-- not the database, enforces which transitions are legal.

CREATE TABLE jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    uid         INTEGER NOT NULL,
    gid         INTEGER NOT NULL,
    user        TEXT    NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('pending', 'running', 'restarting',
                                                  'completed', 'failed', 'cancelled')),
    reason      TEXT,                       -- cause word of the last end/restart
    spec        TEXT    NOT NULL,           -- the spec as stored, defaults filled in
    submit_time INTEGER NOT NULL,
    start_time  INTEGER,
    end_time    INTEGER,
    attempts    INTEGER NOT NULL DEFAULT 0, -- number of the latest attempt
    restarts    INTEGER NOT NULL DEFAULT 0,
    exclude     TEXT    NOT NULL DEFAULT '[]', -- nodes excluded from later attempts
    last_step   INTEGER,                    -- flushed from live state (~1/s)
    last_loss   REAL,
    throughput  REAL,
    metrics_stride INTEGER NOT NULL DEFAULT 1, -- step-metric downsampling stride
    failure     TEXT,                       -- {cause,node,rank,time,detail,evidence} of the last failure
    result      TEXT                        -- what the trainer reported at the end
);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_uid ON jobs (uid);

CREATE TABLE attempts (
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    attempt     INTEGER NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('submitted', 'starting', 'running', 'ending',
                                                  'succeeded', 'failed', 'cancelled')),
    token       TEXT    NOT NULL UNIQUE,    -- hex of 256 random bits
    launcher    TEXT    NOT NULL,
    handle      TEXT,                       -- the launcher's handle (Slurm job id, pgid:N)
    slurm_job_id INTEGER NOT NULL DEFAULT 0,
    batch_host  TEXT,
    nodelist    TEXT,
    num_nodes   INTEGER NOT NULL,
    spare_nodes INTEGER NOT NULL DEFAULT 0,
    ranks_per_node INTEGER NOT NULL,
    world_size  INTEGER NOT NULL,
    exclude     TEXT    NOT NULL DEFAULT '[]',
    resume_step INTEGER,                    -- checkpoint resumed from (NULL: from scratch)
    resume_dir  TEXT,
    resume_sha256 TEXT,
    master_addr TEXT,
    master_port INTEGER,
    cause       TEXT,
    cause_node  TEXT,
    cause_rank  INTEGER,
    detail      TEXT,
    evidence    TEXT,                       -- JSON: exit code, stderr tail, heartbeat gap ...
    fail_time   INTEGER,                    -- first seen
    exit_code   INTEGER,
    submit_time INTEGER NOT NULL,
    start_time  INTEGER,                    -- all agents registered
    end_time    INTEGER,
    provenance  TEXT,                       -- JSON, per attempt (issue 10)
    PRIMARY KEY (job_id, attempt)
);
CREATE INDEX attempts_by_state ON attempts (state);

CREATE TABLE nodes (
    name        TEXT    PRIMARY KEY,
    state       TEXT    NOT NULL DEFAULT 'up' CHECK (state IN ('up', 'down', 'idle', 'suspect')),
    addr        TEXT,
    hostinfo    TEXT,                       -- JSON reported at registration
    first_seen  INTEGER NOT NULL,
    last_seen   INTEGER NOT NULL,
    job_id      INTEGER,
    attempt     INTEGER,
    failures    INTEGER NOT NULL DEFAULT 0,
    suspect_since INTEGER,
    note        TEXT
);

CREATE TABLE attempt_nodes (
    job_id      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    node        TEXT    NOT NULL,
    node_order  INTEGER NOT NULL,
    node_rank   INTEGER,                    -- NULL for spares / before rendezvous
    spare       INTEGER NOT NULL DEFAULT 0,
    addr        TEXT,
    port        INTEGER,
    pid         INTEGER,
    state       TEXT    NOT NULL DEFAULT 'registered',
    register_time INTEGER NOT NULL,
    last_heartbeat INTEGER,
    hostinfo    TEXT,
    PRIMARY KEY (job_id, attempt, node),
    FOREIGN KEY (job_id, attempt) REFERENCES attempts (job_id, attempt)
);

CREATE TABLE ranks (
    job_id      INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    rank        INTEGER NOT NULL,
    node        TEXT    NOT NULL,
    local_rank  INTEGER NOT NULL,
    pid         INTEGER,
    state       TEXT    NOT NULL,
    client      INTEGER NOT NULL DEFAULT 0,
    step        INTEGER,
    loss        REAL,
    samples     INTEGER,
    compute_ms  REAL,
    comm_ms     REAL,
    straggler_score REAL,
    exit_code   INTEGER,
    signal      INTEGER,
    updated     INTEGER NOT NULL,
    PRIMARY KEY (job_id, attempt, rank)
);

CREATE TABLE events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    time        INTEGER NOT NULL,
    job_id      INTEGER,
    attempt     INTEGER,
    kind        TEXT    NOT NULL,
    node        TEXT,
    rank        INTEGER,
    detail      TEXT,
    data        TEXT                        -- JSON
);
CREATE INDEX events_by_job ON events (job_id, id);

CREATE TABLE checkpoints (
    job_id      INTEGER NOT NULL REFERENCES jobs (id),
    step        INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    state       TEXT    NOT NULL CHECK (state IN ('pending', 'committed', 'bad', 'deleted')),
    dir         TEXT    NOT NULL,
    world_size  INTEGER NOT NULL,
    shards      INTEGER NOT NULL DEFAULT 0,
    bytes       INTEGER NOT NULL DEFAULT 0,
    manifest_sha256 TEXT,
    create_time INTEGER NOT NULL,
    commit_time INTEGER,
    PRIMARY KEY (job_id, step)
);

CREATE TABLE checkpoint_shards (
    job_id      INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    rank        INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    node        TEXT,
    path        TEXT    NOT NULL,
    bytes       INTEGER NOT NULL,
    crc32c      TEXT    NOT NULL,
    time        INTEGER NOT NULL,
    PRIMARY KEY (job_id, step, rank)
);

-- Downsampled: at most one row per bucket of jobs.metrics_stride steps; the
-- stride doubles (keeping the first row of each new bucket) when a job
-- reaches its cap, so a job holds at most a fixed number of rows.
CREATE TABLE metrics (
    job_id      INTEGER NOT NULL,
    step        INTEGER NOT NULL,
    attempt     INTEGER NOT NULL,
    time        INTEGER NOT NULL,
    loss        REAL,
    samples_per_s REAL,
    compute_ms  REAL,
    comm_ms     REAL,
    PRIMARY KEY (job_id, step)
);

CREATE TABLE node_health (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    node        TEXT    NOT NULL,
    time        INTEGER NOT NULL,
    job_id      INTEGER,
    attempt     INTEGER,
    kind        TEXT    NOT NULL,           -- node_lost, trainer_exit, hang, ...
    detail      TEXT
);
CREATE INDEX node_health_by_node ON node_health (node, time);
