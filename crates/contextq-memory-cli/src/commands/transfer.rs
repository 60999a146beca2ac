//! `contextq-memory export` and `import`: their arguments and summaries; the copying is
//! `crate::transfer`.

use std::process::ExitCode;

use anyhow::Result;

use super::{Context, Policy};
use std::path::PathBuf;

use crate::stores::{self, Settings, StoreChoice};
use crate::transfer;

/// Write every memory file under DIR/memories/ (atomic, idempotent).
#[derive(clap::Args)]
pub(crate) struct Export {
    /// contextq (default), memory, local:DIR, or memory-stores:STORE_ID (docs/memory-stores.md).
    #[arg(long, default_value = "contextq")]
    pub(crate) store: StoreChoice,
    /// The directory to write (files land in OUT/memories/...).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Every workspace the key reaches, each in its own folder (OUT/memories/WORKSPACE/...),
    /// instead of the pinned one; `import --all-workspaces` restores them.
    #[arg(long, conflicts_with = "workspace")]
    pub(crate) all_workspaces: bool,
}

impl Export {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Export {
            store,
            out,
            all_workspaces,
        } = self;
        let settings = Settings {
            every_workspace: all_workspaces,
            ..cx.settings(Policy::default())
        };
        let summary = stores::with_opened(&store, &settings, async |o| {
            let summary = transfer::export(o.store.as_ref(), &out).await?;
            transfer::with_workspaces(summary, o, all_workspaces).await
        })
        .await?;
        super::finish(summary, "exported")
    }
}

/// Load a directory (DIR/memories/... as the official SDKs write it, or DIR/...) into the store.
#[derive(clap::Args)]
pub(crate) struct Import {
    /// The directory to read.
    pub(crate) dir: PathBuf,
    /// contextq (default), memory, local:DIR, or memory-stores:STORE_ID (docs/memory-stores.md).
    #[arg(long, default_value = "contextq")]
    pub(crate) store: StoreChoice,
    /// Replace existing files whose content differs (default: leave them, counted as skipped).
    #[arg(long)]
    pub(crate) overwrite: bool,
    /// Each first folder is a workspace (as `export --all-workspaces` writes them), created
    /// when missing, instead of everything going into the pinned workspace.
    #[arg(long, conflicts_with = "workspace")]
    pub(crate) all_workspaces: bool,
    /// Also import what `view` hides (names starting with `.`, such as `.git`, and
    /// `node_modules`); by default they are skipped and counted.
    #[arg(long)]
    pub(crate) include_hidden: bool,
    #[command(flatten)]
    pub(crate) policy: Policy,
}

impl Import {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let Import {
            dir,
            store,
            overwrite,
            all_workspaces,
            include_hidden,
            policy,
        } = self;
        let settings = Settings {
            every_workspace: all_workspaces,
            ..cx.settings(policy)
        };
        let options = transfer::ImportOptions {
            overwrite,
            include_hidden,
        };
        let summary = stores::with_opened(&store, &settings, async |o| {
            transfer::import(o.tool.as_ref(), &dir, options).await
        })
        .await?;
        super::finish(summary, "imported")
    }
}
