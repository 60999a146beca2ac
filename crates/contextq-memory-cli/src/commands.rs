//! The commands of `contextq-memory`, one module each (a family shares one: `history`,
//! `transfer`, `serve`): each command is a type with its arguments and its `run`, as
//! mini-redis has one type per protocol command. This module holds the global options and
//! what every command is given ([`Context`]).

mod chat;
mod demo;
mod e2e;
mod exec;
mod history;
#[cfg(feature = "mcp")]
mod mcp;
mod search;
mod serve;
mod sync;
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use contextq_memory_tool::AnswerBudget;
use contextq_memory_tool::budget;

use crate::out::outln;
use crate::stores::Settings;

#[derive(Parser)]
#[command(
    name = "contextq-memory",
    version,
    about = "Claude's memory tool on ContextQ"
)]
pub(crate) struct Cli {
    /// Data directory of the embedded default [default: the platform data dir + contextq-memory].
    #[arg(long, env = "CONTEXTQ_MEMORY_DATA_DIR", global = true)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Pin /memories to this workspace (embedded default: `default`).
    #[arg(long, global = true)]
    pub(crate) workspace: Option<String>,
    /// How far a write to the embedded default or a local:DIR store goes before it is
    /// answered: synced (on stable storage: it survives a power cut) or ordered (it survives a
    /// crash of the process; a power cut or OS crash may take back the last writes, never
    /// tearing one, as with Anthropic's reference memory tools). A remote ContextQ keeps its
    /// own.
    #[arg(long, global = true, env = "CONTEXTQ_MEMORY_DURABILITY", default_value = "synced",
          value_parser = |s: &str| s.parse::<contextq_memory_tool::Durability>())]
    pub(crate) durability: contextq_memory_tool::Durability,
    /// Most entries a directory `view` shows Claude; past it the listing is cut at a whole line
    /// and ends with a note saying what was left out (0: no limit).
    #[arg(long, global = true, value_name = "N", help_heading = "Answer budget",
          default_value_t = budget::DEFAULT_LISTING_ENTRIES)]
    pub(crate) max_listing_entries: usize,
    /// Most characters a directory `view` shows Claude (0: no limit).
    #[arg(long, global = true, value_name = "N", help_heading = "Answer budget",
          default_value_t = budget::DEFAULT_LISTING_CHARS)]
    pub(crate) max_listing_chars: usize,
    /// Most characters a file `view` without view_range shows Claude; past it, the first lines
    /// and the view_range to read on (0: no limit).
    #[arg(long, global = true, value_name = "N", help_heading = "Answer budget",
          default_value_t = budget::DEFAULT_READ_CHARS)]
    pub(crate) max_read_chars: usize,
    #[command(subcommand)]
    pub(crate) command: Command,
    #[command(flatten)]
    pub(crate) logs: contextq_server::logs::LogArgs,
}

/// The write policy, on the commands that write (exec, demo, chat, mcp, import, restore).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub(crate) struct Policy {
    /// Read-only memory: Claude can view it, and every write (create, str_replace, insert,
    /// delete, rename; an import, a restore) is refused with a message that nothing changed.
    #[arg(long)]
    pub(crate) read_only: bool,
    /// Let Claude store credential-shaped strings (API keys, tokens, private keys), refused by
    /// default (also on import and restore).
    #[arg(long)]
    pub(crate) allow_secrets: bool,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// Run tool inputs (JSON, one per line, from stdin); print one result per line.
    Exec(exec::Exec),
    /// Run a realistic memory session through the adapter and server, and show the rows.
    Demo(demo::Demo),
    /// Talk to Claude with the memory tool (one user turn per stdin line; needs ANTHROPIC_API_KEY).
    Chat(chat::Chat),
    /// The live end-to-end check: throwaway tenant, two Claude turns, independent verification.
    E2e(e2e::E2e),
    /// Serve the memory as an MCP server (tool `memory`, files as resources) over stdio, or with
    /// --http over streamable HTTP at /mcp, where each client's `Authorization: Bearer <ContextQ
    /// key>` is the key of its memory.
    #[cfg(feature = "mcp")]
    Mcp(mcp::Mcp),
    /// Write every memory file under DIR/memories/ (atomic, idempotent).
    Export(transfer::Export),
    /// Load a directory (DIR/memories/... as the official SDKs write it, or DIR/...) into the store.
    Import(transfer::Import),
    /// Keep a local memory folder and the store in step, both ways (three-way, conflicts kept,
    /// docs/sync.md); --watch keeps doing it.
    Sync(sync::Sync),
    /// Search the memory files for words (the memory_search tool's query language: words in any
    /// order and case, "quoted phrases", prefix*; identifiers such as OPS-4471 as written).
    Search(search::Search),
    /// The versions of a memory file: number, time, action, size, key (masked).
    History(history::History),
    /// Print one version of a memory file.
    Show(history::Show),
    /// A unified diff between two versions of a file [default: the newest and the one before;
    /// with one version: that one and the newest].
    Diff(history::Diff),
    /// Restore a file to a version (--version N), or a file or directory to a point in time
    /// (--at TIME): shows the plan, then does it, each write conditional on what was planned.
    Restore(history::Restore),
    /// Remove a secret from a file's history for good: the content of one version
    /// (--version N), or of every version holding a text (--matching TEXT, `-` to read it from
    /// stdin). Shows the plan, then redacts, then reports exactly which versions. The file's
    /// current content is never redacted: edit or delete it first. Needs an admin key of the
    /// whole tenant (the embedded default's is).
    Redact(history::Redact),
    /// The keys of the embedded data directory: one per teammate or agent of a `serve`
    /// (create, list, revoke, expire).
    Keys(serve::Keys),
    /// Print a new one-time sign-in link to the inspector of a running `serve` (the one it
    /// printed at start is valid 10 minutes).
    SignInLink(serve::SignInLink),
    /// Serve the embedded store over HTTP so other processes can share it, with the memory
    /// inspector at /ui/ (prints a one-time sign-in link).
    Serve(serve::Serve),
}

impl Command {
    /// Whether the command wants every core (see `main`).
    pub(crate) fn many_threads(&self) -> bool {
        matches!(self, Command::Serve(_) | Command::Import(_))
    }
}

/// What every command is given: the global options.
pub(crate) struct Context {
    /// The embedded default's data directory.
    pub(crate) data_dir: PathBuf,
    workspace: Option<String>,
    durability: contextq_memory_tool::Durability,
    answer_budget: AnswerBudget,
}

impl Context {
    /// The store's settings for a command with this write policy.
    pub(crate) fn settings(&self, policy: Policy) -> Settings {
        Settings {
            data_dir: self.data_dir.clone(),
            workspace: self.workspace.clone(),
            read_only: policy.read_only,
            secret_guard: !policy.allow_secrets,
            answer_budget: self.answer_budget,
            durability: self.durability,
            every_workspace: false,
            key_decides_path_model: false,
        }
    }
}

/// Runs the command `cli` names.
pub(crate) async fn run(cli: Cli) -> Result<ExitCode> {
    let cx = Context {
        data_dir: cli
            .data_dir
            .unwrap_or_else(crate::embedded::default_data_dir),
        workspace: cli.workspace,
        durability: cli.durability,
        answer_budget: AnswerBudget::default()
            .listing_entries(cli.max_listing_entries)
            .listing_chars(cli.max_listing_chars)
            .read_chars(cli.max_read_chars),
    };
    match cli.command {
        Command::Exec(c) => c.run(&cx).await,
        Command::Demo(c) => c.run(&cx).await,
        Command::Chat(c) => c.run(&cx).await,
        Command::E2e(c) => c.run(&cx).await,
        #[cfg(feature = "mcp")]
        Command::Mcp(c) => c.run(&cx).await,
        Command::Export(c) => c.run(&cx).await,
        Command::Import(c) => c.run(&cx).await,
        Command::Sync(c) => c.run(&cx).await,
        Command::Search(c) => c.run(&cx).await,
        Command::History(c) => c.run(&cx).await,
        Command::Show(c) => c.run(&cx).await,
        Command::Diff(c) => c.run(&cx).await,
        Command::Restore(c) => c.run(&cx).await,
        Command::Redact(c) => c.run(&cx).await,
        Command::Keys(c) => c.run(&cx).await,
        Command::SignInLink(c) => c.run(&cx).await,
        Command::Serve(c) => c.run(&cx).await,
    }
}

/// An export's or import's summary printed; exit 1 when a file failed or it stopped.
fn finish(summary: crate::transfer::Summary, verb: &str) -> Result<ExitCode> {
    outln!("{}", summary.line(verb));
    Ok(if summary.failed > 0 || summary.stopped.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
