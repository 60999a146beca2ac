-- Full-text search (extension `search`, docs/search.md). The index holds the terms of each
-- context's current path and content as `contextq_api::search` writes them (terms separated by
-- spaces, so the tokenizer only splits on spaces and never folds again); `scope` holds the
-- tenant's term. Contentless: the text itself is in `contexts` only; a delete is a tombstone
-- (the terms stay in their segment, never matched, until a merge; a redaction merges all).
-- `search_docs` numbers the documents (FTS5 rows are integers; a context's id is text), never
-- reusing a number (AUTOINCREMENT), so a new document never meets an old one's tombstones.
-- The rows of existing contexts are written by the server after this file (store::search).
CREATE TABLE search_docs (
    n           INTEGER PRIMARY KEY AUTOINCREMENT,
    context_id  TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE context_fts USING fts5(
    scope, path, body,
    content = '',
    contentless_delete = 1,
    tokenize = "unicode61 remove_diacritics 0 categories 'L* N* Co M* P* S*'"
);
