//! The error envelope of every refused request, `{"error": {"code": "...", "message": "..."}}`,
//! its codes, and [`Error`], this crate's own error (a malformed key, plan or scope).

use serde::{Deserialize, Serialize};

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorEnvelope {
    /// What went wrong.
    pub error: ErrorBody,
}

/// What went wrong: a stable code and a sentence for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// One of [`ErrorCode`] (kept as text: another ContextQ may send codes we do not know).
    pub code: String,
    /// A sentence saying what to change.
    pub message: String,
    /// For `edit_failed`: why the text edit cannot apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub edit: Option<crate::edit::EditFailure>,
}

impl ErrorEnvelope {
    /// The envelope for `code` with `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorEnvelope {
            error: ErrorBody {
                code: code.as_str().to_string(),
                message: message.into(),
                edit: None,
            },
        }
    }
}

/// The contract's error codes, each with its HTTP status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: malformed JSON, query or header.
    BadRequest,
    /// 401: no key, a malformed, unknown or revoked key.
    Unauthorized,
    /// 402: the plan's cap on contexts.
    QuotaExceeded,
    /// 403: the key lacks the scope.
    Forbidden,
    /// 404: no such workspace, context or endpoint.
    NotFound,
    /// 405: the endpoint exists, the method does not.
    MethodNotAllowed,
    /// 408: the request took too long.
    RequestTimeout,
    /// 409: exists already, archived, not empty.
    Conflict,
    /// 409 (extension `text-edit`): the edit cannot apply to the content; the body says why.
    EditFailed,
    /// 412: `If-Match` named another version.
    PreconditionFailed,
    /// 413: content or body too large.
    PayloadTooLarge,
    /// 422: a field breaks a rule of the contract.
    ValidationFailed,
    /// 429: too many requests (with `Retry-After`).
    RateLimited,
    /// 5xx: the server failed; the detail is in its log.
    Internal,
    /// 503 (with `Retry-After`): the server cannot serve now (its database is unreachable, a
    /// failover is in progress) and did nothing; the same request may be sent again.
    Unavailable,
}

impl ErrorCode {
    /// Every code, in the order of their statuses.
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::BadRequest,
        ErrorCode::Unauthorized,
        ErrorCode::QuotaExceeded,
        ErrorCode::Forbidden,
        ErrorCode::NotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RequestTimeout,
        ErrorCode::Conflict,
        ErrorCode::EditFailed,
        ErrorCode::PreconditionFailed,
        ErrorCode::PayloadTooLarge,
        ErrorCode::ValidationFailed,
        ErrorCode::RateLimited,
        ErrorCode::Internal,
        ErrorCode::Unavailable,
    ];

    /// The code an error answer means: its envelope's `code` when that is one of the
    /// contract's and goes with the status, else the code its status carries (a proxy's HTML
    /// 404 is `NotFound`, any 5xx is `Internal`; the status wins over a code that contradicts
    /// it; a 503 without a code is `Unavailable`: a proxy's 503 also did nothing); `None` for a
    /// status the contract does not use.
    pub fn of_answer(status: u16, code: Option<&str>) -> Option<ErrorCode> {
        let known = code.and_then(|c| Self::ALL.into_iter().find(|k| k.as_str() == c));
        if let Some(known) =
            known.filter(|k| k.status() == status || (status >= 500 && *k == ErrorCode::Internal))
        {
            return Some(known);
        }
        match status {
            503 => Some(ErrorCode::Unavailable),
            500..=599 => Some(ErrorCode::Internal),
            409 => Some(ErrorCode::Conflict),
            s => Self::ALL.into_iter().find(|k| k.status() == s),
        }
    }

    /// The code as sent: `bad_request`, `quota_exceeded`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::QuotaExceeded => "quota_exceeded",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NotFound => "not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RequestTimeout => "request_timeout",
            ErrorCode::Conflict => "conflict",
            ErrorCode::EditFailed => "edit_failed",
            ErrorCode::PreconditionFailed => "precondition_failed",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::ValidationFailed => "validation_failed",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::Internal => "internal",
            ErrorCode::Unavailable => "unavailable",
        }
    }

    /// The HTTP status that carries it.
    pub fn status(self) -> u16 {
        match self {
            ErrorCode::BadRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::QuotaExceeded => 402,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::RequestTimeout => 408,
            ErrorCode::Conflict | ErrorCode::EditFailed => 409,
            ErrorCode::PreconditionFailed => 412,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::ValidationFailed => 422,
            ErrorCode::RateLimited => 429,
            ErrorCode::Internal => 500,
            ErrorCode::Unavailable => 503,
        }
    }
}

/// Errors of this crate: values that break the contract's formats. Each message says what a
/// valid value looks like.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Not `sk_live_` followed by 40 lowercase hex digits (the key is shown masked).
    #[error("the API key ({masked}) is not sk_live_ followed by 40 lowercase hex characters")]
    InvalidKey {
        /// The key as [`crate::mask_secret`] shows it.
        masked: String,
    },
    /// Not a plan.
    #[error("unknown plan {given:?}: use free, pro or unlimited")]
    UnknownPlan {
        /// What was given.
        given: String,
    },
    /// Not a scope.
    #[error("unknown scope {given:?}: use read, write or admin")]
    UnknownScope {
        /// What was given.
        given: String,
    },
    /// An empty list of scopes.
    #[error("no scopes given: use read, write and/or admin")]
    NoScopes,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_shape() {
        let e = ErrorEnvelope::new(ErrorCode::QuotaExceeded, "plan free allows 100 contexts");
        assert_eq!(
            serde_json::to_value(&e).unwrap(),
            serde_json::json!({"error": {"code": "quota_exceeded", "message": "plan free allows 100 contexts"}})
        );
        assert_eq!(ErrorCode::QuotaExceeded.status(), 402);
    }

    #[test]
    fn an_answer_means_its_code_or_its_status() {
        for code in ErrorCode::ALL {
            assert_eq!(
                ErrorCode::of_answer(code.status(), Some(code.as_str())),
                Some(code)
            );
            assert_eq!(
                ErrorCode::of_answer(code.status(), Some("teapot")).map(ErrorCode::status),
                Some(code.status())
            );
        }
        assert_eq!(ErrorCode::of_answer(409, None), Some(ErrorCode::Conflict));
        assert_eq!(
            ErrorCode::of_answer(503, None),
            Some(ErrorCode::Unavailable)
        );
        assert_eq!(ErrorCode::of_answer(502, None), Some(ErrorCode::Internal));
        assert_eq!(
            ErrorCode::of_answer(503, Some("unavailable")),
            Some(ErrorCode::Unavailable)
        );
        assert_eq!(ErrorCode::of_answer(418, None), None);
        assert_eq!(
            ErrorCode::of_answer(503, Some("internal")),
            Some(ErrorCode::Internal)
        );
        assert_eq!(
            ErrorCode::of_answer(412, Some("bad_request")),
            Some(ErrorCode::PreconditionFailed)
        );
    }
}
