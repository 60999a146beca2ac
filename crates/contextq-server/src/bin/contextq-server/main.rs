//! `contextq-server`: serve the ContextQ API, or run an operator command. A table of
//! contents: each command is a module (`serve`, `admin` and its families); the work is in the
//! library (`contextq_server`), which its tests reach.

mod admin;
mod serve;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use contextq_server::DbOptions;

/// mimalloc, not the platform's allocator (feature `mimalloc`, on by default): a request's JSON
/// and a write's values are many short-lived allocations freed on other threads, where glibc's
/// allocator spent 9-17% of the CPU (docs/benchmarks.md, "The allocator").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "contextq-server",
    version,
    about = "A ContextQ-compatible context store server"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    logs: contextq_server::logs::LogArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API; prints its URL (http://ADDR:PORT) on stdout once listening.
    Serve(serve::ServeArgs),
    /// Operator commands, run directly on the database.
    Admin(admin::AdminArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    contextq_server::logs::init("warn,contextq=info", cli.logs.log_format);
    // Before the runtime starts: SQLite's allocator is set only while this is the one thread.
    #[cfg(feature = "mimalloc")]
    contextq_server::db::allocator::set_up_process();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let ran = runtime.block_on(async {
        match cli.command {
            Command::Serve(args) => serve::run(args).await,
            Command::Admin(args) => admin::run(args).await,
        }
    });
    match ran {
        Ok(code) => code,
        Err(e) => {
            contextq_server::logs::fatal(&format!("{e:#}"));
            ExitCode::FAILURE
        }
    }
}

/// Database options with the audit key in `key_file`, if given.
fn db_options(key_file: Option<&std::path::Path>) -> Result<DbOptions> {
    let key = key_file
        .map(contextq_server::audit::AuditKey::load)
        .transpose()?;
    Ok(DbOptions::default().audit_key(key))
}
