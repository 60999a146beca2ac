//! PostgreSQL's write connections, each with the statements it has prepared.
//!
//! A write is two simple-protocol queries (module `pool`): the simple protocol sends many
//! statements in one round trip but cannot bind values, so each statement used to be parsed and
//! planned at every write (planning was most of the database's time for a short write). SQL
//! `PREPARE` gives it the extended protocol's one parse and plan per connection: a statement of
//! a write is prepared once on a connection, with its values' types, and the write `EXECUTE`s it
//! with the values as literals ([`super::batch::inline`]'s, never interpreted as SQL). sqlx's
//! pool cannot say which connection it hands out, so write connections are kept here, each with
//! the names it prepared; a connection whose state is in doubt (an error that was not a clean
//! refusal) is closed, never reused.
//!
//! Bounded: each connection keeps at most [`PREPARED_PER_CONNECTION`] statements (the least
//! recently used is deallocated), at most `max_connections` connections are open, and a
//! statement with more than [`MAX_PREPARED_VALUES`] values (a bulk upsert of many items, whose
//! shape is rarely repeated) is inlined as before.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sqlx::AnyConnection;
use sqlx::Connection as _;
use sqlx::any::AnyConnectOptions;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Backend;
use super::batch::{Bind, inline, literals};

/// Statements a connection keeps prepared: the shapes of a server's writes are a few dozen.
pub const PREPARED_PER_CONNECTION: usize = 64;

/// Values past which a statement is inlined instead of prepared.
pub const MAX_PREPARED_VALUES: usize = 512;

/// An idle connection older than this is closed rather than reused (as sqlx's pool does), so
/// that connections to a database that went away are not kept forever; checked when one is
/// taken and when one is given back.
pub(crate) const IDLE_FOR_AT_MOST: Duration = Duration::from_secs(600);

/// The write connections of one database.
pub(crate) struct Writers {
    connect: AnyConnectOptions,
    idle: Mutex<Vec<Conn>>,
    permits: Arc<Semaphore>,
    /// The permits there are.
    max: usize,
    acquire_timeout: Duration,
    /// [`IDLE_FOR_AT_MOST`], but in tests.
    max_idle: Duration,
}

impl std::fmt::Debug for Writers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writers")
            .field("idle", &self.idle.lock().map(|i| i.len()).unwrap_or(0))
            .field("available", &self.permits.available_permits())
            .finish_non_exhaustive()
    }
}

/// A connection and what it has prepared.
struct Conn {
    conn: AnyConnection,
    /// By name: the statement's key (its text and its values' types) and when it was last used.
    prepared: HashMap<String, (String, u64)>,
    /// Uses so far, the clock of `prepared`.
    uses: u64,
    /// Names evicted from `prepared`, deallocated by the next query sent.
    evicted: Vec<String>,
    idle_since: Instant,
}

impl Writers {
    /// At most `max` connections, opened with `connect` when needed; waiting for one fails
    /// with `PoolTimedOut` after `acquire_timeout`.
    pub(crate) fn new(connect: AnyConnectOptions, max: u32, acquire_timeout: Duration) -> Self {
        Writers {
            connect,
            idle: Mutex::new(Vec::new()),
            permits: Arc::new(Semaphore::new(max.max(1) as usize)),
            max: max.max(1) as usize,
            acquire_timeout,
            max_idle: IDLE_FOR_AT_MOST,
        }
    }

    /// A connection for one write: an idle one, or a new one.
    pub(crate) async fn acquire(self: &Arc<Self>) -> Result<Writer, sqlx::Error> {
        let permit =
            tokio::time::timeout(self.acquire_timeout, self.permits.clone().acquire_owned())
                .await
                .map_err(|_| sqlx::Error::PoolTimedOut)?
                .map_err(|_| sqlx::Error::PoolClosed)?;
        let reused = loop {
            let next = self.idle.lock().expect("not poisoned").pop();
            match next {
                Some(c) if c.idle_since.elapsed() > self.max_idle => close(c.conn),
                other => break other,
            }
        };
        let was_idle = reused.is_some();
        let conn = match reused {
            Some(c) => c,
            None => {
                let conn = tokio::time::timeout(
                    self.acquire_timeout,
                    AnyConnection::connect_with(&self.connect),
                )
                .await
                .map_err(|_| sqlx::Error::PoolTimedOut)??;
                Conn {
                    conn,
                    prepared: HashMap::new(),
                    uses: 0,
                    evicted: Vec::new(),
                    idle_since: Instant::now(),
                }
            }
        };
        Ok(Writer {
            conn: Some(conn),
            reusable: false,
            was_idle,
            writers: self.clone(),
            _permit: permit,
        })
    }

    /// Closes every idle connection: one of them was found dead (the database went away, or
    /// failed over), so the others, opened to the same server, most likely are too, and each
    /// would fail the next write that took it.
    pub(crate) fn discard_idle(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().expect("not poisoned"));
        for c in idle {
            close(c.conn);
        }
    }

    /// Connections open (held by a write or idle) and idle.
    pub(crate) fn connections(&self) -> (u32, usize) {
        let idle = self.idle.lock().expect("not poisoned").len();
        let held = self.max - self.permits.available_permits();
        (u32::try_from(held + idle).unwrap_or(u32::MAX), idle)
    }

    /// How many statements each idle connection keeps prepared.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn prepared_counts(&self) -> Vec<usize> {
        let idle = self.idle.lock().expect("not poisoned");
        idle.iter().map(|c| c.prepared.len()).collect()
    }

    /// Closes the idle connections (the pool is closing).
    pub(crate) async fn close(&self) {
        let idle = std::mem::take(&mut *self.idle.lock().expect("not poisoned"));
        self.permits.close();
        for c in idle {
            let _ = c.conn.close().await;
        }
    }
}

/// Closes `conn` in the background when a runtime is there to do it (a clean goodbye, so the
/// database does not log a lost client); dropped otherwise.
fn close(conn: AnyConnection) {
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            let _ = conn.close().await;
        });
    }
}

/// A write connection, held for one write. Back to the idle ones when dropped after
/// [`Writer::reusable`], closed otherwise (a transaction left open, an error in doubt).
pub(crate) struct Writer {
    conn: Option<Conn>,
    reusable: bool,
    /// It had served an earlier write (taken from the idle ones, not opened for this one).
    was_idle: bool,
    writers: Arc<Writers>,
    _permit: OwnedSemaphorePermit,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("reusable", &self.reusable)
            .finish_non_exhaustive()
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let Some(mut c) = self.conn.take() else {
            return;
        };
        if self.reusable && !self.writers.permits.is_closed() {
            c.idle_since = Instant::now();
            let mut idle = self.writers.idle.lock().expect("not poisoned");
            idle.push(c);
            // The oldest first: those a quiet server has not needed for long are closed.
            while idle
                .first()
                .is_some_and(|c| c.idle_since.elapsed() > self.writers.max_idle)
            {
                close(idle.remove(0).conn);
            }
        } else {
            close(c.conn);
        }
    }
}

impl Writer {
    fn conn(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("held until dropped")
    }

    /// Marks the connection as fit for the next write (its transaction ended cleanly) or not.
    pub(crate) fn set_reusable(&mut self, reusable: bool) {
        self.reusable = reusable;
    }

    /// The connection is dead: it is closed, and so is every idle one
    /// ([`Writers::discard_idle`]).
    pub(crate) fn dead(&mut self) {
        self.reusable = false;
        self.writers.discard_idle();
    }

    /// Whether it served an earlier write (so it may have died while idle).
    pub(crate) fn was_idle(&self) -> bool {
        self.was_idle
    }

    /// The text that runs `sql` with `binds` inside a simple-protocol query: `EXECUTE` of the
    /// statement prepared on this connection (prepared first, in a round trip of its own, when it
    /// is not yet), or `sql` with its values inlined when it has more than
    /// [`MAX_PREPARED_VALUES`] or none.
    pub(crate) async fn statement(
        &mut self,
        sql: &str,
        binds: &[Bind],
    ) -> Result<String, sqlx::Error> {
        if binds.is_empty() || binds.len() > MAX_PREPARED_VALUES {
            return Ok(inline(sql, binds, Backend::Postgres));
        }
        let types: Vec<&str> = binds.iter().map(type_of).collect();
        let key = format!("{}\n{sql}", types.join(","));
        let name = name_of(&key);
        let c = self.conn();
        c.uses += 1;
        let now = c.uses;
        match c.prepared.get_mut(&name) {
            Some((known, used)) if *known == key => *used = now,
            // Another statement with the same name (a 64-bit collision): not prepared, inlined.
            Some(_) => return Ok(inline(sql, binds, Backend::Postgres)),
            None => {
                let prepare = format!(
                    "{}PREPARE {name} ({}) AS {sql}",
                    self.take_evicted(),
                    types.join(", ")
                );
                let c = self.conn();
                sqlx::raw_sql(sqlx::AssertSqlSafe(prepare))
                    .execute(&mut c.conn)
                    .await?;
                c.prepared.insert(name.clone(), (key, now));
                if c.prepared.len() > PREPARED_PER_CONNECTION
                    && let Some(oldest) = c
                        .prepared
                        .iter()
                        .min_by_key(|(_, (_, used))| *used)
                        .map(|(n, _)| n.clone())
                {
                    c.prepared.remove(&oldest);
                    c.evicted.push(oldest);
                }
            }
        }
        Ok(format!(
            "EXECUTE {name}({})",
            literals(binds, Backend::Postgres)
        ))
    }

    /// `DEALLOCATE` of the statements evicted since the last query, to send before the next.
    pub(crate) fn take_evicted(&mut self) -> String {
        self.conn()
            .evicted
            .drain(..)
            .map(|n| format!("DEALLOCATE {n}; "))
            .collect()
    }

    /// The connection, to send a query on.
    pub(crate) fn connection(&mut self) -> &mut AnyConnection {
        &mut self.conn().conn
    }

    /// Statements prepared on this connection.
    #[cfg(test)]
    fn prepared(&self) -> usize {
        self.conn.as_ref().map_or(0, |c| c.prepared.len())
    }
}

/// The SQL type a value is prepared with (as sqlx binds it).
fn type_of(b: &Bind) -> &'static str {
    match b {
        Bind::Text(_) | Bind::OptText(_) => "text",
        Bind::Int(_) | Bind::OptInt(_) => "bigint",
    }
}

/// A statement's name: a hash of its key (the same on every connection, so the database's
/// own views show one name per shape).
fn name_of(key: &str) -> String {
    let mut h = std::hash::DefaultHasher::new();
    key.hash(&mut h);
    format!("cq_{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Write connections to the test PostgreSQL (`CONTEXTQ_TEST_DATABASE_URL`).
    fn test_writers(max: u32, acquire_timeout: Duration) -> Writers {
        use std::str::FromStr as _;
        sqlx::any::install_default_drivers();
        let url = std::env::var("CONTEXTQ_TEST_DATABASE_URL").expect("set when built with it");
        Writers::new(
            AnyConnectOptions::from_str(&url).unwrap(),
            max,
            acquire_timeout,
        )
    }

    /// Idle connections past their time are closed, when one is taken and when one is given
    /// back, never reused.
    #[tokio::test]
    #[cfg_attr(
        not(contextq_postgres),
        ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
    )]
    async fn connections_idle_too_long_are_closed() {
        let mut writers = test_writers(2, Duration::from_secs(5));
        writers.max_idle = Duration::from_millis(200);
        let writers = Arc::new(writers);
        let fresh = |w: &mut Writer| w.conn().uses == 0;
        // Taken after its time: a new connection.
        let mut a = writers.acquire().await.unwrap();
        a.statement("SELECT $1 AS n", &[Bind::Int(1)])
            .await
            .unwrap();
        a.set_reusable(true);
        drop(a);
        let mut again = writers.acquire().await.unwrap();
        assert!(!fresh(&mut again), "reused while fresh");
        again.set_reusable(true);
        drop(again);
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut late = writers.acquire().await.unwrap();
        assert!(
            fresh(&mut late),
            "an idle connection past its time was reused"
        );
        // Given back beside one past its time: that one is closed.
        let mut other = writers.acquire().await.unwrap();
        other.set_reusable(true);
        drop(other);
        tokio::time::sleep(Duration::from_millis(300)).await;
        late.set_reusable(true);
        drop(late);
        assert_eq!(writers.connections(), (1, 1), "the old idle one closed");
        writers.close().await;
    }

    #[test]
    fn names_follow_the_text_and_the_types() {
        let a = name_of("text\nSELECT $1");
        assert_eq!(a, name_of("text\nSELECT $1"));
        assert_ne!(a, name_of("bigint\nSELECT $1"));
        assert_ne!(a, name_of("text\nSELECT $1 "));
        assert!(a.starts_with("cq_") && a.len() == 19, "{a}");
    }

    #[test]
    fn values_are_typed_as_sqlx_binds_them() {
        assert_eq!(type_of(&Bind::OptText(None)), "text");
        assert_eq!(type_of(&Bind::OptInt(Some(1))), "bigint");
        assert_eq!(
            literals(&[Bind::Int(1), Bind::OptText(None)], Backend::Postgres),
            "1, NULL"
        );
    }

    /// Against PostgreSQL: a statement is prepared once per connection, its values never read
    /// as SQL, a connection keeps at most [`PREPARED_PER_CONNECTION`], and large or empty
    /// value lists are inlined.
    #[tokio::test]
    #[cfg_attr(
        not(contextq_postgres),
        ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
    )]
    async fn statements_are_prepared_once_and_bounded() {
        let writers = Arc::new(test_writers(1, Duration::from_secs(5)));
        let mut w = writers.acquire().await.unwrap();
        let hostile = Bind::Text("x'); DROP TABLE nothing; --$$ $cq$".into());
        let sql = "SELECT $1 || '' AS t, $2 + 1 AS n";
        let binds = vec![hostile.clone(), Bind::Int(41)];
        for _ in 0..3 {
            let text = w.statement(sql, &binds).await.unwrap();
            assert!(text.starts_with("EXECUTE cq_"), "{text}");
            let rows = sqlx::raw_sql(sqlx::AssertSqlSafe(text))
                .fetch_all(w.connection())
                .await
                .unwrap();
            let row = crate::db::Row::from_any(&rows[0]).unwrap();
            assert_eq!(
                row.try_get::<String, _>("t").unwrap(),
                "x'); DROP TABLE nothing; --$$ $cq$"
            );
            assert_eq!(row.try_get::<i64, _>("n").unwrap(), 42);
        }
        assert_eq!(w.prepared(), 1);
        for i in 0..PREPARED_PER_CONNECTION + 10 {
            let text = w
                .statement(&format!("SELECT $1 + {i} AS n"), &[Bind::Int(1)])
                .await
                .unwrap();
            let deallocate = w.take_evicted();
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!("{deallocate}{text}")))
                .execute(w.connection())
                .await
                .unwrap();
        }
        assert_eq!(w.prepared(), PREPARED_PER_CONNECTION);
        let on_server: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_prepared_statements WHERE name LIKE 'cq\\_%'",
        )
        .fetch_one(w.connection())
        .await
        .unwrap();
        assert_eq!(on_server, PREPARED_PER_CONNECTION as i64);
        let many: Vec<Bind> = (0..=MAX_PREPARED_VALUES as i64).map(Bind::Int).collect();
        let text = w.statement("SELECT $1", &many).await.unwrap();
        assert_eq!(text, "SELECT 0");
        let most = &many[..MAX_PREPARED_VALUES];
        let text = w.statement("SELECT $1", most).await.unwrap();
        assert!(
            text.starts_with("EXECUTE cq_"),
            "{MAX_PREPARED_VALUES} values are prepared"
        );
        // Another statement under a prepared one's name (a 64-bit collision) is inlined, never
        // run as the other.
        let (name, _) = w
            .conn()
            .prepared
            .iter()
            .max_by_key(|(_, (_, used))| *used)
            .map(|(n, v)| (n.clone(), v.clone()))
            .unwrap();
        w.conn().prepared.get_mut(&name).unwrap().0 = "bigint\nSELECT 'not this'".into();
        let text = w.statement("SELECT $1", most).await.unwrap();
        assert!(text.starts_with("SELECT 0"), "{text}");
        assert_eq!(w.statement("SELECT 1", &[]).await.unwrap(), "SELECT 1");
        // Back to the idle connections, what it prepared with it.
        assert_eq!(writers.connections(), (1, 0));
        w.set_reusable(true);
        drop(w);
        assert_eq!(writers.connections(), (1, 1));
        let w = writers.acquire().await.unwrap();
        assert_eq!(w.prepared(), PREPARED_PER_CONNECTION);
        // Not marked reusable (a transaction left open, an error in doubt): closed.
        drop(w);
        assert_eq!(writers.connections(), (0, 0));
        let w = writers.acquire().await.unwrap();
        assert_eq!(w.prepared(), 0, "a new connection");
        // One connection at most: a second write waits, then gives up.
        let started = Instant::now();
        let second = Arc::new(test_writers(1, Duration::from_millis(200)));
        let held = second.acquire().await.unwrap();
        assert!(matches!(
            second.acquire().await,
            Err(sqlx::Error::PoolTimedOut)
        ));
        assert!(started.elapsed() >= Duration::from_millis(200));
        drop((w, held));
        writers.close().await;
        second.close().await;
    }
}
