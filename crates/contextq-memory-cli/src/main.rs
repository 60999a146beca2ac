//! `contextq-memory`: Claude's memory tool on ContextQ from the command line.
//!
//! With neither `CONTEXT_API_URL` nor `CONTEXT_API_KEY`, every command runs on the embedded
//! default: contextq-server in this process over SQLite in the data directory, so it works on a
//! fresh machine with nothing else installed. A key without a URL means the library's default
//! URL (`http://localhost:38200`), as `ContextQMemoryToolOptions::from_env` has it.

mod chat;
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
mod transfer;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use contextq_memory_tool::AnswerBudget;
use contextq_memory_tool::budget;
use out::outln;

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
    /// How far a write to the embedded default or a local:DIR store goes before it is
    /// answered: synced (on stable storage: it survives a power cut) or ordered (it survives a
    /// crash of the process; a power cut or OS crash may take back the last writes, never
    /// tearing one, as with Anthropic's reference memory tools). A remote ContextQ keeps its
    /// own.
    #[arg(long, global = true, env = "CONTEXTQ_MEMORY_DURABILITY", default_value = "synced",
          value_parser = |s: &str| s.parse::<contextq_memory_tool::Durability>())]
    durability: contextq_memory_tool::Durability,
    /// Most entries a directory `view` shows Claude; past it the listing is cut at a whole line
    /// and ends with a note saying what was left out (0: no limit).
    #[arg(long, global = true, value_name = "N", help_heading = "Answer budget",
          default_value_t = budget::DEFAULT_LISTING_ENTRIES)]
    max_listing_entries: usize,
    /// Most characters a directory `view` shows Claude (0: no limit).
    #[arg(long, global = true, value_name = "N", help_heading = "Answer budget",
          default_value_t = budget::DEFAULT_LISTING_CHARS)]
    max_listing_chars: usize,
    /// Most characters a file `view` without view_range shows Claude; past it, the first lines
    /// and the view_range to read on (0: no limit).
    #[arg(long, global = true, value_name = "N", help_heading = "Answer budget",
          default_value_t = budget::DEFAULT_READ_CHARS)]
    max_read_chars: usize,
    #[command(subcommand)]
    command: Command,
    #[command(flatten)]
    logs: contextq_server::logs::LogArgs,
}

/// The write policy, on the commands that write (exec, demo, chat, mcp, import, restore).
#[derive(clap::Args, Debug, Clone, Copy, Default)]
struct Policy {
    /// Read-only memory: Claude can view it, and every write (create, str_replace, insert,
    /// delete, rename; an import, a restore) is refused with a message that nothing changed.
    #[arg(long)]
    read_only: bool,
    /// Let Claude store credential-shaped strings (API keys, tokens, private keys), refused by
    /// default (also on import and restore).
    #[arg(long)]
    allow_secrets: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Run tool inputs (JSON, one per line, from stdin); print one result per line.
    Exec {
        /// contextq (the embedded store unless CONTEXT_API_URL or CONTEXT_API_KEY is set; a key
        /// alone means http://localhost:38200), memory, or local:DIR.
        #[arg(long, default_value = "contextq")]
        store: StoreChoice,
        /// At the end, print {"commands": N, "seconds": S} (the loop alone) on stderr.
        #[arg(long)]
        timing: bool,
        #[command(flatten)]
        policy: Policy,
    },
    /// Run a realistic memory session through the adapter and server, and show the rows.
    Demo {
        #[command(flatten)]
        policy: Policy,
    },
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
        #[command(flatten)]
        policy: Policy,
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
    /// Serve the memory as an MCP server (tool `memory`, files as resources) over stdio, or with
    /// --http over streamable HTTP at /mcp, where each client's `Authorization: Bearer <ContextQ
    /// key>` is the key of its memory.
    #[cfg(feature = "mcp")]
    Mcp {
        /// contextq (the embedded store unless CONTEXT_API_URL or CONTEXT_API_KEY is set),
        /// memory, or local:DIR.
        #[arg(long, default_value = "contextq")]
        store: StoreChoice,
        #[command(flatten)]
        policy: Policy,
        /// Serve MCP over streamable HTTP on this address (e.g. 127.0.0.1:38300; port 0 picks
        /// one) in front of CONTEXT_API_URL (else the embedded store), instead of stdio; prints
        /// http://ADDR/mcp on stdout once listening.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// With --http: a Host clients use to reach this server, besides loopback (repeat it;
        /// e.g. memory.internal or memory.internal:38300).
        #[arg(long, value_name = "HOST", requires = "http")]
        allowed_host: Vec<String>,
        /// With --http: a browser origin allowed to call it (repeat it; e.g.
        /// `https://app.example.com:443`). Without one, a request carrying Origin is refused.
        #[arg(long, value_name = "ORIGIN", requires = "http")]
        allowed_origin: Vec<String>,
        #[command(flatten)]
        sessions: McpSessionArgs,
    },
    /// Write every memory file under DIR/memories/ (atomic, idempotent).
    Export {
        /// contextq (default), memory, or local:DIR.
        #[arg(long, default_value = "contextq")]
        store: StoreChoice,
        /// The directory to write (files land in OUT/memories/...).
        #[arg(long)]
        out: PathBuf,
        /// Every workspace the key reaches, each in its own folder (OUT/memories/WORKSPACE/...),
        /// instead of the pinned one; `import --all-workspaces` restores them.
        #[arg(long, conflicts_with = "workspace")]
        all_workspaces: bool,
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
        /// Each first folder is a workspace (as `export --all-workspaces` writes them), created
        /// when missing, instead of everything going into the pinned workspace.
        #[arg(long, conflicts_with = "workspace")]
        all_workspaces: bool,
        /// Also import what `view` hides (names starting with `.`, such as `.git`, and
        /// `node_modules`); by default they are skipped and counted.
        #[arg(long)]
        include_hidden: bool,
        #[command(flatten)]
        policy: Policy,
    },
    /// Search the memory files for words (the memory_search tool's query language: words in any
    /// order and case, "quoted phrases", prefix*; identifiers such as OPS-4471 as written).
    Search {
        /// What to look for.
        query: String,
        /// A directory under /memories to search in.
        #[arg(long, default_value = "/memories")]
        path: String,
        /// Most files shown.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=50))]
        limit: u64,
        /// One JSON object per file per line: path, score, lines ([{line, text, marks}]).
        #[arg(long)]
        json: bool,
        /// contextq (default), memory, or local:DIR.
        #[arg(long, default_value = "contextq")]
        store: StoreChoice,
    },
    /// The versions of a memory file: number, time, action, size, key (masked).
    History {
        /// The file, e.g. /memories/notes.md.
        path: String,
        /// One JSON object per version per line instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print one version of a memory file.
    Show {
        /// The file.
        path: String,
        /// The version (a number from `history`).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        version: u64,
    },
    /// A unified diff between two versions of a file [default: the newest and the one before;
    /// with one version: that one and the newest].
    Diff {
        /// The file.
        path: String,
        /// The older version.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        a: Option<u64>,
        /// The newer version.
        #[arg(value_parser = clap::value_parser!(u64).range(1..))]
        b: Option<u64>,
    },
    /// Restore a file to a version (--version N), or a file or directory to a point in time
    /// (--at TIME): shows the plan, then does it, each write conditional on what was planned.
    #[command(group(clap::ArgGroup::new("to").required(true).args(["version", "at"])))]
    Restore {
        /// The file (with --version) or directory (with --at).
        path: String,
        /// The version to restore the file to.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        version: Option<u64>,
        /// The point in time to restore the file or directory to (not in the future): as
        /// `history` shows it (2026-12-03T10:00:00Z), a date and time (2026-12-03 10:00, UTC),
        /// a date (2026-12-03, its start) or a time ago (10 minutes ago, 2h ago).
        #[arg(long)]
        at: Option<String>,
        /// Show the plan only; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation on a terminal (a directory's restore asks).
        #[arg(long, short = 'y')]
        yes: bool,
        #[command(flatten)]
        policy: Policy,
    },
    /// Remove a secret from a file's history for good: the content of one version
    /// (--version N), or of every version holding a text (--matching TEXT, `-` to read it from
    /// stdin). Shows the plan, then redacts, then reports exactly which versions. The file's
    /// current content is never redacted: edit or delete it first. Needs an admin key of the
    /// whole tenant (the embedded default's is).
    #[command(group(clap::ArgGroup::new("what").required(true).args(["version", "matching"])))]
    Redact {
        /// The file; with --all-paths, a directory (every file beneath it).
        path: String,
        /// The version to redact (a number from `history`).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        version: Option<u64>,
        /// Redact every version whose content holds this text (exact, case-sensitive); `-`
        /// reads it from stdin (one line), so that it stays out of shell history.
        #[arg(long)]
        matching: Option<String>,
        /// With --matching: every file beneath PATH (a directory; /memories for all).
        #[arg(long, requires = "matching")]
        all_paths: bool,
        /// Show the plan only; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Do not ask for confirmation on a terminal.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// The keys of the embedded data directory: one per teammate or agent of a `serve`
    /// (create, list, revoke, expire).
    Keys {
        #[command(subcommand)]
        command: keys::KeysCommand,
    },
    /// Print a new one-time sign-in link to the inspector of a running `serve` (the one it
    /// printed at start is valid 10 minutes).
    SignInLink {
        /// The server's URL [default: the one `serve` recorded in the data directory].
        #[arg(long)]
        url: Option<String>,
    },
    /// Serve the embedded store over HTTP so other processes can share it, with the memory
    /// inspector at /ui/ (prints a one-time sign-in link).
    Serve {
        /// Address to listen on (38200 is the TypeScript package's default port, kept so that its default URL
        /// works; it lies in Linux's ephemeral range 32768-60999, so pick another if it is taken).
        #[arg(long, default_value = "127.0.0.1:38200")]
        listen: String,
        /// Serve read-only: every write over HTTP (the API, the inspector's restore) is refused
        /// with 403, whatever the key.
        #[arg(long)]
        read_only: bool,
        /// A Host MCP clients use to reach /mcp, besides loopback and --listen (repeat it).
        #[arg(long, value_name = "HOST")]
        allowed_host: Vec<String>,
        /// A browser origin allowed to call /mcp (repeat it). Without one, an MCP request
        /// carrying Origin is refused.
        #[arg(long, value_name = "ORIGIN")]
        allowed_origin: Vec<String>,
        #[cfg(feature = "mcp")]
        #[command(flatten)]
        sessions: McpSessionArgs,
    },
}

/// How many MCP sessions over HTTP may live, and for how long unused (`serve`'s /mcp and
/// `mcp --http`; docs/reliability.md).
#[cfg(feature = "mcp")]
#[derive(clap::Args, Debug, Clone, Copy)]
struct McpSessionArgs {
    /// Live MCP sessions one key may hold; one more closes the key's longest idle session, or
    /// is refused (429) when all are in use.
    #[arg(long, value_name = "N", default_value_t = mcp::sessions::SessionLimits::default().per_key, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    mcp_sessions_per_key: usize,
    /// Live MCP sessions in all; when full, a key below its fair share still gets in.
    #[arg(long, value_name = "N", default_value_t = mcp::sessions::SessionLimits::default().total, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    mcp_sessions: usize,
    /// Seconds an MCP session may go without a request (and no stream open) before it ends.
    #[arg(long, value_name = "SECS", default_value_t = mcp::sessions::SessionLimits::default().idle.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    mcp_session_idle_secs: u64,
    /// Seconds a new MCP session has to send its first request after `initialize`.
    #[arg(long, value_name = "SECS", default_value_t = mcp::sessions::SessionLimits::default().unconfirmed.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    mcp_session_confirm_secs: u64,
    /// Seconds between checks of a key that holds MCP sessions but makes no request: a key
    /// revoked or expired meanwhile has its sessions (and their open streams) ended.
    #[arg(long, value_name = "SECS", default_value_t = mcp::sessions::SessionLimits::default().key_recheck.as_secs(), value_parser = clap::value_parser!(u64).range(1..))]
    mcp_key_recheck_secs: u64,
}

#[cfg(feature = "mcp")]
impl McpSessionArgs {
    fn limits(self) -> mcp::sessions::SessionLimits {
        mcp::sessions::SessionLimits {
            per_key: self.mcp_sessions_per_key,
            total: self.mcp_sessions,
            idle: std::time::Duration::from_secs(self.mcp_session_idle_secs),
            unconfirmed: std::time::Duration::from_secs(self.mcp_session_confirm_secs),
            key_recheck: std::time::Duration::from_secs(self.mcp_key_recheck_secs),
        }
    }
}

/// `serve`'s MCP endpoint at `/mcp` (feature `mcp`): each client's key is its memory's, checked
/// with the server in this process (no socket) on every request. Its paths are the embedded
/// store's, pinned to its workspace (or `--workspace`) as over stdio: one store, one path model.
#[cfg(feature = "mcp")]
fn mcp_endpoint(
    settings: &stores::Settings,
    allowed_hosts: Vec<String>,
    allowed_origins: Vec<String>,
    sessions: mcp::sessions::SessionLimits,
) -> impl FnOnce(&str, embedded::Local, &str) -> axum::Router {
    let mut settings = settings.clone();
    move |url: &str, local: embedded::Local, workspace: &str| {
        settings
            .workspace
            .get_or_insert_with(|| workspace.to_string());
        let addr = url
            .trim_start_matches("http://")
            .parse()
            .unwrap_or_else(|_| std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        let options = mcp::http::HttpOptions {
            listen: addr.to_string(),
            contextq_url: url.to_string(),
            allowed_hosts,
            allowed_origins,
            sessions,
        };
        mcp::http::router(url, Some(local), addr, &options, settings)
    }
}

#[cfg(not(feature = "mcp"))]
fn mcp_endpoint(
    _settings: &stores::Settings,
    _allowed_hosts: Vec<String>,
    _allowed_origins: Vec<String>,
) -> impl FnOnce(&str, embedded::Local, &str) -> axum::Router {
    |_: &str, _: embedded::Local, _: &str| axum::Router::new()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // JSON logs are for a collector: the request log (one line per request) is on by default.
    let default_filter = match cli.logs.log_format {
        contextq_server::logs::LogFormat::Json => "warn,contextq::request=info,sqlx=error",
        contextq_server::logs::LogFormat::Text => "warn,sqlx=error",
    };
    contextq_server::logs::init(default_filter, cli.logs.log_format);
    // `serve` answers other processes, and `import` keeps several bulk requests in flight (one
    // request's JSON and terms made while the database commits another's): every core. Every
    // other command is one client running one command at a time (the embedded server in the
    // same process): one thread, so a request and its answer never hop between worker threads
    // (faster, measured in docs/benchmarks.md).
    let runtime = match cli.command {
        Command::Serve { .. } | Command::Import { .. } => {
            tokio::runtime::Builder::new_multi_thread()
        }
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

fn finish(summary: transfer::Summary, verb: &str) -> Result<ExitCode> {
    outln!("{}", summary.line(verb));
    Ok(if summary.failed > 0 || summary.stopped.is_some() {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn run(cli: Cli) -> Result<ExitCode> {
    let data_dir = cli.data_dir.unwrap_or_else(embedded::default_data_dir);
    let answer_budget = AnswerBudget::default()
        .listing_entries(cli.max_listing_entries)
        .listing_chars(cli.max_listing_chars)
        .read_chars(cli.max_read_chars);
    let settings = |policy: Policy| Settings {
        data_dir: data_dir.clone(),
        workspace: cli.workspace.clone(),
        read_only: policy.read_only,
        secret_guard: !policy.allow_secrets,
        answer_budget,
        durability: cli.durability,
        every_workspace: false,
        key_decides_path_model: false,
    };
    // The history commands that only read: the default policy, nothing to confirm.
    let read_history =
        async |command| history::command(&settings(Policy::default()), command, false).await;
    match cli.command {
        Command::Exec {
            store,
            timing,
            policy,
        } => {
            let failed = stores::with_opened(&store, &settings(policy), async |o| {
                exec::run(o.tool.as_ref(), timing).await
            })
            .await?;
            if failed > 0 {
                eprintln!(
                    "contextq-memory exec: {failed} command(s) failed because of the memory store (see their results); exit code 1"
                );
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Demo { policy } => {
            stores::with_opened(&StoreChoice::ContextQ, &settings(policy), demo::run).await?;
        }
        Command::Chat {
            model,
            system,
            max_tokens,
            policy,
        } => {
            let options = chat::ChatOptions {
                model,
                system,
                max_tokens,
            };
            let settings = settings(policy);
            stores::with_opened(&StoreChoice::ContextQ, &settings, async |o| {
                chat::run(o, options).await
            })
            .await?;
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
        Command::Mcp {
            http: Some(listen),
            store,
            policy,
            allowed_host,
            allowed_origin,
            sessions,
        } => {
            if !matches!(store, StoreChoice::ContextQ) {
                anyhow::bail!(
                    "--http serves a ContextQ's memories, each client with its own key: drop --store"
                );
            }
            let mut settings = settings(policy);
            // In front of CONTEXT_API_URL, or of the embedded store (started here).
            let url = std::env::var("CONTEXT_API_URL")
                .ok()
                .filter(|u| !u.trim().is_empty());
            let (url, embedded) = match url {
                Some(url) => (url, None),
                None => {
                    let opened = stores::open(&StoreChoice::ContextQ, &settings).await?;
                    let url = opened
                        .contextq
                        .as_ref()
                        .map(|c| c.url.clone())
                        .ok_or_else(|| anyhow::anyhow!("the embedded store has no URL"))?;
                    (url, Some(opened))
                }
            };
            let options = mcp::http::HttpOptions {
                listen,
                contextq_url: url,
                allowed_hosts: allowed_host,
                allowed_origins: allowed_origin,
                sessions: sessions.limits(),
            };
            // The embedded store is called in this process, without a socket.
            let local = embedded
                .as_ref()
                .and_then(|o| o.embedded.as_ref())
                .map(|e| e.local_service());
            // The embedded store's paths are pinned to its workspace whatever the transport.
            if let Some(pinned) = embedded
                .as_ref()
                .and_then(|o| o.contextq.as_ref())
                .and_then(|c| c.workspace.clone())
            {
                settings.workspace.get_or_insert(pinned);
            }
            let result = mcp::http::run(options, local, settings).await;
            if let Some(opened) = embedded {
                opened.close().await;
            }
            result?;
        }
        #[cfg(feature = "mcp")]
        Command::Mcp { store, policy, .. } => {
            let settings = Settings {
                key_decides_path_model: true,
                ..settings(policy)
            };
            stores::with_opened(&store, &settings, mcp::run).await?;
        }
        Command::Export {
            store,
            out,
            all_workspaces,
        } => {
            let settings = Settings {
                every_workspace: all_workspaces,
                ..settings(Policy::default())
            };
            let summary = stores::with_opened(&store, &settings, async |o| {
                let summary = transfer::export(o.store.as_ref(), &out).await?;
                transfer::with_workspaces(summary, o, all_workspaces).await
            })
            .await?;
            return finish(summary, "exported");
        }
        Command::Import {
            dir,
            store,
            overwrite,
            all_workspaces,
            include_hidden,
            policy,
        } => {
            let settings = Settings {
                every_workspace: all_workspaces,
                ..settings(policy)
            };
            let options = transfer::ImportOptions {
                overwrite,
                include_hidden,
            };
            let summary = stores::with_opened(&store, &settings, async |o| {
                transfer::import(o.tool.as_ref(), &dir, options).await
            })
            .await?;
            return finish(summary, "imported");
        }
        Command::Search {
            query,
            path,
            limit,
            json,
            store,
        } => {
            return stores::with_opened(&store, &settings(Policy::default()), async |o| {
                search::command(o, &query, &path, limit as usize, json).await
            })
            .await;
        }
        Command::History { path, json } => {
            return read_history(history::Command::History { path, json }).await;
        }
        Command::Show { path, version } => {
            return read_history(history::Command::Show { path, version }).await;
        }
        Command::Diff { path, a, b } => {
            return read_history(history::Command::Diff { path, a, b }).await;
        }
        Command::Restore {
            path,
            version,
            at,
            dry_run,
            yes,
            policy,
        } => {
            let command = match (version, at) {
                (Some(version), _) => history::Command::RestoreFile {
                    path,
                    version,
                    dry_run,
                },
                (None, Some(at)) => history::Command::RestoreTree {
                    dir: path,
                    at,
                    dry_run,
                },
                (None, None) => {
                    anyhow::bail!("restore needs --version N (a file) or --at TIME (a directory)")
                }
            };
            return history::command(&settings(policy), command, yes).await;
        }
        Command::Redact {
            path,
            version,
            matching,
            all_paths,
            dry_run,
            yes,
        } => {
            let what = match (version, matching) {
                (Some(n), _) => history::Redact::Version(n),
                (None, Some(text)) => history::Redact::Matching {
                    text: history::matching_text(text)?,
                    all_paths,
                },
                (None, None) => {
                    anyhow::bail!("redact needs --version N or --matching TEXT")
                }
            };
            return history::command(
                &settings(Policy::default()),
                history::Command::Redact {
                    path,
                    what,
                    dry_run,
                },
                yes,
            )
            .await;
        }
        Command::Keys { command } => keys::run(&data_dir, command).await?,
        Command::SignInLink { url } => {
            let link = embedded::sign_in_link(&data_dir, url.as_deref()).await?;
            outln!("{link}");
        }
        Command::Serve {
            listen,
            read_only,
            allowed_host,
            allowed_origin,
            #[cfg(feature = "mcp")]
            sessions,
        } => {
            let settings = settings(Policy::default());
            #[cfg(feature = "mcp")]
            let mcp = mcp_endpoint(&settings, allowed_host, allowed_origin, sessions.limits());
            #[cfg(not(feature = "mcp"))]
            let mcp = mcp_endpoint(&settings, allowed_host, allowed_origin);
            let mode = embedded::Mode {
                read_only,
                durability: settings.durability,
            };
            let server =
                embedded::Embedded::start_with(&settings.data_dir, &listen, mode, mcp).await?;
            // Recorded before it is printed: whoever read the URL finds it recorded.
            embedded::record_url(&settings.data_dir, &server.url);
            outln!("{}", server.url);
            contextq_server::logs::notice(&format!(
                "inspector: open {} (a one-time sign-in link, valid 10 minutes; `contextq-memory sign-in-link` prints a new one)",
                server.inspector_link()
            ));
            contextq_server::logs::notice(&format!(
                "serving {} ; use CONTEXT_API_URL={} and the apiKey in {} (or a key of `contextq-memory keys create` per teammate)",
                settings.data_dir.join("contextq.db").display(),
                server.url,
                settings.data_dir.join("embedded.json").display()
            ));
            #[cfg(feature = "mcp")]
            contextq_server::logs::notice(&format!(
                "MCP over HTTP: {}/mcp (each client sends Authorization: Bearer <its key>)",
                server.url
            ));
            server
                .serve_until(contextq_server::listen::stop_signal())
                .await?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
