-- 008-attempt-layout.sql: the parallel layout an attempt ran in: its tensor-
-- and pipeline-parallel degrees (the data-parallel degree is world_size /
-- (tp * pp)).  A restart on fewer nodes may drop data-parallel replicas or,
-- where the spec's parallel.shrink allows, use a smaller tp or pp; NULL for
-- attempts stored before this migration.
ALTER TABLE attempts ADD COLUMN tp INTEGER CHECK (tp >= 1);
ALTER TABLE attempts ADD COLUMN pp INTEGER CHECK (pp >= 1);
