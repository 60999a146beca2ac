//! A database that cannot be reached is an answer, not an internal error: which failures mean
//! "the database is not there" (so the request did nothing and may be sent again, 503
//! `unavailable`), which leave a write's outcome unknown (the connection failed while its
//! `COMMIT` was on the way: a 500, which a client settles by asking again with its
//! `Idempotency-Key` or by reading back), and [`Outage`], which logs an outage once instead of
//! once per request.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Whether `e` says the database could not be reached or cannot take the request now (refused
/// or reset connection, the pool's timeout, a server shutting down or starting, a read-only
/// standby after a failover), so that nothing the request asked was done. Never true of a
/// failure at `COMMIT`, which [`outcome_unknown`] marks first.
pub fn is_unavailable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed => true,
        sqlx::Error::Tls(_) | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(d) => {
            if d.try_downcast_ref::<OutcomeUnknown>().is_some() {
                return false;
            }
            // PostgreSQL's SQLSTATEs: class 08 (connection exception), 57P01-57P03 (shutting
            // down, crashed, starting), 25006 (a read-only transaction: a standby), 53300 (too
            // many connections). SQLite's codes are numbers and never match.
            d.code().is_some_and(|c| {
                c.starts_with("08")
                    || matches!(&*c, "57P01" | "57P02" | "57P03" | "25006" | "53300")
            })
        }
        _ => false,
    }
}

/// The failure of a write's `COMMIT` (or of a batch that ends with one) that leaves its outcome
/// unknown: the database may have committed before the connection failed.
#[derive(Debug, thiserror::Error)]
#[error(
    "the connection failed while the write was committing, so whether it was applied is unknown: {0}"
)]
pub struct OutcomeUnknown(String);

impl sqlx::error::DatabaseError for OutcomeUnknown {
    fn message(&self) -> &str {
        &self.0
    }

    crate::db::as_itself!();

    fn kind(&self) -> sqlx::error::ErrorKind {
        sqlx::error::ErrorKind::Other
    }
}

/// `e`, a failure of a write's `COMMIT`: a lost connection becomes [`OutcomeUnknown`] (not
/// "unavailable", which would tell the client nothing was done); the database's own refusal of
/// a statement stays as it is (nothing was committed).
pub fn outcome_unknown(e: sqlx::Error) -> sqlx::Error {
    if is_unavailable(&e) {
        sqlx::Error::Database(Box::new(OutcomeUnknown(e.to_string())))
    } else {
        e
    }
}

/// `Retry-After` of a 503 `unavailable`: a failover takes seconds.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// While an outage lasts, how often it is logged again (with the count of refused requests).
const LOG_AGAIN_AFTER: Duration = Duration::from_secs(30);

/// One database's outages, for logging: the first refused request of an outage logs it at
/// `warn`, later ones at most every 30 s with a count, and the first answered request after it
/// logs its end at `info` with how long it lasted and how many requests were refused.
#[derive(Debug, Default)]
pub struct Outage {
    state: Mutex<Option<State>>,
    /// Whether `state` holds an outage: every answered request reads it, the lock is taken
    /// only while an outage is on.
    on: AtomicBool,
}

#[derive(Debug)]
struct State {
    since: Instant,
    logged: Instant,
    refused: u64,
}

impl Outage {
    /// A request was refused because the database is unavailable (`error` says why).
    pub fn refused(&self, error: &str) {
        let now = Instant::now();
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match state.as_mut() {
            None => {
                tracing::warn!(
                    error,
                    "the database is unavailable; requests are answered 503 until it answers again"
                );
                *state = Some(State {
                    since: now,
                    logged: now,
                    refused: 1,
                });
                self.on.store(true, Ordering::Release);
            }
            Some(s) => {
                s.refused += 1;
                if now.duration_since(s.logged) >= LOG_AGAIN_AFTER {
                    tracing::warn!(
                        error,
                        refused = s.refused,
                        seconds = s.since.elapsed().as_secs(),
                        "the database is still unavailable"
                    );
                    s.logged = now;
                }
            }
        }
    }

    /// A request was answered without the database failing: ends an outage, if one was on.
    pub fn answered(&self) {
        if !self.on.load(Ordering::Acquire) {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        self.on.store(false, Ordering::Release);
        if let Some(s) = state.take() {
            tracing::info!(
                refused = s.refused,
                millis = s.since.elapsed().as_millis() as u64,
                "the database answers again after an outage"
            );
        }
    }

    /// Whether an outage is on (a request was refused and none answered since).
    pub fn is_on(&self) -> bool {
        self.on.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("{0}")]
    struct Coded(&'static str);

    impl sqlx::error::DatabaseError for Coded {
        fn message(&self) -> &str {
            self.0
        }
        fn code(&self) -> Option<std::borrow::Cow<'_, str>> {
            Some(self.0.into())
        }
        crate::db::as_itself!();
        fn kind(&self) -> sqlx::error::ErrorKind {
            sqlx::error::ErrorKind::Other
        }
    }

    fn coded(code: &'static str) -> sqlx::Error {
        sqlx::Error::Database(Box::new(Coded(code)))
    }

    #[test]
    fn unreachable_and_refusing_databases_are_unavailable() {
        let reset = || sqlx::Error::Io(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        for e in [
            reset(),
            sqlx::Error::PoolTimedOut,
            sqlx::Error::PoolClosed,
            coded("08006"),
            coded("08001"),
            coded("57P01"),
            coded("57P03"),
            coded("25006"),
            coded("53300"),
        ] {
            assert!(is_unavailable(&e), "{e}");
        }
        for e in [
            coded("23505"),
            coded("40001"),
            coded("2067"),
            sqlx::Error::RowNotFound,
            sqlx::Error::Protocol("x".into()),
        ] {
            assert!(!is_unavailable(&e), "{e}");
        }
        // A commit that lost its connection is not "nothing was done".
        let at_commit = outcome_unknown(reset());
        assert!(!is_unavailable(&at_commit), "{at_commit}");
        assert!(at_commit.to_string().contains("unknown"), "{at_commit}");
        // The database's refusal at commit stays what it was.
        assert!(matches!(
            outcome_unknown(coded("23505")),
            sqlx::Error::Database(d) if d.code().as_deref() == Some("23505")
        ));
    }

    #[test]
    fn an_outage_starts_with_a_refusal_and_ends_with_an_answer() {
        let outage = Outage::default();
        assert!(!outage.is_on());
        outage.answered();
        assert!(!outage.is_on());
        outage.refused("reset");
        outage.refused("reset");
        assert!(outage.is_on());
        assert_eq!(outage.state.lock().unwrap().as_ref().unwrap().refused, 2);
        outage.answered();
        assert!(!outage.is_on());
    }
}
