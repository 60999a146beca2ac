//! The pool and the write path: [`Db`] (SQLite or PostgreSQL behind sqlx's `Any` driver), its
//! settings ([`DbOptions`]), this process's SQLite writer slot, and the transactions a write
//! runs in ([`WriteTx`], [`Write`]) and reads use ([`Reader`]).

mod options;
mod sqlite;
mod write;

use std::time::Duration;

use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{Any, AnyPool, Transaction};

use super::backend::sqlite_url;
use super::batch::{Batch, BatchError, BatchMismatch, Bind, bind_all, inline, is_failed_check};
use super::direct::{CommitError, CommitsOn, DirectConnection, Slot};
use super::row::Row;
use super::search::{SearchConnection, SearchFailure, SearchLimits, Searchers};
use super::writers::{Writer, Writers};
use super::{Backend, redact_url};
use crate::error::{Error, Result};

pub use options::{DEFAULT_VERSIONS_KEPT, DbOptions};
pub use sqlite::DEFAULT_CHECKPOINT_INTERVAL;
use sqlite::{WRITER_CACHE, checkpoint_in_background, sqlite_setup, use_wal};
use write::Held;
pub use write::{Reader, Write};

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
    /// SQLite: a commit that waits for the disk waits on the calling thread
    /// ([`DbOptions::flush_on_calling_thread`]).
    flush_on_calling_thread: bool,
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
    flush_on_calling_thread: bool,
    checkpoint_interval: Option<Duration>,
    index_merge_interval: Option<Duration>,
    search: SearchLimits,
});

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
            flush_on_calling_thread: options.flush_on_calling_thread,
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

    /// SQLite: writes' steps handed to the write connection's thread so far (a commit that
    /// flushes, unless [`DbOptions::flush_on_calling_thread`] keeps it; a begin that waits for
    /// another process's lock), each a wake-up of that thread and then of the caller's: a
    /// command's count is the difference around it. The index's background merges are not
    /// counted. 0 on PostgreSQL.
    pub fn thread_handoffs(&self) -> u64 {
        self.direct.as_ref().map_or(0, |d| d.handoffs())
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
    /// checkpoint, or when [`DbOptions::flush_on_calling_thread`] lets them wait there (module
    /// `direct`).
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
            if !self.sync_commits && background_checkpoints {
                CommitsOn::Caller
            } else if self.flush_on_calling_thread {
                CommitsOn::CallerWaiting
            } else {
                CommitsOn::Thread
            },
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

    /// Every row `sql` selects with `binds` (`$1..$n`), on a reader.
    pub async fn read_all(&self, sql: &str, binds: Vec<Bind>) -> Result<Vec<Row>, sqlx::Error> {
        let rows = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql.to_string())), binds)
            .fetch_all(&mut *self.reader().await?)
            .await?;
        Row::from_any_rows(&rows)
    }

    /// The plan of `sql` with `binds` (the dialect's `EXPLAIN`), one line a step: for the
    /// tests that hold a statement's plan on a database nobody analysed.
    #[cfg(test)]
    pub(crate) async fn plan(&self, sql: &str, binds: Vec<Bind>) -> Vec<String> {
        let (prefix, column) = self.dialect().explain();
        let rows = self
            .read_all(&format!("{prefix} {sql}"), binds)
            .await
            .unwrap();
        rows.iter()
            .map(|r| r.try_get::<String, _>(column).unwrap())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::sqlite::SQLITE_PRAGMAS;
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
