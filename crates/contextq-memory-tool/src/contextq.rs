//! Everything ContextQ: the options and [`contextq_memory_tool`], the typed [`Client`], the
//! [`ContextQStore`], history and restores ([`history`]), and [`ContextQError`]. The rest of the
//! crate (protocol, path, render, tool, the other stores) knows nothing of ContextQ.
//!
//! ```no_run
//! use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, contextq_memory_tool};
//! use contextq_memory_tool::MemoryToolHandlers;
//!
//! # async fn run() -> contextq_memory_tool::Result<()> {
//! // Reads CONTEXT_API_KEY and CONTEXT_API_URL; pins the tree to one workspace.
//! let tool = contextq_memory_tool(ContextQMemoryToolOptions::from_env().workspace("acme"))?;
//! let result = tool
//!     .execute(serde_json::json!({"command": "view", "path": "/memories"}))
//!     .await;
//! println!("{}", result.content);
//! # Ok(()) }
//! ```
//!
//! # Contents
//! - [`options`]: [`ContextQMemoryToolOptions`] (defaults, `from_env`), [`contextq_memory_tool`].
//! - [`client`]: the typed client of every endpoint, [`Client`], [`ApiKey`].
//! - [`local`]: [`local::LocalService`], a server in this process called without a socket.
//! - [`mod@path_model`]: which path model a key gets ([`fn@path_model::path_model`]), the one rule of
//!   every transport.
//! - [`store`]: [`ContextQStore`], the path model and the adapter's rules.
//! - [`history`]: versions, diffs and restores on a ContextQ that keeps them.
//! - [`redaction`]: a version's content, or every version holding a text, removed for good.
//! - [`error`]: [`ContextQError`], matched by the contract's [`ErrorCode`].

pub mod client;
pub mod error;
pub mod history;
pub mod local;
pub mod options;
pub mod path_model;
pub mod redaction;
pub mod store;

pub use crate::retry::RetryConfig;
pub use client::{ApiKey, Client};
pub use error::{ContextQError, ErrorCode};
pub use options::{
    ContextQMemoryTool, ContextQMemoryToolOptions, DEFAULT_BASE_URL, DEFAULT_CONTEXT_TYPE,
    DEFAULT_TAG, DEFAULT_TIMEOUT, contextq_memory_tool,
};
pub use path_model::{KeyReach, PathModel, path_model};
pub use store::ContextQStore;
