//! The crate's one error type.
//!
//! [`Error`] is what stores, the HTTP clients and configuration return: the `Store` contract's
//! outcomes, ContextQ's failures ([`Error::ContextQ`]), and any other backend's in its own error
//! type ([`Error::Backend`]: the runner's Messages API). Variants that a store
//! uses to report an expected outcome ([`Error::NotFound`], [`Error::AlreadyExists`],
//! [`Error::Precondition`], [`Error::NotSupported`], [`Error::OutcomeUnknown`]) are matched on by
//! [`crate::MemoryTool`]; every variant has a sentence for Claude, built where every string
//! Claude reads is built ([`Error::tool_message`], in [`crate::render`]). `Display` is for
//! developers and logs. No variant ever holds an API key: the clients keep only the masked form
//! (`sk_live_…abcd`).

use crate::contextq::error::{ContextQError, ErrorCode};
use crate::path::PathError;

// `Error::tool_message` is implemented in `render.rs`, with every other string Claude reads.

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
    /// A text edit ([`crate::store::Store::edit`]) cannot apply to the file's content; nothing
    /// changed.
    #[error("the edit of {path} cannot apply: {failure}")]
    EditRefused {
        /// The path, normalised.
        path: String,
        /// Why.
        failure: contextq_api::EditFailure,
    },
    /// The store does not implement this optional operation (the caller falls back).
    #[error("operation not supported by this store: {operation}")]
    NotSupported {
        /// Which operation.
        operation: &'static str,
    },
    /// The path was refused by the path rules.
    #[error(transparent)]
    Path(#[from] PathError),
    /// A file operation on a path that is a directory (a ContextQ workspace).
    #[error("{path} is a directory, not a file")]
    IsADirectory {
        /// The path as written.
        path: String,
    },
    /// A local store cannot make a directory because a file is in its place.
    #[error("cannot {operation} {path}: a parent of it is a file, not a directory")]
    ParentIsAFile {
        /// The path, normalised.
        path: String,
        /// `create` or `rename to`.
        operation: &'static str,
    },
    /// A write (`put` or `delete`) may or may not have been applied: the server's answer was
    /// lost and reading the row back did not settle it. Every other error from a write means
    /// it was not applied (see the `Store` contract).
    #[error("the {operation} of {path} may or may not have been applied: {cause}")]
    OutcomeUnknown {
        /// The path, normalised.
        path: String,
        /// `write`, `edit` or `delete`.
        operation: &'static str,
        /// What went wrong.
        #[source]
        cause: Box<Error>,
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
    /// The memory is read-only here (the `read_only` option, `--read-only`): a write was
    /// refused before it reached the store; nothing changed.
    #[error("the memory is read-only here: {command} refused")]
    ReadOnly {
        /// The command refused (`create`, `str_replace`, ...).
        command: &'static str,
    },
    /// The content would store a credential (the secret guard); nothing was written.
    #[error("{path}: the content holds what looks like {kind}; not stored")]
    SecretRefused {
        /// The path, normalised.
        path: String,
        /// What it looks like (e.g. "an Anthropic API key").
        kind: &'static str,
        /// The 1-based line it is on.
        line: usize,
    },
    /// No kept version with this number (never written, or pruned by the server's retention).
    #[error("{path} has no version {version} (never written, or pruned by retention)")]
    VersionNotFound {
        /// The path, normalised.
        path: String,
        /// The version asked for.
        version: i64,
    },
    /// The version's content was redacted (extension `redaction`): it cannot be shown, compared
    /// or restored.
    #[error(
        "version {version} of {path} was redacted at {at}: its content is gone for good; choose another version"
    )]
    Redacted {
        /// The path, normalised.
        path: String,
        /// The version.
        version: i64,
        /// When it was redacted.
        at: String,
    },
    /// An operation done in steps ([`crate::store::steps`]) stopped part way, or gave up
    /// against other writers: Claude's sentence for it, and what each path it touched is known
    /// to hold (empty: nothing was changed).
    #[error("{message}")]
    Stopped {
        /// The sentence for Claude (it names the paths as written).
        message: String,
        /// Path by path, whether the operation's step was applied.
        effects: Vec<crate::effects::PathEffect>,
    },
    /// ContextQ failed or refused ([`ContextQError`]: matched by the contract's error code).
    #[error(transparent)]
    ContextQ(#[from] ContextQError),
    /// A backend's or service's own failure, in its own error type (the Messages API's
    /// `anthropic::AnthropicError`, feature `runner`; a third-party store's), as
    /// `object_store::Error::Generic` carries one: [`Error::backend_error`] gives it back.
    #[error("{backend}: {source}")]
    Backend {
        /// What failed, as a sentence names it (`the Anthropic API`).
        backend: &'static str,
        /// It is a failure of the backend (unreachable, failing), not a refusal of what was
        /// asked ([`Error::is_store_failure`]).
        failure: bool,
        /// The backend's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Wrong configuration; the message names what to change.
    #[error("invalid configuration: {message}")]
    Config {
        /// What to change.
        message: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The backend's own error of an [`Error::Backend`], when it is a `T`.
    pub fn backend_error<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Error::Backend { source, .. } => source.downcast_ref::<T>(),
            _ => None,
        }
    }

    /// The ContextQ code of a refusal ([`ContextQError::code`]); `None` for anything else.
    pub fn contextq_code(&self) -> Option<ErrorCode> {
        match self {
            Error::ContextQ(e) => e.code(),
            _ => None,
        }
    }

    /// Whether this is a failure of the store (unreachable, a refused key, a server error, an
    /// outcome it did not confirm, a broken disk or configuration) rather than a refusal of what
    /// was asked (no such file, it exists, it changed, a path outside a workspace, a quota).
    pub fn is_store_failure(&self) -> bool {
        match self {
            Error::Io { .. } | Error::OutcomeUnknown { .. } | Error::Config { .. } => true,
            Error::Backend { failure, .. } => *failure,
            Error::ContextQ(ContextQError::Api { code, .. }) => !matches!(
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
            Error::ContextQ(ContextQError::Transport(_) | ContextQError::Protocol { .. }) => true,
            _ => false,
        }
    }
}
