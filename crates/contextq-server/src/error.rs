//! The server's errors: [`Error`] for the library and admin commands, [`ApiError`] for HTTP.
//!
//! An [`ApiError`] becomes `{"error": {"code", "message"}}` with the contract's status; a
//! database failure becomes a 500 `internal` whose message says nothing about the internals
//! (the detail goes to the log, which never contains keys: they are hashed before any query).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// Errors of the server library and its admin commands.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad configuration; the message names what to change.
    #[error("{0}")]
    Config(String),
    /// Could not connect to the database.
    #[error("cannot connect to {0}: {1}")]
    Connect(String, #[source] sqlx::Error),
    /// A migration failed.
    #[error("migration {0} failed: {1}")]
    Migration(i64, #[source] sqlx::Error),
    /// A query failed.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// An operation was refused (not found, conflict, ...).
    #[error("{0}")]
    Api(#[from] ApiError),
    /// Network or file I/O.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A refused request: status, stable code, message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status} {code}: {message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The contract's error code.
    pub code: &'static str,
    /// A sentence for the client.
    pub message: String,
    /// `Retry-After` seconds for 429.
    pub retry_after: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }
    /// 400 `bad_request`
    pub fn bad_request(m: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", m)
    }
    /// 401 `unauthorized`
    pub fn unauthorized(m: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", m)
    }
    /// 402 `quota_exceeded`
    pub fn quota(m: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYMENT_REQUIRED, "quota_exceeded", m)
    }
    /// 403 `forbidden`
    pub fn forbidden(m: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", m)
    }
    /// 404 `not_found`
    pub fn not_found(m: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", m)
    }
    /// 409 `conflict`
    pub fn conflict(m: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", m)
    }
    /// 412 `precondition_failed`
    pub fn precondition(m: impl Into<String>) -> Self {
        Self::new(StatusCode::PRECONDITION_FAILED, "precondition_failed", m)
    }
    /// 413 `payload_too_large`
    pub fn too_large(m: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", m)
    }
    /// 422 `validation_failed`
    pub fn validation(m: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "validation_failed", m)
    }
    /// 500 `internal` (the detail is logged, not sent).
    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the server log",
        )
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        match e {
            Error::Api(api) => api,
            other => {
                tracing::error!(error = %other, "request failed");
                ApiError::internal()
            }
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(Error::Database(e))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(v) = secs.to_string().parse()
        {
            response.headers_mut().insert("retry-after", v);
        }
        response
    }
}
