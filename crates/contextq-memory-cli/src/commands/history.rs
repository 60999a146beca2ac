//! `contextq-memory history`, `show`, `diff`, `restore` and `redact`: a file's versions.

use std::process::ExitCode;

use anyhow::Result;

use super::{Context, Policy};
use crate::history;

/// The versions of a memory file: number, time, action, size, key (masked).
#[derive(clap::Args)]
pub(crate) struct History {
    /// The file, e.g. /memories/notes.md.
    pub(crate) path: String,
    /// One JSON object per version per line instead of a table.
    #[arg(long)]
    pub(crate) json: bool,
}

impl History {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let History { path, json } = self;
        read_history(cx, history::Command::History { path, json }).await
    }
}

/// Print one version of a memory file.
#[derive(clap::Args)]
pub(crate) struct Show {
    /// The file.
    pub(crate) path: String,
    /// The version (a number from `history`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) version: u64,
}

impl Show {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Show { path, version } = self;
        read_history(cx, history::Command::Show { path, version }).await
    }
}

/// A unified diff between two versions of a file [default: the newest and the one before;
/// with one version: that one and the newest].
#[derive(clap::Args)]
pub(crate) struct Diff {
    /// The file.
    pub(crate) path: String,
    /// The older version.
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) a: Option<u64>,
    /// The newer version.
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) b: Option<u64>,
}

impl Diff {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Diff { path, a, b } = self;
        read_history(cx, history::Command::Diff { path, a, b }).await
    }
}

/// Restore a file to a version (--version N), or a file or directory to a point in time
/// (--at TIME): shows the plan, then does it, each write conditional on what was planned.
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("to").required(true).args(["version", "at"])))]
pub(crate) struct Restore {
    /// The file (with --version) or directory (with --at).
    pub(crate) path: String,
    /// The version to restore the file to.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) version: Option<u64>,
    /// The point in time to restore the file or directory to (not in the future): as
    /// `history` shows it (2026-12-03T10:00:00Z), a date and time (2026-12-03 10:00, UTC),
    /// a date (2026-12-03, its start) or a time ago (10 minutes ago, 2h ago).
    #[arg(long)]
    pub(crate) at: Option<String>,
    /// Show the plan only; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Do not ask for confirmation on a terminal (a directory's restore asks).
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
    #[command(flatten)]
    pub(crate) policy: Policy,
}

impl Restore {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Restore {
            path,
            version,
            at,
            dry_run,
            yes,
            policy,
        } = self;
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
        history::command(&cx.settings(policy), command, yes).await
    }
}

/// Remove a secret from a file's history for good: the content of one version
/// (--version N), or of every version holding a text (--matching TEXT, `-` to read it from
/// stdin). Shows the plan, then redacts, then reports exactly which versions. The file's
/// current content is never redacted: edit or delete it first. Needs an admin key of the
/// whole tenant (the embedded default's is).
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("what").required(true).args(["version", "matching"])))]
pub(crate) struct Redact {
    /// The file; with --all-paths, a directory (every file beneath it).
    pub(crate) path: String,
    /// The version to redact (a number from `history`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub(crate) version: Option<u64>,
    /// Redact every version whose content holds this text (exact, case-sensitive); `-`
    /// reads it from stdin (one line), so that it stays out of shell history.
    #[arg(long)]
    pub(crate) matching: Option<String>,
    /// With --matching: every file beneath PATH (a directory; /memories for all).
    #[arg(long, requires = "matching")]
    pub(crate) all_paths: bool,
    /// Show the plan only; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Do not ask for confirmation on a terminal.
    #[arg(long, short = 'y')]
    pub(crate) yes: bool,
}

impl Redact {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Redact {
            path,
            version,
            matching,
            all_paths,
            dry_run,
            yes,
        } = self;
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
        history::command(
            &cx.settings(Policy::default()),
            history::Command::Redact {
                path,
                what,
                dry_run,
            },
            yes,
        )
        .await
    }
}

/// A history command that only reads: the default policy, nothing to confirm.
async fn read_history(cx: &Context, command: history::Command) -> Result<ExitCode> {
    history::command(&cx.settings(Policy::default()), command, false).await
}
