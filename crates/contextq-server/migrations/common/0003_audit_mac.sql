-- A keyed audit log (docs/schema.md): with an audit key (a file outside the database), every
-- row carries an HMAC of its chain hash, and every head an HMAC of its position and of the row
-- from which its chain is keyed. audit_meta names the key's fingerprint once the database is
-- keyed; a server without that key refuses to open it.
ALTER TABLE activity_logs ADD COLUMN mac TEXT;
ALTER TABLE audit_heads ADD COLUMN keyed_from {{bigint}};
ALTER TABLE audit_heads ADD COLUMN mac TEXT;
CREATE TABLE audit_meta (
    id               {{bigint}} PRIMARY KEY CHECK (id = 1),
    key_fingerprint  TEXT NOT NULL,
    keyed_at         TEXT NOT NULL
);
