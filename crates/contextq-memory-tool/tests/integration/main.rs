//! The memory-tool's integration tests, one module per topic, in one test binary: each binary
//! links the whole stack (axum, sqlx, rusqlite, reqwest), so one per crate instead of one per
//! file is most of what a test build costs (docs/benchmarks.md, "Building the tests").
//! Run one topic with `cargo test -p contextq-memory-tool --test integration <topic>::`.

mod common;

mod bad_input;
mod budget;
mod conformance_local;
mod contextq_adapter;
mod contextq_conformance;
mod contextq_faults;
mod contextq_plain;
mod costs;
mod create_many;
#[cfg(unix)]
mod failover;
mod history;
mod local_service;
mod memory_stores_conformance;
mod outage;
mod preconditions;
mod redaction;
mod runner;
mod soak;
