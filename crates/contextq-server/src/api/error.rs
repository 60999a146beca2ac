//! [`ApiError`]: a refused request as the contract shows it, `{"error": {"code", "message"}}`
//! with the code's status; and the one place where data-layer errors become HTTP answers.
//!
//! A database failure becomes a 500 `internal` whose message says nothing about the internals;
//! the detail goes to the log (which never contains keys: they are hashed before any query).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use contextq_api::{ErrorCode, ErrorEnvelope};

use crate::store;

/// A refused request: its code (which gives the status), a message, and `Retry-After` for 429.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} {}: {message}", code.status(), code.as_str())]
pub struct ApiError {
    /// The contract's code.
    pub code: ErrorCode,
    /// A sentence for the client.
    pub message: String,
    /// `Retry-After` seconds, for 429.
    pub retry_after: Option<u64>,
    /// For `edit_failed`: why the text edit cannot apply.
    pub edit: Option<contextq_api::EditFailure>,
}

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after: None,
            edit: None,
        }
    }

    /// 500 `internal` (the detail is logged, not sent).
    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error; see the server log")
    }

    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

impl From<store::Error> for ApiError {
    fn from(e: store::Error) -> Self {
        use store::Error as E;
        let code = match &e {
            E::WorkspaceNotFound { .. }
            | E::ContextNotFound { .. }
            | E::VersionNotFound { .. }
            | E::TenantNotFound { .. } => ErrorCode::NotFound,
            E::TenantExists { .. }
            | E::WorkspaceExists { .. }
            | E::WorkspaceArchived { .. }
            | E::WorkspaceNotEmpty { .. }
            | E::ExternalIdExists { .. }
            | E::ExternalIdInOtherWorkspace { .. }
            | E::LiveContent { .. }
            | E::Redacted { .. } => ErrorCode::Conflict,
            E::VersionMismatch { .. } | E::ChangedConcurrently { .. } => {
                ErrorCode::PreconditionFailed
            }
            E::QuotaExceeded { .. } => ErrorCode::QuotaExceeded,
            E::EditFailed(failure) => {
                return ApiError {
                    edit: Some(failure.clone()),
                    ..ApiError::new(ErrorCode::EditFailed, e.to_string())
                };
            }
            E::TooLarge { .. } | E::TooMany { .. } => ErrorCode::PayloadTooLarge,
            E::Invalid(_) => ErrorCode::ValidationFailed,
            E::BadParameter(_) => ErrorCode::BadRequest,
            E::Database(_) | E::Corrupt(_) => {
                tracing::error!(error = %e, "request failed");
                return ApiError::internal();
            }
        };
        ApiError::new(code, e.to_string())
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(store::Error::Database(e))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let mut body = ErrorEnvelope::new(self.code, self.message);
        body.error.edit = self.edit;
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(v) = secs.to_string().parse()
        {
            response.headers_mut().insert("retry-after", v);
        }
        response
    }
}
