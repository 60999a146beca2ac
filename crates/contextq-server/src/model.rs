//! The resources of the contract (`shared/spec/contextq-api.md`) as JSON types, plans and scopes.

use serde::{Deserialize, Serialize};

/// Content limit: 1 MiB of UTF-8.
pub const MAX_CONTENT_BYTES: usize = 1 << 20;
/// Most items in one bulk upsert.
pub const MAX_BULK_ITEMS: usize = 100;
/// Default and largest page of `GET /api/contexts`.
pub const MAX_PAGE: i64 = 500;
/// Longest `externalId`, in bytes.
pub const MAX_EXTERNAL_ID_BYTES: usize = 1024;

/// The response header that lists the contract's extensions this server implements.
pub const EXTENSIONS_HEADER: &str = "contextq-extensions";
/// Its value: every extension (conditional requests, `externalIdPrefix`, cursors, `sizeBytes`).
pub const EXTENSIONS: &str = "conditional-requests, external-id-prefix, cursor, size-bytes";

/// Now, RFC 3339 UTC with milliseconds.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A new random id with a readable prefix, e.g. `ctx_3f2a...` (not a secret).
pub fn new_id(prefix: &str) -> String {
    format!(
        "{prefix}_{:016x}{:08x}",
        fastrand::u64(..),
        fastrand::u32(..)
    )
}

/// A tenant's plan: caps the number of contexts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Plan {
    /// 100 contexts.
    Free,
    /// 10,000 contexts.
    Pro,
    /// No cap.
    Unlimited,
}

impl Plan {
    /// The cap on contexts, if any.
    pub fn context_cap(self) -> Option<i64> {
        match self {
            Plan::Free => Some(100),
            Plan::Pro => Some(10_000),
            Plan::Unlimited => None,
        }
    }
    /// The name stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Pro => "pro",
            Plan::Unlimited => "unlimited",
        }
    }
}

impl std::str::FromStr for Plan {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "free" => Ok(Plan::Free),
            "pro" => Ok(Plan::Pro),
            "unlimited" => Ok(Plan::Unlimited),
            other => Err(format!(
                "unknown plan {other:?}: use free, pro or unlimited"
            )),
        }
    }
}

/// What a key may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// GET endpoints.
    Read,
    /// Create, update, delete contexts.
    Write,
    /// Workspaces.
    Admin,
}

impl Scope {
    /// The scope's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Write => "write",
            Scope::Admin => "admin",
        }
    }
}

impl std::str::FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "read" => Ok(Scope::Read),
            "write" => Ok(Scope::Write),
            "admin" => Ok(Scope::Admin),
            other => Err(format!("unknown scope {other:?}: use read, write or admin")),
        }
    }
}

/// Parses `read,write` (commas or spaces) into scopes.
pub fn parse_scopes(s: &str) -> Result<Vec<Scope>, String> {
    let mut scopes: Vec<Scope> = s
        .split([',', ' '])
        .filter(|p| !p.trim().is_empty())
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    scopes.sort();
    scopes.dedup();
    if scopes.is_empty() {
        return Err("no scopes given: use read, write and/or admin".into());
    }
    Ok(scopes)
}

/// Scopes as stored: `read,write`.
pub fn format_scopes(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Whether `slug` is `[a-z0-9][a-z0-9-]{0,62}`.
pub fn valid_slug(slug: &str) -> bool {
    let b = slug.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
}

/// A workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// Id.
    pub id: String,
    /// Slug, unique per tenant.
    pub slug: String,
    /// Display name.
    pub name: String,
    /// Archived workspaces are read-only.
    pub archived: bool,
    /// RFC 3339.
    pub created_at: String,
}

/// A context, whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// Id.
    pub id: String,
    /// Unique per tenant.
    pub external_id: String,
    /// Workspace slug.
    pub workspace: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Title.
    pub title: Option<String>,
    /// Content.
    pub content: String,
    /// Tags.
    pub tags: Vec<String>,
    /// Starts at 1, +1 per change.
    pub version: i64,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// A context without content, plus `sizeBytes` (extension).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextSummary {
    /// Id.
    pub id: String,
    /// Unique per tenant.
    pub external_id: String,
    /// Workspace slug.
    pub workspace: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Title.
    pub title: Option<String>,
    /// Tags.
    pub tags: Vec<String>,
    /// Version.
    pub version: i64,
    /// UTF-8 length of the content.
    pub size_bytes: i64,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// One item of a bulk upsert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextInput {
    /// Unique per tenant.
    pub external_id: String,
    /// Workspace slug (must exist, not archived).
    pub workspace: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Content.
    pub content: String,
    /// Tags.
    #[serde(default)]
    pub tags: Option<Vec<String>>,
    /// Extension: only create; the request fails with 409 if the externalId exists.
    #[serde(default)]
    pub if_absent: bool,
}

/// One result of a bulk upsert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpsertResult {
    /// Id.
    pub id: String,
    /// External id.
    pub external_id: String,
    /// `created` or `updated`.
    pub status: String,
    /// Version after the upsert.
    pub version: i64,
}
