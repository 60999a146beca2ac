//! The database: one pool over SQLite or PostgreSQL, chosen by URL scheme, migrated on start.
//!
//! Queries are written once in SQL both dialects accept (`$N` parameters, `RETURNING`,
//! `ON CONFLICT`) and run through sqlx's `Any` driver; only the migrations differ per backend
//! (`migrations/sqlite`, `migrations/postgres`; `migrations/common` where they agree). Integer
//! columns are `BIGINT` in PostgreSQL so that every integer decodes as `i64` on both.
//!
//! Every write transaction starts by locking its tenant's audit chain head (see
//! [`crate::audit`]): that serialises the writers of one tenant across processes and servers
//! (SQLite: `BEGIN IMMEDIATE`, one writer for the whole file; PostgreSQL: the row lock), and
//! versions are still checked in SQL (`WHERE version = $n`), so several server processes on one
//! PostgreSQL are correct together. A write is two steps ([`Db::begin_with_read`],
//! [`Write::commit`]). On SQLite both run on this process's direct connection (module `direct`:
//! rusqlite on the same bundled SQLite, not sqlx's worker thread), with the process's writer
//! slot held: on the calling thread when nothing in them can wait, on the connection's own
//! thread when they can (another process's lock, a commit that flushes to disk). Point reads on
//! the request path ([`Db::read_one`]) use it too when it is idle. Rows of both drivers come
//! back as one type, [`Row`]. Errors of connecting and migrating are [`crate::Error`]s; the
//! queries of the data layer give `sqlx::Error`s (the direct connection's failures converted,
//! SQLite's code and message kept), which [`crate::store::Error`] wraps.
//!
//! # Contents
//! - `allocator` (feature `mimalloc`): SQLite's allocations on mimalloc, for binaries to choose.
//! - [`pool`]: [`Db`], [`DbOptions`], the writer slot, [`Write`], [`WriteTx`], [`Reader`].
//! - [`backend`]: [`Backend`], URL forms, [`redact_url`], [`create_postgres_database`],
//!   [`drop_postgres_database`].
//! - [`backup`]: the whole database copied while serving, and put back (`admin backup`,
//!   `admin restore`), each engine's own way.
//! - `migrate`: the list of migrations and their runner.
//! - `bind`: [`Bind`] and [`batch::Statement`], a statement's values, below everything else.
//! - [`batch`]: [`Batch`], [`inline`]: a write's statements.
//! - `dialect`: the SQL each engine writes its own way, one module per database
//!   (`dialect/sqlite.rs`, `dialect/postgres.rs`) behind one trait, `Db::dialect`.
//! - [`row`]: [`Row`], [`Value`], [`Field`]: a row's values, owned, whichever driver
//!   read them.
//! - `direct`: SQLite's direct connection (crate-private).
//! - [`merges`]: SQLite's search index merged between writes, in the background.
//! - [`search`]: searches' own connections, their per-tenant limit and time budget
//!   ([`search::SearchLimits`]).
//! - [`outage`]: which failures mean the database is unavailable (503), which leave a commit's
//!   outcome unknown, and [`outage::Outage`], an outage logged once.

/// The three methods of `sqlx::error::DatabaseError` that hand the error back as itself (every
/// error of ours passed through sqlx has them alike).
macro_rules! as_itself {
    () => {
        fn as_error(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn as_error_mut(&mut self) -> &mut (dyn std::error::Error + Send + Sync + 'static) {
            self
        }
        fn into_error(self: Box<Self>) -> Box<dyn std::error::Error + Send + Sync + 'static> {
            self
        }
    };
}
pub(crate) use as_itself;

#[cfg(any(test, feature = "test-util"))]
pub(crate) use direct::MERGE_MARK;

#[cfg(feature = "mimalloc")]
pub mod allocator;
pub mod backend;
pub mod backup;
pub mod batch;
mod bind;
mod dialect;
mod direct;
pub mod merges;
mod migrate;
pub mod outage;
pub mod pool;
pub mod row;
pub mod search;
mod writers;

pub use writers::{MAX_PREPARED_VALUES, PREPARED_PER_CONNECTION};

pub use backend::{
    Backend, create_postgres_database, database_url_for, drop_postgres_database, redact_url,
};
pub use batch::{
    Batch, BatchError, BatchMismatch, Bind, Dialects, bind_all, has_nul, inline, placeholders,
    value_rows,
};
pub(crate) use dialect::{Dialect, IndexDoc, MERGE_ALL, Search, SearchFrom, Select};
pub use migrate::latest_schema_version;
pub use pool::{
    DEFAULT_CHECKPOINT_INTERVAL, DEFAULT_VERSIONS_KEPT, Db, DbOptions, Reader, Write, WriteTx,
};
pub use row::{ColumnIndex, Field, Row, Value};

/// Now, RFC 3339 UTC with milliseconds: how every time is stored.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// A new id with a readable prefix, e.g. `ctx_18f3a2b4c5d9e07b1c2d3e4f` (not a secret): 24 hex
/// digits, the first 11 the milliseconds since 1970 (44 bits, until the year 2527), the other 13
/// random (52 bits). Ids made later sort later, so the indexes keyed by them grow at their end:
/// a write of a thousand contexts touches the last pages of each, where random ids touched a
/// page for nearly every row of a large tenant, in each of the six indexes keyed by a context's
/// id (docs/benchmarks.md, "Import at scale"). The time is the row's `createdAt`, which every
/// reader of the row is shown anyway.
pub fn new_id(prefix: &str) -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    format!(
        "{prefix}_{:011x}{:013x}",
        ms & ((1 << 44) - 1),
        fastrand::u64(..) >> 12
    )
}

/// What a database failure says, for a message: the database's own message without where in
/// its source it was raised (PostgreSQL's errors print ` at line N` of its C source, which
/// tells an operator nothing), else the failure as sqlx puts it.
pub fn describe(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Database(d) => d.message().to_string(),
        other => other.to_string(),
    }
}

/// [`describe`], for `#[error(...)]` attributes.
pub(crate) struct Described<'a>(pub &'a sqlx::Error);

impl std::fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(self.0))
    }
}
