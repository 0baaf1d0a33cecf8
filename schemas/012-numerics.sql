-- 012-numerics.sql: what each attempt computed with (its numerics
-- identity, a JSON object the trainer reports: BLAS library and core type,
-- device, library versions, precision, ...), and whether it differs from
-- the job's pinned identity (its first attempt's): from such an attempt
-- on, the job's parameters are no longer bit-identical to an
-- uninterrupted run's.
ALTER TABLE attempts ADD COLUMN numerics TEXT;
ALTER TABLE attempts ADD COLUMN numerics_changed INTEGER NOT NULL DEFAULT 0
    CHECK (numerics_changed IN (0, 1));
