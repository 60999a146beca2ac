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
use crate::sync::{IGNORE_FILE, Prefer, Report, Rules, SyncOptions, sync};

/// Keep a local memory folder and the store in step, both ways (docs/sync.md): changes on one
/// side are copied to the other with conditional writes; changes on both are conflicts, both
/// kept; deletes follow unless the other side changed.
#[derive(clap::Args)]
pub(crate) struct Sync {
    /// The folder (Claude Code's `~/.claude/projects/<p>/memory/`, an SDK `memories/` folder).
    pub(crate) dir: PathBuf,
    /// contextq (default), memory, local:DIR, or memory-stores:STORE_ID (docs/memory-stores.md).
    #[arg(long, default_value = "contextq")]
    pub(crate) store: StoreChoice,
    /// Where the folder's files live in the store.
    #[arg(long, default_value = "/memories")]
    pub(crate) prefix: String,
    /// In a conflict, whose content stays at the path (the other is kept beside it as
    /// NAME.conflict-HOST-TIME.EXT on both sides).
    #[arg(long, value_enum, default_value_t = Prefer::Store)]
    pub(crate) prefer: Prefer,
    /// Keep syncing: local changes within a second (file-system events, or polling where
    /// there are none), the store's within a few; Ctrl-C stops between passes.
    #[arg(long)]
    pub(crate) watch: bool,
    /// Say what a pass would do; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// One JSON object per pass instead of one line per file.
    #[arg(long)]
    pub(crate) json: bool,
    /// Also sync what `view` hides (names starting with `.`, `node_modules`); the sync's own
    /// `.contextq-sync/` never. DIR/.contextq-syncignore (gitignore's syntax) decides first:
    /// a pattern leaves names out on both sides, `!pattern` takes in a hidden one.
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

/// A cheap fingerprint of the folder: every file's path, size, time and inode (no content), as
/// the rules take them (the watch's polling, where file-system events are not to be had).
fn fingerprint(dir: &Path, include_hidden: bool) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    let Ok(rules) = Rules::of(dir, include_hidden) else {
        return 0;
    };
    let keep = Box::new(move |s: &[String], d: bool| !rules.ignored(s, d));
    if let Ok(walk) = crate::transfer::walk::Walk::filtered(dir, keep) {
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

/// How `--watch` learns of the folder's changes: the file-system's events (inotify, FSEvents,
/// ReadDirectoryChangesW through `notify`), or, where they cannot be had (no such facility,
/// the watch limit reached), a fingerprint of the folder every quarter second.
enum Local {
    Events {
        dir: PathBuf,
        events: tokio::sync::mpsc::UnboundedReceiver<notify::Result<notify::Event>>,
        // Kept alive while the events are wanted.
        _watcher: notify::RecommendedWatcher,
    },
    Poll {
        dir: PathBuf,
        seen: u64,
    },
}

impl Local {
    /// Events for `dir`, or polling (said on stderr, with why).
    fn start(dir: &Path, include_hidden: bool) -> Local {
        use notify::Watcher as _;
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let (tx, events) = tokio::sync::mpsc::unbounded_channel();
        let started = notify::recommended_watcher(move |e| {
            let _ = tx.send(e);
        })
        .and_then(|mut w| {
            w.watch(&dir, notify::RecursiveMode::Recursive)?;
            Ok(w)
        });
        match started {
            Ok(watcher) => {
                eprintln!("watching {}: file-system events", dir.display());
                Local::Events {
                    dir,
                    events,
                    _watcher: watcher,
                }
            }
            Err(e) => {
                eprintln!(
                    "watching {}: polling every 250 ms (file-system events unavailable: {e})",
                    dir.display()
                );
                let seen = fingerprint(&dir, include_hidden);
                Local::Poll { dir, seen }
            }
        }
    }

    /// Waits for a change the rules take (not the sync's own state, not an ignored name), then
    /// for the folder to be quiet for `QUIET` (at most `SETTLE` in all), so that a burst of
    /// writes is one pass.
    async fn changed(&mut self, include_hidden: bool) {
        const QUIET: Duration = Duration::from_millis(200);
        const SETTLE: Duration = Duration::from_millis(800);
        match self {
            Local::Events { dir, events, .. } => {
                let rules = Rules::of(dir, include_hidden).ok();
                loop {
                    match events.recv().await {
                        Some(Ok(e)) if !concerns(dir, rules.as_ref(), &e) => continue,
                        Some(_) => break,
                        // The watcher is gone: poll from here on.
                        None => {
                            let dir = dir.clone();
                            let seen = fingerprint(&dir, include_hidden);
                            eprintln!("watching {}: events stopped; polling", dir.display());
                            *self = Local::Poll { dir, seen };
                            return;
                        }
                    }
                }
                let until = tokio::time::Instant::now() + SETTLE;
                while let Ok(Some(_)) = tokio::time::timeout_at(
                    until.min(tokio::time::Instant::now() + QUIET),
                    events.recv(),
                )
                .await
                {}
            }
            Local::Poll { dir, seen } => loop {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let now = fingerprint(dir, include_hidden);
                if now != *seen {
                    tokio::time::sleep(QUIET).await;
                    *seen = fingerprint(dir, include_hidden);
                    return;
                }
            },
        }
    }

    /// After a pass: what the pass itself wrote is not a change to wait for (polling); events
    /// it caused are (one more pass, which finds nothing to do).
    fn passed(&mut self, include_hidden: bool) {
        if let Local::Poll { dir, seen } = self {
            *seen = fingerprint(dir, include_hidden);
        }
    }
}

/// Whether an event touches a file the sync takes (one under `.contextq-sync/` or a name the
/// rules leave out does not; the ignore file itself does, since it changes the rules).
fn concerns(dir: &Path, rules: Option<&Rules>, e: &notify::Event) -> bool {
    e.paths.is_empty()
        || e.paths.iter().any(|p| {
            let Ok(rel) = p.strip_prefix(dir) else {
                return true;
            };
            let segments: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            if segments.is_empty() {
                return false;
            }
            if segments.len() == 1 && segments[0] == IGNORE_FILE {
                return true;
            }
            match rules {
                Some(r) => !r.ignored(&segments, p.is_dir()),
                None => segments[0] != crate::sync::STATE_DIR,
            }
        })
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
            let hidden = options.include_hidden;
            let mut local = Local::start(&dir, hidden);
            // The store is asked every few seconds (its changes feed: a pass that finds nothing
            // reads no file's content and asks the store one question).
            const STORE_EVERY: Duration = Duration::from_secs(3);
            let mut next_store = tokio::time::Instant::now() + STORE_EVERY;
            loop {
                tokio::select! {
                    _ = &mut stop => return Ok(ExitCode::SUCCESS),
                    _ = tokio::time::sleep_until(next_store) => {}
                    _ = local.changed(hidden) => {}
                }
                let report = sync(store, &dir, &options).await?;
                print(&report, json)?;
                local.passed(hidden);
                next_store = tokio::time::Instant::now() + STORE_EVERY;
            }
        })
        .await
    }
}
