-- No write counts rows (docs/benchmarks.md, "Cost by tenant size"): a tenant's counts of
-- contexts (its plan's cap) and of versions (the retention bound) live on its audit head, which
-- every write locks and moves, and each write adds what it changed. They are not part of the
-- head's MAC: they bound what a tenant may hold, they do not vouch for the log.
ALTER TABLE audit_heads ADD COLUMN contexts BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit_heads ADD COLUMN versions BIGINT NOT NULL DEFAULT 0;
UPDATE audit_heads SET
    contexts = (SELECT COUNT(*) FROM contexts c WHERE c.tenant_id = audit_heads.tenant_id),
    versions = (SELECT COUNT(*) FROM context_versions v WHERE v.tenant_id = audit_heads.tenant_id);

-- A version the tenant's bound may prune: a delete, or one with a newer version of its external
-- id (set when the newer one is written). The bound reads these oldest first through the partial
-- index, so it never walks past the newest versions of live files.
ALTER TABLE context_versions ADD COLUMN superseded BIGINT NOT NULL DEFAULT 0;
UPDATE context_versions SET superseded = 1
WHERE action = 'delete' OR version < (SELECT n.last_version FROM version_counters n
    WHERE n.tenant_id = context_versions.tenant_id AND n.external_id = context_versions.external_id);
CREATE INDEX context_versions_prunable ON context_versions (tenant_id, seq) WHERE superseded = 1;
