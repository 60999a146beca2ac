-- Anthropic's Memory Stores API over the same rows (extension `memory-stores`,
-- docs/memory-stores.md). A store is a workspace: what a store has besides a workspace's slug,
-- name and archive flag lives on its row, so that a store's change is one row's.
ALTER TABLE workspaces ADD COLUMN description TEXT;
-- A JSON object of strings; NULL is {}.
ALTER TABLE workspaces ADD COLUMN metadata TEXT;
-- The last change of name, description, metadata or archive; NULL: created_at.
ALTER TABLE workspaces ADD COLUMN updated_at TEXT;
-- When it was archived; NULL with archived = 1: archived before this column existed.
ALTER TABLE workspaces ADD COLUMN archived_at TEXT;
-- The key that redacted a version (its id), for the door's `redacted_by`.
ALTER TABLE context_versions ADD COLUMN redacted_by TEXT;
-- A store's versions, newest first, without reading the rest of the tenant's.
CREATE INDEX context_versions_by_workspace ON context_versions (tenant_id, workspace_id, seq);
