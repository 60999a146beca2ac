//! The crate's one error type.
//!
//! [`Error`] is what stores, the HTTP clients and configuration return: the `Store` contract's
//! outcomes, and a backend's failures in its own error type ([`Error::Backend`]: ContextQ's, the
//! runner's Messages API's), which words them for Claude ([`BackendError`]). Variants that a store
//! uses to report an expected outcome ([`Error::NotFound`], [`Error::AlreadyExists`],
//! [`Error::Precondition`], [`Error::NotSupported`], [`Error::OutcomeUnknown`]) are matched on by
//! [`crate::MemoryTool`]; every variant has a sentence for Claude, built where every string
//! Claude reads is built ([`Error::tool_message`], in [`crate::render`]). `Display` is for
//! developers and logs. No variant ever holds an API key: the clients keep only the masked form
//! (`sk_live_…abcd`).

use crate::path::PathError;

// `Error::tool_message` is implemented in `render/errors.rs`, with every other string Claude reads
// (a backend words its own errors: `BackendError`).

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
        version: u64,
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
        version: u64,
        /// When it was redacted (RFC 3339, UTC).
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
    /// A backend's own failure, in its own error type ([`BackendError`]: ContextQ's
    /// `contextq::ContextQError`, the runner's `anthropic::AnthropicError`, a third-party
    /// store's), as `object_store::Error::Generic` carries one: its sentence for Claude is its
    /// own, and [`Error::backend_error`] gives it back.
    #[error("{0}")]
    Backend(Box<dyn BackendError>),
    /// Wrong configuration; the message names what to change.
    #[error("invalid configuration: {message}")]
    Config {
        /// What to change.
        message: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A backend's own error, as [`Error::Backend`] carries it: what it tells Claude, and whether
/// the backend failed rather than refused what was asked.
pub trait BackendError: std::error::Error + Send + Sync + 'static {
    /// A sentence Claude can act on (without the `Error: ` prefix), saying what changed (nothing,
    /// for a refusal) and what to do.
    fn tool_message(&self) -> String;

    /// Whether the backend failed (unreachable, failing, a refused key, an answer outside its
    /// contract) rather than refused what was asked ([`Error::is_store_failure`]).
    fn is_failure(&self) -> bool;
}

impl Error {
    /// The backend's own error of an [`Error::Backend`], when it is a `T`.
    pub fn backend_error<T: std::error::Error + 'static>(&self) -> Option<&T> {
        match self {
            Error::Backend(e) => {
                let e: &dyn std::error::Error = e.as_ref();
                e.downcast_ref::<T>()
            }
            _ => None,
        }
    }

    /// The backend's own error of an [`Error::Backend`], taken out, when it is a `T`; else the
    /// error as it was.
    pub fn into_backend_error<T: BackendError>(self) -> std::result::Result<T, Error> {
        match self {
            Error::Backend(e) if (e.as_ref() as &dyn std::error::Error).is::<T>() => {
                let e: Box<dyn std::error::Error + Send + Sync> = e;
                // Checked just above: the downcast cannot fail.
                Ok(*e
                    .downcast::<T>()
                    .expect("a backend error of the type just checked"))
            }
            e => Err(e),
        }
    }

    /// Whether this is a failure of the store (unreachable, a refused key, a server error, an
    /// outcome it did not confirm, a broken disk or configuration) rather than a refusal of what
    /// was asked (no such file, it exists, it changed, a path outside a workspace, a quota).
    pub fn is_store_failure(&self) -> bool {
        match self {
            Error::Io { .. } | Error::OutcomeUnknown { .. } | Error::Config { .. } => true,
            Error::Backend(e) => e.is_failure(),
            _ => false,
        }
    }
}
