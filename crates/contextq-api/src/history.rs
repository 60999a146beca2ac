//! The `history` extension's resources (`docs/contextq-api.md`, "Versions"): every create,
//! update and delete of a context keeps the state it wrote as a [`Version`], numbered per
//! external id over every context that ever had it, and kept after the context is deleted.

use serde::{Deserialize, Serialize};

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// The context was created (its first version).
    Create,
    /// Its content, title or tags changed.
    Update,
    /// It was deleted; the version has no content.
    Delete,
    /// A restore put back the content of an earlier version (`restoredFrom`; extension
    /// `restore-marks`), creating the context again or updating it.
    Restore,
}

impl Action {
    /// `create`, `update`, `delete` or `restore`, as sent.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Restore => "restore",
        }
    }

    /// Whether the version holds content (every action but a delete).
    pub fn has_content(self) -> bool {
        self != Action::Delete
    }
}

impl std::str::FromStr for Action {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [
            Action::Create,
            Action::Update,
            Action::Delete,
            Action::Restore,
        ]
        .into_iter()
        .find(|a| a.as_str() == s)
        .ok_or_else(|| format!("unknown action {s:?}"))
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One version without its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionSummary {
    /// The external id.
    pub external_id: String,
    /// Its number among the external id's versions: 1, 2, 3, ... over every context that ever
    /// had this external id (a context created again after a delete goes on counting).
    pub version: i64,
    /// The tenant's audit sequence number of the change (orders changes across external ids).
    pub seq: i64,
    /// The context the change wrote.
    pub context_id: String,
    /// That context's own version after the change (its `ETag`); for a delete, the version
    /// deleted.
    pub context_version: i64,
    /// The workspace's slug, `None` if the workspace has since been deleted.
    pub workspace: Option<String>,
    /// What the change did.
    pub action: Action,
    /// The context's type after the change.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its title after the change.
    pub title: Option<String>,
    /// Its tags after the change.
    pub tags: Vec<String>,
    /// Bytes of content after the change (0 for a delete).
    pub size_bytes: u64,
    /// Lowercase hex SHA-256 of the content after the change, to compare versions without
    /// reading them (`None` for a delete, and for states kept from before the server kept
    /// versions).
    #[serde(default)]
    pub content_sha256: Option<String>,
    /// The key that made the change (`None`: an operator command).
    pub key_id: Option<String>,
    /// The last four characters of that key, to show it masked (`sk_live_…abcd`).
    pub key_last4: Option<String>,
    /// That key's name (`create-key --name`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_name: Option<String>,
    /// When (RFC 3339, UTC, milliseconds).
    pub created_at: String,
    /// For a `restore` (extension `restore-marks`): the number of the version whose content it
    /// put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<i64>,
    /// For a `create` by a rename (extension `rename`): the external id it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub renamed_from: Option<String>,
    /// When its content was redacted (extension `redaction`): the content and its size are
    /// gone for good (`sizeBytes` 0, `content` `null`), `contentSha256` still names what was
    /// there. `None`: not redacted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redacted_at: Option<String>,
}

impl VersionSummary {
    /// Whether its content was redacted.
    pub fn is_redacted(&self) -> bool {
        self.redacted_at.is_some()
    }
}

/// One version with its content (`None` for a delete).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// Everything but the content.
    #[serde(flatten)]
    pub summary: VersionSummary,
    /// The content after the change; `None` for a delete.
    pub content: Option<String>,
}

/// `GET .../versions`: one page, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionPage {
    /// The versions, newest first.
    pub versions: Vec<VersionSummary>,
    /// Pass back as `cursor=` for older versions; `None` on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// What an external id was at a point in time (`GET /api/history`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PastState {
    /// It held the content of `version`.
    Present,
    /// It had been deleted (`version` is the delete).
    Deleted,
    /// It did not exist yet (its first kept version is its creation, and is later).
    Absent,
    /// Not known: the versions before the point in time were pruned by retention, or were
    /// written before the server kept versions.
    Unknown,
}

/// One external id at a point in time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PathAt {
    /// The external id.
    pub external_id: String,
    /// What it was then.
    pub state: PastState,
    /// The version in effect then (for `present` and `deleted`).
    pub version: Option<VersionSummary>,
    /// Its newest version (what it is now, or its delete).
    pub latest: VersionSummary,
}

/// `GET /api/history?at=...`: one page of external ids with any kept version, by external id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPage {
    /// The point in time, as the server read it (RFC 3339, UTC, milliseconds).
    pub at: String,
    /// One entry per external id, by external id.
    pub paths: Vec<PathAt>,
    /// Pass back as `cursor=` for the next page; `None` on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_round_trips_with_flattened_summary() {
        let v = Version {
            summary: VersionSummary {
                external_id: "mem-tool:acme/a.md".into(),
                version: 3,
                seq: 17,
                context_id: "ctx_1".into(),
                context_version: 1,
                workspace: Some("acme".into()),
                action: Action::Delete,
                kind: "note".into(),
                title: None,
                tags: vec!["mem-tool".into()],
                size_bytes: 0,
                content_sha256: None,
                key_id: Some("key_1".into()),
                key_last4: Some("abcd".into()),
                key_name: None,
                created_at: "2026-12-03T10:00:00.000Z".into(),
                restored_from: None,
                renamed_from: None,
                redacted_at: None,
            },
            content: None,
        };
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["action"], "delete");
        assert_eq!(json["type"], "note");
        assert_eq!(json["contextVersion"], 1);
        assert!(json["content"].is_null());
        assert!(json.get("redactedAt").is_none(), "absent unless redacted");
        let back: Version = serde_json::from_value(json).unwrap();
        assert_eq!(back, v);
        assert_eq!("update".parse::<Action>().unwrap(), Action::Update);
        assert_eq!("restore".parse::<Action>().unwrap(), Action::Restore);
        assert!(Action::Restore.has_content() && !Action::Delete.has_content());
        assert!("rename".parse::<Action>().is_err());
    }
}

/// The answer to `GET /api/contexts/by-external/:externalId/diff?from=&to=` (extension `diff`):
/// the lines of version `from` turned into those of version `to`, by the server (Myers'
/// algorithm: time linear in the lines plus the square of the changes, never the product of
/// the two lengths). A delete version reads as empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionDiff {
    /// The older side's version number.
    pub from: i64,
    /// The newer side's version number.
    pub to: i64,
    /// Every line of both sides in order: kept, removed (only in `from`) or added (only in
    /// `to`), without its line ending.
    pub lines: Vec<DiffLine>,
}

/// One line of a [`VersionDiff`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiffLine {
    /// What happened to it.
    pub op: DiffOp,
    /// The line, without its line ending.
    pub text: String,
}

/// How a line of a [`VersionDiff`] differs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiffOp {
    /// In both versions.
    Same,
    /// Only in `from`.
    Del,
    /// Only in `to`.
    Add,
}

/// `POST /api/redactions` (extension `redaction`, scope `admin`, a key of the whole tenant):
/// removes the content of one version (`version` with `externalId`) or of every version whose
/// content holds `matching` (of `externalId`, of every external id starting with
/// `externalIdPrefix`, or of the whole tenant), in one transaction, at most
/// [`MAX_REDACTED_VERSIONS`] versions a request (`more` says to ask again).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedactRequest {
    /// The external id whose versions to redact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id: Option<String>,
    /// Every external id starting with this (with `matching` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_id_prefix: Option<String>,
    /// The one version to redact (with `externalId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// Redact every version whose content holds this text (exact, case-sensitive; 1 to
    /// [`MAX_MATCHING_BYTES`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matching: Option<String>,
    /// Only versions written in this workspace (slug).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Only versions after this `seq` (the last one of the previous answer; to page a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seq: Option<i64>,
    /// Answer what would be redacted, change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

/// The most versions one redaction request changes (or a dry run lists).
pub const MAX_REDACTED_VERSIONS: usize = 1_000;

/// The longest `matching` text, in bytes.
pub const MAX_MATCHING_BYTES: usize = 4_096;

/// One version a redaction removed (or, in a dry run, would remove) the content of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RedactedVersion {
    /// The external id.
    pub external_id: String,
    /// Its version number.
    pub version: i64,
    /// The tenant's audit sequence number of the change that wrote it (orders the answer).
    pub seq: i64,
    /// The context the version belongs to.
    pub context_id: String,
    /// What that change did.
    pub action: Action,
    /// When it was written.
    pub created_at: String,
    /// Its content's bytes before the redaction (0 when it was redacted already).
    pub size_bytes: u64,
    /// The SHA-256 of what was there, kept.
    pub content_sha256: Option<String>,
    /// When it was redacted: now, or earlier when `already`.
    pub redacted_at: Option<String>,
    /// It had been redacted before this request (nothing changed for it).
    #[serde(default)]
    pub already: bool,
}

/// The answer to `POST /api/redactions`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Redaction {
    /// The versions, by `seq`.
    pub redacted: Vec<RedactedVersion>,
    /// More versions match than one request takes: ask again (a dry run with `afterSeq` =
    /// the last `seq` here).
    pub more: bool,
    /// Nothing was changed (a dry run).
    pub dry_run: bool,
    /// SQLite: whether the write-ahead log was checkpointed and truncated after the redaction,
    /// so that the removed text is no longer in the `-wal` file (`false`: a reader of another
    /// process held it; it is truncated at a later checkpoint). `None`: PostgreSQL, a dry run,
    /// or nothing changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wal_truncated: Option<bool>,
}
