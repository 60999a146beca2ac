//! The crate's one error type.
//!
//! [`Error`] is what stores, the ContextQ client and configuration return. Variants that a store
//! uses to report an expected outcome ([`Error::NotFound`], [`Error::AlreadyExists`],
//! [`Error::Precondition`], [`Error::NotSupported`]) are matched on by [`crate::MemoryTool`];
//! everything else becomes a tool error via [`Error::tool_message`]. No variant ever holds an API
//! key: the ContextQ client keeps only the masked form (`sk_live_…abcd`).

use crate::path::PathError;

/// Everything that can go wrong below the memory tool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No file at this path.
    #[error("not found: {path}")]
    NotFound {
        /// The path, normalised.
        path: String,
    },
    /// A create-only write found something at this path.
    #[error("already exists: {path}")]
    AlreadyExists {
        /// The path, normalised.
        path: String,
    },
    /// A conditional write or delete found a different version than expected; nothing changed.
    #[error("precondition failed: {path} changed since it was read")]
    Precondition {
        /// The path, normalised.
        path: String,
    },
    /// The store does not implement this optional operation (the caller falls back).
    #[error("operation not supported by this store: {operation}")]
    NotSupported {
        /// Which operation.
        operation: &'static str,
    },
    /// The path is invalid for this store (e.g. a workspace slug ContextQ refuses).
    #[error("{message}")]
    InvalidPath {
        /// A sentence for Claude.
        message: String,
    },
    /// The path was refused by the path rules.
    #[error(transparent)]
    Path(#[from] PathError),
    /// ContextQ answered with an error status.
    #[error("ContextQ answered {status} {code}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// The `error.code` of the body (`quota_exceeded`, `forbidden`, ...), or `http_<status>`.
        code: String,
        /// The `error.message` of the body, or the start of the raw body.
        message: String,
        /// `Retry-After` in seconds, when the server sent one.
        retry_after: Option<u64>,
    },
    /// The request never got an answer (connection refused or dropped, timeout, TLS).
    #[error("could not reach ContextQ at {url}: {message}")]
    Transport {
        /// The request URL (never carries the key).
        url: String,
        /// What happened.
        message: String,
        /// Whether it was a timeout.
        timeout: bool,
        /// Whether the request may have reached the server (`false`: the connection was never
        /// made, so nothing can have been applied).
        sent: bool,
    },
    /// A write (`put` or `delete`) may or may not have been applied: the server's answer was
    /// lost and reading the row back did not settle it. Every other error from a write means
    /// it was not applied (see the `Store` contract).
    #[error("the {operation} of {path} may or may not have been applied: {cause}")]
    OutcomeUnknown {
        /// The path, normalised.
        path: String,
        /// `write` or `delete`.
        operation: &'static str,
        /// What went wrong.
        #[source]
        cause: Box<Error>,
    },
    /// ContextQ answered, but not with what the contract says.
    #[error("unexpected answer from ContextQ at {url}: {message}")]
    Protocol {
        /// The request URL.
        url: String,
        /// What was wrong.
        message: String,
    },
    /// A local file operation failed.
    #[error("{operation} {path}: {source}")]
    Io {
        /// What was being done.
        operation: &'static str,
        /// The file system path.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A multi-step command stopped part way; the message says exactly what was and was not done.
    #[error("{message}")]
    Partial {
        /// The full account, for Claude and for logs.
        message: String,
    },
    /// The Anthropic Messages API answered with an error.
    #[error("Anthropic API answered {status} {error_type}: {message}")]
    Anthropic {
        /// HTTP status.
        status: u16,
        /// `error.type` (`overloaded_error`, `invalid_request_error`, ...).
        error_type: String,
        /// `error.message`.
        message: String,
        /// The `request-id` header, for support requests.
        request_id: Option<String>,
    },
    /// Wrong configuration; the message names what to change.
    #[error("invalid configuration: {message}")]
    Config {
        /// What to change.
        message: String,
    },
}

impl Error {
    /// A sentence Claude can act on (without the `Error: ` prefix).
    pub fn tool_message(&self) -> String {
        match self {
            Error::NotFound { path } => crate::render::does_not_exist(path),
            Error::AlreadyExists { path } => crate::render::already_exists(path),
            Error::Precondition { path } => format!(
                "The file {path} was changed by another writer; nothing was changed. View it again and retry."
            ),
            Error::NotSupported { operation } => {
                format!("This memory store does not support {operation}")
            }
            Error::InvalidPath { message } | Error::Partial { message } => message.clone(),
            Error::Path(e) => e.message(),
            Error::Api {
                status,
                code,
                message,
                retry_after,
            } => match (*status, code.as_str()) {
                (402, _) | (_, "quota_exceeded") => format!(
                    "The memory store is full: {message}. Delete memories you no longer need, then retry."
                ),
                (403, _) => format!(
                    "The memory store refused this operation: the ContextQ API key lacks the scope it needs ({message})."
                ),
                (401, _) => {
                    "The memory store rejected its API key (401 unauthorized); the operator must fix the key.".to_string()
                }
                (413, _) => format!(
                    "The content is too large for the memory store ({message}); at most 1 MiB per file. Split it into smaller files."
                ),
                (409, _) => format!("The memory store refused the change: {message}"),
                (429, _) => format!(
                    "The memory store is rate limiting requests{}; nothing was changed by this command. Retry later.",
                    retry_after
                        .map(|s| format!(" (retry after {s}s)"))
                        .unwrap_or_default()
                ),
                (s, _) if s >= 500 => format!(
                    "The memory store failed ({status} {code}: {message}); nothing was changed. Retry later."
                ),
                _ => format!("The memory store answered {status} {code}: {message}"),
            },
            Error::Transport { message, timeout, .. } => {
                if *timeout {
                    format!("The memory store did not answer in time ({message}); nothing was changed. Retry later.")
                } else {
                    format!("The memory store is unreachable ({message}); nothing was changed. Retry later.")
                }
            }
            Error::OutcomeUnknown {
                path,
                operation,
                cause,
            } => crate::render::outcome_unknown(operation, path, &cause.to_string()),
            Error::Protocol { message, .. } => {
                format!("The memory store gave an unexpected answer: {message}")
            }
            Error::Io {
                operation, source, ..
            } => format!("The memory store failed to {operation}: {source}"),
            Error::Config { message } => format!("The memory tool is misconfigured: {message}"),
            Error::Anthropic { message, .. } => format!("The Anthropic API failed: {message}"),
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
