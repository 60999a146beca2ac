//! `contextq-bench`: measures the memory tool on ContextQ and prints tables (docs/benchmarks.md).
//!
//! The server runs as a separate process (the release `contextq-server` next to this binary),
//! on loopback, so its peak memory can be read and client and server do not share a runtime.
//!
//! ```sh
//! cargo build --release -p contextq-server -p contextq-bench -p contextq-memory-cli
//! target/release/contextq-bench commands [--postgres-url URL]
//! target/release/contextq-bench overhead
//! target/release/contextq-bench scale [--postgres-url URL]
//! target/release/contextq-bench burst [--postgres-url URL]
//! target/release/contextq-bench scaleout --postgres-url URL [--one-way-ms 0.5,1.0]
//! target/release/contextq-bench floor [--postgres-url URL]
//! target/release/contextq-bench trace --commands 10000 --out trace.jsonl   # for bench/trace.sh
//! ```

mod burst;
mod floor;
mod harness;
mod history;
mod memory_stores;
mod overhead;
mod per_command;
mod scale;
mod scaleout;
mod search;
mod tenant_size;
mod trace;

use anyhow::Result;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "contextq-bench",
    about = "Benchmarks of the memory tool on ContextQ"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Per command: ops/s, p50/p99 at concurrency 1 and 16, HTTP requests per command.
    Commands(per_command::Commands),
    /// The same `view` through the tool and as a bare HTTP GET, in one run.
    Overhead(overhead::Overhead),
    /// Two replicas on one PostgreSQL behind a delaying proxy: writes/s of one tenant and of 8
    /// tenants, database round trips per write, concurrent inserts into one file.
    Scaleout(scaleout::Scaleout),
    /// Listing 1k/20k/100k files (whole, and within the default answer budget: time and
    /// characters); edits on 1 KiB/100 KiB/1 MiB files; server peak memory.
    Scale(scale::Scale),
    /// Server memory under bursts of large requests: peak and settled RSS with the default
    /// budget of bodies in flight and with a budget large enough to be no limit.
    Burst(burst::Burst),
    /// Versions: writes of one file with many versions, reading its history and one version,
    /// planning and carrying out the restore of a tree to a point in time.
    History(history::History),
    /// A command's cost as the tenant grows: p50/p99 of create, str_replace, view file and view
    /// of a small directory, at concurrency 1, in a tenant that holds each number of files in
    /// turn (loaded through bulk-upsert into another folder of the same workspace).
    TenantSize(tenant_size::TenantSize),
    /// Full-text search (extension `search`): p50/p99 of each kind of query (an identifier, two
    /// words, a common word, a prefix, a phrase) as the tenant grows.
    Search(search::Search),
    /// One tenant's flood of heavy searches against another tenant's reads (docs/search.md,
    /// "Fair under load"): latencies, answers by status, the server's peak RSS.
    SearchFlood(search::SearchFlood),
    /// The floors of a durable write on this machine: one client committing, one transaction at
    /// a time, the rows a write needs at the least (file, version, audit), then the rows a
    /// memory-tool write writes in the server's schema, on SQLite with `synchronous = FULL` and
    /// `NORMAL` and, with --postgres-url, on PostgreSQL in one round trip each.
    Floor(floor::Floor),
    /// Writes the deterministic command trace (JSON lines).
    Trace(trace::Trace),
    /// The Memory Stores door as the store grows: a memory page, a depth=1 page, a version page
    /// and a retrieve at each size; a create and an update through the door against the same
    /// write through /api/contexts.
    MemoryStores(memory_stores::MemoryStores),
}

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Commands(c) => c.run().await,
        Cmd::Overhead(c) => c.run().await,
        Cmd::Scaleout(c) => c.run().await,
        Cmd::Scale(c) => c.run().await,
        Cmd::Burst(c) => c.run().await,
        Cmd::History(c) => c.run().await,
        Cmd::TenantSize(c) => c.run().await,
        Cmd::Search(c) => c.run().await,
        Cmd::SearchFlood(c) => c.run().await,
        Cmd::Floor(c) => c.run().await,
        Cmd::Trace(c) => c.run().await,
        Cmd::MemoryStores(c) => c.run().await,
    }
}
