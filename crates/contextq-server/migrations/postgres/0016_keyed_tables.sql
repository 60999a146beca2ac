-- SQLite only (its tables keyed by text become WITHOUT ROWID): a PostgreSQL table is a heap
-- beside its primary key's index whatever it is declared as, so nothing changes here; the
-- version is kept the same on both databases.
SELECT 1;
