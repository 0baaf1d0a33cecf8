-- 010-reform.sql: an attempt that re-formed in place (restart path
-- "reform": the surviving ranks kept running and re-formed the group with a
-- replacement of the lost rank).  restart_path's CHECK of 005 cannot be
-- widened without rebuilding the table, so such a row keeps 'in_place'
-- there (the same nodes, allocation and step) and says reform = 1; the
-- store reads 'reform' back for it.
ALTER TABLE attempts ADD COLUMN reform INTEGER NOT NULL DEFAULT 0
    CHECK (reform IN (0, 1));
