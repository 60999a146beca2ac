-- Redaction (extension `redaction`, docs/history.md): a version whose content was removed for
-- good keeps its row, its number and its content_sha256; its content is NULL, its size 0, and
-- redacted_at says when (NULL: not redacted). Who redacted it is in the audit log.
ALTER TABLE context_versions ADD COLUMN redacted_at TEXT;
