//! ContextQ's own failures, apart from the `Store` contract: what the server refused (matched by
//! the contract's [`ErrorCode`], never by a status number), that no answer came, an answer
//! outside the contract, a missing extension, and paths the per-workspace model cannot map.
//!
//! The library's [`crate::Error`] carries one as an [`crate::Error::Backend`] (its wording for
//! Claude is here, [`BackendError`]), found again with [`crate::Error::contextq`]; the store turns the
//! refusals it expects (`not_found`, `conflict`, `precondition_failed`) into the contract's
//! variants (`NotFound`, `AlreadyExists`, `Precondition`) and passes the rest on.

pub use contextq_api::ErrorCode;

use crate::error::BackendError;
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

impl From<ContextQError> for crate::Error {
    fn from(e: ContextQError) -> Self {
        crate::Error::Backend(Box::new(e))
    }
}

impl crate::Error {
    /// The ContextQ failure this error carries, if it is one.
    pub fn contextq(&self) -> Option<&ContextQError> {
        self.backend_error::<ContextQError>()
    }

    /// The ContextQ code of a refusal ([`ContextQError::code`]); `None` for anything else.
    pub fn contextq_code(&self) -> Option<ErrorCode> {
        self.contextq().and_then(ContextQError::code)
    }
}

impl BackendError for ContextQError {
    fn tool_message(&self) -> String {
        message(self)
    }

    /// Unreachable, failing, an answer outside the contract, a refused key; not a refusal of
    /// what was asked (no such file, it exists, it changed, a quota, a bad request, a path
    /// outside a workspace).
    fn is_failure(&self) -> bool {
        match self {
            ContextQError::Api { code, .. } => !matches!(
                code,
                Some(
                    ErrorCode::NotFound
                        | ErrorCode::Conflict
                        | ErrorCode::PreconditionFailed
                        | ErrorCode::EditFailed
                        | ErrorCode::ValidationFailed
                        | ErrorCode::PayloadTooLarge
                        | ErrorCode::QuotaExceeded
                        | ErrorCode::BadRequest
                )
            ),
            ContextQError::Transport(_) | ContextQError::Protocol { .. } => true,
            _ => false,
        }
    }
}

/// What Claude reads when ContextQ failed or refused: by the contract's error code.
fn message(e: &ContextQError) -> String {
    match e {
        ContextQError::NotAWorkspace { segment } => format!(
            "{segment:?} cannot be a workspace: the first folder under /memories is a ContextQ workspace, named with 1 to 63 of a-z, 0-9 and '-' (e.g. /memories/acme/notes.md)"
        ),
        ContextQError::OutsideWorkspace { path } => format!(
            "{path} is not inside a workspace: the first folder under /memories is a ContextQ workspace, so write to /memories/<workspace>/{}",
            path.rsplit('/')
                .find(|s| !s.is_empty())
                .unwrap_or("notes.md")
        ),
        ContextQError::WorkspaceNotFound {
            workspace,
            create_allowed: false,
        } => format!(
            "The workspace {workspace:?} does not exist in ContextQ; ask the operator to create it (or enable create_workspaces)"
        ),
        ContextQError::WorkspaceNotFound { workspace, .. } => {
            format!("The workspace {workspace:?} could not be created")
        }
        ContextQError::Api {
            code,
            code_text,
            status,
            message,
            retry_after,
        } => match code {
            Some(ErrorCode::QuotaExceeded) => format!(
                "The memory store is full: {message}. Delete memories you no longer need, then retry."
            ),
            // Read-only only when it is: a key without the write scope, or a read-only server;
            // a key limited to other workspaces may write, just not there.
            Some(ErrorCode::Forbidden)
                if message.contains("lacks the write scope") || message.contains("read-only") =>
            {
                format!(
                    "The memory is read-only here: {}; nothing was changed.",
                    crate::render::without_nothing_changed(message)
                )
            }
            Some(ErrorCode::Forbidden) => format!(
                "The ContextQ API key may not make this change: {}; nothing was changed.",
                crate::render::without_nothing_changed(message)
            ),
            Some(ErrorCode::Unauthorized) => format!(
                "The memory store rejected its API key (401: {}); the operator must fix the key.",
                crate::render::without_nothing_changed(message)
            ),
            Some(ErrorCode::PayloadTooLarge) => format!(
                "The content is too large for the memory store ({message}); at most 1 MiB per file. Split it into smaller files."
            ),
            Some(ErrorCode::Conflict | ErrorCode::EditFailed) => {
                format!("The memory store refused the change: {message}")
            }
            Some(ErrorCode::RateLimited) => format!(
                "The memory store is rate limiting requests{}; nothing was changed by this command. Retry later.",
                retry_after
                    .map(|s| format!(" (retry after {s}s)"))
                    .unwrap_or_default()
            ),
            Some(ErrorCode::Internal) => format!(
                "The memory store failed ({status} {code_text}: {message}); nothing was changed. Retry later."
            ),
            Some(ErrorCode::Unavailable) => format!(
                "The memory store is unavailable for now ({status} {code_text}: {message}); nothing was changed. Retry later."
            ),
            _ => format!("The memory store answered {status} {code_text}: {message}"),
        },
        ContextQError::Transport(TransportError {
            message, timeout, ..
        }) => {
            if *timeout {
                format!(
                    "The memory store did not answer in time ({message}); nothing was changed. Retry later."
                )
            } else {
                format!(
                    "The memory store is unreachable ({message}); nothing was changed. Retry later."
                )
            }
        }
        ContextQError::Protocol { message, .. } => {
            format!("The memory store gave an unexpected answer: {message}")
        }
        ContextQError::HistoryUnavailable { .. } => {
            "This memory store keeps no history; nothing was changed.".to_string()
        }
        ContextQError::RedactionUnavailable { .. } => {
            "This memory store cannot redact; nothing was changed.".to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;

    /// Every ContextQ failure's sentence, exactly (the conformance suite cannot provoke
    /// ContextQ's refusals on the in-memory store, so they are pinned here).
    #[test]
    fn every_contextq_failure_has_its_sentence() {
        let api = |status: u16, code: &str, retry_after: Option<u64>| {
            Error::from(ContextQError::Api {
                code: ErrorCode::of_answer(status, Some(code)),
                code_text: code.into(),
                status,
                message: "m".into(),
                retry_after,
            })
        };
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::from(ContextQError::NotAWorkspace {
                    segment: "Bad Slug".into(),
                }),
                "\"Bad Slug\" cannot be a workspace: the first folder under /memories is a ContextQ workspace, named with 1 to 63 of a-z, 0-9 and '-' (e.g. /memories/acme/notes.md)",
            ),
            (
                Error::from(ContextQError::OutsideWorkspace {
                    path: "/memories/n.md".into(),
                }),
                "/memories/n.md is not inside a workspace: the first folder under /memories is a ContextQ workspace, so write to /memories/<workspace>/n.md",
            ),
            (
                Error::from(ContextQError::WorkspaceNotFound {
                    workspace: "acme".into(),
                    create_allowed: false,
                }),
                "The workspace \"acme\" does not exist in ContextQ; ask the operator to create it (or enable create_workspaces)",
            ),
            (
                Error::from(ContextQError::WorkspaceNotFound {
                    workspace: "acme".into(),
                    create_allowed: true,
                }),
                "The workspace \"acme\" could not be created",
            ),
            (
                Error::from(ContextQError::Transport(TransportError {
                    url: "u".into(),
                    message: "refused".into(),
                    timeout: false,
                    sent: false,
                })),
                "The memory store is unreachable (refused); nothing was changed. Retry later.",
            ),
            (
                Error::from(ContextQError::Transport(TransportError {
                    url: "u".into(),
                    message: "slow".into(),
                    timeout: true,
                    sent: true,
                })),
                "The memory store did not answer in time (slow); nothing was changed. Retry later.",
            ),
            (
                Error::from(ContextQError::Protocol {
                    url: "u".into(),
                    message: "not JSON".into(),
                }),
                "The memory store gave an unexpected answer: not JSON",
            ),
            (
                api(402, "quota_exceeded", None),
                "The memory store is full: m. Delete memories you no longer need, then retry.",
            ),
            (
                api(403, "forbidden", None),
                "The ContextQ API key may not make this change: m; nothing was changed.",
            ),
            (
                api(401, "unauthorized", None),
                "The memory store rejected its API key (401: m); the operator must fix the key.",
            ),
            (
                api(413, "payload_too_large", None),
                "The content is too large for the memory store (m); at most 1 MiB per file. Split it into smaller files.",
            ),
            (
                api(409, "conflict", None),
                "The memory store refused the change: m",
            ),
            (
                api(429, "rate_limited", Some(3)),
                "The memory store is rate limiting requests (retry after 3s); nothing was changed by this command. Retry later.",
            ),
            (
                api(500, "internal", None),
                "The memory store failed (500 internal: m); nothing was changed. Retry later.",
            ),
            (
                api(503, "unavailable", Some(1)),
                "The memory store is unavailable for now (503 unavailable: m); nothing was changed. Retry later.",
            ),
            (
                api(418, "teapot", None),
                "The memory store answered 418 teapot: m",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.tool_message(), want, "{error:?}");
        }
    }
}
