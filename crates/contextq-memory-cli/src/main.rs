//! `contextq-memory`: Claude's memory tool on ContextQ from the command line.
//!
//! With no `CONTEXT_API_URL`, every command runs on the embedded default: contextq-server in
//! this process over SQLite in the data directory, so it works on a fresh machine with nothing
//! else installed.

mod chat;
mod demo;
mod e2e;
mod embedded;
mod exec;
#[cfg(feature = "mcp")]
mod mcp;
mod stores;
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};

use stores::{Settings, StoreChoice};

#[derive(Parser)]
#[command(
    name = "contextq-memory",
    version,
    about = "Claude's memory tool on ContextQ"
)]
struct Cli {
    /// Data directory of the embedded default [default: the platform data dir + contextq-memory].
    #[arg(long, env = "CONTEXTQ_MEMORY_DATA_DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// Pin /memories to this workspace (embedded default: `default`).
    #[arg(long, global = true)]
    workspace: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run tool inputs (JSON, one per line, from stdin); print one result per line.
    Exec {
        /// contextq (default: embedded unless CONTEXT_API_URL is set), memory, or local:DIR.
        #[arg(long, default_value = "contextq")]
        store: StoreChoice,
        /// At the end, print {"commands": N, "seconds": S} (the loop alone) on stderr.
        #[arg(long)]
        timing: bool,
    },
    /// Run a realistic memory session through the adapter and server, and show the rows.
    Demo,
    /// Talk to Claude with the memory tool (one user turn per stdin line; needs ANTHROPIC_API_KEY).
    Chat {
        /// Model id.
        #[arg(long, env = "ANTHROPIC_MODEL", default_value = "claude-opus-5")]
        model: String,
        /// System prompt.
        #[arg(long)]
        system: Option<String>,
        /// Output cap per response.
        #[arg(long, default_value_t = 4096)]
        max_tokens: u32,
    },
    /// The live end-to-end check: throwaway tenant, two Claude turns, independent verification.
    E2e {
        /// The server's database (default: a temporary SQLite file).
        #[arg(long)]
        database_url: Option<String>,
        /// A running server on that database (default: one in this process).
        #[arg(long)]
        contextq_url: Option<String>,
        /// Model id.
        #[arg(long, env = "ANTHROPIC_MODEL", default_value = "claude-opus-5")]
        model: String,
    },
    /// Serve the memory as an MCP server over stdio (tool `memory`, files as resources).
    #[cfg(feature = "mcp")]
    Mcp,
    /// Write every memory file under DIR/memories/ (atomic, idempotent).
    Export {
        /// contextq (default), memory, or local:DIR.
        #[arg(long, default_value = "contextq")]
        store: StoreChoice,
        /// The directory to write (files land in OUT/memories/...).
        #[arg(long)]
        out: PathBuf,
    },
    /// Load a directory (DIR/memories/... as the official SDKs write it, or DIR/...) into the store.
    Import {
        /// The directory to read.
        dir: PathBuf,
        /// contextq (default), memory, or local:DIR.
        #[arg(long, default_value = "contextq")]
        store: StoreChoice,
        /// Replace existing files whose content differs (default: leave them, counted as skipped).
        #[arg(long)]
        overwrite: bool,
    },
    /// Serve the embedded store over HTTP so other processes can share it.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:38200")]
        listen: String,
    },
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sqlx=error".into()),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: piped or redirected logs stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let cli = Cli::parse();
    // `serve` answers other processes: every core. Every other command is one client running
    // one command at a time (the embedded server in the same process): one thread, so a request
    // and its answer never hop between worker threads (measured: the 5,000-command trace runs
    // in 12% less time than on the multi-threaded runtime; docs/benchmarks.md).
    let runtime = match cli.command {
        Command::Serve { .. } => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
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
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn finish(summary: transfer::Summary, verb: &str) -> Result<ExitCode> {
    println!("{}", summary.line(verb));
    Ok(if summary.failed > 0 || summary.stopped.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let settings = Settings {
        data_dir: cli.data_dir.unwrap_or_else(embedded::default_data_dir),
        workspace: cli.workspace,
    };
    match cli.command {
        Command::Exec { store, timing } => {
            let opened = stores::open(&store, &settings).await?;
            let result = exec::run(opened.tool.as_ref(), timing).await;
            opened.close().await;
            result?;
        }
        Command::Demo => {
            let opened = stores::open(&StoreChoice::ContextQ, &settings).await?;
            let result = demo::run(&opened).await;
            opened.close().await;
            result?;
        }
        Command::Chat {
            model,
            system,
            max_tokens,
        } => {
            let opened = stores::open(&StoreChoice::ContextQ, &settings).await?;
            let result = chat::run(
                &opened,
                chat::ChatOptions {
                    model,
                    system,
                    max_tokens,
                },
            )
            .await;
            opened.close().await;
            result?;
        }
        Command::E2e {
            database_url,
            contextq_url,
            model,
        } => {
            let ok = e2e::run(e2e::E2eOptions {
                database_url,
                contextq_url,
                model,
            })
            .await?;
            if !ok {
                return Ok(ExitCode::FAILURE);
            }
        }
        #[cfg(feature = "mcp")]
        Command::Mcp => {
            let opened = stores::open(&StoreChoice::ContextQ, &settings).await?;
            let result = mcp::run(&opened).await;
            opened.close().await;
            result?;
        }
        Command::Export { store, out } => {
            let opened = stores::open(&store, &settings).await?;
            let result = transfer::export(opened.store.as_ref(), &out).await;
            opened.close().await;
            return finish(result?, "exported");
        }
        Command::Import {
            dir,
            store,
            overwrite,
        } => {
            let opened = stores::open(&store, &settings).await?;
            let result = transfer::import(opened.store.as_ref(), &dir, overwrite).await;
            opened.close().await;
            return finish(result?, "imported");
        }
        Command::Serve { listen } => {
            let server = embedded::Embedded::start(&settings.data_dir, &listen).await?;
            println!("{}", server.url);
            eprintln!(
                "serving {} ; use CONTEXT_API_URL={} and the apiKey in {}",
                settings.data_dir.join("contextq.db").display(),
                server.url,
                settings.data_dir.join("embedded.json").display()
            );
            server
                .serve_until(async {
                    let _ = tokio::signal::ctrl_c().await;
                })
                .await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
