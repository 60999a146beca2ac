//! The database: one pool over SQLite or PostgreSQL, chosen by URL scheme, migrated on start.
//!
//! Queries are written once in SQL both dialects accept (`$N` parameters, `RETURNING`,
//! `ON CONFLICT`) and run through sqlx's `Any` driver; only the migrations differ per backend
//! (`migrations/sqlite`, `migrations/postgres`). Integer columns are `BIGINT` in PostgreSQL so
//! that every integer decodes as `i64` on both.
//!
//! Every write transaction starts by locking the single `audit_head` row (see [`crate::audit`]):
//! that serialises writers across processes and servers (SQLite: `BEGIN IMMEDIATE`;
//! PostgreSQL: the row lock), and versions are still checked in SQL (`WHERE version = $n`), so
//! several server processes on one PostgreSQL are correct together. Errors of connecting and
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
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((userinfo, host)) = rest.split_once('@')
        && let Some((user, _)) = userinfo.split_once(':')
    {
        return format!("{scheme}://{user}:***@{host}");
    }
    url.to_string()
}

struct Migration {
    version: i64,
    description: &'static str,
    sql: &'static str,
}

const SQLITE_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "init",
        sql: include_str!("../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        description: "per-tenant audit chains, idempotency keys",
        sql: include_str!("../migrations/sqlite/0002_tenant_chains.sql"),
    },
];

const POSTGRES_MIGRATIONS: &[Migration] = &[
    Migration {
        version: 1,
        description: "init",
        sql: include_str!("../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        description: "per-tenant audit chains, idempotency keys",
        sql: include_str!("../migrations/postgres/0002_tenant_chains.sql"),
    },
];

/// A connection pool and its backend.
#[derive(Debug, Clone)]
pub struct Db {
    pool: AnyPool,
    backend: Backend,
    writer: std::sync::Arc<tokio::sync::Mutex<()>>,
}

/// A write transaction (and, on SQLite, this process's writer slot until it ends).
#[derive(Debug)]
pub struct WriteTx {
    tx: Transaction<'static, Any>,
    _guard: Option<tokio::sync::OwnedMutexGuard<()>>,
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
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            max_connections: 16,
            acquire_timeout: Duration::from_secs(30),
        }
    }
}

impl Db {
    /// Connects to `url` (`sqlite:PATH`, created if missing; or `postgres://...`) and migrates.
    pub async fn connect(url: &str, options: &DbOptions) -> Result<Db> {
        install_default_drivers();
        let backend = Backend::from_url(url)?;
        let url = match backend {
            Backend::Sqlite => sqlite_url(url)?,
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
                    for pragma in [
                        "PRAGMA busy_timeout = 30000",
                        "PRAGMA foreign_keys = ON",
                        "PRAGMA synchronous = FULL",
                    ] {
                        sqlx::query(pragma).execute(&mut *conn).await?;
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

    /// The pool.
    pub fn pool(&self) -> &AnyPool {
        &self.pool
    }

    /// The backend.
    pub fn backend(&self) -> Backend {
        self.backend
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
        let migrations = match self.backend {
            Backend::Sqlite => SQLITE_MIGRATIONS,
            Backend::Postgres => POSTGRES_MIGRATIONS,
        };
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
            sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql))
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

/// The writes of one transaction, decided before any is made: one round trip on PostgreSQL (the
/// statements become one statement of data-modifying CTEs), one statement after another on
/// SQLite (local, where a round trip costs nothing). Each statement uses its own `$1..$n`;
/// each may say how many rows it must change, and the batch fails (and the transaction with it)
/// when one changes another number.
#[derive(Debug, Default)]
pub struct Batch {
    statements: Vec<(String, Vec<Bind>, Option<u64>)>,
}

/// A write transaction opened by its read (see [`Db::begin_with_read`]); finished by
/// [`Write::commit`] with the batch of its changes, or by [`Write::abort`].
#[derive(Debug)]
pub struct Write {
    kind: WriteKind,
}

#[derive(Debug)]
enum WriteKind {
    Sqlite(WriteTx),
    Postgres(PgWrite),
}

/// A pooled PostgreSQL connection inside a transaction begun by hand. If it is dropped before
/// commit or rollback (a panic), it is closed, not returned to the pool, so that PostgreSQL
/// rolls the transaction back and no other request ever runs inside it.
#[derive(Debug)]
struct PgWrite {
    conn: sqlx::pool::PoolConnection<Any>,
    open: bool,
}

impl Drop for PgWrite {
    fn drop(&mut self) {
        if self.open {
            self.conn.close_on_drop();
        }
    }
}

impl Db {
    /// Round trip 1 of a write: begins the transaction, runs `lock` (a statement that takes
    /// the write's row locks and returns no rows), then `read` (which reads what the write
    /// needs), both with `binds`. On PostgreSQL the three go in one simple-protocol query, the
    /// values inlined as literals ([`inline`]); `read` runs after `lock` was granted, with a
    /// snapshot of its own (READ COMMITTED), so it sees every write committed before the lock.
    /// On SQLite, `BEGIN IMMEDIATE` is the lock (one writer), then the bound `read` (local: no
    /// network round trips).
    pub async fn begin_with_read(
        &self,
        lock: &str,
        read: &str,
        binds: Vec<Bind>,
    ) -> Result<(Write, Option<AnyRow>), sqlx::Error> {
        match self.backend {
            Backend::Sqlite => {
                let mut tx = self.begin_write().await?;
                let row = bind_all(sqlx::query(sqlx::AssertSqlSafe(read.to_string())), binds)
                    .fetch_optional(&mut *tx)
                    .await?;
                Ok((
                    Write {
                        kind: WriteKind::Sqlite(tx),
                    },
                    row,
                ))
            }
            Backend::Postgres => {
                let conn = self.pool.acquire().await?;
                let mut write = PgWrite { conn, open: true };
                let query = format!("BEGIN; {}; {}", inline(lock, &binds), inline(read, &binds));
                let rows = match sqlx::raw_sql(sqlx::AssertSqlSafe(query))
                    .fetch_all(&mut *write.conn)
                    .await
                {
                    Ok(rows) => rows,
                    Err(e) => {
                        rollback(&mut write).await;
                        return Err(e);
                    }
                };
                Ok((
                    Write {
                        kind: WriteKind::Postgres(write),
                    },
                    rows.into_iter().next(),
                ))
            }
        }
    }
}

/// Ends a PostgreSQL transaction that will not commit; a connection that cannot even do that
/// is closed instead of returned to the pool.
async fn rollback(write: &mut PgWrite) {
    match sqlx::raw_sql("ROLLBACK").execute(&mut *write.conn).await {
        Ok(_) => write.open = false,
        Err(e) => tracing::warn!(error = %e, "rollback failed; closing the connection"),
    }
}

impl Write {
    /// Round trip 2 of a write on PostgreSQL: every statement of `batch`, each checked for the
    /// rows it had to change, and `COMMIT`, in one query. Nothing is committed when a check
    /// fails or the database refuses a statement.
    pub async fn commit(self, batch: Batch) -> Result<(), BatchError> {
        match self.kind {
            WriteKind::Sqlite(mut tx) => {
                batch.run(&mut tx, Backend::Sqlite).await?;
                tx.commit().await?;
                Ok(())
            }
            WriteKind::Postgres(mut write) => {
                let (sql, expects) = batch.into_checked_statement();
                let query = format!("{sql}; COMMIT");
                match sqlx::raw_sql(sqlx::AssertSqlSafe(query))
                    .execute(&mut *write.conn)
                    .await
                {
                    Ok(_) => {
                        write.open = false;
                        Ok(())
                    }
                    Err(e) => {
                        rollback(&mut write).await;
                        let failed_check = matches!(
                            &e,
                            sqlx::Error::Database(d) if d.code().as_deref() == Some("22012")
                        );
                        if failed_check {
                            Err(BatchError::Mismatch(BatchMismatch {
                                index: 0,
                                expected: expects.iter().flatten().sum(),
                                got: u64::MAX,
                            }))
                        } else {
                            Err(BatchError::Database(e))
                        }
                    }
                }
            }
        }
    }

    /// Ends the transaction without changing anything (a refused write).
    pub async fn abort(self) {
        match self.kind {
            WriteKind::Sqlite(tx) => drop(tx), // sqlx rolls back a dropped transaction
            WriteKind::Postgres(mut write) => rollback(&mut write).await,
        }
    }
}

/// Whether a text value contains NUL (U+0000).
pub fn has_nul(binds: &[Bind]) -> bool {
    binds.iter().any(|b| match b {
        Bind::Text(t) | Bind::OptText(Some(t)) => t.contains('\0'),
        _ => false,
    })
}

/// `sql` with each `$n` replaced by the `n`th value as a SQL literal: integers in decimal,
/// `NULL`, and text dollar-quoted with a random tag that the text does not contain (so no
/// character of it is ever interpreted: no escaping to get wrong).
pub fn inline(sql: &str, binds: &[Bind]) -> String {
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
            Some(b) => out.push_str(&literal(b)),
            None => {
                out.push('$');
                out.push_str(&digits);
            }
        }
    }
    out
}

fn literal(b: &Bind) -> String {
    fn text(t: &str) -> String {
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

/// A [`Batch`] statement changed another number of rows than it had to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("statement {index} of a write changed {got} rows, not {expected}")]
pub struct BatchMismatch {
    /// Which statement (0-based).
    pub index: usize,
    /// Rows it had to change.
    pub expected: u64,
    /// Rows it changed.
    pub got: u64,
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

    /// Runs every statement in `tx`.
    pub async fn run(
        self,
        tx: &mut sqlx::AnyConnection,
        backend: Backend,
    ) -> Result<(), BatchError> {
        match backend {
            Backend::Sqlite => {
                for (index, (sql, binds, expect)) in self.statements.into_iter().enumerate() {
                    let got = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
                        .execute(&mut *tx)
                        .await?
                        .rows_affected();
                    check(index, expect, got)?;
                }
            }
            Backend::Postgres => {
                if self.statements.is_empty() {
                    return Ok(());
                }
                let (sql, binds, expects) = self.into_one_statement();
                let row = bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
                    .fetch_one(&mut *tx)
                    .await?;
                for (index, expect) in expects.into_iter().enumerate() {
                    let got: i64 = row.try_get(index)?;
                    check(index, expect, got as u64)?;
                }
            }
        }
        Ok(())
    }

    /// Whether a text value of the batch contains NUL (U+0000), which PostgreSQL cannot store
    /// and the contract refuses on every database.
    pub fn has_nul(&self) -> bool {
        self.statements.iter().any(|(_, binds, _)| has_nul(binds))
    }

    /// The batch as one PostgreSQL statement with its values inlined, that fails (division by
    /// zero) unless every statement changed the rows it had to:
    /// `WITH s0 AS (... RETURNING 1), ... SELECT 1 / (CASE WHEN (SELECT COUNT(*) FROM s0) = 1
    /// AND ... THEN 1 ELSE 0 END)`.
    fn into_checked_statement(self) -> (String, Vec<Option<u64>>) {
        let mut ctes = Vec::new();
        let mut checks = Vec::new();
        let mut expects = Vec::new();
        for (index, (sql, binds, expect)) in self.statements.into_iter().enumerate() {
            ctes.push(format!(
                "s{index} AS ({} RETURNING 1)",
                inline(&sql, &binds)
            ));
            if let Some(n) = expect {
                checks.push(format!("(SELECT COUNT(*) FROM s{index}) = {n}"));
            }
            expects.push(expect);
        }
        if checks.is_empty() {
            checks.push("TRUE".into());
        }
        (
            format!(
                "WITH {} SELECT 1 / (CASE WHEN {} THEN 1 ELSE 0 END)",
                ctes.join(", "),
                checks.join(" AND ")
            ),
            expects,
        )
    }

    /// `WITH s0 AS (... RETURNING 1), s1 AS (...) SELECT (SELECT COUNT(*) FROM s0), ...` with
    /// the parameters renumbered.
    fn into_one_statement(self) -> (String, Vec<Bind>, Vec<Option<u64>>) {
        let mut ctes = Vec::new();
        let mut counts = Vec::new();
        let mut all = Vec::new();
        let mut expects = Vec::new();
        for (index, (sql, binds, expect)) in self.statements.into_iter().enumerate() {
            let offset = all.len();
            ctes.push(format!(
                "s{index} AS ({} RETURNING 1)",
                renumber(&sql, offset)
            ));
            counts.push(format!("(SELECT COUNT(*) FROM s{index}) AS n{index}"));
            all.extend(binds);
            expects.push(expect);
        }
        (
            format!("WITH {} SELECT {}", ctes.join(", "), counts.join(", ")),
            all,
            expects,
        )
    }
}

fn check(index: usize, expect: Option<u64>, got: u64) -> Result<(), BatchMismatch> {
    match expect {
        Some(expected) if expected != got => Err(BatchMismatch {
            index,
            expected,
            got,
        }),
        _ => Ok(()),
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

/// `sql` with every `$n` placeholder moved up by `offset`.
fn renumber(sql: &str, offset: usize) -> String {
    let mut out = String::with_capacity(sql.len() + 16);
    let mut chars = sql.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '$' {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some((_, d)) = chars.peek().copied().filter(|(_, d)| d.is_ascii_digit()) {
            digits.push(d);
            chars.next();
        }
        match digits.parse::<usize>() {
            Ok(n) => out.push_str(&format!("${}", n + offset)),
            Err(_) => out.push('$'),
        }
    }
    out
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
    if let Some(parent) = std::path::Path::new(path).parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)
            .map_err(|e| Error::Config(format!("cannot create the directory of {path}: {e}")))?;
    }
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
    fn batches_become_one_statement_on_postgres() {
        let mut b = Batch::default();
        b.push(
            "UPDATE t SET a = $1 WHERE id = $2",
            vec![Bind::Int(1), Bind::Text("x".into())],
            Some(1),
        );
        b.push("DELETE FROM u WHERE id = $1", vec![Bind::Int(9)], None);
        let (sql, binds, expects) = b.into_one_statement();
        assert_eq!(
            sql,
            "WITH s0 AS (UPDATE t SET a = $1 WHERE id = $2 RETURNING 1), s1 AS (DELETE FROM u WHERE id = $3 RETURNING 1) SELECT (SELECT COUNT(*) FROM s0) AS n0, (SELECT COUNT(*) FROM s1) AS n1"
        );
        assert_eq!(binds.len(), 3);
        assert_eq!(expects, vec![Some(1), None]);
        assert_eq!(renumber("$1, $10, $", 5), "$6, $15, $");
        let sql = inline(
            "x = $1 AND y = $2 AND z = $3 AND w = $4",
            &[
                Bind::Int(-7),
                Bind::OptText(None),
                Bind::Text("it's $$ a $cq$ trap".into()),
                Bind::OptInt(Some(3)),
            ],
        );
        assert!(sql.starts_with("x = -7 AND y = NULL AND z = $cq"), "{sql}");
        assert!(sql.contains("$it's $$ a $cq$ trap$cq"), "{sql}");
        assert!(sql.ends_with(" AND w = 3"), "{sql}");
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
