//! The bounds of the contract. A request past one is refused: `413 payload_too_large` for
//! content, `422 validation_failed` for the rest.

/// Largest `content`: 1 MiB of UTF-8.
pub const MAX_CONTENT_BYTES: usize = 1 << 20;

/// Most items in one `POST /api/contexts/bulk-upsert`.
pub const MAX_BULK_ITEMS: usize = 100;

/// Most items in one `POST /api/contexts/bulk-upsert` to a server with the extension
/// `large-bulk`: an import writes this many files per transaction, so that the pages of each
/// index a write touches are written once per thousand files rather than once per hundred
/// (docs/benchmarks.md, "Import at scale").
pub const MAX_LARGE_BULK_ITEMS: usize = 1_000;

/// Most contexts one `by-prefix` delete or rename changes (its transaction stays short); a
/// directory with more is refused with 413 and nothing changed.
pub const MAX_PREFIX_CONTEXTS: usize = 1_000;

/// Most bytes of content one `by-prefix` rename copies into versions; 413 above.
pub const MAX_PREFIX_RENAME_BYTES: usize = 32 << 20;

/// Default and largest `limit` of `GET /api/contexts`.
pub const MAX_PAGE: u32 = 500;

/// Longest `externalId`, in bytes.
pub const MAX_EXTERNAL_ID_BYTES: usize = 1024;

/// Most tags on one context.
pub const MAX_TAGS: usize = 32;

/// Longest tag, in bytes (and at least 1).
pub const MAX_TAG_BYTES: usize = 64;

/// Longest `title`, in bytes.
pub const MAX_TITLE_BYTES: usize = 1024;

/// Longest `type`, in bytes (and at least 1).
pub const MAX_TYPE_BYTES: usize = 64;

/// Longest workspace `name`, in bytes.
pub const MAX_WORKSPACE_NAME_BYTES: usize = 256;
