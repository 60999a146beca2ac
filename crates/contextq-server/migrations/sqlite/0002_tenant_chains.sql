-- Per-tenant audit chains (docs/schema.md). Every tenant's activity rows form a chain of their
-- own, numbered by tenant_seq, with its head in audit_heads: a write locks only its tenant's
-- head. Rows written before this migration keep their global chain (tenant_seq NULL), verified
-- against the frozen audit_head.
ALTER TABLE activity_logs ADD COLUMN tenant_seq BIGINT;
CREATE UNIQUE INDEX activity_logs_by_tenant_seq ON activity_logs (tenant_id, tenant_seq);

CREATE TABLE audit_heads (
    tenant_id   TEXT PRIMARY KEY REFERENCES tenants(id),
    seq         BIGINT NOT NULL,
    last_hash   TEXT
);
INSERT INTO audit_heads (tenant_id, seq, last_hash) SELECT id, 0, NULL FROM tenants;

-- Text edits (extension text-edit) applied once per Idempotency-Key, kept an hour.
CREATE TABLE idempotency_keys (
    tenant_id     TEXT NOT NULL,
    key           TEXT NOT NULL,
    context_id    TEXT NOT NULL,
    version       BIGINT NOT NULL,
    changed_line  BIGINT,
    created_at    TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (tenant_id, created_at);
