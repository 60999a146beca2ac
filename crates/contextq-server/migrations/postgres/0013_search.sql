-- Full-text search (extension `search`, docs/search.md). `doc` holds the terms of each
-- context's current path (weight A, positions 1-256) and content (positions from 301) as
-- `contextq_api::search` writes them, and the tenant's term; GIN indexes it. The rows of
-- existing contexts are written by the server after this file (store::search).
CREATE TABLE context_search (
    context_id  TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    doc         tsvector NOT NULL
);
CREATE INDEX context_search_doc ON context_search USING gin (doc);
CREATE INDEX context_search_by_tenant ON context_search (tenant_id);
