//! The pool and the write path: [`Db`] (SQLite or PostgreSQL behind sqlx's `Any` driver), its
//! settings ([`DbOptions`]), this process's SQLite writer slot, and the transactions a write
//! runs in ([`WriteTx`], [`Write`]) and reads use ([`Reader`]).

use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{Any, AnyPool, Transaction};

use super::backend::sqlite_url;
use super::batch::{Batch, BatchError, BatchMismatch, Bind, bind_all, inline, is_failed_check};
use super::direct::{CommitError, DirectConnection, Slot};
use super::row::Row;
use super::search::{SearchConnection, SearchFailure, SearchLimits, Searchers};
use super::writers::{Writer, Writers};
use super::{Backend, redact_url};
use crate::error::{Error, Result};

/// A connection pool and its backend.
#[derive(Debug, Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
    /// SQLite: this process's writer slot, and in it the write connection of
    /// [`Db::begin_with_read`] (opened on first use, dropped when a write fails to end cleanly).
    writer: std::sync::Arc<tokio::sync::Mutex<Option<sqlx::AnyConnection>>>,
    /// The URL connections are opened with.
    url: String,
    /// The audit key, if the audit log is keyed.
    audit_key: Option<std::sync::Arc<crate::audit::key::AuditKey>>,
    /// How many versions of each external id are kept.
    versions_kept: u32,
    /// SQLite: flush the write-ahead log at every commit.
    sync_commits: bool,
    /// Commits made through this pool, for the background checkpoint to see there is work.
    commits: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// SQLite: the background checkpoint ([`DbOptions::checkpoint_interval`]), stopped when
    /// the last clone of this `Db` is dropped; `None` when SQLite checkpoints on its own.
    checkpointer: Option<std::sync::Arc<AbortOnDrop>>,
    /// SQLite: the background merge of the search index ([`DbOptions::index_merge_interval`]),
    /// stopped when the last clone of this `Db` is dropped.
    merger: Option<std::sync::Arc<AbortOnDrop>>,
    /// SQLite: held by whoever checkpoints in this process (the background checkpoint,
    /// [`Db::truncate_wal`]): SQLite refuses a checkpoint while another runs, without waiting,
    /// so a redaction's truncation would otherwise find the log busy now and then.
    checkpointing: std::sync::Arc<tokio::sync::Mutex<()>>,
    /// SQLite: truncations of the log that found the background checkpoint running and waited
    /// for it ([`Db::truncations_that_waited`]).
    truncations_waited: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// SQLite: this process's direct connection, which writes ([`Db::begin_with_read`]) and
    /// point reads ([`Db::read_one`]) use (module `direct`).
    direct: Option<std::sync::Arc<DirectConnection>>,
    /// Outages of this database, logged once each ([`super::outage::Outage`]).
    outage: std::sync::Arc<super::outage::Outage>,
    /// PostgreSQL: the write connections, each with its prepared statements (module
    /// `writers`).
    writers: Option<std::sync::Arc<Writers>>,
    /// Searches' own connections (module `search`).
    searchers: std::sync::Arc<super::search::Searchers>,
}

/// Aborts its task when dropped.
#[derive(Debug)]
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Puts a SQLite database in write-ahead-log mode (persistent in the file). Changing the mode
/// takes an exclusive lock that SQLite's busy timeout does not wait for, so when several
/// processes open a new database at once all but one find it busy: they try again, for as long
/// as the busy timeout would have waited.
async fn use_wal(pool: &sqlx::AnyPool) -> Result<()> {
    let deadline = std::time::Instant::now() + super::direct::BUSY_TIMEOUT;
    loop {
        match sqlx::query("PRAGMA journal_mode = WAL").execute(pool).await {
            Ok(_) => return Ok(()),
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether SQLite refused for another connection's lock (`SQLITE_BUSY` or `SQLITE_LOCKED`,
/// with their extended codes).
fn is_busy(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d)
        if d.code().and_then(|c| c.parse::<i32>().ok()).is_some_and(|c| matches!(c & 0xff, 5 | 6)))
}

/// Set on every SQLite connection.
const SQLITE_PRAGMAS: &[&str] = &[
    // `direct::BUSY_TIMEOUT`.
    "PRAGMA busy_timeout = 30000",
    "PRAGMA foreign_keys = ON",
    // Freed content is overwritten with zeros, so that a file's old text, a pruned or a
    // redacted version does not linger in free space of the database file (docs/history.md).
    "PRAGMA secure_delete = ON",
    // A write-ahead log that grew under a burst of writes is cut back to 16 MiB when it starts
    // over (it is rewound, not truncated, otherwise).
    "PRAGMA journal_size_limit = 16777216",
];

/// The page cache of the connection that writes (SQLite's default is 2 MiB): a bulk upsert of a
/// thousand files dirties more pages than that, and a full cache spills them to the log before
/// the commit and reads index pages back from the file (docs/benchmarks.md, "Import at
/// scale"). Pages are allocated as they are used, so a small database never holds this much.
const WRITER_CACHE: &str = "PRAGMA cache_size = -65536";

/// Every pragma a SQLite connection is set up with: [`SQLITE_PRAGMAS`], how it commits
/// ([`DbOptions::sync_commits`]): flushing the write-ahead log before a commit is answered, or
/// leaving the flush to checkpoints (still atomic and consistent), and whether a commit may run
/// a checkpoint itself (not when they run in the background, [`DbOptions::checkpoint_interval`]).
fn sqlite_setup(
    sync_commits: bool,
    background_checkpoints: bool,
) -> impl Iterator<Item = &'static str> {
    let synchronous = if sync_commits {
        "PRAGMA synchronous = FULL"
    } else {
        "PRAGMA synchronous = NORMAL"
    };
    let checkpoints = if background_checkpoints {
        "PRAGMA wal_autocheckpoint = 0"
    } else {
        "PRAGMA wal_autocheckpoint = 1000"
    };
    SQLITE_PRAGMAS
        .iter()
        .copied()
        .chain([synchronous, checkpoints])
}

/// Default [`DbOptions::checkpoint_interval`]: 50 ms.
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(50);

/// SQLite: the write-ahead log's length, in pages, past which the background checkpoint runs
/// with this process's writer slot held, so that it completes and the next write starts the
/// log over (a checkpoint racing writers never catches up, and the log would only grow).
const CHECKPOINT_RESET_PAGES: i64 = 4000;

/// SQLite: every `interval`, when there were commits since the last one, a PASSIVE checkpoint
/// (committed pages copied from the write-ahead log into the database file, without waiting for
/// readers) on a pooled connection, beside the writes; once the log is past
/// [`CHECKPOINT_RESET_PAGES`], the next one holds the writer slot. Ends when the pool is closed.
async fn checkpoint_in_background(
    pool: AnyPool,
    writer: std::sync::Arc<tokio::sync::Mutex<Option<sqlx::AnyConnection>>>,
    checkpointing: std::sync::Arc<tokio::sync::Mutex<()>>,
    commits: std::sync::Arc<std::sync::atomic::AtomicU64>,
    interval: Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut done, mut log_pages) = (0, 0i64);
    loop {
        tick.tick().await;
        if pool.is_closed() {
            return;
        }
        let now = commits.load(std::sync::atomic::Ordering::Relaxed);
        if now == done {
            continue;
        }
        let _slot = if log_pages > CHECKPOINT_RESET_PAGES {
            Some(writer.lock().await)
        } else {
            None
        };
        let _checkpointing = checkpointing.lock().await;
        // One row: busy, pages in the log, pages checkpointed.
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&pool)
            .await
        {
            Ok(row) => {
                done = now;
                log_pages = sqlx::Row::try_get::<i64, _>(&row, 1).unwrap_or(0);
            }
            Err(e) => {
                tracing::warn!(error = %e, "the background checkpoint failed; it runs again at the next tick")
            }
        }
    }
}

/// A write transaction (and, on SQLite, this process's writer slot until it ends).
#[derive(Debug)]
pub struct WriteTx {
    tx: Transaction<'static, Any>,
    _guard: Option<tokio::sync::OwnedMutexGuard<Option<sqlx::AnyConnection>>>,
    commits: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl WriteTx {
    /// Commits (and frees the writer slot).
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx
            .commit()
            .await
            .map_err(super::outage::outcome_unknown)?;
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }
}

impl std::ops::Deref for WriteTx {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &Self::Target {
        &self.tx
    }
}

impl std::ops::DerefMut for WriteTx {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.tx
    }
}

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
    /// connection's thread, so no runtime thread waits for the disk. PostgreSQL: no effect (its
    /// own `synchronous_commit`).
    pub sync_commits: bool,
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
    /// [`super::merges::DEFAULT_INDEX_MERGE_INTERVAL`], 100 ms; module [`super::merges`]).
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

contextq_api::setters!(DbOptions {
    max_connections: u32,
    acquire_timeout: Duration,
    audit_key: Option<crate::audit::key::AuditKey>,
    adopt_audit_key: bool,
    inspect_audit: bool,
    reads_only: bool,
    existing_only: bool,
    versions_kept: u32,
    sync_commits: bool,
    checkpoint_interval: Option<Duration>,
    index_merge_interval: Option<Duration>,
    search: SearchLimits,
});

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
            checkpoint_interval: Some(DEFAULT_CHECKPOINT_INTERVAL),
            index_merge_interval: Some(super::merges::DEFAULT_INDEX_MERGE_INTERVAL),
            search: SearchLimits::default(),
        }
    }
}

impl Db {
    /// Connects to `url` (`sqlite:PATH`, created if missing unless `existing_only`; or
    /// `postgres://...`) and migrates; [`Db::connect`] (module `open`) then checks the audit
    /// log's keying.
    pub(crate) async fn open_pool(url: &str, options: &DbOptions) -> Result<Db> {
        install_default_drivers();
        if options.versions_kept == 0 {
            return Err(Error::Config(
                "versions_kept must be at least 1 (the current state is a version)".into(),
            ));
        }
        let backend = Backend::from_url(url)?;
        let url = match backend {
            Backend::Sqlite => {
                let url = sqlite_url(url)?;
                let rest = url.trim_start_matches("sqlite://");
                let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
                if options.existing_only && !std::path::Path::new(path).is_file() {
                    return Err(Error::Config(format!(
                        "no database at {path}: check --database-url (this command opens an \
                         existing database only; bootstrap, create-tenant and init-audit-key \
                         create one)"
                    )));
                }
                if query.contains("mode=rwc") {
                    // Private (directories 0700, the file 0600; SQLite gives its `-wal` and
                    // `-shm` files the database file's mode): other local users cannot read
                    // any tenant's content or key hashes. What exists already is left as it is.
                    crate::private_file::ensure(std::path::Path::new(path))
                        .map_err(|e| Error::Config(format!("cannot create {path}: {e}")))?;
                }
                url
            }
            Backend::Postgres => url.to_string(),
        };
        // No ping before handing out a connection: it would cost every request one more round
        // trip; a connection found broken fails its query (a 500 the client treats as such).
        let mut pool_options = AnyPoolOptions::new()
            .test_before_acquire(false)
            .acquire_timeout(options.acquire_timeout)
            .max_connections(match backend {
                Backend::Sqlite => options.max_connections.min(8),
                Backend::Postgres => options.max_connections,
            });
        let background_checkpoints =
            backend == Backend::Sqlite && options.checkpoint_interval.is_some();
        if backend == Backend::Sqlite {
            let sync_commits = options.sync_commits;
            pool_options = pool_options.after_connect(move |conn, _meta| {
                Box::pin(async move {
                    for pragma in sqlite_setup(sync_commits, background_checkpoints) {
                        sqlx::query(pragma).execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            });
        }
        // sqlx logs each statement's text (and a slow one's at `warn`): on PostgreSQL a batch's
        // values are literals in that text, file contents included, so it never logs them.
        let connect_options = {
            use sqlx::ConnectOptions as _;
            use std::str::FromStr as _;
            sqlx::any::AnyConnectOptions::from_str(&url)
                .map_err(|e| Error::Connect(redact_url(&url), e))?
                .disable_statement_logging()
        };
        // One connection first, on its own: a wrong host or port is said at once, as the
        // database's own error ("connection refused"), where the pool would retry until its
        // acquire timeout and say only "pool timed out".
        if backend == Backend::Postgres {
            use sqlx::Connection as _;
            let first = tokio::time::timeout(
                options.acquire_timeout,
                sqlx::AnyConnection::connect_with(&connect_options),
            )
            .await
            .unwrap_or(Err(sqlx::Error::PoolTimedOut))
            .map_err(|e| Error::Connect(redact_url(&url), e))?;
            let _ = first.close().await;
        }
        let searchers = std::sync::Arc::new(match backend {
            Backend::Sqlite => {
                use std::str::FromStr as _;
                let file = sqlx::sqlite::SqliteConnectOptions::from_str(&url)
                    .map_err(|e| Error::Connect(redact_url(&url), e))?
                    .get_filename()
                    .to_path_buf();
                Searchers::sqlite(file, options.search, options.acquire_timeout)
            }
            Backend::Postgres => Searchers::postgres(
                connect_options.clone(),
                options.search,
                options.acquire_timeout,
            ),
        });
        let writers = (backend == Backend::Postgres).then(|| {
            std::sync::Arc::new(Writers::new(
                connect_options.clone(),
                options.max_connections,
                options.acquire_timeout,
            ))
        });
        let pool = pool_options
            .connect_with(connect_options)
            .await
            .map_err(|e| Error::Connect(redact_url(&url), e))?;
        let commits = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let checkpointing: std::sync::Arc<tokio::sync::Mutex<()>> = Default::default();
        let writer: std::sync::Arc<tokio::sync::Mutex<Option<sqlx::AnyConnection>>> =
            Default::default();
        let checkpointer = match options.checkpoint_interval {
            Some(interval) if background_checkpoints => {
                let task = tokio::spawn(checkpoint_in_background(
                    pool.clone(),
                    writer.clone(),
                    checkpointing.clone(),
                    commits.clone(),
                    interval.max(Duration::from_millis(1)),
                ));
                Some(std::sync::Arc::new(AbortOnDrop(task.abort_handle())))
            }
            _ => None,
        };
        let mut db = Db {
            pool,
            backend,
            writer,
            url,
            audit_key: options.audit_key.clone().map(std::sync::Arc::new),
            versions_kept: options.versions_kept,
            sync_commits: options.sync_commits,
            commits,
            checkpointer,
            merger: None,
            checkpointing,
            truncations_waited: std::sync::Arc::default(),
            direct: None,
            outage: std::sync::Arc::default(),
            writers,
            searchers,
        };
        if backend == Backend::Sqlite {
            use_wal(&db.pool).await?;
        }
        db.migrate().await?;
        if backend == Backend::Sqlite {
            let direct = std::sync::Arc::new(db.open_direct()?);
            let read_only = options.reads_only || db.url.contains("mode=ro");
            if let (Some(interval), false) = (options.index_merge_interval, read_only) {
                let task = tokio::spawn(super::merges::merge_in_background(
                    std::sync::Arc::downgrade(&direct),
                    db.writer.clone(),
                    db.commits.clone(),
                    interval.max(Duration::from_millis(1)),
                    db.sync_commits,
                ));
                db.merger = Some(std::sync::Arc::new(AbortOnDrop(task.abort_handle())));
            }
            db.direct = Some(direct);
        }
        Ok(db)
    }

    /// This database's outages, for answering and logging them ([`super::outage`]).
    pub fn outage(&self) -> &super::outage::Outage {
        &self.outage
    }

    /// The audit key rows and heads are MACed with, if any.
    pub fn audit_key(&self) -> Option<&crate::audit::key::AuditKey> {
        self.audit_key.as_deref()
    }

    /// Versions kept of each external id ([`DbOptions::versions_kept`]).
    pub fn versions_kept(&self) -> u32 {
        self.versions_kept
    }

    /// Write transactions committed through this database handle (and its clones) so far: a
    /// command's cost in commits is the difference around it (docs/costs.md).
    pub fn commits(&self) -> u64 {
        self.commits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Connections open to the database and how many of them are idle: the pool's, and on
    /// PostgreSQL the write connections' (module `writers`).
    pub fn connections(&self) -> (u32, usize) {
        let (writers_open, writers_idle) =
            self.writers.as_ref().map_or((0, 0), |w| w.connections());
        (
            self.pool.size() + writers_open,
            self.pool.num_idle() + writers_idle,
        )
    }

    /// PostgreSQL: how many statements each idle write connection keeps prepared (at most
    /// [`super::PREPARED_PER_CONNECTION`] each); empty on SQLite.
    #[cfg(feature = "test-util")]
    pub fn prepared_per_write_connection(&self) -> Vec<usize> {
        self.writers
            .as_ref()
            .map_or_else(Vec::new, |w| w.prepared_counts())
    }

    /// The pool.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// SQLite: the file that signals key revocations to every server process on this database
    /// (`<database>-revocations`, rewritten after each revocation commits; see
    /// [`crate::auth::KeyCache`]). `None` on PostgreSQL.
    pub fn revocations_file(&self) -> Option<std::path::PathBuf> {
        self.sqlite_file()
            .map(|path| std::path::PathBuf::from(format!("{}-revocations", path.display())))
    }

    /// SQLite: the database file (`None` on PostgreSQL).
    pub fn sqlite_file(&self) -> Option<std::path::PathBuf> {
        if self.backend != Backend::Sqlite {
            return None;
        }
        let rest = self.url.trim_start_matches("sqlite://");
        let path = rest.split_once('?').map_or(rest, |(p, _)| p);
        Some(std::path::PathBuf::from(path))
    }

    /// The URL this pool connects with (it may hold a password: never log it, see
    /// [`redact_url`]).
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The SQL of this database's engine, for what the two spell differently.
    pub(crate) fn dialect(&self) -> &'static dyn super::Dialect {
        self.backend.dialect()
    }

    /// A connection for reads. On SQLite, the slot's sqlx connection when no write or
    /// provisioning transaction holds the slot (nothing is checked out of the pool, so there
    /// is no release ping: one hop to sqlx's worker thread per query instead of two); a pooled
    /// connection while one does, so reads never wait for writes. On PostgreSQL, a pooled
    /// connection. Point reads on the request path use [`Db::read_one`] instead.
    pub async fn reader(&self) -> Result<Reader, sqlx::Error> {
        if self.backend == Backend::Sqlite
            && let Ok(mut slot) = self.writer.clone().try_lock_owned()
        {
            if slot.is_none() {
                *slot = Some(self.sqlite_connection().await?);
            }
            return Ok(Reader(Held::Slot(slot)));
        }
        Ok(Reader(Held::Pooled(self.pool.acquire().await?)))
    }

    /// SQLite: checkpoints the write-ahead log into the database file and truncates it to zero
    /// bytes (`PRAGMA wal_checkpoint(TRUNCATE)`, waiting up to the busy timeout for readers of
    /// other processes), after a redaction, so that removed text does not stay in the `-wal`
    /// file. `Some(true)` when it was truncated, `Some(false)` when a reader still held it (a
    /// later checkpoint truncates it); `None` on PostgreSQL.
    pub async fn truncate_wal(&self) -> Result<Option<bool>, sqlx::Error> {
        self.truncate_wal_after(None).await
    }

    /// SQLite: how many truncations of the log ([`Db::truncate_wal`]) found this process's
    /// background checkpoint running and waited for it to end (SQLite would have refused
    /// them); for diagnostics and for the test that this race is met and survived.
    pub fn truncations_that_waited(&self) -> u64 {
        self.truncations_waited
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// [`Db::truncate_wal`], first running `statement` under the same writer slot (a
    /// redaction's rewrite of the search index).
    pub(crate) async fn truncate_wal_after(
        &self,
        statement: Option<&'static str>,
    ) -> Result<Option<bool>, sqlx::Error> {
        if self.backend != Backend::Sqlite {
            return Ok(None);
        }
        // Holding the writer slot: no write of this process is between its statements; and
        // the checkpoint lock: the background checkpoint is not running either.
        let mut slot = self.writer_slot().await?;
        let _checkpointing = match self.checkpointing.try_lock() {
            Ok(free) => free,
            Err(_) => {
                self.truncations_waited
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.checkpointing.lock().await
            }
        };
        let conn = slot.as_mut().expect("the slot holds a connection");
        if let Some(statement) = statement {
            sqlx::query(statement).execute(&mut *conn).await?;
        }
        let row = sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(&mut *conn)
            .await?;
        let busy: i64 = sqlx::Row::try_get(&row, 0)?;
        Ok(Some(busy == 0))
    }

    /// SQLite: this process's writer slot, waited for, with its connection (opened if it was
    /// dropped).
    async fn writer_slot(
        &self,
    ) -> Result<tokio::sync::OwnedMutexGuard<Option<sqlx::AnyConnection>>, sqlx::Error> {
        let mut slot = self.writer.clone().lock_owned().await;
        if slot.is_none() {
            *slot = Some(self.sqlite_connection().await?);
        }
        Ok(slot)
    }

    /// SQLite: the direct connection on the pool's file, set up as the pool's connections
    /// are. Its commits run on the calling thread when they neither flush to disk nor
    /// checkpoint (module `direct`).
    fn open_direct(&self) -> Result<DirectConnection> {
        use std::str::FromStr as _;
        let options = sqlx::sqlite::SqliteConnectOptions::from_str(&self.url)
            .map_err(|e| Error::Connect(redact_url(&self.url), e))?;
        let query = self.url.split_once('?').map_or("", |(_, q)| q);
        let read_only = query.split('&').any(|p| p == "mode=ro");
        let background_checkpoints = self.checkpointer.is_some();
        DirectConnection::open(
            options.get_filename(),
            read_only,
            sqlite_setup(self.sync_commits, background_checkpoints).chain([WRITER_CACHE]),
            !self.sync_commits && background_checkpoints,
        )
        .map_err(|e| Error::Connect(redact_url(&self.url), e))
    }

    /// A new SQLite connection outside the pool, set up as the pool's are.
    async fn sqlite_connection(&self) -> Result<sqlx::AnyConnection, sqlx::Error> {
        use sqlx::Connection as _;
        let mut conn = sqlx::AnyConnection::connect(&self.url).await?;
        for pragma in sqlite_setup(self.sync_commits, self.checkpointer.is_some()) {
            sqlx::query(pragma).execute(&mut conn).await?;
        }
        Ok(conn)
    }

    /// Starts a read-write transaction that takes the write lock at once.
    ///
    /// SQLite has one writer at a time: writers of this process queue on a fair async lock
    /// first (held until commit or drop), so they never spin in SQLite's busy handler, whose
    /// sleeps (up to 100 ms) would otherwise dominate tail latency; the busy timeout still
    /// arbitrates between processes. PostgreSQL writers serialise on the audit head row lock.
    pub async fn begin_write(&self) -> Result<WriteTx, sqlx::Error> {
        Ok(match self.backend {
            Backend::Sqlite => {
                let guard = self.writer.clone().lock_owned().await;
                WriteTx {
                    tx: self.pool.begin_with("BEGIN IMMEDIATE").await?,
                    _guard: Some(guard),
                    commits: self.commits.clone(),
                }
            }
            Backend::Postgres => WriteTx {
                tx: self.pool.begin().await?,
                _guard: None,
                commits: self.commits.clone(),
            },
        })
    }

    /// Closes the pool (waits for connections to be returned) and the direct connection.
    pub async fn close(&self) {
        if let Some(direct) = &self.direct {
            direct.close();
        }
        if let Some(writers) = &self.writers {
            writers.close().await;
        }
        self.searchers.close().await;
        self.pool.close().await;
    }

    /// A search connection for one search of `tenant_id` (module `search`): refused when the
    /// tenant has its limit of searches in flight; its statements stop at the search's budget
    /// or when it is dropped.
    pub async fn begin_search(&self, tenant_id: &str) -> Result<SearchConnection, SearchFailure> {
        self.searchers.begin(tenant_id).await
    }

    /// How searches are bounded ([`DbOptions::search`]).
    pub fn search_limits(&self) -> SearchLimits {
        self.searchers.limits()
    }

    /// The rows of one point read (`sql`, one statement, with `binds`; a lookup by key, not a
    /// range that grows with the tenant): on SQLite read on the direct connection when it is
    /// idle (no hop to a worker thread; its cache is the warmest), on the pool otherwise.
    pub async fn read_one(&self, sql: &str, binds: Vec<Bind>) -> Result<Option<Row>, sqlx::Error> {
        if let Some(direct) = &self.direct
            && let Some(row) = direct.try_read_one(sql, &binds)
        {
            return row;
        }
        let row = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql.to_string())), binds)
            .fetch_optional(&mut *self.reader().await?)
            .await?;
        row.as_ref().map(Row::from_any).transpose()
    }
}

/// A write transaction opened by its read (see [`Db::begin_with_read`]); finished by
/// [`Write::commit`] with the batch of its changes, or by [`Write::abort`].
///
/// On PostgreSQL a write connection inside a transaction begun by hand: if it is dropped
/// before commit or rollback (a panic, a cancelled request), it is closed, not reused, so that
/// the database rolls the transaction back and no other request ever runs inside it. On SQLite the
/// direct connection with this process's writer slot: dropped early, it rolls back before the
/// slot is released.
#[derive(Debug)]
pub struct Write {
    conn: WriteConn,
    /// Not yet committed nor rolled back.
    open: bool,
    commits: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// The connection a [`Write`] runs on.
#[derive(Debug)]
enum WriteConn {
    /// PostgreSQL: a write connection (module `writers`).
    Postgres(Writer),
    /// SQLite: the direct connection, with this process's writer slot (`None` while a job on
    /// the connection's thread carries it).
    Sqlite {
        slot: Option<Slot>,
        direct: std::sync::Arc<DirectConnection>,
    },
}

/// The connection a [`Write`] or a [`Reader`] holds.
#[derive(Debug)]
enum Held {
    /// A pooled connection (PostgreSQL; SQLite reads while a write holds the slot).
    Pooled(sqlx::pool::PoolConnection<Any>),
    /// SQLite: the write connection, in the writer slot (held until the write or read ends).
    Slot(tokio::sync::OwnedMutexGuard<Option<sqlx::AnyConnection>>),
}

impl Held {
    fn get(&mut self) -> &mut sqlx::AnyConnection {
        match self {
            Held::Pooled(c) => c,
            Held::Slot(slot) => slot.as_mut().expect("the slot holds a connection"),
        }
    }
}

/// A connection for reads ([`Db::reader`]); `&mut *reader` is an executor.
#[derive(Debug)]
pub struct Reader(Held);

impl std::ops::Deref for Reader {
    type Target = sqlx::AnyConnection;
    fn deref(&self) -> &Self::Target {
        match &self.0 {
            Held::Pooled(c) => c,
            Held::Slot(slot) => slot.as_ref().expect("the slot holds a connection"),
        }
    }
}

impl std::ops::DerefMut for Reader {
    fn deref_mut(&mut self) -> &mut Self::Target {
        self.0.get()
    }
}

impl Drop for Write {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        match &mut self.conn {
            // Not marked reusable: closed, and the database rolls the transaction back.
            WriteConn::Postgres(_) => {}
            // Ended before the slot is released (a job that carries the slot ends its own).
            WriteConn::Sqlite {
                slot: Some(_),
                direct,
            } => direct.rollback(),
            WriteConn::Sqlite { slot: None, .. } => {}
        }
    }
}

impl Db {
    /// Round trip 1 of a write: begins the transaction, runs `lock` (a statement that takes
    /// the write's row locks and returns no rows), then `read` (which reads what the write
    /// needs), both with `binds`, and gives the first row of `read`. On PostgreSQL it is one
    /// simple-protocol query on a write connection (module `writers`): `lock` inlined, `read`
    /// `EXECUTE`d (prepared on that connection first when it is not yet, one more round trip),
    /// and `read` runs after `lock` was granted, with a snapshot of its own (READ COMMITTED), so
    /// it sees every write committed before the lock. On SQLite, `BEGIN IMMEDIATE` is the lock (one writer;
    /// `lock` is not sent), taken after this process's writer slot, so that writers queue
    /// fairly instead of polling SQLite's lock; `read` runs bound, prepared once, on the
    /// direct connection: on the calling thread when the lock is free, on the connection's
    /// thread (waiting up to the busy timeout) when another process holds it.
    pub async fn begin_with_read(
        &self,
        lock: &str,
        read: &str,
        binds: Vec<Bind>,
    ) -> Result<(Write, Option<Row>), sqlx::Error> {
        if let Some(direct) = &self.direct {
            let slot = self.writer.clone().lock_owned().await;
            let (row, slot) = direct.begin_with_read(slot, read, binds).await?;
            let write = Write {
                conn: WriteConn::Sqlite {
                    slot: Some(slot),
                    direct: direct.clone(),
                },
                open: true,
                commits: self.commits.clone(),
            };
            return Ok((write, row));
        }
        let writers = self
            .writers
            .as_ref()
            .expect("PostgreSQL has write connections");
        let mut retried = false;
        loop {
            let mut writer = writers.acquire().await?;
            let was_idle = writer.was_idle();
            let row = async {
                let read = writer.statement(read, &binds).await?;
                let query = format!(
                    "{}BEGIN; {}; {read}",
                    writer.take_evicted(),
                    inline(lock, &binds, Backend::Postgres),
                );
                let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(query))
                    .fetch_all(writer.connection())
                    .await?;
                rows.first().map(Row::from_any).transpose()
            }
            .await;
            let mut write = Write {
                conn: WriteConn::Postgres(writer),
                open: true,
                commits: self.commits.clone(),
            };
            match row {
                Ok(row) => return Ok((write, row)),
                Err(e) if super::outage::is_unavailable(&e) => {
                    write.dead();
                    // A connection that died while idle (the database restarted or failed
                    // over since): nothing was sent that commits, so the write starts again
                    // once on a new connection instead of answering 503.
                    if was_idle && !retried && matches!(e, sqlx::Error::Io(_)) {
                        retried = true;
                        continue;
                    }
                    return Err(e);
                }
                Err(e) => {
                    write.rollback().await;
                    return Err(e);
                }
            }
        }
    }
}

impl Write {
    /// Round trip 2 of a write: every statement of `batch`, each checked for the rows it had to
    /// change, and `COMMIT`: on PostgreSQL in one query ([`Batch::into_postgres`]); on SQLite
    /// statement by statement on the direct connection, on the calling thread when the commit
    /// does not flush to disk, on the connection's thread when it does. Nothing is committed
    /// when a check fails or the database refuses a statement.
    pub async fn commit(mut self, batch: Batch) -> Result<(), BatchError> {
        let writer = match &mut self.conn {
            WriteConn::Sqlite { slot, direct } => {
                let expected = batch.expected();
                let direct = direct.clone();
                let taken = slot.take().expect("an open write holds the slot");
                return match direct
                    .commit(taken, batch.into_statements(), self.commits.clone())
                    .await
                {
                    // Committed, or rolled back by the failure: ended either way.
                    Ok(_slot) => {
                        self.open = false;
                        Ok(())
                    }
                    Err(CommitError::Mismatch) => {
                        self.open = false;
                        Err(BatchError::Mismatch(BatchMismatch { expected }))
                    }
                    Err(CommitError::Database(e)) => {
                        self.open = false;
                        Err(BatchError::Database(e))
                    }
                };
            }
            WriteConn::Postgres(writer) => writer,
        };
        let (sql, binds, expects) = batch.into_postgres();
        // `Err((true, e))`: the batch and its COMMIT were sent; `(false, e)`: not yet (preparing
        // sends nothing that commits), so a failure there leaves nothing applied.
        let sent = async {
            let statement = writer
                .statement(&sql, &binds)
                .await
                .map_err(|e| (false, e))?;
            let query = format!("{}{statement}; COMMIT", writer.take_evicted());
            sqlx::raw_sql(sqlx::AssertSqlSafe(query))
                .execute(writer.connection())
                .await
                .map_err(|e| (true, e))
        }
        .await;
        match sent {
            Ok(_) => {
                writer.set_reusable(true);
                self.open = false;
                self.commits
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(())
            }
            Err((sent, e)) => {
                if super::outage::is_unavailable(&e) {
                    self.dead();
                } else {
                    self.rollback().await;
                }
                if is_failed_check(&e) {
                    Err(BatchError::Mismatch(BatchMismatch { expected: expects }))
                } else if sent {
                    // The batch ends with its COMMIT: a lost connection leaves it unknown.
                    Err(BatchError::Database(super::outage::outcome_unknown(e)))
                } else {
                    Err(BatchError::Database(e))
                }
            }
        }
    }

    /// PostgreSQL, after a failure that says the database is unavailable: the connection is
    /// closed with every idle one (no `ROLLBACK` is sent to a connection that is gone; a
    /// standby after a failover ends the transaction when the connection closes).
    fn dead(&mut self) {
        if let WriteConn::Postgres(writer) = &mut self.conn {
            writer.dead();
        }
        self.open = false;
    }

    /// Ends the transaction without changing anything (a refused write).
    pub async fn abort(mut self) {
        self.rollback().await;
    }

    /// Ends a transaction that will not commit; a connection that cannot even do that is
    /// closed instead of returned to the pool.
    async fn rollback(&mut self) {
        match &mut self.conn {
            WriteConn::Sqlite { direct, .. } => {
                direct.rollback();
                self.open = false;
            }
            WriteConn::Postgres(writer) => {
                match sqlx::raw_sql("ROLLBACK").execute(writer.connection()).await {
                    Ok(_) => {
                        writer.set_reusable(true);
                        self.open = false;
                    }
                    Err(e) => tracing::warn!(error = %e, "rollback failed; closing the connection"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wal_switch_waits_as_long_as_the_busy_timeout() {
        let pragma = format!(
            "PRAGMA busy_timeout = {}",
            super::super::direct::BUSY_TIMEOUT.as_millis()
        );
        assert!(
            SQLITE_PRAGMAS.contains(&pragma.as_str()),
            "{SQLITE_PRAGMAS:?}"
        );
    }

    /// The setting of the connection commits run on (the direct one), not of a pooled reader.
    #[tokio::test]
    async fn the_connection_that_commits_has_the_durability_asked_for() {
        for (sync, want) in [(true, 2), (false, 1)] {
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite:{}", dir.path().join("d.db").display());
            let db = Db::connect(&url, &DbOptions::default().sync_commits(sync))
                .await
                .unwrap();
            let direct = db
                .direct
                .as_ref()
                .expect("SQLite writes on a direct connection");
            let row = direct
                .try_read_one("PRAGMA synchronous", &[])
                .expect("the connection is idle")
                .unwrap()
                .expect("one row");
            assert_eq!(row.try_get::<i64, _>(0usize).unwrap(), want, "sync {sync}");
            db.close().await;
        }
    }
}
