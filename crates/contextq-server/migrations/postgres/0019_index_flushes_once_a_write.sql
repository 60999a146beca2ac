-- SQLite only (FTS5's in-memory terms of a write): PostgreSQL builds a write's `tsvector` rows
-- in the statement; the version is kept the same on both databases.
SELECT 1;
