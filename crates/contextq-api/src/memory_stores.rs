//! Anthropic's Memory Stores API (beta `agent-memory-2026-07-22`) as served by contextq-server
//! (extension `memory-stores`, docs/memory-stores.md): its JSON objects and request bodies, its
//! limits on writes, the slug a store's name gives its workspace, and the mapping between a
//! memory's path and the memory tool's external id. The contract is the official SDKs' generated
//! types (Python `anthropic==2.17.0`, TypeScript `@anthropic-ai/sdk@1.17.0`); fields here are
//! named as they are on that wire (snake_case), not as the rest of this crate's (camelCase).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use unicode_normalization::is_nfc;

/// The beta every call of the SDKs names in `anthropic-beta`.
pub const BETA: &str = "agent-memory-2026-07-22";

/// The other beta the SDKs' docs accept for these endpoints.
pub const MANAGED_AGENTS_BETA: &str = "managed-agents-2026-04-01";

/// The memory tool's tag: a memory at `/a/b.md` of the store whose workspace is `s` is the
/// context at external id `mem-tool:s/a/b.md`, the file the memory tool sees at
/// `/memories/a/b.md` when pinned to `s` (the tool's default tag).
pub const TOOL_TAG: &str = "mem-tool";

/// Prefix of a store's id: `memstore_<workspace id>`.
pub const STORE_ID_PREFIX: &str = "memstore_";
/// Prefix of a memory's id: `mem_<context id>`.
pub const MEMORY_ID_PREFIX: &str = "mem_";
/// Prefix of a version's id: `memver_<sequence number in its tenant>`.
pub const VERSION_ID_PREFIX: &str = "memver_";

/// Largest content written through this door, in UTF-8 bytes.
pub const MAX_MEMORY_CONTENT_BYTES: usize = 102_400;
/// Longest path written through this door, in bytes.
pub const MAX_MEMORY_PATH_BYTES: usize = 1_024;
/// Most segments of a path written through this door.
pub const MAX_MEMORY_PATH_SEGMENTS: usize = 20;
/// Longest store name, in characters (and at least 1).
pub const MAX_STORE_NAME_CHARS: usize = 255;
/// Longest store description, in characters.
pub const MAX_STORE_DESCRIPTION_CHARS: usize = 1_024;
/// Most metadata pairs of a store.
pub const MAX_METADATA_PAIRS: usize = 16;
/// Longest metadata key, in characters (and at least 1).
pub const MAX_METADATA_KEY_CHARS: usize = 64;
/// Longest metadata value, in characters.
pub const MAX_METADATA_VALUE_CHARS: usize = 512;
/// Default `limit` of a list.
pub const DEFAULT_PAGE: usize = 20;
/// Largest `limit` of a list.
pub const MAX_PAGE: usize = 100;
/// Largest page of a list with `view=full`.
pub const MAX_FULL_PAGE: usize = 20;

/// A memory store (`memory_store`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStore {
    /// `memstore_...`.
    pub id: String,
    /// Always `memory_store`.
    #[serde(rename = "type")]
    pub kind: String,
    /// 1 to 255 characters.
    pub name: String,
    /// Empty when unset.
    pub description: String,
    /// At most 16 pairs.
    pub metadata: BTreeMap<String, String>,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339: the last change of name, description, metadata or archive.
    pub updated_at: String,
    /// RFC 3339, or `null` when not archived.
    pub archived_at: Option<String>,
}

/// What deleting a store answers (`memory_store_deleted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedMemoryStore {
    /// The store's id.
    pub id: String,
    /// Always `memory_store_deleted`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// A memory (`memory`): a text document at a path of a store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// `mem_...`, kept across renames.
    pub id: String,
    /// Always `memory`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `memstore_...`.
    pub memory_store_id: String,
    /// The version that holds the current content (`memver_...`).
    pub memory_version_id: String,
    /// Starts with `/`.
    pub path: String,
    /// `null` with `view=basic`.
    pub content: Option<String>,
    /// Lowercase hex SHA-256 of the content's UTF-8 bytes.
    pub content_sha256: String,
    /// The content's size in UTF-8 bytes.
    pub content_size_bytes: u64,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
}

/// A directory marker of a `depth=1` listing (`memory_prefix`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryPrefix {
    /// Always `memory_prefix`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The prefix, ending with `/`.
    pub path: String,
}

/// One item of a memory listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MemoryListItem {
    /// A memory.
    Memory(Memory),
    /// A directory marker.
    Prefix(MemoryPrefix),
}

/// What deleting a memory answers (`memory_deleted`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedMemory {
    /// The memory's id.
    pub id: String,
    /// Always `memory_deleted`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// Who made a change. This server records API keys only (`api_actor`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Actor {
    /// `api_actor`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The key's id (never the key).
    pub api_key_id: String,
}

impl Actor {
    /// The actor of the key `api_key_id`.
    pub fn api(api_key_id: &str) -> Actor {
        Actor {
            kind: "api_actor".into(),
            api_key_id: api_key_id.to_string(),
        }
    }
}

/// One entry of a memory's history (`memory_version`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryVersion {
    /// `memver_...`.
    pub id: String,
    /// Always `memory_version`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `mem_...`, valid after the memory is deleted.
    pub memory_id: String,
    /// `memstore_...`.
    pub memory_store_id: String,
    /// `created`, `modified` or `deleted`.
    pub operation: String,
    /// RFC 3339.
    pub created_at: String,
    /// `null` with `view=basic`, for `deleted`, or when redacted.
    pub content: Option<String>,
    /// `null` when redacted or `deleted`.
    pub content_sha256: Option<String>,
    /// `null` when redacted or `deleted`.
    pub content_size_bytes: Option<u64>,
    /// The path at this write; `null` if and only if redacted.
    pub path: Option<String>,
    /// Who wrote it, when known.
    pub created_by: Option<Actor>,
    /// RFC 3339, when redacted.
    pub redacted_at: Option<String>,
    /// Who redacted it.
    pub redacted_by: Option<Actor>,
}

/// One page of a list: `next_page` is the opaque token of the next, `null` on the last.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page<T> {
    /// The items.
    pub data: Vec<T>,
    /// Sent back as `page=` for the next page.
    pub next_page: Option<String>,
}

/// `POST /v1/memory_stores`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateStore {
    /// 1 to 255 characters, no control characters.
    pub name: String,
    /// At most 1,024 characters.
    #[serde(default)]
    pub description: Option<String>,
    /// At most 16 pairs.
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// `POST /v1/memory_stores/{id}`: each field absent (or `null`) keeps its value; metadata is a
/// patch (a key set to `null` is removed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateStore {
    /// The new name.
    #[serde(default)]
    pub name: Option<String>,
    /// The new description (`""` clears it).
    #[serde(default)]
    pub description: Option<String>,
    /// Keys to set (a string) or remove (`null`).
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, Option<String>>>,
}

/// `POST /v1/memory_stores/{id}/memories`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateMemory {
    /// The path.
    pub path: String,
    /// The content (`null` is an empty memory).
    #[serde(default)]
    pub content: Option<String>,
}

/// The condition of an update: the memory's current content has this SHA-256.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Precondition {
    /// `content_sha256`, the only kind.
    #[serde(rename = "type")]
    pub kind: String,
    /// 64 lowercase hex characters.
    #[serde(default)]
    pub content_sha256: Option<String>,
}

/// `POST /v1/memory_stores/{id}/memories/{memory_id}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpdateMemory {
    /// New content (absent: kept).
    #[serde(default)]
    pub content: Option<String>,
    /// New path (absent: kept), a rename.
    #[serde(default)]
    pub path: Option<String>,
    /// Apply only if the current content has this hash.
    #[serde(default)]
    pub precondition: Option<Precondition>,
}

/// Anthropic's error envelope: `{"type":"error","error":{"type","message"},"request_id"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorResponse {
    /// Always `error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What went wrong.
    pub error: ErrorObject,
    /// The request's id.
    pub request_id: Option<String>,
}

/// The `error` of an [`ErrorResponse`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// `invalid_request_error`, `authentication_error`, `permission_error`, `not_found_error`,
    /// `memory_path_conflict_error`, `memory_precondition_failed_error`, `conflict_error`,
    /// `rate_limit_error`, `timeout_error`, `api_error`, `overloaded_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// A sentence for the caller.
    pub message: String,
    /// For `memory_path_conflict_error`: the memory in the way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicting_memory_id: Option<String>,
    /// For `memory_path_conflict_error`: its path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conflicting_path: Option<String>,
}

/// Whether `c` is a format character (Unicode's general category Cf, Unicode 15).
fn is_format(c: char) -> bool {
    matches!(c as u32,
        0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2
        | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
        | 0xFEFF | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F
        | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

/// Whether `c` may not appear in a path: a control or format character, or U+2028/U+2029.
fn forbidden_in_path(c: char) -> bool {
    c.is_control() || is_format(c) || c == '\u{2028}' || c == '\u{2029}'
}

/// Checks a path written through this door (`field` names it in the message): starts with `/`,
/// at most 1,024 bytes and 20 segments, no empty, `.` or `..` segment, no control or format
/// character, in NFC (refused, never normalised: two spellings are never two memories).
pub fn check_path(field: &str, path: &str) -> Result<(), String> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("{field}: a path starts with '/', got {path:?}"));
    };
    if path.len() > MAX_MEMORY_PATH_BYTES {
        return Err(format!(
            "{field}: at most {MAX_MEMORY_PATH_BYTES} bytes, got {}",
            path.len()
        ));
    }
    if let Some(c) = path.chars().find(|c| forbidden_in_path(*c)) {
        return Err(format!(
            "{field}: U+{:04X} is a control or format character, which a path cannot hold",
            c as u32
        ));
    }
    if !is_nfc(path) {
        return Err(format!(
            "{field}: the path is not in Unicode Normalization Form C; send its NFC form"
        ));
    }
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.len() > MAX_MEMORY_PATH_SEGMENTS {
        return Err(format!(
            "{field}: at most {MAX_MEMORY_PATH_SEGMENTS} segments, got {}",
            segments.len()
        ));
    }
    for s in &segments {
        if s.is_empty() {
            return Err(format!(
                "{field}: {path:?} has an empty segment (a doubled or final '/')"
            ));
        }
        if *s == "." || *s == ".." {
            return Err(format!("{field}: a segment cannot be {s:?}"));
        }
    }
    Ok(())
}

/// Checks `path_prefix` of a listing: starts and ends with `/`, no empty, `.` or `..` segment.
pub fn check_path_prefix(prefix: &str) -> Result<(), String> {
    if prefix == "/" {
        return Ok(());
    }
    match prefix.strip_suffix('/') {
        Some(p) if p.starts_with('/') => check_path("path_prefix", p).map_err(|e| {
            e.replace(
                "path_prefix: at most 20 segments",
                "path_prefix: too many segments",
            )
        }),
        _ => Err(format!(
            "path_prefix: starts and ends with '/' (it matches whole segments), got {prefix:?}"
        )),
    }
}

/// Checks a memory's content: at most 102,400 bytes.
pub fn check_content(content: &str) -> Result<(), String> {
    if content.len() > MAX_MEMORY_CONTENT_BYTES {
        return Err(format!(
            "content: at most {MAX_MEMORY_CONTENT_BYTES} bytes, got {}",
            content.len()
        ));
    }
    Ok(())
}

/// Checks a store's name: 1 to 255 characters, no control character.
pub fn check_name(name: &str) -> Result<(), String> {
    let n = name.chars().count();
    if n == 0 || n > MAX_STORE_NAME_CHARS {
        return Err(format!(
            "name: 1 to {MAX_STORE_NAME_CHARS} characters, got {n}"
        ));
    }
    if name.chars().any(char::is_control) {
        return Err("name: control characters are not allowed".into());
    }
    Ok(())
}

/// Checks a store's description: at most 1,024 characters.
pub fn check_description(description: &str) -> Result<(), String> {
    let n = description.chars().count();
    if n > MAX_STORE_DESCRIPTION_CHARS {
        return Err(format!(
            "description: at most {MAX_STORE_DESCRIPTION_CHARS} characters, got {n}"
        ));
    }
    Ok(())
}

/// Checks a store's metadata: at most 16 pairs, keys 1 to 64 characters, values at most 512.
pub fn check_metadata(metadata: &BTreeMap<String, String>) -> Result<(), String> {
    if metadata.len() > MAX_METADATA_PAIRS {
        return Err(format!(
            "metadata: at most {MAX_METADATA_PAIRS} pairs, got {}",
            metadata.len()
        ));
    }
    for (k, v) in metadata {
        let n = k.chars().count();
        if n == 0 || n > MAX_METADATA_KEY_CHARS {
            return Err(format!(
                "metadata: a key is 1 to {MAX_METADATA_KEY_CHARS} characters, got {n}"
            ));
        }
        if v.chars().count() > MAX_METADATA_VALUE_CHARS {
            return Err(format!(
                "metadata[{k:?}]: a value is at most {MAX_METADATA_VALUE_CHARS} characters"
            ));
        }
    }
    Ok(())
}

/// The workspace slug a store's name gives: lowercased, each run of characters other than
/// `a-z0-9` one `-`, trimmed of `-`, at most 63 characters (`store` when nothing is left).
pub fn slug_of_name(name: &str) -> String {
    let mut slug = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            slug.push(c);
        } else if !slug.ends_with('-') {
            slug.push('-');
        }
    }
    let mut slug = slug.trim_matches('-').to_string();
    slug.truncate(crate::slug::MAX_SLUG_BYTES);
    let slug = slug.trim_end_matches('-').to_string();
    if slug.is_empty() {
        "store".into()
    } else {
        slug
    }
}

/// The external id of the memory at `path` (starting with `/`) in the workspace `slug`.
pub fn external_id(slug: &str, path: &str) -> String {
    format!("{TOOL_TAG}:{slug}{path}")
}

/// The prefix of the external ids of every memory of the workspace `slug` under `prefix`
/// (starting and ending with `/`).
pub fn external_prefix(slug: &str, prefix: &str) -> String {
    format!("{TOOL_TAG}:{slug}{prefix}")
}

/// The path of the memory at `external_id` in the workspace `slug`, if it is one of its.
pub fn path_of(slug: &str, external_id: &str) -> Option<String> {
    let rest = external_id
        .strip_prefix(TOOL_TAG)?
        .strip_prefix(':')?
        .strip_prefix(slug)?;
    (rest.starts_with('/') && rest.len() > 1).then(|| rest.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for ok in [
            "/a",
            "/a/b.md",
            "/é.md",
            "/with space/x",
            &format!("/{}", "a/".repeat(19) + "z"),
        ] {
            assert_eq!(check_path("path", ok), Ok(()), "{ok}");
        }
        let long = format!("/{}", "x".repeat(1024));
        let deep = format!("/{}", "a/".repeat(20) + "z");
        for bad in [
            "",
            "a",
            "/",
            "/a/",
            "//a",
            "/a//b",
            "/./a",
            "/a/..",
            "/a\u{0}b",
            "/a\nb",
            "/a\u{200B}b",
            "/a\u{2028}b",
            "/e\u{301}.md",
            &long,
            &deep,
        ] {
            assert!(check_path("path", bad).is_err(), "{bad:?}");
        }
        assert!(
            check_path("path", "/e\u{301}.md")
                .unwrap_err()
                .contains("NFC")
        );
    }

    #[test]
    fn prefixes() {
        for ok in ["/", "/notes/", "/a/b/"] {
            assert_eq!(check_path_prefix(ok), Ok(()), "{ok}");
        }
        for bad in ["", "notes/", "/notes", "//", "/a//", "/../"] {
            assert!(check_path_prefix(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn slugs() {
        assert_eq!(slug_of_name("My Notes!"), "my-notes");
        assert_eq!(slug_of_name("--Ünïcode  café--"), "n-code-caf");
        assert_eq!(slug_of_name("***"), "store");
        assert_eq!(slug_of_name(&"ab ".repeat(60)).len(), 62);
        assert!(crate::valid_slug(&slug_of_name(&"x-".repeat(100))));
    }

    #[test]
    fn external_ids_round_trip() {
        let e = external_id("team", "/a/b.md");
        assert_eq!(e, "mem-tool:team/a/b.md");
        assert_eq!(path_of("team", &e).as_deref(), Some("/a/b.md"));
        assert_eq!(path_of("tea", &e), None);
        assert_eq!(path_of("team", "other:team/a"), None);
        assert_eq!(path_of("team", "mem-tool:team/"), None);
    }

    #[test]
    fn limits() {
        assert!(check_content(&"x".repeat(102_400)).is_ok());
        assert!(check_content(&"x".repeat(102_401)).is_err());
        assert!(check_name("").is_err());
        assert!(check_name(&"é".repeat(255)).is_ok());
        assert!(check_name("a\tb").is_err());
        let mut m: BTreeMap<String, String> =
            (0..16).map(|i| (format!("k{i}"), "v".into())).collect();
        assert!(check_metadata(&m).is_ok());
        m.insert("k16".into(), "v".into());
        assert!(check_metadata(&m).is_err());
        assert!(check_metadata(&BTreeMap::from([(String::new(), "v".into())])).is_err());
    }

    #[test]
    fn list_items_keep_their_type() {
        let p = MemoryListItem::Prefix(MemoryPrefix {
            kind: "memory_prefix".into(),
            path: "/a/".into(),
        });
        let json = serde_json::to_string(&p).unwrap();
        assert_eq!(json, r#"{"type":"memory_prefix","path":"/a/"}"#);
        assert_eq!(serde_json::from_str::<MemoryListItem>(&json).unwrap(), p);
    }
}
