-- SQLite only (FTS5's merges move out of the write): PostgreSQL's GIN index merges its pending
-- list on its own terms (migration 14); the version is kept the same on both databases.
SELECT 1;
