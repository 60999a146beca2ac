//! [`Error`]: what the server library and its operator commands return.
//!
//! The HTTP API has its own error type ([`crate::api::ApiError`]), which the data layer's
//! [`crate::store::Error`] is mapped to in one place; nothing here knows about HTTP. No variant
//! ever holds a key or a database password (URLs are redacted first).

/// Errors of the server library and its operator commands.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bad configuration; the message names what to change.
    #[error("{0}")]
    Config(String),
    /// Could not connect to the database (the URL is shown redacted).
    #[error("cannot connect to {0}: {1}")]
    Connect(String, #[source] sqlx::Error),
    /// A migration failed.
    #[error("migration {0} failed: {1}")]
    Migration(i64, #[source] sqlx::Error),
    /// A query failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// The data layer refused an operation or failed.
    #[error(transparent)]
    Store(#[from] crate::store::Error),
    /// Network or file I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
