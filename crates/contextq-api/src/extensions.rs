//! The extensions of the contract a server implements, and the header that names them
//! (`docs/contextq-api.md`, "Extensions"). A ContextQ without the header has none of them.

/// The response header that lists a server's extensions, comma-separated.
pub const EXTENSIONS_HEADER: &str = "contextq-extensions";

/// Which extensions a server implements.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extensions {
    /// `ETag` on reads, `If-Match` on `PUT`/`DELETE`, `ifAbsent` on bulk-upsert items (token
    /// `conditional-requests`).
    pub conditional_requests: bool,
    /// `externalIdPrefix=` on `GET /api/contexts` (token `external-id-prefix`).
    pub external_id_prefix: bool,
    /// `cursor=` / `nextCursor` paging of `GET /api/contexts` (token `cursor`).
    pub cursor: bool,
    /// `sizeBytes` in summaries (token `size-bytes`).
    pub size_bytes: bool,
    /// `POST /api/contexts/by-external/:id/edit`: one text edit applied on the server, with
    /// `Idempotency-Key` (token `text-edit`).
    pub text_edit: bool,
    /// Versions of every context, kept across deletion, and the endpoints that read them
    /// (`/versions`, `GET /api/history`; token `history`).
    pub history: bool,
    /// `GET /api/audit`: the tenant's own activity log, paged and filtered (token `audit-log`).
    pub audit_log: bool,
    /// `snippetLines` on a text edit: the answer is the context without its content and the
    /// lines around the change (token `edit-snippet`).
    pub edit_snippet: bool,
    /// `POST /api/contexts/by-external/:id/rename`: a context moved to another external id in
    /// one transaction, its history kept (token `rename`).
    pub rename: bool,
    /// `POST /api/contexts/by-prefix/delete` and `.../rename`: every context under an
    /// external-id prefix (a directory) deleted or moved in one transaction (token
    /// `by-prefix`).
    pub by_prefix: bool,
    /// `GET /api/contexts/tree?prefix=`: a directory two levels deep with sizes added up by
    /// the server (token `tree`).
    pub tree: bool,
    /// `GET /api/contexts/by-external/:id/diff?from=&to=`: two versions' line diff computed
    /// by the server (token `diff`; with `history`).
    pub diff: bool,
    /// `startAfter=<externalId>` on `GET /api/contexts`: the page starts after that external
    /// id, a position the client names itself (token `start-after`; `cursor` is opaque).
    pub start_after: bool,
    /// Keys limited to workspaces, enforced by the server: other workspaces' rows are 404,
    /// writes there 403 (token `workspace-keys`).
    pub workspace_keys: bool,
    /// `POST /api/redactions`: a version's content, or that of every version holding a given
    /// text, removed for good, its SHA-256 kept and the redaction audited (token `redaction`;
    /// with `history`).
    pub redaction: bool,
    /// `DELETE /api/contexts/by-external/:id?requireTag=&workspace=`: a context deleted by its
    /// external id in one request, within a tag and a workspace, `If-Match` optional (token
    /// `delete-by-external`).
    pub delete_by_external: bool,
    /// `file=<externalId>` on `GET /api/contexts/tree`: the context at that external id, within
    /// the tree's scope and the caller's workspaces, comes back beside the tree, so that a view
    /// of a path that may be a file or a directory is one request (token `tree-file`; with
    /// `tree`).
    pub tree_file: bool,
    /// `Idempotency-Key` on every write: the server records each keyed write's outcome in the
    /// write's own transaction and answers a repeat of the same request with that outcome,
    /// whatever happened since (token `idempotency`).
    pub idempotency: bool,
    /// `GET /api/contexts/search?q=`: ranked full-text search over the current content and
    /// external ids, within the listing's scopes and the key's workspaces (token `search`).
    pub search: bool,
    /// A write sent with `ContextQ-Restored-From: N` ([`RESTORED_FROM_HEADER`]) is recorded as
    /// a restore of version N: its version's action is `restore` with `restoredFrom`, its audit
    /// row `context.restore` (token `restore-marks`).
    pub restore_marks: bool,
    /// `POST /api/contexts/bulk-upsert` takes up to [`crate::limits::MAX_LARGE_BULK_ITEMS`]
    /// items instead of the contract's [`crate::limits::MAX_BULK_ITEMS`], still all or nothing in
    /// one transaction and within the request's body limit (token `large-bulk`).
    pub large_bulk: bool,
}

/// The header that marks a write as the restore of a version (extension `restore-marks`).
pub const RESTORED_FROM_HEADER: &str = "contextq-restored-from";

const TOKENS: [&str; 21] = [
    "conditional-requests",
    "external-id-prefix",
    "cursor",
    "size-bytes",
    "text-edit",
    "history",
    "audit-log",
    "edit-snippet",
    "rename",
    "by-prefix",
    "tree",
    "diff",
    "start-after",
    "workspace-keys",
    "redaction",
    "delete-by-external",
    "tree-file",
    "idempotency",
    "search",
    "restore-marks",
    "large-bulk",
];

impl Extensions {
    /// Every extension this contract defines (what contextq-server implements).
    pub const ALL: Extensions = Extensions {
        conditional_requests: true,
        external_id_prefix: true,
        cursor: true,
        size_bytes: true,
        text_edit: true,
        history: true,
        audit_log: true,
        edit_snippet: true,
        rename: true,
        by_prefix: true,
        tree: true,
        diff: true,
        start_after: true,
        workspace_keys: true,
        redaction: true,
        delete_by_external: true,
        tree_file: true,
        idempotency: true,
        search: true,
        restore_marks: true,
        large_bulk: true,
    };

    fn flags(&self) -> [bool; 21] {
        [
            self.conditional_requests,
            self.external_id_prefix,
            self.cursor,
            self.size_bytes,
            self.text_edit,
            self.history,
            self.audit_log,
            self.edit_snippet,
            self.rename,
            self.by_prefix,
            self.tree,
            self.diff,
            self.start_after,
            self.workspace_keys,
            self.redaction,
            self.delete_by_external,
            self.tree_file,
            self.idempotency,
            self.search,
            self.restore_marks,
            self.large_bulk,
        ]
    }

    /// Parses the header's value; unknown tokens are ignored.
    pub fn parse(header: &str) -> Extensions {
        let has = |t: &str| header.split(',').map(str::trim).any(|x| x == t);
        Extensions {
            conditional_requests: has(TOKENS[0]),
            external_id_prefix: has(TOKENS[1]),
            cursor: has(TOKENS[2]),
            size_bytes: has(TOKENS[3]),
            text_edit: has(TOKENS[4]),
            history: has(TOKENS[5]),
            audit_log: has(TOKENS[6]),
            edit_snippet: has(TOKENS[7]),
            rename: has(TOKENS[8]),
            by_prefix: has(TOKENS[9]),
            tree: has(TOKENS[10]),
            diff: has(TOKENS[11]),
            start_after: has(TOKENS[12]),
            workspace_keys: has(TOKENS[13]),
            redaction: has(TOKENS[14]),
            delete_by_external: has(TOKENS[15]),
            tree_file: has(TOKENS[16]),
            idempotency: has(TOKENS[17]),
            search: has(TOKENS[18]),
            restore_marks: has(TOKENS[19]),
            large_bulk: has(TOKENS[20]),
        }
    }

    /// The header's value for these extensions.
    pub fn header_value(&self) -> String {
        TOKENS
            .iter()
            .zip(self.flags())
            .filter(|(_, on)| *on)
            .map(|(t, _)| *t)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let v = Extensions::ALL.header_value();
        assert_eq!(
            v,
            "conditional-requests, external-id-prefix, cursor, size-bytes, text-edit, history, audit-log, edit-snippet, rename, by-prefix, tree, diff, start-after, workspace-keys, redaction, delete-by-external, tree-file, idempotency, search, restore-marks, large-bulk"
        );
        assert_eq!(Extensions::parse(&v), Extensions::ALL);
        assert_eq!(
            Extensions::parse("cursor,future-thing"),
            Extensions {
                cursor: true,
                ..Extensions::default()
            }
        );
        assert_eq!(Extensions::parse(""), Extensions::default());
    }
}
