-- 005-restart-path.sql: which path an attempt's restart took
-- (restartpolicy.h, restart_path_of): 'in_place' (same nodes, a new step of
-- the same allocation), 'spare' (same allocation, a spare took a failed
-- node's place), 'new_allocation' (a new Slurm job, or any restart of the
-- local and external launchers); NULL for a job's first attempt.
ALTER TABLE attempts ADD COLUMN restart_path TEXT
    CHECK (restart_path IN ('in_place', 'spare', 'new_allocation'));
