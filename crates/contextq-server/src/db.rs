//! The database: one pool over SQLite or PostgreSQL, chosen by URL scheme, migrated on start.
//!
//! Queries are written once in SQL both dialects accept (`$N` parameters, `RETURNING`,
//! `ON CONFLICT`) and run through sqlx's `Any` driver; only the migrations differ per backend
//! (`migrations/sqlite`, `migrations/postgres`). Integer columns are `BIGINT` in PostgreSQL so
//! that every integer decodes as `i64` on both.
//!
//! Every write transaction starts by locking its tenant's audit chain head (see
//! [`crate::audit`]): that serialises the writers of one tenant across processes and servers
//! (SQLite: `BEGIN IMMEDIATE`, one writer for the whole file; PostgreSQL: the row lock), and
//! versions are still checked in SQL (`WHERE version = $n`), so several server processes on one
//! PostgreSQL are correct together. A write is two queries ([`Db::begin_with_read`],
//! [`Write::commit`]); on SQLite they run on the process's one write connection, held in its
//! writer slot (no pool check-out, no release ping). Errors of connecting and
//! migrating are [`crate::Error`]s; the queries of the data layer give `sqlx::Error`s, which
//! [`crate::store::Error`] wraps.

use std::str::FromStr;
use std::time::Duration;

use sqlx::any::AnyRow;
use sqlx::any::{AnyPoolOptions, install_default_drivers};
use sqlx::{Any, AnyPool, Row, Transaction};

use crate::error::{Error, Result};

/// Now, RFC 3339 UTC with milliseconds: how every time is stored.
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

/// Which database a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// `sqlite:PATH` (the default).
    Sqlite,
    /// `postgres://...` or `postgresql://...`.
    Postgres,
}

impl Backend {
    /// The backend for `url`, or an error naming the accepted schemes.
    pub fn from_url(url: &str) -> Result<Backend> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(Error::Config(format!(
                "unsupported database URL {:?}: use sqlite:PATH or postgres://USER:PASSWORD@HOST/DB",
                redact_url(url)
            )))
        }
    }
}

/// A URL with its password replaced by `***`, for messages and logs.
pub fn redact_url(url: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, Some(q)),
        None => (url, None),
    };
    let mut out = match base.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
                None => base.to_string(),
            },
            None => base.to_string(),
        },
        None => base.to_string(),
    };
    if let Some(q) = query {
        // `password=`, `sslpassword=`, ...: any parameter whose name mentions a password.
        let params: Vec<String> = q
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, _)) if k.to_ascii_lowercase().contains("pass") => format!("{k}=***"),
                _ => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&params.join("&"));
    }
    out
}

struct Migration {
    version: i64,
    description: &'static str,
    /// The migration's SQL per backend (the dialects differ, the versions never do).
    sqlite: &'static str,
    postgres: &'static str,
}

impl Migration {
    fn sql(&self, backend: Backend) -> &'static str {
        match backend {
            Backend::Sqlite => self.sqlite,
            Backend::Postgres => self.postgres,
        }
    }
}

/// One migration: its version, description, and the file of that name in each backend's
/// folder.
macro_rules! migration {
    ($version:literal, $description:literal, $file:literal) => {
        Migration {
            version: $version,
            description: $description,
            sqlite: include_str!(concat!("../migrations/sqlite/", $file)),
            postgres: include_str!(concat!("../migrations/postgres/", $file)),
        }
    };
}

/// Every migration, in order; each backend has its own SQL file of the same name.
const MIGRATIONS: &[Migration] = &[
    migration!(1, "init", "0001_init.sql"),
    migration!(
        2,
        "per-tenant audit chains, idempotency keys",
        "0002_tenant_chains.sql"
    ),
    migration!(3, "keyed audit log", "0003_audit_mac.sql"),
    migration!(4, "context versions", "0004_versions.sql"),
    migration!(
        5,
        "version counters, idempotency keys bound to their request, expiring keys, the legacy chain anchored",
        "0005_version_counters.sql"
    ),
];

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
}

/// Set on every SQLite connection.
const SQLITE_PRAGMAS: &[&str] = &[
    "PRAGMA busy_timeout = 30000",
    "PRAGMA foreign_keys = ON",
    "PRAGMA synchronous = FULL",
];

/// A write transaction (and, on SQLite, this process's writer slot until it ends).
#[derive(Debug)]
pub struct WriteTx {
    tx: Transaction<'static, Any>,
    _guard: Option<tokio::sync::OwnedMutexGuard<Option<sqlx::AnyConnection>>>,
}

impl WriteTx {
    /// Commits (and frees the writer slot).
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        self.tx.commit().await
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

/// Pool settings.
#[derive(Debug, Clone)]
pub struct DbOptions {
    /// Most connections held open (default 16; SQLite 8).
    pub max_connections: u32,
    /// How long to wait for a free connection (default 30 s).
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
    /// Open an existing database only (default false: a SQLite file that does not exist is
    /// created, with its directories). Operator commands that only read or change what is there
    /// set it, so that a typo in the URL is an error rather than a new, empty database.
    pub existing_only: bool,
    /// Versions kept of each external id (extension `history`; default
    /// [`DEFAULT_VERSIONS_KEPT`], 100; at least 1). A tenant keeps at most its plan's context cap
    /// times this many versions in all (a deleted context's versions count until pruned, oldest
    /// first).
    pub versions_kept: u32,
}

/// Default [`DbOptions::versions_kept`]: 100.
pub const DEFAULT_VERSIONS_KEPT: u32 = 100;

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(30),
            audit_key: None,
            adopt_audit_key: false,
            inspect_audit: false,
            existing_only: false,
            versions_kept: DEFAULT_VERSIONS_KEPT,
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
        if backend == Backend::Sqlite {
            pool_options = pool_options.after_connect(|conn, _meta| {
                Box::pin(async move {
                    for pragma in SQLITE_PRAGMAS {
                        sqlx::query(*pragma).execute(&mut *conn).await?;
                    }
                    Ok(())
                })
            });
        }
        let pool = pool_options
            .connect(&url)
            .await
            .map_err(|e| Error::Connect(redact_url(&url), e))?;
        let db = Db {
            pool,
            backend,
            writer: Default::default(),
            url,
            audit_key: options.audit_key.clone().map(std::sync::Arc::new),
            versions_kept: options.versions_kept,
        };
        if backend == Backend::Sqlite {
            // Persistent in the file: set once.
            sqlx::query("PRAGMA journal_mode = WAL")
                .execute(&db.pool)
                .await?;
        }
        db.migrate().await?;
        Ok(db)
    }

    /// The audit key rows and heads are MACed with, if any.
    pub fn audit_key(&self) -> Option<&crate::audit::key::AuditKey> {
        self.audit_key.as_deref()
    }

    /// Versions kept of each external id ([`DbOptions::versions_kept`]).
    pub fn versions_kept(&self) -> u32 {
        self.versions_kept
    }

    /// The pool.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// SQLite: the file that signals key revocations to every server process on this database
    /// (`<database>-revocations`, rewritten after each revocation commits; see
    /// [`crate::auth::KeyCache`]). `None` on PostgreSQL.
    pub fn revocations_file(&self) -> Option<std::path::PathBuf> {
        if self.backend != Backend::Sqlite {
            return None;
        }
        let rest = self.url.trim_start_matches("sqlite://");
        let path = rest.split_once('?').map_or(rest, |(p, _)| p);
        Some(std::path::PathBuf::from(format!("{path}-revocations")))
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

    /// A connection for reads. On SQLite, the write connection when no write holds it (its page
    /// cache stays warm across this process's own writes, and nothing is checked out of the
    /// pool, so there is no release ping: one hop to SQLite's worker thread per query instead
    /// of two); a pooled connection while a write runs, so reads never wait for writes. On
    /// PostgreSQL, a pooled connection.
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

    /// A new SQLite connection outside the pool, set up as the pool's are.
    async fn sqlite_connection(&self) -> Result<sqlx::AnyConnection, sqlx::Error> {
        use sqlx::Connection as _;
        let mut conn = sqlx::AnyConnection::connect(&self.url).await?;
        for pragma in SQLITE_PRAGMAS {
            sqlx::query(*pragma).execute(&mut conn).await?;
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
                }
            }
            Backend::Postgres => WriteTx {
                tx: self.pool.begin().await?,
                _guard: None,
            },
        })
    }

    async fn migrate(&self) -> Result<()> {
        let migrations = MIGRATIONS;
        // One transaction under one lock: two servers starting together on one database do not
        // race (SQLite: BEGIN IMMEDIATE; PostgreSQL: an advisory lock held to commit).
        let mut tx = self.begin_write().await?;
        if self.backend == Backend::Postgres {
            sqlx::query("SELECT pg_advisory_xact_lock(7301452)")
                .execute(&mut *tx)
                .await?;
        }
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version BIGINT PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)",
        )
        .execute(&mut *tx)
        .await?;
        for m in migrations {
            let done = sqlx::query("SELECT version FROM schema_migrations WHERE version = $1")
                .bind(m.version)
                .fetch_optional(&mut *tx)
                .await?;
            if done.is_some() {
                continue;
            }
            sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql(self.backend)))
                .execute(&mut *tx)
                .await
                .map_err(|e| Error::Migration(m.version, e))?;
            sqlx::query(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES ($1, $2, $3)",
            )
            .bind(m.version)
            .bind(m.description)
            .bind(now())
            .execute(&mut *tx)
            .await?;
            tracing::info!(version = m.version, "applied migration {}", m.description);
        }
        tx.commit().await?;
        Ok(())
    }

    /// Closes the pool (waits for connections to be returned).
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// The latest applied migration.
    pub async fn schema_version(&self) -> Result<i64, sqlx::Error> {
        let row = sqlx::query("SELECT MAX(version) AS v FROM schema_migrations")
            .fetch_one(&self.pool)
            .await?;
        Ok(row.try_get::<Option<i64>, _>("v")?.unwrap_or(0))
    }
}

/// A value bound to a statement of a [`Batch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// `TEXT`.
    Text(String),
    /// `TEXT` or `NULL`.
    OptText(Option<String>),
    /// `BIGINT`.
    Int(i64),
    /// `BIGINT` or `NULL`.
    OptInt(Option<i64>),
}

/// The writes of one transaction, decided before any is made, sent as one query with `COMMIT`
/// ([`Write::commit`], [`Batch::into_checked`]): one round trip on PostgreSQL (the statements
/// become one statement of data-modifying CTEs), one hop to sqlx's worker thread on SQLite.
/// Each statement uses its own `$1..$n`; each may say how many rows it must change, and the
/// batch fails (and the transaction with it) when one changes another number.
#[derive(Debug, Default)]
pub struct Batch {
    statements: Vec<(String, Vec<Bind>, Option<u64>)>,
}

/// A write transaction opened by its read (see [`Db::begin_with_read`]); finished by
/// [`Write::commit`] with the batch of its changes, or by [`Write::abort`].
///
/// A pooled connection inside a transaction begun by hand (on SQLite, with this process's
/// writer slot). If it is dropped before commit or rollback (a panic), it is closed, not
/// returned to the pool, so that the database rolls the transaction back and no other request
/// ever runs inside it.
#[derive(Debug)]
pub struct Write {
    conn: Held,
    backend: Backend,
    open: bool,
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

    /// Closes the connection instead of reusing it (the database rolls back what it had open).
    fn discard(&mut self) {
        match self {
            Held::Pooled(c) => c.close_on_drop(),
            Held::Slot(slot) => drop(slot.take()),
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
        if self.open {
            self.conn.discard();
        }
    }
}

impl Db {
    /// Round trip 1 of a write: begins the transaction, runs `lock` (a statement that takes
    /// the write's row locks and returns no rows), then `read` (which reads what the write
    /// needs), both with `binds`, in one simple-protocol query, the values inlined as literals
    /// ([`inline`]). On PostgreSQL `read` runs after `lock` was granted, with a snapshot of its
    /// own (READ COMMITTED), so it sees every write committed before the lock. On SQLite,
    /// `BEGIN IMMEDIATE` is the lock (one writer; `lock` is not sent), taken after this
    /// process's writer slot, so that writers queue fairly instead of polling SQLite's lock; the
    /// one query is one hop to sqlx's SQLite worker thread instead of three.
    pub async fn begin_with_read(
        &self,
        lock: &str,
        read: &str,
        binds: Vec<Bind>,
    ) -> Result<(Write, Option<AnyRow>), sqlx::Error> {
        let conn = match self.backend {
            Backend::Sqlite => {
                let mut slot = self.writer.clone().lock_owned().await;
                if slot.is_none() {
                    *slot = Some(self.sqlite_connection().await?);
                }
                Held::Slot(slot)
            }
            Backend::Postgres => Held::Pooled(self.pool.acquire().await?),
        };
        let mut write = Write {
            conn,
            backend: self.backend,
            open: true,
        };
        let query = match self.backend {
            Backend::Sqlite => {
                format!("BEGIN IMMEDIATE; {}", inline(read, &binds, Backend::Sqlite))
            }
            Backend::Postgres => format!(
                "BEGIN; {}; {}",
                inline(lock, &binds, Backend::Postgres),
                inline(read, &binds, Backend::Postgres)
            ),
        };
        match sqlx::raw_sql(sqlx::AssertSqlSafe(query))
            .fetch_all(write.conn.get())
            .await
        {
            Ok(rows) => Ok((write, rows.into_iter().next())),
            Err(e) => {
                write.rollback().await;
                Err(e)
            }
        }
    }
}

impl Write {
    /// Round trip 2 of a write: every statement of `batch`, each checked for the rows it had to
    /// change, and `COMMIT`, in one query ([`Batch::into_checked`]). Nothing is committed when
    /// a check fails or the database refuses a statement.
    pub async fn commit(mut self, batch: Batch) -> Result<(), BatchError> {
        let (sql, expects) = batch.into_checked(self.backend);
        let query = format!("{sql}; COMMIT");
        match sqlx::raw_sql(sqlx::AssertSqlSafe(query))
            .execute(self.conn.get())
            .await
        {
            Ok(_) => {
                self.open = false;
                Ok(())
            }
            Err(e) => {
                self.rollback().await;
                if is_failed_check(&e, self.backend) {
                    Err(BatchError::Mismatch(BatchMismatch { expected: expects }))
                } else {
                    Err(BatchError::Database(e))
                }
            }
        }
    }

    /// Ends the transaction without changing anything (a refused write).
    pub async fn abort(mut self) {
        self.rollback().await;
    }

    /// Ends a transaction that will not commit; a connection that cannot even do that is
    /// closed instead of returned to the pool.
    async fn rollback(&mut self) {
        match sqlx::raw_sql("ROLLBACK").execute(self.conn.get()).await {
            Ok(_) => self.open = false,
            Err(e) => tracing::warn!(error = %e, "rollback failed; closing the connection"),
        }
    }
}

/// Whether `e` is the failure [`Batch::into_checked`] provokes when a statement changed
/// another number of rows than it had to: division by zero on PostgreSQL (22012), malformed
/// JSON from `json('batch check')` on SQLite (which has no statement that raises an error).
fn is_failed_check(e: &sqlx::Error, backend: Backend) -> bool {
    match (e, backend) {
        (sqlx::Error::Database(d), Backend::Postgres) => d.code().as_deref() == Some("22012"),
        (sqlx::Error::Database(d), Backend::Sqlite) => d.message().contains("malformed JSON"),
        _ => false,
    }
}

/// Whether a text value contains NUL (U+0000).
pub fn has_nul(binds: &[Bind]) -> bool {
    binds.iter().any(|b| match b {
        Bind::Text(t) | Bind::OptText(Some(t)) => t.contains('\0'),
        _ => false,
    })
}

/// `sql` with each `$n` replaced by the `n`th value as a SQL literal of `backend`: integers in
/// decimal, `NULL`, and text: on PostgreSQL dollar-quoted with a random tag that the text does
/// not contain (so no character of it is ever interpreted: no escaping to get wrong); on
/// SQLite in single quotes with each `'` doubled (SQLite's only escape: a backslash is an
/// ordinary character). Values never contain NUL ([`has_nul`] is refused before).
pub fn inline(sql: &str, binds: &[Bind], backend: Backend) -> String {
    let mut out = String::with_capacity(sql.len() + 64);
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().copied().filter(char::is_ascii_digit) {
            digits.push(d);
            chars.next();
        }
        match digits
            .parse::<usize>()
            .ok()
            .and_then(|n| binds.get(n.wrapping_sub(1)))
        {
            Some(b) => out.push_str(&literal(b, backend)),
            None => {
                out.push('$');
                out.push_str(&digits);
            }
        }
    }
    out
}

fn literal(b: &Bind, backend: Backend) -> String {
    let text = |t: &str| match backend {
        Backend::Sqlite => format!("'{}'", t.replace('\'', "''")),
        Backend::Postgres => dollar_quoted(t),
    };
    fn dollar_quoted(t: &str) -> String {
        loop {
            let tag = format!("cq{:016x}", fastrand::u64(..));
            if !t.contains(&tag) {
                return format!("${tag}${t}${tag}$");
            }
        }
    }
    match b {
        Bind::Text(t) | Bind::OptText(Some(t)) => text(t),
        Bind::OptText(None) | Bind::OptInt(None) => "NULL".to_string(),
        Bind::Int(i) | Bind::OptInt(Some(i)) => i.to_string(),
    }
}

/// A statement of a [`Batch`] changed another number of rows than it had to. The batch is
/// checked as a whole in the database (one query), so which statement is not known.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a statement of a write changed another number of rows than it had to (rows each had to change: {expected:?})"
)]
pub struct BatchMismatch {
    /// Rows each statement had to change, in order (`None`: any number).
    pub expected: Vec<Option<u64>>,
}

/// What a [`Batch`] can fail with.
#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    /// The database failed.
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// A statement changed an unexpected number of rows.
    #[error(transparent)]
    Mismatch(#[from] BatchMismatch),
}

impl Batch {
    /// Adds an `INSERT`, `UPDATE` or `DELETE` (without `RETURNING`) that must change `expect`
    /// rows (`None`: any number).
    pub fn push(&mut self, sql: impl Into<String>, binds: Vec<Bind>, expect: Option<u64>) {
        self.statements.push((sql.into(), binds, expect));
    }

    /// Whether nothing was added.
    pub fn is_empty(&self) -> bool {
        self.statements.is_empty()
    }

    /// Whether a text value of the batch contains NUL (U+0000), which PostgreSQL cannot store
    /// and the contract refuses on every database.
    pub fn has_nul(&self) -> bool {
        self.statements.iter().any(|(_, binds, _)| has_nul(binds))
    }

    /// The batch as one query of `backend` that fails unless every statement changed the rows
    /// it had to, with the rows each had to change. PostgreSQL: one statement of
    /// data-modifying CTEs, `WITH s0 AS (... RETURNING 1), ... SELECT 1 / (CASE WHEN <each
    /// count is right> THEN 1 ELSE 0 END)` (division by zero otherwise). SQLite: the statements
    /// one after another, each checked by `SELECT CASE WHEN changes() = n THEN 1 ELSE
    /// json('batch check ' || changes()) END`, which raises "malformed JSON" when the count is
    /// wrong (the argument is not constant, so SQLite never evaluates it ahead of the `CASE`).
    pub fn into_checked(self, backend: Backend) -> (String, Vec<Option<u64>>) {
        let expects: Vec<Option<u64>> = self.statements.iter().map(|s| s.2).collect();
        if self.statements.is_empty() {
            return ("SELECT 1".into(), expects);
        }
        let sql = match backend {
            Backend::Postgres => {
                let mut ctes = Vec::new();
                let mut checks = Vec::new();
                for (index, (sql, binds, expect)) in self.statements.into_iter().enumerate() {
                    ctes.push(format!(
                        "s{index} AS ({} RETURNING 1)",
                        inline(&sql, &binds, backend)
                    ));
                    if let Some(n) = expect {
                        checks.push(format!("(SELECT COUNT(*) FROM s{index}) = {n}"));
                    }
                }
                if checks.is_empty() {
                    checks.push("TRUE".into());
                }
                format!(
                    "WITH {} SELECT 1 / (CASE WHEN {} THEN 1 ELSE 0 END)",
                    ctes.join(", "),
                    checks.join(" AND ")
                )
            }
            Backend::Sqlite => {
                let mut parts = Vec::new();
                for (sql, binds, expect) in self.statements {
                    parts.push(inline(&sql, &binds, backend));
                    if let Some(n) = expect {
                        parts.push(format!(
                            "SELECT CASE WHEN changes() = {n} THEN 1 ELSE json('batch check ' || changes()) END"
                        ));
                    }
                }
                parts.join("; ")
            }
        };
        (sql, expects)
    }
}

/// Binds `binds` in order.
pub fn bind_all<'q>(
    mut query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    binds: Vec<Bind>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    for b in binds {
        query = match b {
            Bind::Text(v) => query.bind(v),
            Bind::OptText(v) => query.bind(v),
            Bind::Int(v) => query.bind(v),
            Bind::OptInt(v) => query.bind(v),
        };
    }
    query
}

/// `$from, $from+1, ..., $from+n-1`.
pub fn placeholders(from: usize, n: usize) -> String {
    (from..from + n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Creates an empty PostgreSQL database `name` on the server `url` points at, and returns the
/// URL of the new database (same credentials and options). For tests, benchmarks and
/// provisioning scripts; `name` must be a plain identifier (letters, digits, `_`).
pub async fn create_postgres_database(url: &str, name: &str) -> Result<String> {
    use sqlx::Connection;
    if Backend::from_url(url)? != Backend::Postgres {
        return Err(Error::Config(format!(
            "{} is not a postgres:// URL",
            redact_url(url)
        )));
    }
    if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(Error::Config(format!(
            "{name:?} is not a plain database name"
        )));
    }
    install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(url)
        .await
        .map_err(|e| Error::Connect(redact_url(url), e))?;
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    let (base, query) = url
        .split_once('?')
        .map_or((url, None), |(b, q)| (b, Some(q)));
    let scheme_end = base.find("://").map_or(0, |i| i + 3);
    let path_start = base[scheme_end..]
        .find('/')
        .map_or(base.len(), |i| i + scheme_end);
    let mut out = format!("{}/{name}", &base[..path_start]);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    Ok(out)
}

/// `sqlite:PATH` with `mode=rwc` (create if missing) unless a mode was given.
fn sqlite_url(url: &str) -> Result<String> {
    let rest = url.trim_start_matches("sqlite:").trim_start_matches("//");
    if rest.is_empty() || rest.starts_with(":memory:") {
        return Err(Error::Config(
            "in-memory SQLite is not supported (each pooled connection would get its own database): use sqlite:PATH".into(),
        ));
    }
    let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
    let query = if query.contains("mode=") {
        query.to_string()
    } else if query.is_empty() {
        "mode=rwc".to_string()
    } else {
        format!("{query}&mode=rwc")
    };
    Ok(format!("sqlite://{path}?{query}"))
}

impl FromStr for Backend {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Backend::from_url(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_become_one_checked_query() {
        let batch = || {
            let mut b = Batch::default();
            b.push(
                "UPDATE t SET a = $1 WHERE id = $2",
                vec![Bind::Int(1), Bind::Text("x".into())],
                Some(1),
            );
            b.push("DELETE FROM u WHERE id = $1", vec![Bind::Int(9)], None);
            b
        };
        let (sql, expects) = batch().into_checked(Backend::Postgres);
        assert!(
            sql.starts_with("WITH s0 AS (UPDATE t SET a = 1 WHERE id = $cq"),
            "{sql}"
        );
        assert!(
            sql.ends_with(
                "s1 AS (DELETE FROM u WHERE id = 9 RETURNING 1) SELECT 1 / (CASE WHEN (SELECT COUNT(*) FROM s0) = 1 THEN 1 ELSE 0 END)"
            ),
            "{sql}"
        );
        assert_eq!(expects, vec![Some(1), None]);
        let (sql, _) = batch().into_checked(Backend::Sqlite);
        assert_eq!(
            sql,
            "UPDATE t SET a = 1 WHERE id = 'x'; SELECT CASE WHEN changes() = 1 THEN 1 ELSE json('batch check ' || changes()) END; DELETE FROM u WHERE id = 9"
        );
        assert_eq!(
            Batch::default().into_checked(Backend::Sqlite),
            ("SELECT 1".to_string(), vec![])
        );
    }

    #[test]
    fn values_are_inlined_as_literals() {
        let binds = [
            Bind::Int(-7),
            Bind::OptText(None),
            Bind::Text("it's $$ a $cq$ trap \\ $1".into()),
            Bind::OptInt(Some(3)),
        ];
        let sql = inline(
            "x = $1 AND y = $2 AND z = $3 AND w = $4",
            &binds,
            Backend::Postgres,
        );
        assert!(sql.starts_with("x = -7 AND y = NULL AND z = $cq"), "{sql}");
        assert!(sql.contains("$it's $$ a $cq$ trap \\ $1$cq"), "{sql}");
        assert!(sql.ends_with(" AND w = 3"), "{sql}");
        assert_eq!(
            inline(
                "x = $1 AND y = $2 AND z = $3 AND w = $4 AND v = $10",
                &binds,
                Backend::Sqlite
            ),
            "x = -7 AND y = NULL AND z = 'it''s $$ a $cq$ trap \\ $1' AND w = 3 AND v = $10"
        );
        assert_eq!(placeholders(3, 2), "$3, $4");
    }

    #[test]
    fn urls() {
        assert_eq!(
            Backend::from_url("sqlite:/tmp/x.db").unwrap(),
            Backend::Sqlite
        );
        assert_eq!(
            Backend::from_url("postgres://u:p@h/db").unwrap(),
            Backend::Postgres
        );
        let err = Backend::from_url("mysql://u:secret@h/db")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("sqlite:PATH") && !err.contains("secret"),
            "{err}"
        );
        assert_eq!(
            redact_url("postgres://u:pw@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(
            redact_url("postgres://u:p@ss@h/db?password=secret&sslmode=require&sslpassword=x"),
            "postgres://u:***@h/db?password=***&sslmode=require&sslpassword=***"
        );
        assert_eq!(
            redact_url("postgres://u@h/db?PassWord=secret"),
            "postgres://u@h/db?PassWord=***"
        );
        assert_eq!(
            sqlite_url("sqlite:/tmp/a.db").unwrap(),
            "sqlite:///tmp/a.db?mode=rwc"
        );
        assert_eq!(
            sqlite_url("sqlite:rel.db").unwrap(),
            "sqlite://rel.db?mode=rwc"
        );
        assert!(sqlite_url("sqlite::memory:").is_err());
    }
}
