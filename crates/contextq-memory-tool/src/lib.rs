//! Claude's memory tool (`memory_20250818`) with its files in ContextQ, a local directory or memory.
//!
//! Claude calls the memory tool with six commands (`view`, `create`, `str_replace`, `insert`,
//! `delete`, `rename`) on paths under `/memories`. This crate answers them exactly as Anthropic's
//! reference tools do (same strings, byte for byte), over a small [`Store`] trait, so the memory
//! can live wherever the application needs it.
//!
//! ```
//! use contextq_memory_tool::{MemoryTool, MemoryToolHandlers, MemoryStore};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let tool = MemoryTool::new(MemoryStore::new());
//! let result = tool
//!     .execute(json!({"command": "create", "path": "/memories/notes.md", "file_text": "Prefers Rust\n"}))
//!     .await;
//! assert_eq!(result.content, "File created successfully at: /memories/notes.md");
//! assert!(!result.is_error);
//! # }
//! ```
//!
//! # Contents
//! - [`protocol`]: the commands Claude sends, [`ToolResult`], the tool definition.
//! - [`path`]: parsing and validating `/memories` paths ([`MemoryPath`]).
//! - [`render`]: every string Claude reads (results, listings, every error's sentence).
//! - [`budget`]: [`AnswerBudget`], how much one directory listing or file read may hold.
//! - [`handlers`]: [`MemoryToolHandlers`], the handler trait, `execute`, and [`ToolError`].
//! - [`tool`]: [`MemoryTool`], the six commands over any [`Store`].
//! - [`store`]: the [`Store`] trait and the neutral backends, [`MemoryStore`] and [`LocalStore`].
//! - [`contextq`]: everything ContextQ: options, client, [`ContextQStore`], history and
//!   restores ([`contextq::history`]), [`ContextQError`]; the wire types are the
//!   `contextq-api` crate's.
//! - `memory_stores` (feature `memory-stores`): `MemoryStoresStore`, the files in a store of
//!   Anthropic's Memory Stores API (contextq-server's `/v1`, or a hosted one).
//! - [`search`]: the `memory_search` tool beside `memory`: [`Store::search`]'s answer, the scan
//!   of stores without an index, Claude's answer.
//! - [`secrets`]: the secret guard's patterns ([`MemoryTool::secret_guard`]).
//! - [`retry`]: the one retry engine of both HTTP clients, and [`RetryConfig`].
//! - [`error`]: [`Error`], the crate's one error type.
//! - `anthropic` (feature `runner`): the Messages API client, `ToolRunner`, context management.
//! - `conformance` (feature `test-util`): the suite every store passes.
//! - `testing` (feature `test-util`): a scripted stand-in for the Messages API, a command trace.

#![warn(missing_docs)]

#[cfg(feature = "runner")]
pub mod anthropic;
pub mod budget;
#[cfg(feature = "contextq")]
pub mod contextq;
mod effects;
pub mod error;
pub mod handlers;
#[cfg(feature = "memory-stores")]
pub mod memory_stores;
pub mod path;
pub mod protocol;
pub mod render;
pub mod retry;
pub mod search;
pub mod secrets;
pub mod store;
pub mod tool;
mod transport;

#[cfg(feature = "test-util")]
pub mod conformance;
#[cfg(feature = "test-util")]
pub mod testing;

/// The attribute a [`Store`] or [`MemoryToolHandlers`] implementation needs
/// (`#[contextq_memory_tool::async_trait]`), re-exported so that an embedder does not depend on
/// the `async-trait` crate itself.
pub use async_trait::async_trait;
pub use budget::AnswerBudget;
#[cfg(feature = "contextq")]
pub use contextq::{
    ContextQError, ContextQMemoryTool, ContextQMemoryToolOptions, ContextQStore,
    contextq_memory_tool,
};
pub use error::{Error, Result};
pub use handlers::{MemoryToolHandlers, ToolError};
pub use path::{MemoryPath, PathError};
pub use protocol::{Command, ToolDefinition, ToolResult};
pub use retry::RetryConfig;
pub use store::{
    Durability, Entry, Listing, LocalStore, MemoryStore, PutMode, Store, Version, Viewed,
};
pub use tool::MemoryTool;
