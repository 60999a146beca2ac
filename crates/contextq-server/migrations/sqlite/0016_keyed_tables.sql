-- Two tables keyed by text, kept in their key's order (WITHOUT ROWID): SQLite then stores each
-- row in the primary key's own B-tree, instead of a rowid table beside a separate unique index,
-- so a write that records a keyed request's outcome, or a new version number, changes one page
-- less (docs/costs.md, "The tables and indexes a write touches"). Same columns, same rows.
CREATE TABLE write_outcomes_new (
    tenant_id      TEXT NOT NULL,
    key            TEXT NOT NULL,
    n              INTEGER NOT NULL,
    request_sha256 TEXT NOT NULL,
    status         INTEGER NOT NULL,
    answer         TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    PRIMARY KEY (tenant_id, key)
) WITHOUT ROWID;
INSERT INTO write_outcomes_new (tenant_id, key, n, request_sha256, status, answer, created_at)
SELECT tenant_id, key, n, request_sha256, status, answer, created_at FROM write_outcomes;
DROP TABLE write_outcomes;
ALTER TABLE write_outcomes_new RENAME TO write_outcomes;
CREATE INDEX write_outcomes_by_n ON write_outcomes (tenant_id, n);

CREATE TABLE version_counters_new (
    tenant_id     TEXT NOT NULL,
    external_id   TEXT NOT NULL,
    last_version  BIGINT NOT NULL,
    PRIMARY KEY (tenant_id, external_id)
) WITHOUT ROWID;
INSERT INTO version_counters_new (tenant_id, external_id, last_version)
SELECT tenant_id, external_id, last_version FROM version_counters;
DROP TABLE version_counters;
ALTER TABLE version_counters_new RENAME TO version_counters;
