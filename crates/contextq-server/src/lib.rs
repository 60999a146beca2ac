//! A ContextQ-compatible context store server (the contract: `docs/contextq-api.md`).
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
//! - [`api`]: the contract's routes and handlers, [`ServerConfig`], and [`ApiError`], where the
//!   data layer's errors become HTTP answers; [`app`] (module `router`) puts them and the
//!   inspector's under one set of middleware, and [`serve`] runs that on a listener.
//! - [`listen`]: the accept loop: header read and idle timeouts, the connection cap, the
//!   descriptor limit ([`ConnectionLimits`]).
//! - [`ui`]: the memory inspector at `/ui/` (assets compiled in, strict CSP, one-time sign-in
//!   tokens).
//! - [`embed`]: [`RunningServer`], a server inside another program (start, URL, graceful stop).
//! - [`store`]: the data layer, every operation scoped to a tenant, with its own error type.
//! - [`audit`]: the hash chain of the activity log and its verifier.
//! - [`auth`]: API key generation, hashing and the lookup cache.
//! - [`admin`]: provisioning and operator commands.
//! - [`db`]: the pool, backends and per-backend migrations.
//! - [`error`]: [`Error`], for the library and operator commands.
//! - [`logs`]: how the binaries log.
//! - [`metrics`]: what `/metrics` counts (Prometheus text), per server.
//! - `testing` (feature `test-util`): fresh test databases, [`database_tests!`], a test server.
//!
//! The wire types (resources, bodies, limits, keys, slugs) are the `contextq-api` crate's.

#![warn(missing_docs)]

pub mod admin;
pub mod api;
pub mod audit;
pub mod auth;
mod body;
pub mod db;
pub mod embed;
pub mod error;
pub mod listen;
pub mod logs;
pub mod metrics;
mod open;
mod private_file;
mod router;
pub mod store;
#[cfg(feature = "test-util")]
pub mod testing;
pub mod ui;

pub use api::{ApiError, AppState, Caller, ServerConfig};
pub use contextq_api::{Plan, Scope};
pub use db::{Backend, Db, DbOptions};
pub use embed::RunningServer;
pub use error::{Error, Result};
pub use listen::ConnectionLimits;
pub use router::{app, serve};
