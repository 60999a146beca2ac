//! The extensions of the contract a server implements, and the header that names them
//! (`docs/contextq-api.md`, "Extensions"). A ContextQ without the header has none of them.

/// The response header that lists a server's extensions, comma-separated.
pub const EXTENSIONS_HEADER: &str = "contextq-extensions";

/// One row per extension: its field of [`Extensions`] (with the field's documentation) and its
/// token in the header. The struct, [`Extensions::ALL`], [`Extensions::parse`] and
/// [`Extensions::header_value`] are all made from this one list, so a new extension is one row.
macro_rules! extensions {
    ($($(#[doc = $doc:literal])* $field:ident = $token:literal,)*) => {
        /// Which extensions a server implements.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Extensions {
            $($(#[doc = $doc])* pub $field: bool,)*
        }

        impl Extensions {
            /// Every extension this contract defines (what contextq-server implements).
            pub const ALL: Extensions = Extensions { $($field: true,)* };

            /// Every extension's token, in the order of the list.
            pub const TOKENS: &'static [&'static str] = &[$($token,)*];

            /// Parses the header's value; unknown tokens are ignored.
            pub fn parse(header: &str) -> Extensions {
                let has = |t: &str| header.split(',').map(str::trim).any(|x| x == t);
                Extensions { $($field: has($token),)* }
            }

            /// Whether the extension named by `token` is on (an unknown token is not).
            pub fn has(&self, token: &str) -> bool {
                $(if token == $token { return self.$field; })*
                false
            }
        }
    };
}

extensions! {
    /// `ETag` on reads, `If-Match` on `PUT`/`DELETE`, `ifAbsent` on bulk-upsert items (token
    /// `conditional-requests`).
    conditional_requests = "conditional-requests",
    /// `externalIdPrefix=` on `GET /api/contexts` (token `external-id-prefix`).
    external_id_prefix = "external-id-prefix",
    /// `cursor=` / `nextCursor` paging of `GET /api/contexts` (token `cursor`).
    cursor = "cursor",
    /// `sizeBytes` in summaries (token `size-bytes`).
    size_bytes = "size-bytes",
    /// `POST /api/contexts/by-external/:id/edit`: one text edit applied on the server, with
    /// `Idempotency-Key` (token `text-edit`).
    text_edit = "text-edit",
    /// Versions of every context, kept across deletion, and the endpoints that read them
    /// (`/versions`, `GET /api/history`; token `history`).
    history = "history",
    /// `GET /api/audit`: the tenant's own activity log, paged and filtered (token `audit-log`).
    audit_log = "audit-log",
    /// `snippetLines` on a text edit: the answer is the context without its content and the
    /// lines around the change (token `edit-snippet`).
    edit_snippet = "edit-snippet",
    /// `POST /api/contexts/by-external/:id/rename`: a context moved to another external id in
    /// one transaction, its history kept (token `rename`).
    rename = "rename",
    /// `POST /api/contexts/by-prefix/delete` and `.../rename`: every context under an
    /// external-id prefix (a directory) deleted or moved in one transaction (token
    /// `by-prefix`).
    by_prefix = "by-prefix",
    /// `GET /api/contexts/tree?prefix=`: a directory two levels deep with sizes added up by
    /// the server (token `tree`).
    tree = "tree",
    /// `GET /api/contexts/by-external/:id/diff?from=&to=`: two versions' line diff computed
    /// by the server (token `diff`; with `history`).
    diff = "diff",
    /// `startAfter=<externalId>` on `GET /api/contexts`: the page starts after that external
    /// id, a position the client names itself (token `start-after`; `cursor` is opaque).
    start_after = "start-after",
    /// Keys limited to workspaces, enforced by the server: other workspaces' rows are 404,
    /// writes there 403 (token `workspace-keys`).
    workspace_keys = "workspace-keys",
    /// `POST /api/redactions`: a version's content, or that of every version holding a given
    /// text, removed for good, its SHA-256 kept and the redaction audited (token `redaction`;
    /// with `history`).
    redaction = "redaction",
    /// `DELETE /api/contexts/by-external/:id?requireTag=&workspace=`: a context deleted by its
    /// external id in one request, within a tag and a workspace, `If-Match` optional (token
    /// `delete-by-external`).
    delete_by_external = "delete-by-external",
    /// `file=<externalId>` on `GET /api/contexts/tree`: the context at that external id, within
    /// the tree's scope and the caller's workspaces, comes back beside the tree, so that a view
    /// of a path that may be a file or a directory is one request (token `tree-file`; with
    /// `tree`).
    tree_file = "tree-file",
    /// `Idempotency-Key` on every write: the server records each keyed write's outcome in the
    /// write's own transaction and answers a repeat of the same request with that outcome,
    /// whatever happened since (token `idempotency`).
    idempotency = "idempotency",
    /// `GET /api/contexts/search?q=`: ranked full-text search over the current content and
    /// external ids, within the listing's scopes and the key's workspaces (token `search`).
    search = "search",
    /// A write sent with `ContextQ-Restored-From: N` ([`RESTORED_FROM_HEADER`]) is recorded as
    /// a restore of version N: its version's action is `restore` with `restoredFrom`, its audit
    /// row `context.restore` (token `restore-marks`).
    restore_marks = "restore-marks",
    /// `POST /api/contexts/bulk-upsert` takes up to [`crate::limits::MAX_LARGE_BULK_ITEMS`]
    /// items instead of the contract's [`crate::limits::MAX_BULK_ITEMS`], still all or nothing in
    /// one transaction and within the request's body limit (token `large-bulk`).
    large_bulk = "large-bulk",
    /// `/v1/memory_stores...`: Anthropic's Memory Stores API over the same memory, a store for
    /// each workspace and a memory for each memory-tool file (token `memory-stores`,
    /// docs/memory-stores.md).
    memory_stores = "memory-stores",
}

/// The header that marks a write as the restore of a version (extension `restore-marks`).
pub const RESTORED_FROM_HEADER: &str = "contextq-restored-from";

impl Extensions {
    /// The header's value for these extensions.
    pub fn header_value(&self) -> String {
        Self::TOKENS
            .iter()
            .filter(|t| self.has(t))
            .copied()
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
            "conditional-requests, external-id-prefix, cursor, size-bytes, text-edit, history, audit-log, edit-snippet, rename, by-prefix, tree, diff, start-after, workspace-keys, redaction, delete-by-external, tree-file, idempotency, search, restore-marks, large-bulk, memory-stores"
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
        assert!(Extensions::ALL.has("large-bulk") && !Extensions::ALL.has("large"));
    }
}
