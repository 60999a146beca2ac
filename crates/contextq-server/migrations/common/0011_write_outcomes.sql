-- Outcomes of keyed writes (extension `idempotency`, docs/contextq-api.md): every write sent
-- with an `Idempotency-Key` records, in its own transaction, the digest of its request and the
-- answer it got (status and body, without file contents), so that a repeat is answered with
-- that outcome whatever happened since. `n` numbers a tenant's records; each keyed write prunes
-- its tenant's records past the newest 10,000, and a record older than an hour is not replayed.
-- The text edit's own table (migration 2) is replaced: its keys replayed within an hour only.
CREATE TABLE write_outcomes (
    tenant_id      TEXT NOT NULL,
    key            TEXT NOT NULL,
    n              {{bigint}} NOT NULL,
    request_sha256 TEXT NOT NULL,
    status         {{bigint}} NOT NULL,
    answer         TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
);
CREATE INDEX write_outcomes_by_n ON write_outcomes (tenant_id, n);
DROP TABLE idempotency_keys;
