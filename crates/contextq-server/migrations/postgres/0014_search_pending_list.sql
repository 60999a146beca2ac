-- The GIN index's pending list (`fastupdate`) holds new entries unsorted until VACUUM (or the
-- 4 MB `gin_pending_list_limit`) merges them, and every search reads all of it: on a database
-- nobody vacuumed by hand a search took 5 ms for one hit at 20,000 files (docs/benchmarks.md,
-- "Search"). 256 kB keeps that read small; the write that fills the list merges it.
ALTER INDEX context_search_doc SET (gin_pending_list_limit = 256);
SELECT gin_clean_pending_list('context_search_doc'::regclass);
