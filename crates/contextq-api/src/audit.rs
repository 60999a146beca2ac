//! The `audit-log` extension's resources (`docs/contextq-api.md`, "The audit trail"): a
//! tenant's own activity log, newest first, as `GET /api/audit` pages it.

use serde::{Deserialize, Serialize};

/// One row of a tenant's activity log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    /// The row's number in the server's log (orders rows; the page cursor).
    pub seq: i64,
    /// What happened: `context.create`, `context.update`, `context.restore`, `context.delete`,
    /// `workspace.create`, `workspace.archive`, `workspace.delete`, ...
    pub action: String,
    /// `context` or `workspace`.
    pub entity_type: String,
    /// The context's or workspace's id.
    pub entity_id: String,
    /// The external id the change was about (contexts), when recorded.
    pub external_id: Option<String>,
    /// The workspace slug the change was about (workspaces), when recorded.
    pub slug: Option<String>,
    /// The context's version after the change, when recorded.
    pub version: Option<i64>,
    /// The key that made the change (`None`: an operator command).
    pub key_id: Option<String>,
    /// The last four characters of that key (`sk_live_…abcd`).
    pub key_last4: Option<String>,
    /// That key's name (`create-key --name`), when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_name: Option<String>,
    /// For `context.restore` (extension `restore-marks`): the version whose content it put back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored_from: Option<i64>,
    /// When (RFC 3339, UTC, milliseconds).
    pub created_at: String,
}

/// `GET /api/audit`: one page, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuditPage {
    /// The rows, newest first.
    pub entries: Vec<AuditEntry>,
    /// Pass back as `cursor=` for older rows; `None` on the last page.
    #[serde(default)]
    pub next_cursor: Option<String>,
}
