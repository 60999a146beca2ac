//! [`DbOptions`]: how a database is opened, each field's default documented.

use super::*;

/// Pool settings, with documented defaults; built from `Default` with its setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct DbOptions {
    /// Most connections held open (default 16; SQLite 8); on PostgreSQL as many again for
    /// writes, which keep their prepared statements on connections of their own.
    pub max_connections: u32,
    /// How long a request waits for a connection (default 5 s, well inside the request
    /// timeout): past it, the request is answered 503 `unavailable` (the pool is exhausted, or
    /// the database does not answer and the pool keeps trying to connect).
    pub acquire_timeout: Duration,
    /// The audit key (default none: rows are hash-chained but carry no MAC). A database keyed
    /// once is refused without its key ([`Db::connect`]).
    pub audit_key: Option<crate::audit::key::AuditKey>,
    /// Key a database whose audit log was written without a key, from its next row on (default
    /// false: such a database is refused with a key, saying how to key it). A fresh database is
    /// keyed without asking.
    pub adopt_audit_key: bool,
    /// Open a database whose audit log has rows but no keying record although a key is given,
    /// to verify it (`verify-audit`, which then reports it; default false: such a database is
    /// refused, since it was never keyed or was stripped of its keying).
    pub inspect_audit: bool,
    /// Open a keyed database without its audit key, for a command that changes nothing
    /// (`list-keys`, `list-tenants`, `list-workspaces`; default false: a keyed database needs
    /// its key, since every change extends the log).
    pub reads_only: bool,
    /// Open an existing database only (default false: a SQLite file that does not exist is
    /// created, with its directories). Operator commands that only read or change what is there
    /// set it, so that a typo in the URL is an error rather than a new, empty database.
    pub existing_only: bool,
    /// Versions kept of each external id (extension `history`; default
    /// [`DEFAULT_VERSIONS_KEPT`], 100; at least 1). A tenant keeps at most its plan's context cap
    /// times this many versions in all (a deleted context's versions count until pruned, oldest
    /// first).
    pub versions_kept: u32,
    /// SQLite: every commit flushes the write-ahead log before it is answered, so that an
    /// answered write survives a power cut (`synchronous = FULL`; default true). False:
    /// `synchronous = NORMAL`, a commit survives a crash of the process and the database stays
    /// consistent, but a power cut or OS crash may roll back the last commits; the embedded
    /// default's `--durability ordered`. A commit that does not flush (false, with background
    /// checkpoints) runs on the calling thread; one that flushes runs on the direct
    /// connection's thread, so no runtime thread waits for the disk (unless
    /// [`DbOptions::flush_on_calling_thread`]). PostgreSQL: no effect (its own
    /// `synchronous_commit`).
    pub sync_commits: bool,
    /// SQLite: on a current-thread runtime, a commit that waits for the disk (a flush, or a
    /// checkpoint of SQLite's own) waits on the runtime's thread rather than on the write
    /// connection's (default false). That saves two thread wake-ups a write, about a tenth of
    /// a synced write of the trace (docs/benchmarks.md, "Commits on the calling thread"), but
    /// the runtime runs nothing else until the disk answers: set it only when the runtime
    /// serves one client at a time (the `contextq-memory` CLI's one-command runs do). From a
    /// multi-thread runtime's threads commits still go to the connection's thread
    /// (`block_in_place` was measured slower for a server). PostgreSQL: no effect.
    pub flush_on_calling_thread: bool,
    /// SQLite: how often a background task checkpoints the write-ahead log (copies committed
    /// pages into the database file, a PASSIVE checkpoint), when there were commits since the
    /// last time (default [`DEFAULT_CHECKPOINT_INTERVAL`], 50 ms). Commits then never run a
    /// checkpoint themselves (`wal_autocheckpoint = 0`), so no write waits for one
    /// (docs/benchmarks.md has what that saves). `None`: SQLite's own
    /// checkpoint, run by the commit that takes the log past 1,000 pages. PostgreSQL: no
    /// effect.
    pub checkpoint_interval: Option<Duration>,
    /// SQLite: how often a background task merges the search index's segments, a bounded
    /// step at a time, when there were writes (default
    /// [`crate::db::merges::DEFAULT_INDEX_MERGE_INTERVAL`], 100 ms; module [`crate::db::merges`]).
    /// Writes never merge them themselves (migration 17) until a level holds 16 segments.
    /// `None`: no background merge (then writes merge at 16). Not on a read-only database.
    /// PostgreSQL: no effect.
    pub index_merge_interval: Option<Duration>,
    /// How searches are bounded: their own connections, searches in flight per tenant, and a
    /// time budget per search (default [`SearchLimits::default`]: 4, 2, 2 s).
    pub search: SearchLimits,
}

/// Default [`DbOptions::versions_kept`]: 100.
pub const DEFAULT_VERSIONS_KEPT: u32 = 100;

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(5),
            audit_key: None,
            adopt_audit_key: false,
            inspect_audit: false,
            reads_only: false,
            existing_only: false,
            versions_kept: DEFAULT_VERSIONS_KEPT,
            sync_commits: true,
            flush_on_calling_thread: false,
            checkpoint_interval: Some(DEFAULT_CHECKPOINT_INTERVAL),
            index_merge_interval: Some(crate::db::merges::DEFAULT_INDEX_MERGE_INTERVAL),
            search: SearchLimits::default(),
        }
    }
}
