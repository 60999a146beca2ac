//! `contextq-memory export` and `import`: move memories between a store and a directory.
//!
//! Layout: `/memories/a/b.md` is `DIR/memories/a/b.md` — the layout the official SDKs' local
//! memory tools write, so their directories import as they are (a directory without a
//! `memories/` folder is imported as if it were that folder).
//!
//! Both are idempotent and never lose data:
//! - export writes each file atomically (temporary file + rename) and leaves files whose content
//!   is already identical untouched (counted as skipped);
//! - import creates what is missing, skips what is identical, and leaves a different existing file
//!   alone unless `--overwrite` (counted as skipped, named on stderr);
//! - a failure names the file and the rest carries on; a full store (quota) or a refused key
//!   (401, 403) stops the import at once, because every later write would be refused too.
//!
//! A progress bar is drawn on a terminal (stderr), nothing when piped; each ends with one line:
//! `exported 12 files (3.4K), skipped 2, failed 0`.

use std::borrow::Cow;
use std::collections::HashSet;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use contextq_memory_tool::contextq::ErrorCode;
use contextq_memory_tool::render::human_size;
use contextq_memory_tool::store::Page;
use contextq_memory_tool::{Error, MemoryPath, MemoryTool, PutMode, Store};

mod in_flight;
pub(crate) mod walk;

use in_flight::{Next, Queue};

/// What a transfer did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    /// Files written.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Files left as they were (identical, or existing without `--overwrite`).
    pub skipped: usize,
    /// Files that failed (each named on stderr).
    pub failed: usize,
    /// Why the run stopped early, if it did.
    pub stopped: Option<String>,
    /// Files left out because `view` hides them (a name starting with `.`, `node_modules`).
    pub hidden: usize,
    /// Which workspaces it took, and which it left out, as the summary says them.
    pub workspaces: Option<String>,
}

impl Summary {
    /// Counts one file's outcome (written, left as it was, or failed); the error, if it failed.
    fn count<E>(&mut self, outcome: std::result::Result<bool, E>) -> Option<E> {
        match outcome {
            Ok(true) => self.files += 1,
            Ok(false) => self.skipped += 1,
            Err(e) => {
                self.failed += 1;
                return Some(e);
            }
        }
        None
    }

    /// The one-line summary.
    pub fn line(&self, verb: &str) -> String {
        let files = if self.files == 1 { "file" } else { "files" };
        let mut s = format!(
            "{verb} {} {files} ({}), skipped {}, failed {}",
            self.files,
            human_size(self.bytes),
            self.skipped,
            self.failed
        );
        if self.hidden > 0 {
            s.push_str(&format!(
                "; left out {} hidden (names starting with '.', node_modules: view hides them; --include-hidden imports them)",
                self.hidden
            ));
        }
        if let Some(w) = &self.workspaces {
            s.push_str(&format!("; {w}"));
        }
        if let Some(why) = &self.stopped {
            s.push_str(&format!("; stopped early: {why}"));
        }
        s
    }
}

fn progress(len: usize) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

fn write_atomic(target: &Path, content: &[u8]) -> std::io::Result<()> {
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".cqmem-export-{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ));
    let result = (|| {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Exports every file of `store` under `out/memories/`.
pub async fn export(store: &dyn Store, out: &Path) -> Result<Summary> {
    let listing = store
        .list(&MemoryPath::root())
        .await
        .map_err(|e| anyhow::anyhow!("cannot list the memory store: {}", e.tool_message()))?
        .unwrap_or_default();
    let mut files: Vec<MemoryPath> = listing.files.into_iter().map(|f| f.path).collect();
    files.sort();
    let bar = progress(files.len());
    let mut summary = Summary::default();
    // A few files at a time: each is a read from the store and a synced write to disk.
    for group in files.chunks(IN_FLIGHT * 8) {
        let each = group.iter().map(|path| async move {
            let target = out.join("memories").join(path.relative());
            let outcome: Result<(bool, u64)> = async {
                let entry = store
                    .get(path)
                    .await
                    .map_err(|e| anyhow::anyhow!(e.tool_message()))?
                    .context("deleted while exporting")?;
                if std::fs::read(&target).is_ok_and(|old| old == entry.content.as_bytes()) {
                    return Ok((false, 0));
                }
                let content = entry.content.into_bytes();
                let len = content.len() as u64;
                let shown = target.clone();
                tokio::task::spawn_blocking(move || write_atomic(&shown, &content))
                    .await
                    .context("the writing thread failed")?
                    .with_context(|| format!("writing {}", target.display()))?;
                Ok((true, len))
            }
            .await;
            (path, outcome)
        });
        for (path, outcome) in futures::future::join_all(each).await {
            bar.set_message(path.normalized());
            let outcome = outcome.map(|(written, bytes)| {
                summary.bytes += bytes;
                written
            });
            if let Some(e) = summary.count(outcome) {
                bar.suspend(|| eprintln!("failed: {}: {e:#}", path.normalized()));
            }
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    Ok(summary)
}

/// `summary` with the workspaces the export took named, and those of the key it left out (a
/// pinned export takes one workspace: the others are said, never silently left out).
pub async fn with_workspaces(
    mut summary: Summary,
    opened: &crate::stores::Opened,
    every: bool,
) -> Result<Summary> {
    let Some(tool) = &opened.history else {
        return Ok(summary);
    };
    let all: Vec<String> = tool
        .store()
        .client()
        .list_workspaces()
        .await
        .map_err(|e| anyhow::anyhow!("cannot list the workspaces: {}", e.tool_message()))?
        .into_iter()
        .map(|w| w.slug)
        .collect();
    let pinned = opened.contextq.as_ref().and_then(|c| c.workspace.clone());
    // What an export is not: the files' history, keys and audit log stay in the store.
    let files_only = "files only: versions, keys and the audit log are not in an export (`contextq-server admin backup` keeps everything)";
    summary.workspaces = Some(match pinned.filter(|_| !every) {
        // Every workspace, or the per-workspace model (no workspace pinned): each in its
        // folder; a workspace without files has no folder.
        None => format!(
            "workspaces {} (each in its own folder; one without files has none); {files_only}",
            all.join(", ")
        ),
        Some(pinned) => pinned_summary(&all, &pinned, files_only),
    });
    Ok(summary)
}

/// What a pinned export says: its workspace, and the key's others it left out.
fn pinned_summary(all: &[String], pinned: &str, files_only: &str) -> String {
    let others: Vec<&str> = all
        .iter()
        .map(String::as_str)
        .filter(|w| *w != pinned)
        .collect();
    if others.is_empty() {
        format!("workspace {pinned}; {files_only}")
    } else {
        format!(
            "workspace {pinned} only: not exported {} (--all-workspaces takes every one); {files_only}",
            others.join(", ")
        )
    }
}

/// How an import treats what it finds.
#[derive(Debug, Clone, Copy, Default)]
pub struct ImportOptions {
    /// Replace existing files whose content differs.
    pub overwrite: bool,
    /// Also import what `view` hides.
    pub include_hidden: bool,
}

/// The folder whose contents are `/memories`: `dir/memories` if it exists, else `dir`.
fn import_root(dir: &Path) -> PathBuf {
    let sdk = dir.join("memories");
    if sdk.is_dir() { sdk } else { dir.to_path_buf() }
}

/// Imports the files under `dir` (or `dir/memories`) through `tool`, so under its write policy:
/// a read-only tool refuses the import before anything is read, and a file the secret guard
/// refuses fails (named on stderr) while the others go on.
///
/// Streaming: the folder is walked in the text order of the files' paths ([`walk::Walk`]) and
/// imported a window of [`WINDOW`] files at a time, so that what is held stays bounded however
/// many files there are. For each window, what the store holds in the window's range of paths
/// is listed page by page when the store pages ([`Store::pages`]: ContextQ with its listing
/// extensions); a store that cannot is listed once, beneath the deepest directory every file
/// shares. Files the store does not hold are created together, [`CREATE_CHUNK`] at a time,
/// through [`MemoryTool::create_many`] (ContextQ: one bulk-upsert per 100 or 1,000 files); a
/// file created by someone else meanwhile, and every file whose presence is not known, goes the
/// careful way: read, compared, then created, overwritten (`--overwrite`) or skipped. What the
/// listing says is never relied on for safety: a create never overwrites.
pub async fn import<S: Store>(
    tool: &MemoryTool<S>,
    dir: &Path,
    options: ImportOptions,
) -> Result<Summary> {
    if tool.is_read_only() {
        anyhow::bail!(Error::ReadOnly { command: "import" }.tool_message());
    }
    let store = tool.store();
    let root = import_root(dir);
    let unreadable = || format!("cannot read {}", root.display());
    // A terminal's bar needs the total (one walk more, names only); a pipe gets no bar.
    let bar = if std::io::stderr().is_terminal() {
        let mut count = 0;
        for file in walk::Walk::new(&root, options.include_hidden).with_context(unreadable)? {
            file.with_context(unreadable)?;
            count += 1;
        }
        progress(count)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let mut held = if store.pages().await {
        Held::Paged { after: None }
    } else {
        // One listing, beneath what every file shares (a walk of names to find it).
        let mut common = Common::default();
        for file in walk::Walk::new(&root, options.include_hidden).with_context(unreadable)? {
            if let Ok(path) = MemoryPath::from_segments(&file.with_context(unreadable)?.0) {
                common.add(&path);
            }
        }
        Held::Once(match store.list(&common.directory()).await {
            Ok(Some(l)) if !l.truncated => {
                Some(l.files.iter().map(|f| store.key(&f.path)).collect())
            }
            Ok(None) => Some(Default::default()),
            _ => None,
        })
    };
    let mut walk = walk::Walk::new(&root, options.include_hidden).with_context(unreadable)?;
    let mut run = Run {
        summary: Summary::default(),
        bar: &bar,
    };
    let mut claims = Claims::default();
    // Windows in order, each its refusals, its chunks to create and its end; the next window
    // is walked and listed while this one's chunks are written, and its chunks start as this
    // one's finish, so that the store always has a chunk to write.
    let mut queue: Queue<'_, Created, Mark> = Queue::new(IN_FLIGHT);
    let mut walked = false;
    // Files of the oldest window that turned out to exist (created by someone else meanwhile).
    let mut found = Vec::new();
    loop {
        if !walked && queue.marks(|m| matches!(m, Mark::End(_))) < 2 {
            let next = queue
                .drive(next_window(
                    store,
                    &mut walk,
                    &mut claims,
                    &mut held,
                    &root,
                    options.include_hidden,
                ))
                .await;
            match next {
                Ok(Some(window)) => {
                    queue.push_mark(Mark::Refused(window.refused));
                    for chunk in window.absent.chunks(CREATE_CHUNK) {
                        queue.push_task(create_chunk(tool, chunk.to_vec()));
                    }
                    queue.push_mark(Mark::End(window.present));
                }
                Ok(None) => walked = true,
                Err(e) => {
                    queue.finish().await;
                    return Err(e.context(unreadable()));
                }
            }
            continue;
        }
        let stop = match queue.next().await {
            None => break,
            Some(Next::Mark(Mark::Refused(refused))) => {
                for (shown, e) in refused {
                    run.outcome(&shown, Err(e));
                }
                false
            }
            Some(Next::Done(created)) => run.created(created, &mut found),
            Some(Next::Mark(Mark::End(mut present))) => {
                present.append(&mut found);
                queue
                    .drive(import_present(tool, present, options.overwrite, &mut run))
                    .await
            }
        };
        if stop {
            queue.finish().await;
            break;
        }
    }
    run.summary.hidden = walk.hidden;
    bar.finish_and_clear();
    Ok(run.summary)
}

/// A window of an import's files: those refused by name, those the store does not hold (to
/// create together) and those it may hold (the careful way).
struct Window {
    refused: Vec<(String, Error)>,
    absent: Vec<Ready>,
    present: Vec<Ready>,
}

/// What an import's queue holds besides its chunks.
enum Mark {
    /// A window's files refused by name, reported where the window starts.
    Refused(Vec<(String, Error)>),
    /// A window's end, with its files the store may hold.
    End(Vec<Ready>),
}

/// A chunk's files as read, and the store's answer for those read.
type Created = (
    Vec<(Ready, Result<String, Error>)>,
    Vec<Result<Option<contextq_memory_tool::Version>, Error>>,
);

/// The next window of at most [`WINDOW`] files from `walk` (`None` when the walk is done),
/// split by what the store holds.
async fn next_window<S: Store>(
    store: &S,
    walk: &mut walk::Walk,
    claims: &mut Claims,
    held: &mut Held,
    root: &Path,
    include_hidden: bool,
) -> Result<Option<Window>> {
    let mut window = Vec::with_capacity(WINDOW);
    let mut refused = Vec::new();
    for file in walk.by_ref() {
        let (segments, fs_path) = file?;
        let shown = fs_path.display().to_string();
        match claims.claim(store, &segments, &shown, root, include_hidden) {
            Ok(path) => window.push(Ready {
                shown,
                path,
                fs_path,
            }),
            Err(e) => refused.push((shown, e)),
        }
        if window.len() == WINDOW {
            break;
        }
    }
    if window.is_empty() {
        // Refusals after the last window's files still count.
        return Ok((!refused.is_empty()).then(|| Window {
            refused,
            absent: Vec::new(),
            present: Vec::new(),
        }));
    }
    let known = held.of(store, &window).await;
    let (absent, present): (Vec<Ready>, Vec<Ready>) = window.into_iter().partition(|r| {
        known
            .as_ref()
            .is_some_and(|h| !h.contains(&store.key(&r.path)))
    });
    Ok(Some(Window {
        refused,
        absent,
        present,
    }))
}

/// Reads `chunk`'s files and creates them together (when the queue starts it: a chunk waiting
/// holds only its paths).
fn create_chunk<S: Store>(
    tool: &MemoryTool<S>,
    chunk: Vec<Ready>,
) -> futures::future::LocalBoxFuture<'_, Created> {
    Box::pin(async move {
        let read: Vec<(Ready, Result<String, Error>)> = chunk
            .into_iter()
            .map(|f| {
                let text = read_text(&f.fs_path);
                (f, text)
            })
            .collect();
        let batch: Vec<(MemoryPath, String)> = read
            .iter()
            .filter_map(|(f, r)| r.as_ref().ok().map(|c| (f.path.clone(), c.clone())))
            .collect();
        let created = tool.create_many("import", &batch).await;
        (read, created)
    })
}

/// The files the store may hold (`present`): each read, compared, then written or left alone,
/// a few at a time. `true` when the import must stop.
async fn import_present<S: Store>(
    tool: &MemoryTool<S>,
    present: Vec<Ready>,
    overwrite: bool,
    run: &mut Run<'_>,
) -> bool {
    let store = tool.store();
    let bar = run.bar;
    for group in present.chunks(IN_FLIGHT * 8) {
        let each = group.iter().map(|file| async move {
            let outcome: Result<(bool, u64), Error> = async {
                let content = &read_text(&file.fs_path)?;
                let path = &file.path;
                match store.get(path).await? {
                    Some(existing) if existing.content == *content => Ok((false, 0)),
                    Some(existing) if overwrite => {
                        let mode = existing.version.map_or(PutMode::Overwrite, PutMode::Update);
                        tool.put("import", path, content, mode).await?;
                        Ok((true, content.len() as u64))
                    }
                    Some(_) => {
                        bar.suspend(|| {
                            eprintln!(
                                "skipped: {} exists with other content (use --overwrite)",
                                path.normalized()
                            )
                        });
                        Ok((false, 0))
                    }
                    None => {
                        tool.put("import", path, content, PutMode::Create).await?;
                        Ok((true, content.len() as u64))
                    }
                }
            }
            .await;
            (file, outcome)
        });
        for (file, outcome) in futures::future::join_all(each).await {
            bar.set_message(file.path.normalized());
            let outcome = outcome.map(|(written, bytes)| {
                run.summary.bytes += bytes;
                written
            });
            if run.outcome(&file.shown, outcome) {
                return true;
            }
        }
    }
    false
}

/// Files an import reads and sends per window: the most it holds at once (their paths; their
/// contents a chunk of [`CREATE_CHUNK`] at a time, [`IN_FLIGHT`] chunks in flight).
pub const WINDOW: usize = CREATE_CHUNK * IN_FLIGHT;

/// What the store holds of an import's files, as their keys.
enum Held {
    /// Listed per window, in the window's range of paths; `after`: the last path of the
    /// previous window, where this one's range starts.
    Paged { after: Option<MemoryPath> },
    /// Listed once (`None`: the store could not say for every file).
    Once(Option<std::collections::HashSet<String>>),
}

/// Files per page of a window's listing (the server's largest page).
const LIST_PAGE: usize = 500;

impl Held {
    /// The keys the store holds among `window`'s paths (`None`: not known, every file goes the
    /// careful way). Paged: the files after the previous window's last path up to this one's,
    /// beneath the directory the window's files share; a failed listing is `None`.
    async fn of<'a, S: Store>(
        &'a mut self,
        store: &S,
        window: &[Ready],
    ) -> Option<Cow<'a, HashSet<String>>> {
        let after = match self {
            Held::Once(keys) => return keys.as_ref().map(Cow::Borrowed),
            Held::Paged { after } => after,
        };
        let last = window.iter().map(|r| r.path.normalized()).max()?;
        let first = window.iter().map(|r| r.path.normalized()).min()?;
        let mut common = Common::default();
        window.iter().for_each(|r| common.add(&r.path));
        let dir = common.directory();
        let mut keys = HashSet::new();
        let mut from = later(after.take(), just_before(&first));
        *after = MemoryPath::parse(&last).ok();
        loop {
            let page = Page {
                after: from.as_ref(),
                limit: LIST_PAGE,
            };
            let files = store.list_after(&dir, page).await.ok()?;
            let mut past = false;
            for f in &files {
                if f.path.normalized() > last {
                    past = true;
                    break;
                }
                keys.insert(store.key(&f.path));
            }
            match files.last() {
                Some(f) if files.len() == LIST_PAGE && !past => from = Some(f.path.clone()),
                _ => return Some(Cow::Owned(keys)),
            }
        }
    }
}

/// A path that sorts before `first` and after nearly every path that does: `first` less its
/// last character (a path has no predecessor to name), so that a window's listing starts at
/// its own files, not at the start of its directory (whatever the store holds there before
/// them). `None` when that is no path, or does not sort before `first`.
fn just_before(first: &str) -> Option<MemoryPath> {
    let (cut, _) = first.char_indices().last()?;
    MemoryPath::parse(&first[..cut])
        .ok()
        .filter(|p| p.normalized().as_str() < first)
}

/// The later of two positions to list after.
fn later(a: Option<MemoryPath>, b: Option<MemoryPath>) -> Option<MemoryPath> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if b.normalized() > a.normalized() {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

/// How many chunks of [`CREATE_CHUNK`] files an import has in flight at once (and, times 8, how
/// many single files); an export reads this many times 8 files at once.
pub const IN_FLIGHT: usize = 4;

/// How many files [`import`] hands to [`MemoryTool::create_many`] at once (the store splits
/// them into its own requests; this bounds what is held and how often the bar moves).
pub const CREATE_CHUNK: usize = 1_000;

/// A file read and checked, ready to import.
#[derive(Clone)]
struct Ready {
    /// The file on disk, as named in messages.
    shown: String,
    path: MemoryPath,
    fs_path: PathBuf,
}

/// An import's count and progress bar.
struct Run<'a> {
    summary: Summary,
    bar: &'a indicatif::ProgressBar,
}

impl Run<'_> {
    /// Counts a chunk's outcomes in order; a file found to exist joins `found` (the careful
    /// way, at its window's end). `true` when the import must stop.
    fn created(&mut self, (read, created): Created, found: &mut Vec<Ready>) -> bool {
        let mut created = created.into_iter();
        for (file, text) in read {
            self.bar.set_message(file.path.normalized());
            let result = match text {
                Err(e) => Err(e),
                Ok(content) => match created.next() {
                    Some(Ok(_)) => {
                        self.summary.bytes += content.len() as u64;
                        Ok(true)
                    }
                    Some(Err(Error::AlreadyExists { .. })) => {
                        found.push(file);
                        continue;
                    }
                    Some(Err(e)) => Err(e),
                    None => continue,
                },
            };
            if self.outcome(&file.shown, result) {
                return true;
            }
        }
        false
    }

    /// Counts one file's outcome and names a failure on stderr; `true` when the import must stop
    /// (a full store, a refused key: every later write would be refused too).
    fn outcome(&mut self, shown: &str, outcome: std::result::Result<bool, Error>) -> bool {
        self.bar.inc(1);
        let Some(e) = self.summary.count(outcome) else {
            return false;
        };
        let stop = matches!(
            e.contextq_code(),
            Some(ErrorCode::Unauthorized | ErrorCode::QuotaExceeded | ErrorCode::Forbidden)
        );
        self.bar.suspend(|| {
            eprintln!("failed: {shown}: {}", e.tool_message());
            if let Some(hint) = crate::stores::hint(&e) {
                eprintln!("hint: {hint}");
            }
        });
        if stop {
            self.summary.stopped = Some(e.tool_message());
        }
        stop
    }
}

/// The deepest directory that holds every file added (`/memories` when they share none).
#[derive(Default)]
struct Common(Option<Vec<String>>);

impl Common {
    fn add(&mut self, file: &MemoryPath) {
        let dir = &file.segments()[..file.segments().len().saturating_sub(1)];
        self.0 = Some(match self.0.take() {
            None => dir.to_vec(),
            Some(mut c) => {
                let same = c.iter().zip(dir).take_while(|(a, b)| a == b).count();
                c.truncate(same);
                c
            }
        });
    }

    fn directory(&self) -> MemoryPath {
        self.0
            .as_ref()
            .and_then(|c| MemoryPath::from_segments(c).ok())
            .unwrap_or_else(MemoryPath::root)
    }
}

/// The keys ([`Store::key`]) an import has claimed, so that a second file the store would keep
/// as the same one as an earlier file fails, named with it, instead of overwriting it. Held as
/// 128-bit digests (about 32 bytes a file, never the names); the earlier file's name is found
/// by one more walk of the folder when a collision first happens.
#[derive(Default)]
struct Claims {
    seen: HashSet<u128>,
    names: Option<std::collections::HashMap<u128, String>>,
}

fn digest(key: &str) -> u128 {
    use std::hash::{Hash as _, Hasher as _};
    let half = |salt: u8| {
        let mut h = std::hash::DefaultHasher::new();
        salt.hash(&mut h);
        key.hash(&mut h);
        h.finish()
    };
    (u128::from(half(0)) << 64) | u128::from(half(1))
}

impl Claims {
    /// The path of the file at `segments` below `/memories`, unless an earlier file of this
    /// import (walked from `root`) has its key.
    fn claim<S: Store>(
        &mut self,
        store: &S,
        segments: &[String],
        shown: &str,
        root: &Path,
        include_hidden: bool,
    ) -> Result<MemoryPath, Error> {
        let path = MemoryPath::from_segments(segments)?;
        let key = digest(&store.key(&path));
        if self.seen.insert(key) {
            return Ok(path);
        }
        let names = self.names.get_or_insert_with(|| {
            let mut names = std::collections::HashMap::new();
            for (segments, _) in walk::Walk::new(root, include_hidden)
                .into_iter()
                .flatten()
                .flatten()
            {
                if let Ok(p) = MemoryPath::from_segments(&segments) {
                    names
                        .entry(digest(&store.key(&p)))
                        .or_insert_with(|| p.normalized());
                }
            }
            names
        });
        let first = names
            .get(&key)
            .cloned()
            .unwrap_or_else(|| "an earlier file".into());
        Err(Error::Io {
            operation: "import",
            path: shown.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} and {first} are one file in this store (its names are not case-sensitive here); not imported, rename one of them",
                    path.normalized(),
                ),
            ),
        })
    }
}

/// The file `fs_path` as UTF-8 text.
fn read_text(fs_path: &Path) -> Result<String, Error> {
    let shown = fs_path.display().to_string();
    let bytes = std::fs::read(fs_path).map_err(|source| Error::Io {
        operation: "read",
        path: shown.clone(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|_| Error::Io {
        operation: "read",
        path: shown,
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "not UTF-8 text: memory files are text",
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use contextq_memory_tool::store::{Entry, Listing};
    use contextq_memory_tool::{MemoryStore, Version};

    /// A store whose listings leave out `hidden`: files another writer created after the
    /// import listed its window, so that the import believes them absent and creates them.
    struct CreatedMeanwhile {
        inner: MemoryStore,
        hidden: Vec<MemoryPath>,
    }

    #[contextq_memory_tool::async_trait]
    impl Store for CreatedMeanwhile {
        async fn get(&self, path: &MemoryPath) -> contextq_memory_tool::Result<Option<Entry>> {
            self.inner.get(path).await
        }
        async fn list(&self, dir: &MemoryPath) -> contextq_memory_tool::Result<Option<Listing>> {
            let mut listing = self.inner.list(dir).await?;
            if let Some(l) = &mut listing {
                l.files.retain(|f| !self.hidden.contains(&f.path));
            }
            Ok(listing)
        }
        async fn put(
            &self,
            path: &MemoryPath,
            text: &str,
            mode: PutMode,
        ) -> contextq_memory_tool::Result<Option<Version>> {
            self.inner.put(path, text, mode).await
        }
        async fn delete(
            &self,
            path: &MemoryPath,
            expected: Option<Version>,
        ) -> contextq_memory_tool::Result<()> {
            self.inner.delete(path, expected).await
        }
    }

    /// Files created by another writer between a window's listing and its creates are refused
    /// by the create (never overwritten) and settled the careful way at their own window's
    /// end, in the first window and in the second: one held with other content is skipped and
    /// kept as it was, one held with the same content is skipped as identical.
    #[tokio::test]
    async fn files_created_meanwhile_are_settled_in_their_window() {
        let src = tempfile::tempdir().unwrap();
        let d = src.path().join("memories").join("d");
        std::fs::create_dir_all(&d).unwrap();
        const FILES: usize = WINDOW + 100;
        for i in 0..FILES {
            std::fs::write(d.join(format!("f{i:05}.md")), format!("note {i}\n")).unwrap();
        }
        let path = |i: usize| MemoryPath::parse(&format!("/memories/d/f{i:05}.md")).unwrap();
        let (other, same) = (path(10), path(WINDOW + 50));
        let inner = MemoryStore::new();
        inner
            .put(&other, "theirs\n", PutMode::Create)
            .await
            .unwrap();
        let same_text = format!("note {}\n", WINDOW + 50);
        inner.put(&same, &same_text, PutMode::Create).await.unwrap();
        let tool = MemoryTool::new(CreatedMeanwhile {
            inner,
            hidden: vec![other.clone(), same.clone()],
        });
        let summary = import(&tool, src.path(), ImportOptions::default())
            .await
            .unwrap();
        assert_eq!(
            (summary.files, summary.skipped, summary.failed),
            (FILES - 2, 2, 0),
            "{summary:?}"
        );
        let store = tool.store();
        assert_eq!(
            store.get(&other).await.unwrap().unwrap().content,
            "theirs\n"
        );
        assert_eq!(store.get(&same).await.unwrap().unwrap().content, same_text);
        let last = store.get(&path(FILES - 1)).await.unwrap().unwrap();
        assert_eq!(last.content, format!("note {}\n", FILES - 1));
    }

    fn dir_of(files: &[&str]) -> String {
        let paths: Vec<MemoryPath> = files
            .iter()
            .map(|f| MemoryPath::parse(f).unwrap())
            .collect();
        let mut common = Common::default();
        paths.iter().for_each(|p| common.add(p));
        common.directory().normalized()
    }

    #[test]
    fn import_lists_only_the_directory_its_files_share() {
        assert_eq!(
            dir_of(&["/memories/a/b/x.md", "/memories/a/b/c/y.md"]),
            "/memories/a/b"
        );
        assert_eq!(
            dir_of(&["/memories/a/b/x.md", "/memories/a/c/y.md"]),
            "/memories/a"
        );
        assert_eq!(dir_of(&["/memories/a/x.md", "/memories/b.md"]), "/memories");
        assert_eq!(dir_of(&["/memories/a/x.md"]), "/memories/a");
        assert_eq!(dir_of(&[]), "/memories");
        // A name that is only a prefix of another is not a shared directory.
        assert_eq!(
            dir_of(&["/memories/ab/x.md", "/memories/a/y.md"]),
            "/memories"
        );
    }
}
