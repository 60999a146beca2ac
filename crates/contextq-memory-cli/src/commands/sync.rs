//! `contextq-memory sync DIR`: its arguments, its report, and `--watch`; the three-way pass
//! itself is `crate::sync`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context as _, Result};
use contextq_memory_tool::MemoryPath;

use super::{Context, Policy};
use crate::out::outln;
use crate::stores::{self, StoreChoice};
use crate::sync::{Prefer, Report, SyncOptions, sync};

/// Keep a local memory folder and the store in step, both ways (docs/sync.md): changes on one
/// side are copied to the other with conditional writes; changes on both are conflicts, both
/// kept; deletes follow unless the other side changed.
#[derive(clap::Args)]
pub(crate) struct Sync {
    /// The folder (Claude Code's `~/.claude/projects/<p>/memory/`, an SDK `memories/` folder).
    pub(crate) dir: PathBuf,
    /// contextq (default), memory, or local:DIR.
    #[arg(long, default_value = "contextq")]
    pub(crate) store: StoreChoice,
    /// Where the folder's files live in the store.
    #[arg(long, default_value = "/memories")]
    pub(crate) prefix: String,
    /// In a conflict, whose content stays at the path (the other is kept beside it as
    /// NAME.conflict-HOST-TIME.EXT on both sides).
    #[arg(long, value_enum, default_value_t = Prefer::Store)]
    pub(crate) prefer: Prefer,
    /// Keep syncing: local changes within a second, the store's within a few; Ctrl-C stops
    /// between passes.
    #[arg(long)]
    pub(crate) watch: bool,
    /// Say what a pass would do; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON object per pass instead of one line per file.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also sync what `view` hides (names starting with `.`, `node_modules`); the sync's own
    /// `.contextq-sync/` never.
    #[arg(long)]
    pub(crate) include_hidden: bool,
    #[command(flatten)]
    pub(crate) policy: Policy,
}

/// This machine's name, for conflict files.
fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into())
}

fn print(report: &Report, json: bool) -> Result<()> {
    if json {
        outln!("{}", serde_json::to_string(report)?);
        return Ok(());
    }
    for a in &report.actions {
        match &a.detail {
            Some(d) => outln!("{} {}: {d}", a.action, a.path),
            None => outln!("{} {}", a.action, a.path),
        }
    }
    Ok(())
}

/// A cheap fingerprint of the folder: every file's path, size, time and inode (no content).
fn fingerprint(dir: &Path, include_hidden: bool) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    if let Ok(walk) = crate::transfer::walk::Walk::new(dir, include_hidden) {
        for (segments, disk) in walk.flatten() {
            segments.hash(&mut h);
            if let Ok(m) = std::fs::metadata(&disk) {
                m.len().hash(&mut h);
                m.modified().ok().hash(&mut h);
            }
        }
    }
    h.finish()
}

impl Sync {
    pub(crate) async fn run(self, cx: &Context) -> Result<ExitCode> {
        let prefix = MemoryPath::parse(&self.prefix)
            .with_context(|| format!("--prefix {:?}: a path below /memories", self.prefix))?;
        let options = SyncOptions {
            prefix,
            prefer: self.prefer,
            dry_run: self.dry_run,
            host: host(),
            include_hidden: self.include_hidden,
        };
        let settings = cx.settings(self.policy);
        let (dir, json, watch) = (self.dir.clone(), self.json, self.watch);
        stores::with_opened(&self.store, &settings, async |o| {
            let store = o.store.as_ref();
            let report = sync(store, &dir, &options).await?;
            print(&report, json)?;
            if !watch || options.dry_run {
                return Ok(ExitCode::SUCCESS);
            }
            // Ctrl-C is answered between passes only, so a pass and its baseline finish whole.
            let stop = tokio::signal::ctrl_c();
            tokio::pin!(stop);
            let mut seen = fingerprint(&dir, options.include_hidden);
            let mut ticks = 0u32;
            loop {
                tokio::select! {
                    _ = &mut stop => return Ok(ExitCode::SUCCESS),
                    _ = tokio::time::sleep(Duration::from_millis(250)) => {}
                }
                ticks += 1;
                let now = fingerprint(&dir, options.include_hidden);
                // A local change: a pass after a quarter second of quiet; the store: every 3 s.
                if now != seen || ticks.is_multiple_of(12) {
                    if now != seen {
                        tokio::time::sleep(Duration::from_millis(250)).await;
                    }
                    let report = sync(store, &dir, &options).await?;
                    print(&report, json)?;
                    seen = fingerprint(&dir, options.include_hidden);
                }
            }
        })
        .await
    }
}
