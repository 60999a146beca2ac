//! [`AnthropicError`], the Messages API's failures. The crate's [`crate::Error`] carries one as
//! [`crate::Error::Backend`] (the core knows no runner): [`crate::Error::backend_error`] gives it
//! back.

use crate::transport::TransportError;

/// A failure of the Messages API, carried by [`crate::Error::Backend`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AnthropicError {
    /// The API answered with an error.
    #[error("Anthropic API answered {status} {error_type}: {message}")]
    Api {
        /// HTTP status.
        status: u16,
        /// `error.type` (`overloaded_error`, `invalid_request_error`, ...).
        error_type: String,
        /// `error.message`.
        message: String,
        /// The `request-id` header, for support requests.
        request_id: Option<String>,
    },
    /// The request never got an answer.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// A complete answer that is not a message.
    #[error("unexpected answer from the Messages API at {url}: {message}")]
    Protocol {
        /// The request URL.
        url: String,
        /// What was wrong.
        message: String,
    },
}

impl AnthropicError {
    /// What went wrong, in a few words (the API's message, or why no answer came).
    pub fn message(&self) -> &str {
        match self {
            AnthropicError::Api { message, .. } | AnthropicError::Protocol { message, .. } => {
                message
            }
            AnthropicError::Transport(t) => &t.message,
        }
    }
}

impl From<AnthropicError> for crate::Error {
    fn from(e: AnthropicError) -> Self {
        crate::Error::Backend(Box::new(e))
    }
}

impl crate::error::BackendError for AnthropicError {
    fn tool_message(&self) -> String {
        format!("The Anthropic API failed: {}", self.message())
    }

    /// Always: the runner's calls are not Claude's to refuse.
    fn is_failure(&self) -> bool {
        true
    }
}
