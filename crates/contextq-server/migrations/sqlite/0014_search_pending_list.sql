-- PostgreSQL only (the GIN index's pending list); FTS5 merges its segments on its own
-- (automerge). Kept so that both databases count the same schema versions.
SELECT 1;
