//! [`TransportError`]: a request that never got a complete answer. Its own file, below both
//! clients' errors and the retry engine, so that none of them imports another to name it.

/// A request that never got a complete answer (connection refused or dropped, timeout, TLS).
/// Each client carries it in its own error ([`crate::contextq::ContextQError::Transport`], the
/// Messages API's).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("could not reach {url}: {message}")]
pub struct TransportError {
    /// The request URL (never carries a key).
    pub url: String,
    /// What happened.
    pub message: String,
    /// Whether it was a timeout.
    pub timeout: bool,
    /// Whether the request may have reached the server (`false`: the connection was never
    /// made, so nothing can have been applied).
    pub sent: bool,
}
