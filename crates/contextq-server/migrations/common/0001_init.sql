-- ContextQ-compatible schema, both dialects. See docs/schema.md.
CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    plan        TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'unlimited')),
    created_at  TEXT NOT NULL
);

CREATE TABLE users (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    email       TEXT NOT NULL,
    role        TEXT NOT NULL DEFAULT 'owner',
    created_at  TEXT NOT NULL,
    UNIQUE (tenant_id, email)
);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    user_id      TEXT REFERENCES users(id),
    key_hash     TEXT NOT NULL UNIQUE,
    key_last4    TEXT NOT NULL,
    scopes       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    revoked_at   TEXT
);

CREATE TABLE workspaces (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    slug        TEXT NOT NULL,
    name        TEXT NOT NULL,
    archived    {{bigint}} NOT NULL DEFAULT 0,
    created_at  TEXT NOT NULL,
    UNIQUE (tenant_id, slug)
);

CREATE TABLE contexts (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
    external_id   {{text_c}} NOT NULL,
    type          TEXT NOT NULL,
    title         TEXT,
    content       TEXT NOT NULL,
    tags          TEXT NOT NULL DEFAULT '[]',
    size_bytes    {{bigint}} NOT NULL,
    version       {{bigint}} NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL,
    UNIQUE (tenant_id, external_id)
);
CREATE INDEX contexts_by_workspace ON contexts (tenant_id, workspace_id, external_id);

CREATE TABLE context_tags (
    context_id  TEXT NOT NULL REFERENCES contexts(id) ON DELETE CASCADE,
    tenant_id   TEXT NOT NULL,
    tag         {{text_c}} NOT NULL,
    PRIMARY KEY (context_id, tag)
);
CREATE INDEX context_tags_by_tag ON context_tags (tenant_id, tag, context_id);

CREATE TABLE activity_logs (
    seq           {{bigint}} PRIMARY KEY,
    tenant_id     TEXT NOT NULL,
    api_key_id    TEXT,
    action        TEXT NOT NULL,
    entity_type   TEXT NOT NULL,
    entity_id     TEXT NOT NULL,
    detail        TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    prev_hash     TEXT,
    hash          TEXT NOT NULL
);
CREATE INDEX activity_logs_by_tenant ON activity_logs (tenant_id, seq);

CREATE TABLE audit_head (
    id         {{bigint}} PRIMARY KEY CHECK (id = 1),
    seq        {{bigint}} NOT NULL,
    last_hash  TEXT
);
INSERT INTO audit_head (id, seq, last_hash) VALUES (1, 0, NULL);
