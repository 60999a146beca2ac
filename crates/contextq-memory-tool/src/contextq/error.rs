//! ContextQ's own failures, apart from the `Store` contract: what the server refused (matched by
//! the contract's [`ErrorCode`], never by a status number), that no answer came, an answer
//! outside the contract, a missing extension, and paths the per-workspace model cannot map.
//!
//! The library's [`crate::Error`] carries one as [`crate::Error::ContextQ`]; the store turns the
//! refusals it expects (`not_found`, `conflict`, `precondition_failed`) into the contract's
//! variants (`NotFound`, `AlreadyExists`, `Precondition`) and passes the rest on.

pub use contextq_api::ErrorCode;

pub use crate::transport::TransportError;

/// A ContextQ failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ContextQError {
    /// ContextQ answered with an error status.
    #[error("ContextQ answered {status} {code_text}: {message}")]
    Api {
        /// What the answer means: its envelope's code, or the code of its status
        /// ([`ErrorCode::of_answer`]); `None` for a status outside the contract.
        code: Option<ErrorCode>,
        /// The `error.code` as sent (another ContextQ may send codes we do not know), or
        /// `http_<status>` when the body was not an envelope.
        code_text: String,
        /// HTTP status, for logs and messages.
        status: u16,
        /// The `error.message` of the body, or the start of the raw body.
        message: String,
        /// `Retry-After` in seconds, when the server sent one.
        retry_after: Option<u64>,
    },
    /// The request never got an answer (connection refused or dropped, timeout, TLS).
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// ContextQ answered, but not with what the contract says.
    #[error("unexpected answer from ContextQ at {url}: {message}")]
    Protocol {
        /// The request URL.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// The server keeps no versions (it does not name the `history` extension): history,
    /// diffs and restores need contextq-server or another ContextQ with that extension.
    #[error(
        "the ContextQ at {url} keeps no history (its answers do not name the `history` extension): history, diffs and restores need contextq-server"
    )]
    HistoryUnavailable {
        /// The server's base URL.
        url: String,
    },
    /// The server cannot redact (no `redaction` in `ContextQ-Extensions`).
    #[error(
        "the ContextQ at {url} cannot redact (its answers do not name the `redaction` extension): redaction needs contextq-server"
    )]
    RedactionUnavailable {
        /// The server's base URL.
        url: String,
    },
    /// One workspace per first folder: that folder cannot be a workspace slug.
    #[error("{segment:?} cannot be a ContextQ workspace slug")]
    NotAWorkspace {
        /// The first folder under `/memories`, as written.
        segment: String,
    },
    /// One workspace per first folder: a file directly under `/memories`.
    #[error("{path} is not inside a workspace")]
    OutsideWorkspace {
        /// The path as written.
        path: String,
    },
    /// ContextQ has no such workspace (and the store may not create it).
    #[error("the workspace {workspace:?} does not exist in ContextQ")]
    WorkspaceNotFound {
        /// The workspace slug.
        workspace: String,
        /// Whether the store was allowed to create it (then creating it failed).
        create_allowed: bool,
    },
}

impl ContextQError {
    /// The contract's code of a refusal; `None` for every other failure.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ContextQError::Api { code, .. } => *code,
            _ => None,
        }
    }

    /// Whether a failed write may still have been applied: the request may have reached the
    /// server and no answer says it was refused (503 is a refusal: the server did nothing).
    pub fn may_have_applied(&self) -> bool {
        match self {
            ContextQError::Transport(t) => t.sent,
            ContextQError::Api { code, status, .. } => {
                *code == Some(ErrorCode::Internal) && *status != 503
            }
            _ => false,
        }
    }
}
