-- Inspector sessions bound to the key they were minted from (docs/reliability.md, threat model
-- of the inspector): a session key works only while that key is active and unexpired, and
-- revoking or deleting it ends its sessions. Sessions minted before this migration name no
-- parent and are refused from now on (sign in again).
ALTER TABLE api_keys ADD COLUMN parent_key_id TEXT;
CREATE INDEX api_keys_parent ON api_keys (parent_key_id);
