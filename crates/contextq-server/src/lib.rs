//! A ContextQ-compatible context store server (`shared/spec/contextq-api.md`).
//!
//! It is the test backend of the memory tool's ContextQ adapter, the embedded default of the
//! `contextq-memory` CLI, and a server people can self-host: SQLite by default, PostgreSQL chosen
//! by URL scheme, several processes on one PostgreSQL correct together.
//!
//! ```no_run
//! # async fn run() -> contextq_server::Result<()> {
//! use contextq_server::{AppState, Db, DbOptions, ServerConfig, serve};
//! let db = Db::connect("sqlite:/var/lib/contextq/contextq.db", &DbOptions::default()).await?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:38200").await?;
//! serve(listener, AppState::new(db, ServerConfig::default()), async {
//!     let _ = tokio::signal::ctrl_c().await;
//! })
//! .await?;
//! # Ok(()) }
//! ```
//!
//! # Contents
//! - [`api`]: the router ([`app`]), [`serve`], [`ServerConfig`].
//! - [`store`]: the data operations, every one scoped to a tenant.
//! - [`audit`]: the global hash chain of the activity log and its verifier.
//! - [`auth`]: API keys (format, hashing, masking) and the request extractor.
//! - [`admin`]: provisioning and operator commands.
//! - [`db`]: the pool, backends and per-backend migrations.
//! - [`model`]: the JSON resources, plans, scopes and limits.
//! - [`error`]: [`Error`] and the HTTP [`ApiError`].
//! - `testing` (feature `test-util`): fresh test databases and `database_tests!`.

#![warn(missing_docs)]

pub mod admin;
pub mod api;
pub mod audit;
pub mod auth;
pub mod db;
pub mod error;
pub mod model;
pub mod store;
#[cfg(feature = "test-util")]
pub mod testing;

pub use api::{AppState, ServerConfig, app, serve};
pub use db::{Backend, Db, DbOptions};
pub use error::{ApiError, Error, Result};
