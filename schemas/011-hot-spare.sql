-- 011-hot-spare.sql: an attempt in which a hot spare replaced a lost node
-- in a re-formed group (restart path "hot_spare": the surviving ranks kept
-- running, the spare's standby processes took the lost node's ranks).  As
-- in 010, restart_path's CHECK of 005 cannot be widened without rebuilding
-- the table, so such a row keeps 'spare' there (a spare took a failed
-- node's place in the same allocation) and says hot_spare = 1; the store
-- reads 'hot_spare' back for it.
ALTER TABLE attempts ADD COLUMN hot_spare INTEGER NOT NULL DEFAULT 0
    CHECK (hot_spare IN (0, 1));
