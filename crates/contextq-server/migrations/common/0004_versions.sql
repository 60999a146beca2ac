-- Versions (extension `history`, docs/contextq-api.md): every create, update and delete of a
-- context keeps the state it wrote (a delete: a row without content), numbered per external id
-- (1, 2, 3, ... over every context that ever had it), with the tenant's audit sequence number of
-- the change (seq), its time and its key. A deleted context's versions stay. Retention: the last
-- versions of each external id, and a bound per tenant (checked whenever a tenant's audit
-- sequence crosses a multiple of 16).
CREATE TABLE context_versions (
    tenant_id     TEXT NOT NULL,
    seq           BIGINT NOT NULL,
    external_id   {{text_c}} NOT NULL,
    version       BIGINT NOT NULL,
    context_id    TEXT NOT NULL,
    context_version BIGINT NOT NULL,
    workspace_id  TEXT NOT NULL,
    action        TEXT NOT NULL CHECK (action IN ('create', 'update', 'delete')),
    type          TEXT NOT NULL,
    title         TEXT,
    tags          TEXT NOT NULL,
    content       TEXT,
    content_sha256 TEXT,
    size_bytes    BIGINT NOT NULL,
    api_key_id    TEXT,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, seq)
);
CREATE UNIQUE INDEX context_versions_by_external ON context_versions (tenant_id, external_id, version);
CREATE INDEX context_versions_by_context ON context_versions (tenant_id, context_id, version);

-- Contexts written before versions were kept: their current state becomes their version 1, an
-- 'update' (what came before is not known), numbered below the audit sequence (seq < 0).
INSERT INTO context_versions (tenant_id, seq, external_id, version, context_id, context_version,
    workspace_id, action, type, title, tags, content, size_bytes, api_key_id, created_at)
SELECT tenant_id, -ROW_NUMBER() OVER (PARTITION BY tenant_id ORDER BY external_id), external_id, 1,
    id, version, workspace_id, 'update', type, title, tags, content, size_bytes, NULL, updated_at
FROM contexts;
