//! [`Error`]: what the server library and its operator commands return.
//!
//! The data layer (and the operator commands on top of it, [`crate::admin`]) has its own error
//! type, [`crate::store::Error`]; the HTTP API has [`crate::api::ApiError`], to which the data
//! layer's errors are mapped in one place. Nothing here knows about HTTP or the data layer. No
//! variant ever holds a key or a database password (URLs are redacted first).

/// Errors of the server library and its operator commands.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad configuration; the message names what to change.
    #[error("{0}")]
    Config(String),
    /// Could not connect to the database (the URL is shown redacted). The cause is part of the
    /// message, not a separate source, so that a report of the chain says it once.
    #[error("cannot connect to the database at {0} (is it running and reachable?): {described}", described = crate::db::Described(.1))]
    Connect(String, sqlx::Error),
    /// A migration failed.
    #[error("migration {0} failed: {described}", described = crate::db::Described(.1))]
    Migration(i64, #[source] sqlx::Error),
    /// A query failed.
    #[error("database error: {}", crate::db::Described(.0))]
    Database(#[from] sqlx::Error),
    /// Network or file I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
