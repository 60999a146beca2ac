//! `contextq-memory`: Claude's memory tool on ContextQ from the command line.
//!
//! With neither `CONTEXT_API_URL` nor `CONTEXT_API_KEY`, every command runs on the embedded
//! default: contextq-server in this process over SQLite in the data directory, so it works on a
//! fresh machine with nothing else installed. A key without a URL means the library's default
//! URL (`http://localhost:38200`), as `ContextQMemoryToolOptions::from_env` has it.

mod chat;
mod commands;
mod demo;
mod e2e;
mod embedded;
mod exec;
mod history;
mod keys;
#[cfg(feature = "mcp")]
mod mcp;
mod out;
mod search;
mod stores;
mod sync;
mod transfer;

use std::process::ExitCode;

use clap::Parser;

use commands::Cli;

/// mimalloc, not the platform's allocator (feature `mimalloc`, on by default): requests, their
/// JSON and a write's values are many short-lived allocations freed on other threads, where
/// glibc's allocator spent 9-17% of the CPU (docs/benchmarks.md, "The allocator").
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // JSON logs are for a collector: the request log (one line per request) is on by default.
    let default_filter = match cli.logs.log_format {
        contextq_server::logs::LogFormat::Json => "warn,contextq::request=info,sqlx=error",
        contextq_server::logs::LogFormat::Text => "warn,sqlx=error",
    };
    contextq_server::logs::init(default_filter, cli.logs.log_format);
    // Before the runtime starts, so no other thread exists to touch SQLite.
    #[cfg(feature = "mimalloc")]
    contextq_server::db::allocator::set_up_process();
    // `serve` answers other processes, and `import` keeps several bulk requests in flight (one
    // request's JSON and terms made while the database commits another's): every core. Every
    // other command is one client running one command at a time (the embedded server in the
    // same process): one thread, so a request and its answer never hop between worker threads
    // (faster, measured in docs/benchmarks.md).
    let runtime = if cli.command.many_threads() {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    }
    .enable_all()
    .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(code) => code,
        Err(e) if out::is_closed_pipe(&e) => {
            eprintln!("contextq-memory: stopped: the output was closed (broken pipe)");
            ExitCode::FAILURE
        }
        Err(e) => {
            contextq_server::logs::fatal(&format!("{e:#}"));
            let hint = e
                .chain()
                .find_map(|c| c.downcast_ref::<contextq_memory_tool::Error>())
                .and_then(stores::hint);
            if let Some(hint) = hint {
                contextq_server::logs::notice(&format!("hint: {hint}"));
            }
            ExitCode::FAILURE
        }
    }
}
