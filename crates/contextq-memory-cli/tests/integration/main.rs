//! The CLI's integration tests, one module per topic, in one test binary: each binary
//! links the whole stack (axum, sqlx, rusqlite, reqwest), so one per crate instead of one per
//! file is most of what a test build costs (docs/benchmarks.md, "Building the tests").
//! Run one topic with `cargo test -p contextq-memory-cli --test integration <topic>::`.

mod common;

mod claude;
mod cli;
mod costs;
mod history;
mod inspector;
#[cfg(feature = "mcp")]
mod mcp;
#[cfg(feature = "mcp")]
mod mcp_http;
#[cfg(feature = "mcp")]
mod mcp_official_clients;
#[cfg(feature = "mcp")]
mod path_model;
mod redact;
mod sync;
mod transfer;
