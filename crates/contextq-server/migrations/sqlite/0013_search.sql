-- Full-text search (extension `search`, docs/search.md). The index holds the terms of each
-- context's current path and content as `contextq_api::search` writes them (terms separated by
-- spaces, so the tokenizer only splits on spaces and never folds again); `scope` holds the
-- tenant's term. Contentless: the text itself is in `contexts` only. `secure-delete` removes a
-- replaced or deleted file's terms from the index's pages at once, not at a later merge.
-- `search_docs` numbers the documents (FTS5 rows are integers; a context's id is text).
-- The rows of existing contexts are written by the server after this file (store::search).
CREATE TABLE search_docs (
    n           INTEGER PRIMARY KEY,
    context_id  TEXT NOT NULL UNIQUE
);
CREATE VIRTUAL TABLE context_fts USING fts5(
    scope, path, body,
    content = '',
    contentless_delete = 1,
    tokenize = "unicode61 remove_diacritics 0 categories 'L* N* Co M* P* S*'"
);
INSERT INTO context_fts (context_fts, rank) VALUES ('secure-delete', 1);
