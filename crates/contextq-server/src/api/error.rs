//! [`ApiError`]: a refused request as the contract shows it, `{"error": {"code", "message"}}`
//! with the code's status; and the one place where data-layer errors become HTTP answers.
//!
//! A database that cannot be reached becomes a 503 `unavailable` with `Retry-After` (nothing was
//! done; [`crate::db::outage`]); any other database failure a 500 `internal` whose message says
//! nothing about the internals, the detail in the log (which never contains keys: they are
//! hashed before any query).

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
    /// `Retry-After` seconds, for 429 and 503.
    pub retry_after: Option<u64>,
    /// For `edit_failed`: why the text edit cannot apply.
    pub edit: Option<contextq_api::EditFailure>,
    /// A repeat of a keyed write: the answer its first run recorded, sent as it is instead of
    /// this error (extension `idempotency`).
    pub replay: Option<Box<store::outcome::Recorded>>,
    /// For 503 `unavailable`: the database's failure, for the outage log (never sent).
    pub unavailable: Option<Unavailable>,
}

/// Why the database was unavailable to a request: carried on its answer (a response extension)
/// to the middleware that logs outages once (`api::note_outage`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unavailable(pub String);

impl ApiError {
    /// An error with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            code,
            message: message.into(),
            retry_after: None,
            edit: None,
            replay: None,
            unavailable: None,
        }
    }

    /// 500 `internal` (the detail is logged, not sent).
    pub fn internal() -> Self {
        Self::new(ErrorCode::Internal, "internal error; see the server log")
    }

    /// 503 `unavailable`: the database cannot be reached; nothing was done.
    pub fn unavailable() -> Self {
        ApiError {
            retry_after: Some(crate::db::outage::RETRY_AFTER.as_secs()),
            ..Self::new(
                ErrorCode::Unavailable,
                "the database is unavailable; nothing was done, send the request again",
            )
        }
    }

    /// Its HTTP status.
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// The contract's code of a data-layer refusal; `None` for a failure of the server (a database
/// error, damaged data) and for a replay, which are not refusals of the request.
fn code_of(e: &store::Error) -> Option<ErrorCode> {
    use store::Error as E;
    Some(match e {
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
        E::VersionMismatch { .. } | E::ChangedConcurrently { .. } => ErrorCode::PreconditionFailed,
        E::QuotaExceeded { .. } | E::WorkspaceQuotaExceeded { .. } => ErrorCode::QuotaExceeded,
        E::EditFailed(_) => ErrorCode::EditFailed,
        E::TooLarge { .. } | E::TooMany { .. } => ErrorCode::PayloadTooLarge,
        E::Invalid(_) => ErrorCode::ValidationFailed,
        E::BadParameter(_) | E::SearchTooBroad { .. } => ErrorCode::BadRequest,
        E::SearchBusy { .. } | E::SearchesSaturated => ErrorCode::RateLimited,
        E::Database(_) | E::Corrupt(_) | E::Replayed(_) => return None,
    })
}

impl ApiError {
    /// The answer to a data-layer refusal, without consuming it; `None` as for `code_of`.
    pub fn of(e: &store::Error) -> Option<ApiError> {
        let code = code_of(e)?;
        let mut error = ApiError::new(code, e.to_string());
        if let store::Error::SearchBusy { .. } | store::Error::SearchesSaturated = e {
            error.retry_after = Some(1);
        }
        if let store::Error::EditFailed(failure) = e {
            error.edit = Some(failure.clone());
        }
        Some(error)
    }

    /// What a keyed write records of this refusal: its status and envelope.
    pub fn recorded(&self) -> store::outcome::Recorded {
        let mut body = ErrorEnvelope::new(self.code, self.message.clone());
        body.error.edit = self.edit.clone();
        store::outcome::Recorded {
            status: self.code.status(),
            body: serde_json::to_value(body).unwrap_or_default(),
            etag: None,
        }
    }
}

impl From<store::Error> for ApiError {
    fn from(e: store::Error) -> Self {
        match e {
            store::Error::Replayed(recorded) => ApiError {
                replay: Some(Box::new(recorded)),
                ..ApiError::internal()
            },
            store::Error::Database(e) if crate::db::outage::is_unavailable(&e) => ApiError {
                // Logged once per outage, where the database is known (`note_outage`).
                unavailable: Some(Unavailable(e.to_string())),
                ..ApiError::unavailable()
            },
            e => ApiError::of(&e).unwrap_or_else(|| {
                tracing::error!(error = %e, "request failed");
                ApiError::internal()
            }),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(e: sqlx::Error) -> Self {
        ApiError::from(store::Error::Database(e))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if let Some(recorded) = self.replay {
            return replayed(*recorded);
        }
        let status = self.status();
        let mut body = ErrorEnvelope::new(self.code, self.message);
        body.error.edit = self.edit;
        let mut response = (status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after
            && let Ok(v) = secs.to_string().parse()
        {
            response.headers_mut().insert("retry-after", v);
        }
        if let Some(why) = self.unavailable {
            response.extensions_mut().insert(why);
        }
        response
    }
}

/// The header that marks a replayed answer (extension `idempotency`).
pub const REPLAYED_HEADER: &str = "idempotency-replayed";

/// A recorded answer, sent again: its status, body and `ETag`, marked as a replay.
pub fn replayed(recorded: store::outcome::Recorded) -> Response {
    let status = StatusCode::from_u16(recorded.status).unwrap_or(StatusCode::OK);
    let mut response = if recorded.body.is_null() {
        status.into_response()
    } else {
        (status, axum::Json(recorded.body)).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(
        REPLAYED_HEADER,
        axum::http::HeaderValue::from_static("true"),
    );
    if let Some(v) = recorded
        .etag
        .and_then(|v| axum::http::HeaderValue::from_str(&format!("\"{v}\"")).ok())
    {
        headers.insert(axum::http::header::ETAG, v);
    }
    response
}
