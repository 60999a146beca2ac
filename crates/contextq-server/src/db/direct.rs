//! SQLite: this process's write connection, driven directly ([`DirectConnection`]) rather than through
//! sqlx's worker thread.
//!
//! sqlx runs each SQLite connection on a thread of its own and hands every query and every
//! row across; on the embedded default those hand-offs (thread wake-ups) cost more than the
//! SQL (docs/benchmarks.md). This connection (rusqlite, on the same bundled SQLite library)
//! runs a write on the calling thread when nothing in it can wait: `BEGIN IMMEDIATE` is tried
//! without waiting, and a commit runs here when it does not flush to disk (no `fsync`:
//! `synchronous = NORMAL` with checkpoints in the background). Whatever can wait (another
//! process holding the write lock, a commit that flushes) runs on the connection's own thread,
//! so an async runtime thread never blocks on a lock or a disk; unless the owner said a commit
//! may wait for the disk on a current-thread runtime that serves one client
//! ([`CommitsOn::CallerWaiting`]: two thread wake-ups a write fewer). Reads use it too when it
//! is idle ([`DirectConnection::try_read_one`]): its page cache is the warmest, having made the
//! writes.
//!
//! Who may use it: the holder of this process's writer slot ([`super::Db`]) for a write; a
//! read only when no write is open on it. A job sent to the thread carries the writer slot, so
//! a request that gives up waiting cannot let the next write in before its transaction ended.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::batch::Bind;
use super::row::{Row, Value};

/// How long a write waits for another process's write lock (SQLite's busy timeout), as on
/// the pool's connections.
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

/// Prepared statements kept per connection: every read and write statement of the memory
/// tool's commands, several times over.
const PREPARED_STATEMENTS: usize = 256;

/// The writer slot a write holds (see [`super::Db`]).
pub(crate) type Slot = tokio::sync::OwnedMutexGuard<Option<sqlx::AnyConnection>>;

type Job = Box<dyn FnOnce(&mut Option<Connection>) + Send>;

/// Where a commit runs ([`DirectConnection::commit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommitsOn {
    /// On the calling thread: commits do not wait for the disk (no flush, checkpoints in the
    /// background).
    Caller,
    /// On the calling thread, waiting for the disk there, when that thread is a current-thread
    /// runtime's (which runs nothing else meanwhile) or no runtime's; on the connection's
    /// thread from a multi-thread runtime ([`super::DbOptions::flush_on_calling_thread`]).
    CallerWaiting,
    /// On the connection's thread: the calling thread never waits for the disk.
    Thread,
}

/// Whether the calling thread belongs to a multi-thread runtime, whose workers must not wait for
/// a disk (`tokio::task::block_in_place` would let them, but moving the worker's other tasks
/// away and back cost a server more than the two wake-ups it saved: docs/benchmarks.md).
fn on_multi_thread_runtime() -> bool {
    use tokio::runtime::{Handle, RuntimeFlavor};
    Handle::try_current().is_ok_and(|h| h.runtime_flavor() != RuntimeFlavor::CurrentThread)
}

/// The direct connection and the thread that runs what may wait.
#[derive(Debug)]
pub(crate) struct DirectConnection {
    /// `None` once closed.
    conn: Arc<Mutex<Option<Connection>>>,
    jobs: std::sync::mpsc::Sender<Job>,
    /// Where commits run.
    commits_on: CommitsOn,
    /// Writes' steps handed to the connection's thread so far ([`DirectConnection::handoffs`]).
    handoffs: AtomicU64,
}

/// A failure of the direct connection, as sqlx reports database errors (so that the store
/// handles both drivers' failures alike).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub(crate) struct SqliteFailure {
    message: String,
    /// SQLite's extended result code, if SQLite failed (not the binding of a value).
    code: Option<i32>,
}

impl sqlx::error::DatabaseError for SqliteFailure {
    fn message(&self) -> &str {
        &self.message
    }

    fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
        self.code.map(|c| c.to_string().into())
    }

    crate::db::as_itself!();

    fn kind(&self) -> sqlx::error::ErrorKind {
        use sqlx::error::ErrorKind;
        match self.code {
            // SQLITE_CONSTRAINT_UNIQUE, SQLITE_CONSTRAINT_PRIMARYKEY
            Some(2067 | 1555) => ErrorKind::UniqueViolation,
            // SQLITE_CONSTRAINT_FOREIGNKEY
            Some(787) => ErrorKind::ForeignKeyViolation,
            // SQLITE_CONSTRAINT_NOTNULL
            Some(1299) => ErrorKind::NotNullViolation,
            // SQLITE_CONSTRAINT_CHECK
            Some(275) => ErrorKind::CheckViolation,
            _ => ErrorKind::Other,
        }
    }
}

/// `e` as an `sqlx::Error`: a database failure keeps SQLite's extended code and message.
pub(super) fn to_sqlx(e: rusqlite::Error) -> sqlx::Error {
    match e {
        rusqlite::Error::SqliteFailure(f, message) => {
            sqlx::Error::Database(Box::new(SqliteFailure {
                message: message.unwrap_or_else(|| f.to_string()),
                code: Some(f.extended_code),
            }))
        }
        other => sqlx::Error::Database(Box::new(SqliteFailure {
            message: other.to_string(),
            code: None,
        })),
    }
}

fn closed() -> sqlx::Error {
    sqlx::Error::PoolClosed
}

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _)
        if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked))
}

/// `sql` with each parameter `$k` written `?k`. Both name a value by its number, but SQLite
/// finds a `$k` by walking the names seen so far, at every `$` while it parses and at every
/// lookup of a name, so a statement of ten thousand values (a bulk upsert of a thousand files)
/// took half a second to prepare; `?k` is the parameter numbered `k`, found at once. Our
/// statements never hold `$` followed by a digit other than as a parameter (values are bound,
/// never written into the text).
fn numbered(sql: &str) -> std::borrow::Cow<'_, str> {
    if !sql.contains('$') {
        return sql.into();
    }
    let mut out = String::with_capacity(sql.len());
    let mut rest = sql;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        out.push(if after.starts_with(|c: char| c.is_ascii_digit()) {
            '?'
        } else {
            '$'
        });
        rest = after;
    }
    out.push_str(rest);
    out.into()
}

/// Binds each parameter of `stmt` (made from [`numbered`] text: parameter `k` is value
/// `binds[k - 1]`). A parameter without a value is an error, not a silent `NULL`.
fn bind(stmt: &mut rusqlite::CachedStatement<'_>, binds: &[Bind]) -> rusqlite::Result<()> {
    for i in 1..=stmt.parameter_count() {
        match binds.get(i - 1) {
            Some(Bind::Text(t) | Bind::OptText(Some(t))) => {
                stmt.raw_bind_parameter(i, t.as_str())?
            }
            Some(Bind::Int(n) | Bind::OptInt(Some(n))) => stmt.raw_bind_parameter(i, *n)?,
            Some(Bind::OptText(None) | Bind::OptInt(None)) => {
                stmt.raw_bind_parameter(i, rusqlite::types::Null)?
            }
            // A number the text does not use (`$1` and `$3` only) needs no value.
            None if stmt.parameter_name(i).is_none() => {}
            None => {
                return Err(rusqlite::Error::InvalidParameterName(format!(
                    "{} (of {} values)",
                    stmt.parameter_name(i).unwrap_or("?"),
                    binds.len()
                )));
            }
        }
    }
    Ok(())
}

/// The rows of `sql` (one statement) with `binds`; at most `limit`.
pub(super) fn query(
    conn: &Connection,
    sql: &str,
    binds: &[Bind],
    limit: usize,
) -> rusqlite::Result<Vec<Row>> {
    let mut stmt = conn.prepare_cached(&numbered(sql))?;
    bind(&mut stmt, binds)?;
    let names: Arc<[String]> = stmt
        .column_names()
        .into_iter()
        .map(str::to_string)
        .collect();
    let mut rows = stmt.raw_query();
    let mut out = Vec::new();
    while out.len() < limit {
        let Some(row) = rows.next()? else { break };
        let mut values = Vec::with_capacity(names.len());
        for i in 0..names.len() {
            values.push(match row.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(n) => Value::Int(n),
                ValueRef::Real(f) => Value::Real(f),
                // Text that is not UTF-8 (a database written by hand) fails where it is read
                // as text, as with sqlx.
                ValueRef::Text(t) => match std::str::from_utf8(t) {
                    Ok(s) => Value::Text(s.to_string()),
                    Err(_) => Value::Blob(t.to_vec()),
                },
                ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        out.push(Row::new(names.clone(), values));
    }
    Ok(out)
}

/// `BEGIN IMMEDIATE` (waiting for another process's lock as long as the connection's busy
/// timeout allows), then the first row of `read`; rolled back if the read fails.
fn begin_and_read(conn: &Connection, read: &str, binds: &[Bind]) -> rusqlite::Result<Option<Row>> {
    conn.execute_batch("BEGIN IMMEDIATE")?;
    match query(conn, read, binds, 1) {
        Ok(mut rows) => Ok(rows.pop()),
        Err(e) => {
            rollback(conn);
            Err(e)
        }
    }
}

/// What [`DirectConnection::commit`] can fail with.
#[derive(Debug)]
pub(crate) enum CommitError {
    /// The database refused a statement or the commit.
    Database(sqlx::Error),
    /// A statement changed another number of rows than it had to.
    Mismatch,
}

/// Each statement, checked for the rows it had to change, then `COMMIT` (counted in
/// `commits`, for the background checkpoint); everything rolled back when one fails.
fn apply(
    conn: &Connection,
    statements: &[(String, Vec<Bind>, Option<u64>)],
    commits: &AtomicU64,
) -> Result<(), CommitError> {
    let run = || {
        for (sql, binds, expect) in statements {
            let mut stmt = conn.prepare_cached(&numbered(sql)).map_err(to_sqlx)?;
            bind(&mut stmt, binds).map_err(to_sqlx)?;
            let changed = stmt.raw_execute().map_err(to_sqlx)?;
            if expect.is_some_and(|n| n != changed as u64) {
                return Err(CommitError::Mismatch);
            }
        }
        conn.execute_batch("COMMIT").map_err(to_sqlx)?;
        commits.fetch_add(1, Ordering::Relaxed);
        Ok(())
    };
    let out = run();
    if out.is_err() {
        rollback(conn);
    }
    out
}

/// What marks the statements of an index merge, for the counts of `testing::sqlite_counts`.
pub(crate) const MERGE_MARK: &str = "/* index merge */";

/// One step of FTS5's `merge` (at most about `pages` pages of work, and only when a level holds
/// enough segments to merge) in a transaction of its own, not counted as a commit. It is
/// committed without a flush of its own (`synchronous = NORMAL` for its span when commits
/// flush): losing it to a power cut loses only the merge, the index stays whole, and the next
/// write's flush carries it, since the log is written in order. Another process's write in
/// progress: nothing, `false`.
fn merge_step(conn: &Connection, pages: u32, synced: bool) -> rusqlite::Result<bool> {
    rollback(conn);
    let batch = |sql: &str| conn.execute_batch(&format!("{MERGE_MARK} {sql}"));
    if synced {
        batch("PRAGMA synchronous = NORMAL")?;
    }
    let step = || -> rusqlite::Result<bool> {
        batch("BEGIN IMMEDIATE")?;
        let before = conn.total_changes();
        batch(&format!(
            "INSERT INTO context_fts (context_fts, rank) VALUES ('merge', {pages})"
        ))?;
        // The command's own row aside, FTS5 writes its segments' pages when it merges.
        let merged = conn.total_changes() - before > 1;
        batch("COMMIT")?;
        Ok(merged)
    };
    let out = match step() {
        Err(e) if is_busy(&e) => Ok(false),
        out => out,
    };
    if out.is_err() || !conn.is_autocommit() {
        rollback(conn);
    }
    if synced {
        batch("PRAGMA synchronous = FULL")?;
    }
    out
}

impl From<sqlx::Error> for CommitError {
    fn from(e: sqlx::Error) -> Self {
        CommitError::Database(e)
    }
}

/// Ends an open transaction without changes (nothing happens when none is open).
fn rollback(conn: &Connection) {
    if !conn.is_autocommit()
        && let Err(e) = conn.execute_batch("ROLLBACK")
    {
        tracing::warn!(error = %e, "rollback failed on the direct SQLite connection");
    }
}

impl DirectConnection {
    /// Opens `path` (which exists: the pool created and migrated it), sets it up with
    /// `pragmas`, and starts its thread; its commits run where `commits_on` says.
    pub(crate) fn open<'a>(
        path: &Path,
        read_only: bool,
        pragmas: impl IntoIterator<Item = &'a str>,
        commits_on: CommitsOn,
    ) -> Result<DirectConnection, sqlx::Error> {
        let flags = if read_only {
            OpenFlags::SQLITE_OPEN_READ_ONLY
        } else {
            OpenFlags::SQLITE_OPEN_READ_WRITE
        } | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_EXRESCODE;
        let conn = Connection::open_with_flags(path, flags).map_err(to_sqlx)?;
        for pragma in pragmas {
            conn.execute_batch(pragma).map_err(to_sqlx)?;
        }
        // Nothing on the calling thread waits for a lock: a busy database sends the write to
        // the connection's thread, which waits (`BUSY_TIMEOUT`).
        conn.busy_timeout(Duration::ZERO).map_err(to_sqlx)?;
        conn.set_prepared_statement_cache_capacity(PREPARED_STATEMENTS);
        let conn = Arc::new(Mutex::new(Some(conn)));
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let theirs = conn.clone();
        std::thread::Builder::new()
            .name("contextq-sqlite-writer".into())
            .spawn(move || {
                for job in queue {
                    let mut conn = theirs.lock().unwrap_or_else(|p| p.into_inner());
                    // A job that panics fails its own caller (its answer is dropped), not
                    // every later write; the next write ends what it left open.
                    let run = std::panic::AssertUnwindSafe(|| job(&mut conn));
                    if std::panic::catch_unwind(run).is_err() {
                        tracing::error!("a job on the direct SQLite connection panicked");
                    }
                }
            })
            .map_err(sqlx::Error::Io)?;
        Ok(DirectConnection {
            conn,
            jobs,
            commits_on,
            handoffs: AtomicU64::new(0),
        })
    }

    /// Writes' steps (a begin that waits for another process's lock, a commit that flushes)
    /// handed to the connection's thread so far, each a wake-up of that thread and one of the
    /// caller's: a command's count is the difference around it. The index's merges, which run
    /// there between writes, are not counted.
    pub(crate) fn handoffs(&self) -> u64 {
        self.handoffs.load(Ordering::Relaxed)
    }

    /// The connection, locked (it is held only for the span of one statement or commit).
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Connection>> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `job` on the connection's thread with `slot`, and gives the slot back with its
    /// answer; when the caller stopped waiting, `abandon` runs on the connection instead (the
    /// slot is released after it).
    async fn on_thread<R: Send + 'static>(
        &self,
        slot: Slot,
        job: impl FnOnce(&Connection) -> R + Send + 'static,
        abandon: impl FnOnce(&Connection) + Send + 'static,
    ) -> Result<(R, Slot), sqlx::Error> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move |conn: &mut Option<Connection>| {
                let Some(conn) = conn.as_ref() else {
                    // Closed: dropping the sender tells the caller.
                    drop(slot);
                    return;
                };
                let out = job(conn);
                if let Err((_, slot)) = tx.send((out, slot)) {
                    abandon(conn);
                    drop(slot);
                }
            }))
            .map_err(|_| closed())?;
        rx.await.map_err(|_| closed())
    }

    /// Round trip 1 of a write ([`super::Db::begin_with_read`]): `BEGIN IMMEDIATE` and the
    /// first row of `read`. Here when the lock is free; on the thread, waiting for it, when
    /// another process holds it. The slot comes back with the answer.
    pub(crate) async fn begin_with_read(
        &self,
        slot: Slot,
        read: &str,
        binds: Vec<Bind>,
    ) -> Result<(Option<Row>, Slot), sqlx::Error> {
        {
            let guard = self.lock();
            let conn = guard.as_ref().ok_or_else(closed)?;
            // A transaction left open by a write whose caller vanished mid-way is ended here:
            // the slot holder is the only writer.
            rollback(conn);
            match conn.execute_batch("BEGIN IMMEDIATE") {
                Ok(()) => {
                    return match query(conn, read, &binds, 1) {
                        Ok(mut rows) => Ok((rows.pop(), slot)),
                        Err(e) => {
                            rollback(conn);
                            Err(to_sqlx(e))
                        }
                    };
                }
                Err(e) if is_busy(&e) => {}
                Err(e) => return Err(to_sqlx(e)),
            }
        }
        let read = read.to_string();
        self.handoffs.fetch_add(1, Ordering::Relaxed);
        let (out, slot) = self
            .on_thread(
                slot,
                move |conn| {
                    let waited = conn
                        .busy_timeout(BUSY_TIMEOUT)
                        .and_then(|()| begin_and_read(conn, &read, &binds));
                    conn.busy_timeout(Duration::ZERO).ok();
                    waited
                },
                rollback,
            )
            .await?;
        Ok((out.map_err(to_sqlx)?, slot))
    }

    /// Round trip 2 of a write ([`super::Write::commit`]): the statements, each checked, and
    /// `COMMIT`; where [`CommitsOn`] says.
    pub(crate) async fn commit(
        &self,
        slot: Slot,
        statements: Vec<(String, Vec<Bind>, Option<u64>)>,
        commits: Arc<AtomicU64>,
    ) -> Result<(), CommitError> {
        let here = || {
            let guard = self.lock();
            let conn = guard.as_ref().ok_or_else(closed)?;
            apply(conn, &statements, &commits)
        };
        let on_caller = match self.commits_on {
            CommitsOn::Caller => true,
            CommitsOn::CallerWaiting => !on_multi_thread_runtime(),
            CommitsOn::Thread => false,
        };
        if on_caller {
            let out = here();
            drop(slot);
            return out;
        }
        // The statements come back to be freed here, after the slot: freeing a large batch
        // (a bulk upsert's contents) is work the next write need not wait for.
        self.handoffs.fetch_add(1, Ordering::Relaxed);
        let ((out, statements), slot) = self
            .on_thread(
                slot,
                move |conn| (apply(conn, &statements, &commits), statements),
                |_| {},
            )
            .await?;
        drop(slot);
        drop(statements);
        out
    }

    /// One step of merging the search index's segments (module `merges`), on the connection's
    /// thread with the writer `slot` (released when it ends): `true` when FTS5 had work to do.
    pub(crate) async fn merge_index(
        &self,
        slot: Slot,
        pages: u32,
        synced: bool,
    ) -> Result<bool, sqlx::Error> {
        let (out, _slot) = self
            .on_thread(slot, move |conn| merge_step(conn, pages, synced), rollback)
            .await?;
        out.map_err(to_sqlx)
    }

    /// Ends the open write without changes (a refused write, or one dropped before commit).
    pub(crate) fn rollback(&self) {
        if let Some(conn) = self.lock().as_ref() {
            rollback(conn);
        }
    }

    /// The first row of `sql` (one statement) with `binds`, read here if the connection is
    /// idle (no write open on it, nobody else using it, no other process's lock in the way);
    /// `None` when it is not, for the caller to read elsewhere.
    pub(crate) fn try_read_one(
        &self,
        sql: &str,
        binds: &[Bind],
    ) -> Option<Result<Option<Row>, sqlx::Error>> {
        let guard = self.conn.try_lock().ok()?;
        let Some(conn) = guard.as_ref() else {
            return Some(Err(closed()));
        };
        if !conn.is_autocommit() {
            return None;
        }
        match query(conn, sql, binds, 1) {
            Err(e) if is_busy(&e) => None,
            other => Some(other.map(|mut rows| rows.pop()).map_err(to_sqlx)),
        }
    }

    /// Closes the connection (rolling back what was open); later uses fail as a closed pool.
    pub(crate) fn close(&self) {
        if let Some(conn) = self.lock().take() {
            rollback(&conn);
            drop(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_numbered_for_sqlite() {
        assert_eq!(
            numbered("SELECT '$.a', $1, $12 FROM t WHERE x = $2 AND y = $"),
            "SELECT '$.a', ?1, ?12 FROM t WHERE x = ?2 AND y = $"
        );
        assert!(matches!(
            numbered("SELECT 1"),
            std::borrow::Cow::Borrowed(_)
        ));
    }

    #[test]
    fn each_number_takes_its_value_and_a_missing_one_is_an_error() {
        let conn = Connection::open_in_memory().unwrap();
        let binds = [Bind::Text("one".into()), Bind::Int(2), Bind::OptText(None)];
        let rows = query(
            &conn,
            "SELECT $3 AS c, $1 AS a, $1 || 'x' AS ax",
            &binds,
            10,
        )
        .unwrap();
        assert_eq!(rows.len(), 1);
        let row = &rows[0];
        assert_eq!(row.try_get::<Option<String>, _>("c").unwrap(), None);
        assert_eq!(row.try_get::<String, _>("a").unwrap(), "one");
        assert_eq!(row.try_get::<String, _>("ax").unwrap(), "onex");
        // Ten thousand values, in one statement, each where its number says.
        let many: Vec<Bind> = (0..10_000).map(Bind::Int).collect();
        let sql = format!(
            "SELECT sum(column1) AS s FROM (VALUES {})",
            (1..=10_000)
                .map(|k| format!("(${k})"))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let rows = query(&conn, &sql, &many, 1).unwrap();
        assert_eq!(
            rows[0].try_get::<i64, _>("s").unwrap(),
            (0..10_000).sum::<i64>()
        );
        let e = query(&conn, "SELECT $2", &binds[..1], 1).unwrap_err();
        assert!(e.to_string().contains("?2 (of 1 values)"), "{e}");
    }
}
