-- Keys limited to workspaces (docs/contextq-api.md, extension `workspace-keys`): a JSON array of
-- workspace slugs the key reaches, NULL for every workspace of its tenant (every key before this
-- migration). And when a key was last used, to within the key cache's lifetime.
ALTER TABLE api_keys ADD COLUMN workspaces TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
