//! Every string Claude reads, in one place: the results and errors of the memory tool byte for
//! byte as the protocol says (`docs/protocol.md`), the directory tree of a listing, the
//! sentences for every store failure ([`Error::tool_message`](crate::Error::tool_message)) and for refused paths
//! ([`PathError::message`](crate::PathError::message)).
//!
//! Claude was trained on the outputs of Anthropic's reference memory tools, so the wording, the
//! tabs, the number widths and the absence of trailing newlines all matter. Messages returned by
//! the error functions here do not carry the `Error: ` prefix: [`crate::ToolResult::error`] adds
//! it, so that the prefix exists in exactly one place too.
//!
//! Messages for situations the spec does not name (documented in `docs/protocol.md`) follow the
//! same style: they say what happened and what Claude can do next.
//!
//! By kind: the results of the six commands (`results.rs`), a file's view (`file.rs`), a
//! directory's listing (`listing.rs`), and what went wrong below the tool (`errors.rs`). The
//! public part is small (sizes as the reference tools write them, what a listing hides, the
//! line limits); the rest is the crate's own, so that wording is not public API.

mod errors;
mod file;
mod listing;
mod results;

pub use file::{MAX_LINES, SNIPPET_CONTEXT};
pub use listing::{hidden, human_size};
pub use results::unknown_tool;

pub(crate) use errors::*;
pub(crate) use file::*;
pub(crate) use listing::*;
pub(crate) use results::*;

/// The memory root, as every message names it.
const ROOT: &str = "/memories";
