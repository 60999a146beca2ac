//! Searches' own slice of the database (extension `search`, docs/search.md "Cost"): a few
//! connections that only searches use, so that a flood of searches never takes a connection
//! that reads and writes need; a limit of searches in flight per tenant; and a time budget per
//! search, after which its statement is stopped, as it is within moments when its client goes
//! away (the request's future is dropped).
//!
//! SQLite: read-only rusqlite connections on the same bundled library, each statement run on a
//! blocking thread (never an async worker) under a progress handler that checks the budget and
//! whether the search was abandoned; each carries the ranking function (module `rank`).
//! PostgreSQL: a pool of its own whose connections have `statement_timeout` set to the budget
//! and `client_connection_check_interval` to 100 ms; a search past its deadline, or abandoned,
//! has its connection closed, not returned, so the server stops its statement at its next
//! check of the socket.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::any::AnyPoolOptions;
use sqlx::pool::PoolConnection;
use sqlx::{Any, AnyPool};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::batch::{Bind, bind_all};
use super::row::Row;

mod rank;

/// VM instructions between two looks at the clock (SQLite's progress handler): about 0.1 ms.
const CHECK_EVERY_OPS: i32 = 2_000;

/// How the searches of a database are bounded ([`super::DbOptions`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchLimits {
    /// Connections only searches use (default 4). A search waits for one as long as a request
    /// waits for any connection ([`super::DbOptions::acquire_timeout`]).
    pub connections: u32,
    /// Searches one tenant may have in flight (default 2, at most `connections`); the next is
    /// answered 429 `rate_limited` with `Retry-After: 1`, so one tenant never holds every
    /// search connection.
    pub per_tenant: u32,
    /// How long one search may run (default 2 s): its statement is then stopped and the search
    /// answered 400 "too broad", with how to narrow it.
    pub budget: Duration,
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            connections: 4,
            per_tenant: 2,
            budget: Duration::from_secs(2),
        }
    }
}

/// Why a search did not run or stopped, other than a database failure.
#[derive(Debug)]
pub enum SearchFailure {
    /// The tenant has [`SearchLimits::per_tenant`] searches in flight.
    Busy {
        /// The limit.
        limit: u32,
    },
    /// Every search connection stayed in use for the acquire timeout (other tenants'
    /// searches): load, not an outage of the database.
    Saturated,
    /// The search ran out of its budget and was stopped.
    TooBroad {
        /// The budget.
        budget: Duration,
    },
    /// The database failed (or no search connection was free in time).
    Db(sqlx::Error),
}

impl From<sqlx::Error> for SearchFailure {
    fn from(e: sqlx::Error) -> Self {
        SearchFailure::Db(e)
    }
}

/// The search slice of one database.
#[derive(Debug)]
pub(crate) struct Searchers {
    limits: SearchLimits,
    acquire_timeout: Duration,
    /// One per connection.
    permits: Arc<Semaphore>,
    /// Searches in flight per tenant (no entry at 0).
    in_flight: Arc<Mutex<HashMap<String, u32>>>,
    engine: Engine,
}

#[derive(Debug)]
enum Engine {
    Sqlite {
        path: PathBuf,
        /// Connections not in use (opened on demand, at most `connections`).
        idle: Arc<Mutex<Vec<rusqlite::Connection>>>,
    },
    Postgres(AnyPool),
}

impl Searchers {
    /// SQLite: connections on the file at `path`, opened when first needed.
    pub(crate) fn sqlite(path: PathBuf, limits: SearchLimits, acquire_timeout: Duration) -> Self {
        Self::new(
            limits,
            acquire_timeout,
            Engine::Sqlite {
                path,
                idle: Arc::default(),
            },
        )
    }

    /// PostgreSQL: a pool of `limits.connections` with the budget as `statement_timeout`.
    pub(crate) fn postgres(
        connect: sqlx::any::AnyConnectOptions,
        limits: SearchLimits,
        acquire_timeout: Duration,
    ) -> Self {
        let budget_ms = limits.budget.as_millis().max(1);
        let pool = AnyPoolOptions::new()
            .test_before_acquire(false)
            .acquire_timeout(acquire_timeout)
            .max_connections(limits.connections.max(1))
            .min_connections(0)
            .after_connect(move |conn, _meta| {
                Box::pin(async move {
                    sqlx::query(sqlx::AssertSqlSafe(format!(
                        "SET statement_timeout = {budget_ms}"
                    )))
                    .execute(&mut *conn)
                    .await?;
                    // The plan of a search is fixed by its text (store::search): with no
                    // statistics the planner may still price a scan of the shared index table
                    // below the GIN index; on these connections only, it takes the index.
                    // A plan priced past `jit_above_cost` that way must not be compiled.
                    sqlx::query("SET enable_seqscan = off")
                        .execute(&mut *conn)
                        .await?;
                    sqlx::query("SET jit = off").execute(&mut *conn).await?;
                    // PostgreSQL 14 and later: a statement whose client has closed the
                    // connection stops within this interval (an abandoned search's).
                    let _ = sqlx::query("SET client_connection_check_interval = 100")
                        .execute(&mut *conn)
                        .await;
                    Ok(())
                })
            })
            .connect_lazy_with(connect);
        Self::new(limits, acquire_timeout, Engine::Postgres(pool))
    }

    fn new(limits: SearchLimits, acquire_timeout: Duration, engine: Engine) -> Self {
        let limits = SearchLimits {
            connections: limits.connections.max(1),
            per_tenant: limits.per_tenant.clamp(1, limits.connections.max(1)),
            budget: limits.budget.max(Duration::from_millis(1)),
        };
        Searchers {
            permits: Arc::new(Semaphore::new(limits.connections as usize)),
            limits,
            acquire_timeout,
            in_flight: Arc::default(),
            engine,
        }
    }

    /// The limits in force.
    pub(crate) fn limits(&self) -> SearchLimits {
        self.limits
    }

    /// A search connection for one search of `tenant_id`: refused at once when the tenant has
    /// its limit in flight; waits for a free connection up to the acquire timeout. Its budget
    /// starts now.
    pub(crate) async fn begin(&self, tenant_id: &str) -> Result<SearchConnection, SearchFailure> {
        let slot = TenantSlot::take(&self.in_flight, tenant_id, self.limits.per_tenant)?;
        let deadline = Instant::now() + self.limits.budget;
        let permit =
            tokio::time::timeout(self.acquire_timeout, self.permits.clone().acquire_owned())
                .await
                .map_err(|_| SearchFailure::Saturated)?
                .map_err(|_| sqlx::Error::PoolClosed)?;
        let held = match &self.engine {
            Engine::Sqlite { path, idle } => {
                let conn = idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
                let conn = match conn {
                    Some(c) => c,
                    None => {
                        let path = path.clone();
                        tokio::task::spawn_blocking(move || open_sqlite(&path))
                            .await
                            .map_err(|e| sqlx::Error::Io(std::io::Error::other(e)))??
                    }
                };
                Held::Sqlite {
                    conn: Some(conn),
                    idle: idle.clone(),
                }
            }
            Engine::Postgres(pool) => {
                let conn = pool.acquire().await?;
                Held::Postgres {
                    conn: Some(conn),
                    running: false,
                }
            }
        };
        Ok(SearchConnection {
            held,
            deadline,
            budget: self.limits.budget,
            cancelled: Arc::new(AtomicBool::new(false)),
            permit: Some(permit),
            _slot: slot,
        })
    }

    /// Closes the PostgreSQL pool (SQLite's connections close when dropped).
    pub(crate) async fn close(&self) {
        match &self.engine {
            Engine::Postgres(pool) => pool.close().await,
            Engine::Sqlite { idle, .. } => idle.lock().unwrap_or_else(|p| p.into_inner()).clear(),
        }
    }
}

/// A search connection, held for one search: its statements run within the search's budget,
/// and dropping it mid-statement stops that statement.
#[derive(Debug)]
pub struct SearchConnection {
    held: Held,
    deadline: Instant,
    budget: Duration,
    /// Set when the search is dropped: SQLite's progress handler then stops the statement.
    cancelled: Arc<AtomicBool>,
    /// Released when the connection is back (SQLite: when the blocking thread is done with it).
    permit: Option<OwnedSemaphorePermit>,
    _slot: TenantSlot,
}

#[derive(Debug)]
enum Held {
    Sqlite {
        /// `None` while a statement runs on a blocking thread.
        conn: Option<rusqlite::Connection>,
        idle: Arc<Mutex<Vec<rusqlite::Connection>>>,
    },
    Postgres {
        conn: Option<PoolConnection<Any>>,
        /// A statement was sent and its answer not yet read.
        running: bool,
    },
}

impl SearchConnection {
    /// The rows of `sql` with `binds`, within the search's budget.
    pub async fn fetch(
        &mut self,
        sql: String,
        binds: Vec<Bind>,
    ) -> Result<Vec<Row>, SearchFailure> {
        let (deadline, budget) = (self.deadline, self.budget);
        match &mut self.held {
            Held::Sqlite { conn, .. } => {
                let c = conn.take().ok_or(sqlx::Error::PoolClosed)?;
                let cancelled = self.cancelled.clone();
                // The permit goes with the connection: a search dropped mid-statement frees
                // its place only when the thread has stopped it.
                let permit = self.permit.take();
                let (c, permit, result) = tokio::task::spawn_blocking(move || {
                    let result = watched(&c, deadline, cancelled, || {
                        super::direct::query(&c, &sql, &binds, usize::MAX)
                    });
                    (c, permit, result)
                })
                .await
                .map_err(|e| sqlx::Error::Io(std::io::Error::other(e)))?;
                *conn = Some(c);
                self.permit = permit;
                match result {
                    Ok(rows) => Ok(rows),
                    Err(e) if is_interrupt(&e) && Instant::now() >= deadline => {
                        Err(SearchFailure::TooBroad { budget })
                    }
                    Err(e) => Err(SearchFailure::Db(super::direct::to_sqlx(e))),
                }
            }
            Held::Postgres { conn, running } => {
                let c = conn.as_mut().ok_or(sqlx::Error::PoolClosed)?;
                *running = true;
                // The search's deadline covers all its statements, as on SQLite;
                // `statement_timeout` (the budget, per statement) is the server's backstop.
                let rows = tokio::time::timeout(
                    deadline.saturating_duration_since(Instant::now()),
                    bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds).fetch_all(&mut **c),
                )
                .await;
                let Ok(rows) = rows else {
                    // Closed under the statement, which the server then stops (as when the
                    // search is dropped, below).
                    if let Some(c) = conn.take() {
                        drop(c.detach());
                    }
                    *running = false;
                    return Err(SearchFailure::TooBroad { budget });
                };
                *running = false;
                match rows {
                    Ok(rows) => Ok(Row::from_any_rows(&rows)?),
                    // 57014 query_canceled: the statement_timeout.
                    Err(sqlx::Error::Database(d)) if d.code().as_deref() == Some("57014") => {
                        Err(SearchFailure::TooBroad { budget })
                    }
                    Err(e) => Err(SearchFailure::Db(e)),
                }
            }
        }
    }

    /// `work` on a blocking thread (CPU work of a search: snippets), never on a runtime worker.
    /// A blocking task cannot be stopped: a dropped search drops only its result, so `work`
    /// must be bounded (snippets read at most 2,000,000 characters an answer).
    pub async fn compute<T: Send + 'static>(
        &mut self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, SearchFailure> {
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| SearchFailure::Db(sqlx::Error::Io(std::io::Error::other(e))))
    }
}

impl Drop for SearchConnection {
    fn drop(&mut self) {
        self.cancelled.store(true, Ordering::Relaxed);
        match &mut self.held {
            Held::Sqlite { conn, idle } => {
                if let Some(c) = conn.take() {
                    idle.lock().unwrap_or_else(|p| p.into_inner()).push(c);
                }
            }
            Held::Postgres { conn, running } => {
                if *running && let Some(c) = conn.take() {
                    // Closed without a goodbye: the server sees the socket closed at its next
                    // check (client_connection_check_interval) and stops the statement.
                    drop(c.detach());
                }
            }
        }
    }
}

/// One of a tenant's searches in flight, counted until dropped.
#[derive(Debug)]
struct TenantSlot {
    in_flight: Arc<Mutex<HashMap<String, u32>>>,
    tenant_id: String,
}

impl TenantSlot {
    fn take(
        in_flight: &Arc<Mutex<HashMap<String, u32>>>,
        tenant_id: &str,
        limit: u32,
    ) -> Result<TenantSlot, SearchFailure> {
        let mut map = in_flight.lock().unwrap_or_else(|p| p.into_inner());
        let n = map.entry(tenant_id.to_string()).or_insert(0);
        if *n >= limit {
            return Err(SearchFailure::Busy { limit });
        }
        *n += 1;
        Ok(TenantSlot {
            in_flight: in_flight.clone(),
            tenant_id: tenant_id.to_string(),
        })
    }
}

impl Drop for TenantSlot {
    fn drop(&mut self) {
        let mut map = self.in_flight.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = map.get_mut(&self.tenant_id) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.tenant_id);
            }
        }
    }
}

/// A read-only search connection on the database file, with the ranking function.
fn open_sqlite(path: &std::path::Path) -> Result<rusqlite::Connection, sqlx::Error> {
    use rusqlite::OpenFlags;
    let conn = rusqlite::Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_EXRESCODE,
    )
    .map_err(super::direct::to_sqlx)?;
    conn.busy_timeout(super::direct::BUSY_TIMEOUT)
        .map_err(super::direct::to_sqlx)?;
    conn.set_prepared_statement_cache_capacity(16);
    rank::register(&conn).map_err(super::direct::to_sqlx)?;
    Ok(conn)
}

/// `run` on `conn` with a progress handler that stops it at `deadline` or once `cancelled`.
fn watched<T>(
    conn: &rusqlite::Connection,
    deadline: Instant,
    cancelled: Arc<AtomicBool>,
    run: impl FnOnce() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    conn.progress_handler(
        CHECK_EVERY_OPS,
        Some(move || cancelled.load(Ordering::Relaxed) || Instant::now() >= deadline),
    )?;
    let result = run();
    let _ = conn.progress_handler(0, None::<fn() -> bool>);
    result
}

fn is_interrupt(e: &rusqlite::Error) -> bool {
    matches!(e, rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::OperationInterrupted)
}
