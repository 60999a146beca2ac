//! The request and response bodies of the endpoints (the resources are in
//! [`crate::resources`]).

use serde::{Deserialize, Serialize};

use crate::edit::TextEdit;
use crate::resources::{Context, ContextInput, ContextSummary, UpsertResult, Workspace};

/// The header that makes a text edit safe to repeat: the server applies an edit with a key it
/// has seen (for this tenant, within an hour) only once, and answers a repeat with the first
/// outcome (`replayed`).
pub const IDEMPOTENCY_KEY_HEADER: &str = "idempotency-key";

/// `GET /api/workspaces`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkspaceList {
    /// Every workspace of the tenant the key reaches, archived ones included, by slug.
    pub workspaces: Vec<Workspace>,
    /// The workspaces (slugs) the calling key is limited to (extension `workspace-keys`);
    /// absent for a key of the whole tenant, and from a server without the extension, whose
    /// keys all are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limited_to: Option<Vec<String>>,
}

/// `POST /api/workspaces`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateWorkspace {
    /// See [`crate::slug`].
    pub slug: String,
    /// Display name; the slug when empty.
    #[serde(default)]
    pub name: String,
}

/// `GET /api/contexts`: one page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextPage {
    /// The summaries, by `externalId`.
    pub contexts: Vec<ContextSummary>,
    /// Extension (`cursor`): pass back as `cursor=` for the next page; `None` on the last page
    /// (and always from a server without the extension).
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// `POST /api/contexts/bulk-upsert`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkUpsert {
    /// 1 to [`crate::limits::MAX_BULK_ITEMS`] items, applied all or nothing.
    pub contexts: Vec<ContextInput>,
}

/// The answer to [`BulkUpsert`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkUpsertResults {
    /// One result per item, in the request's order.
    pub results: Vec<UpsertResult>,
}

/// `PUT /api/contexts/:id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateContext {
    /// The whole new text.
    pub content: String,
    /// Absent: keep the title; `null`: clear it; a string: set it.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    pub title: Option<Option<String>>,
    /// Absent: keep the tags; else replace them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
}

/// The conditions a write by external id or by prefix holds its contexts to, each when given
/// (the fields `requireTag` and `workspace` of its body): a context outside them is left alone,
/// as if absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Within {
    /// The tag the context must carry (the memory tool's scope tag).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_tag: Option<String>,
    /// The slug of the workspace the context must live in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
}

impl Within {
    /// Contexts carrying `tag` in `workspace`.
    pub fn new(tag: impl Into<String>, workspace: impl Into<String>) -> Self {
        Within {
            require_tag: Some(tag.into()),
            workspace: Some(workspace.into()),
        }
    }
}

/// `POST /api/contexts/by-external/:externalId/edit` (extension `text-edit`): one edit applied
/// on the server, under the row's lock, so that concurrent edits of one context never conflict.
/// `If-Match` makes it conditional; `Idempotency-Key` makes it safe to repeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditContext {
    /// The edit.
    pub edit: TextEdit,
    /// Only a context within these may be edited (404 otherwise).
    #[serde(flatten)]
    pub within: Within,
    /// Extension `edit-snippet`: answer with [`EditedSummary`] (the context without its content,
    /// and for `strReplace` this many lines each side of the change) instead of
    /// [`EditedContext`]; at most [`MAX_SNIPPET_LINES`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet_lines: Option<usize>,
}

/// The body of `POST /api/contexts/by-external/:externalId/rename` (extension `rename`): the
/// context moves to `to` in one transaction (409 when `to` exists, or names a directory:
/// external ids below `to/`); its history stays with it (a `delete` version of the old id, a
/// `create` version of the new one that records `renamedFrom`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenameContext {
    /// The new external id.
    pub to: String,
    /// The new title (absent: kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Only a context within these may be renamed (404 otherwise).
    #[serde(flatten)]
    pub within: Within,
}

/// The answer to [`RenameContext`]: the context under its new external id, without its
/// content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenamedContext {
    /// The context after the rename.
    pub context: ContextSummary,
}

/// Body of `POST /api/contexts/by-prefix/delete` (extension `by-prefix`): every context whose
/// external id starts with `prefix` (which ends with `/`: a directory) and that is within the
/// conditions is deleted in one transaction, each with its `delete` version; all or nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeletePrefix {
    /// The directory's prefix, ending with `/`.
    pub prefix: String,
    /// Only contexts within these are deleted (others are left as they are).
    #[serde(flatten)]
    pub within: Within,
}

/// Body of `POST /api/contexts/by-prefix/rename` (extension `by-prefix`): every context under
/// `from` (within the conditions) moves under `to`, keeping what follows the prefix, in one
/// transaction, as [`RenameContext`] moves one. Refused (409, nothing changed) when anything
/// is at `to`: a context under it, or one whose external id is `to` without its `/`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RenamePrefix {
    /// The directory's prefix, ending with `/`.
    pub from: String,
    /// The new prefix, ending with `/`; not beneath `from`.
    pub to: String,
    /// With [`title_to`](Self::title_to): a moved context's title that starts with this
    /// starts with `titleTo` instead (the memory tool titles each file with its path); other
    /// titles are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_from: Option<String>,
    /// See [`title_from`](Self::title_from).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_to: Option<String>,
    /// Only contexts within these move.
    #[serde(flatten)]
    pub within: Within,
}

/// One context a `by-prefix` request changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefixChange {
    /// The context's id (kept by a rename).
    pub id: String,
    /// Its external id before the request.
    pub external_id: String,
    /// Its external id after a rename (absent for a delete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Its version after a rename; the version it was deleted at.
    pub version: i64,
}

/// The answer to [`DeletePrefix`] and [`RenamePrefix`]: every context changed, by external id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrefixChanges {
    /// What changed, ordered by (former) external id.
    pub changed: Vec<PrefixChange>,
}

/// The answer to `GET /api/contexts/tree?prefix=` (extension `tree`): a directory two levels
/// deep with its sizes added up by the server, what the memory tool's `view` of a directory
/// shows, in one answer however many files lie deeper.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tree {
    /// Contexts beneath the prefix, at any depth.
    pub files: u64,
    /// Their content's bytes, added up.
    pub size_bytes: u64,
    /// The newest `updatedAt` among them (RFC 3339; empty when there are none).
    pub updated_at: String,
    /// Each file and directory one or two levels beneath the prefix, ordered by path: the path
    /// after the prefix, a directory's ending with `/` and counting everything beneath it.
    pub entries: Vec<TreeEntry>,
    /// With `file=<externalId>` (extension `tree-file`): the context at that external id, if
    /// there is one within the tree's scope (`requireTag`, `workspace`) and the caller's
    /// workspaces, and then instead of the tree (the other fields empty: a view shows the
    /// file); absent otherwise, and the tree is as without `file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<Context>,
}

/// One entry of a [`Tree`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TreeEntry {
    /// The path after the prefix (`notes.md`, `projects/`, `projects/plan.md`, ...).
    pub path: String,
    /// 1 for a file; a directory's contexts at any depth.
    pub files: u64,
    /// Bytes of content, added up for a directory.
    pub size_bytes: u64,
    /// The newest `updatedAt` beneath it.
    pub updated_at: String,
}

/// The most lines each side of a change an [`EditContext::snippet_lines`] may ask for.
pub const MAX_SNIPPET_LINES: usize = 100;

/// The answer to an [`EditContext`] with `snippetLines` (extension `edit-snippet`): what the
/// memory tool prints, not the whole content (an edit of a 1 MiB file answers a few lines).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditedSummary {
    /// The context after the edit, without its content (`sizeBytes` given).
    pub context: ContextSummary,
    /// For `strReplace`, the 1-based line where the replacement starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_line: Option<usize>,
    /// For `strReplace`, the lines around the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snippet: Option<crate::edit::Snippet>,
    /// See [`EditedContext::replayed`].
    #[serde(default)]
    pub replayed: bool,
}

impl EditedContext {
    /// The small answer: the context without its content and `around` lines each side of the
    /// change.
    pub fn summary(&self, around: usize) -> EditedSummary {
        let c = &self.context;
        EditedSummary {
            context: c.summary(),
            changed_line: self.changed_line,
            snippet: self
                .changed_line
                .map(|l| crate::edit::snippet(&c.content, l, around)),
            replayed: self.replayed,
        }
    }
}

/// The answer to [`EditContext`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EditedContext {
    /// The context after the edit.
    pub context: Context,
    /// For `strReplace`, the 1-based line where the replacement starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed_line: Option<usize>,
    /// The same `Idempotency-Key` was applied before: this is that outcome (the context as it
    /// is now), and nothing was applied again.
    #[serde(default)]
    pub replayed: bool,
}

/// Tells an absent field (`None`, by `default`) from an explicit `null` (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_tells_absent_from_null() {
        let absent: UpdateContext = serde_json::from_str(r#"{"content": "c"}"#).unwrap();
        let null: UpdateContext =
            serde_json::from_str(r#"{"content": "c", "title": null}"#).unwrap();
        assert_eq!((absent.title, null.title), (None, Some(None)));
        let page: ContextPage = serde_json::from_str(r#"{"contexts": []}"#).unwrap();
        assert_eq!(page.next_cursor, None);
    }
}
