-- The search index's segments are merged between writes, not inside them: FTS5's `automerge`
-- made the write that completed a level's fourth segment merge them all, so a large file's
-- edit paid for merging everyone's postings (about 30% of a 64 KiB edit; docs/benchmarks.md,
-- "SQLite's page size and FTS5's merges"). A background task of the server merges instead
-- (`db::merges`); FTS5 still merges inside a write once a level holds `crisismerge` (16)
-- segments, so a server that does not run the task (an older binary cannot open this schema;
-- `DbOptions::index_merge_interval = None`) keeps the index bounded all the same.
INSERT INTO context_fts (context_fts, rank) VALUES ('automerge', 0);
