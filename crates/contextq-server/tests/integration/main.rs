//! The server's integration tests, one module per topic, in one test binary: each binary
//! links the whole stack (axum, sqlx, rusqlite, reqwest), so one per crate instead of one per
//! file is most of what a test build costs (docs/benchmarks.md, "Building the tests").
//! Run one topic with `cargo test -p contextq-server --test integration <topic>::`.

mod common;

mod api;
mod audit_and_concurrency;
mod audit_tamper;
mod backup;
mod binary;
mod bodies;
mod checkpoint;
mod connections;
mod crash;
mod direct;
mod durability;
#[cfg(unix)]
mod flood;
mod history;
mod index_merges;
#[cfg(unix)]
mod local_exposure;
mod memory_stores;
mod operations;
mod outage;
mod outcomes;
mod redaction;
mod revocation;
mod round_trips;
mod search;
mod search_holds;
mod ui;
mod upgrade;
mod who;
mod workspace_keys;
mod write_batch;
