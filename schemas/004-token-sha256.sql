-- 004-token-sha256.sql: an attempt's agent token is stored as its SHA-256
-- (64 hex chars), never in clear, so that whoever reads the database
-- cannot act as that attempt's agents.  SQLite has no SHA-256 function:
-- this marks the tokens of existing rows, and store_open() replaces each
-- marked one with its hash in the same start.
UPDATE attempts SET token = 'plain:' || token WHERE token NOT LIKE 'plain:%';
