-- Version numbers never restart (docs/history.md): the last number given to each external id,
-- kept when its versions are pruned, so that a context created again after every version of
-- its external id was pruned goes on counting (and a time inside the pruned life reads as
-- "unknown", never "absent"). Written in the same batch as each version.
CREATE TABLE version_counters (
    tenant_id     TEXT NOT NULL,
    external_id   {{text_c}} NOT NULL,
    last_version  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, external_id)
);
INSERT INTO version_counters (tenant_id, external_id, last_version)
SELECT tenant_id, external_id, MAX(version) FROM context_versions GROUP BY tenant_id, external_id;

-- An Idempotency-Key is bound to its request: the external id it edited and a digest of the
-- request (method, external id, body, If-Match). Keys stored before this migration carry
-- neither and are never replayed (reuse is refused, 422).
ALTER TABLE idempotency_keys ADD COLUMN external_id TEXT NOT NULL DEFAULT '';
ALTER TABLE idempotency_keys ADD COLUMN request_sha256 TEXT NOT NULL DEFAULT '';

-- Keys can expire (`expires_at`, checked on every request; NULL: never). The inspector's sign-in
-- mints keys of their own (`kind` 'ui-session'), which expire and are revoked by Sign out, so
-- that the key a sign-in link stands for never leaves the server.
ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
ALTER TABLE api_keys ADD COLUMN kind TEXT NOT NULL DEFAULT 'key';

-- The frozen global chain (rows written before per-tenant chains, which carry no MAC) as it was
-- when the log was keyed, under the key's MAC: a row forged into that chain afterwards, or one
-- removed from it, no longer matches. Filled when the log is keyed (or, for a log keyed
-- before this migration, the first time the server opens it with its key).
ALTER TABLE audit_meta ADD COLUMN legacy_seq BIGINT;
ALTER TABLE audit_meta ADD COLUMN legacy_hash TEXT;
ALTER TABLE audit_meta ADD COLUMN legacy_mac TEXT;
