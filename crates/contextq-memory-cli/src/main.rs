//! `contextq-memory`: Claude's memory tool on ContextQ from the command line.
//!
//! With no `CONTEXT_API_URL`, every command runs on the embedded default: contextq-server in
//! this process over SQLite in the data directory, so it works on a fresh machine with nothing
//! else installed.

mod demo;
mod embedded;
mod exec;
mod stores;

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
    },
    /// Run a realistic memory session through the adapter and server, and show the rows.
    Demo,
    /// Serve the embedded store over HTTP so other processes can share it.
    Serve {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:38200")]
        listen: String,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sqlx=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Cli::parse()).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let settings = Settings {
        data_dir: cli.data_dir.unwrap_or_else(embedded::default_data_dir),
        workspace: cli.workspace,
    };
    match cli.command {
        Command::Exec { store } => {
            let opened = stores::open(&store, &settings).await?;
            let result = exec::run(opened.tool.as_ref()).await;
            opened.close().await;
            result?;
        }
        Command::Demo => {
            let opened = stores::open(&StoreChoice::ContextQ, &settings).await?;
            let result = demo::run(&opened).await;
            opened.close().await;
            result?;
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
            let db = server.db.clone();
            tokio::select! {
                r = server.wait() => r?,
                _ = tokio::signal::ctrl_c() => {}
            }
            db.close().await;
        }
    }
    Ok(ExitCode::SUCCESS)
}
