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

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use contextq_memory_tool::contextq::ErrorCode;
use contextq_memory_tool::render::human_size;
use contextq_memory_tool::{Error, MemoryPath, MemoryTool, PutMode, Store};

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

/// The files beneath `dir`, as path segments below it; what `view` hides is counted in
/// `hidden` (with everything beneath it) unless `include_hidden`.
fn collect(
    dir: &Path,
    rel: &mut Vec<String>,
    out: &mut Vec<(Vec<String>, PathBuf)>,
    include_hidden: bool,
    hidden: &mut usize,
) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let meta = std::fs::symlink_metadata(e.path())?;
        let name = e.file_name().to_string_lossy().to_string();
        if meta.file_type().is_symlink() || name.starts_with(".cqmem-") {
            continue;
        }
        if !include_hidden && contextq_memory_tool::render::hidden(&name) {
            let mut skipped = Vec::new();
            if meta.is_dir() {
                collect(&e.path(), &mut Vec::new(), &mut skipped, true, &mut 0)?;
                *hidden += skipped.len();
            } else if meta.is_file() {
                *hidden += 1;
            }
            continue;
        }
        rel.push(name);
        if meta.is_dir() {
            collect(&e.path(), rel, out, include_hidden, hidden)?;
        } else if meta.is_file() {
            out.push((rel.clone(), e.path()));
        }
        rel.pop();
    }
    Ok(())
}

/// Imports the files under `dir` (or `dir/memories`) through `tool`, so under its write policy:
/// a read-only tool refuses the import before anything is read, and a file the secret guard
/// refuses fails (named on stderr) while the others go on.
///
/// Files the store does not hold (one listing of the store says which) are created together,
/// [`CREATE_CHUNK`] at a time, through [`MemoryTool::create_many`] (ContextQ: one bulk-upsert per
/// 100 files); a file created by someone else meanwhile, and every file when the store cannot
/// list everything, goes the careful way: read, compared, then created, overwritten
/// (`--overwrite`) or skipped.
pub async fn import<S: Store>(
    tool: &MemoryTool<S>,
    dir: &Path,
    options: ImportOptions,
) -> Result<Summary> {
    let ImportOptions {
        overwrite,
        include_hidden,
    } = options;
    if tool.is_read_only() {
        anyhow::bail!(Error::ReadOnly { command: "import" }.tool_message());
    }
    let store = tool.store();
    let root = import_root(dir);
    let mut files = Vec::new();
    let mut hidden = 0;
    collect(
        &root,
        &mut Vec::new(),
        &mut files,
        include_hidden,
        &mut hidden,
    )
    .with_context(|| format!("cannot read {}", root.display()))?;
    let bar = progress(files.len());
    let mut run = Run {
        summary: Summary {
            hidden,
            ..Summary::default()
        },
        bar: &bar,
    };
    // Files that the store keeps as one (Store::key): the first is imported, each later one
    // fails, named with the one it collides with, instead of silently overwriting it.
    let mut keys: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut ready = Vec::with_capacity(files.len());
    for (segments, fs_path) in files {
        let shown = fs_path.display().to_string();
        match claim(store, &mut keys, &segments, &shown) {
            Ok(path) => ready.push(Ready {
                shown,
                path,
                fs_path,
            }),
            Err(e) => {
                run.outcome(&shown, Err(e));
            }
        }
    }

    // What the store holds already, by key (`None`: it cannot say for all), beneath the
    // deepest directory holding every file imported: not the whole store when they share one.
    let held: Option<std::collections::HashSet<String>> = match store
        .list(&common_directory(ready.iter().map(|r| &r.path)))
        .await
    {
        Ok(Some(l)) if !l.truncated => Some(l.files.iter().map(|f| store.key(&f.path)).collect()),
        Ok(None) => Some(Default::default()),
        _ => None,
    };
    let (absent, mut present): (Vec<Ready>, Vec<Ready>) = ready.into_iter().partition(|r| {
        held.as_ref()
            .is_some_and(|h| !h.contains(&store.key(&r.path)))
    });

    // A few chunks in flight at a time (the requests of one overlap the reading and sending of
    // the next); outcomes are counted in order, and a stop lets those in flight finish.
    'created: for group in absent.chunks(CREATE_CHUNK * IN_FLIGHT) {
        let chunks = group.chunks(CREATE_CHUNK).map(|chunk| async move {
            // Read a chunk at a time: what is held stays bounded, whatever the directory holds.
            let read: Vec<(&Ready, Result<String, Error>)> =
                chunk.iter().map(|f| (f, read_text(&f.fs_path))).collect();
            let batch: Vec<(MemoryPath, String)> = read
                .iter()
                .filter_map(|(f, r)| r.as_ref().ok().map(|c| (f.path.clone(), c.clone())))
                .collect();
            let created = tool.create_many("import", &batch).await;
            (read, created)
        });
        for (read, created) in futures::future::join_all(chunks).await {
            let mut created = created.into_iter();
            for (file, text) in read {
                bar.set_message(file.path.normalized());
                let result = match text {
                    Err(e) => Err(e),
                    Ok(content) => match created.next() {
                        Some(Ok(_)) => {
                            run.summary.bytes += content.len() as u64;
                            Ok(true)
                        }
                        Some(Err(Error::AlreadyExists { .. })) => {
                            present.push(file.clone());
                            continue;
                        }
                        Some(Err(e)) => Err(e),
                        None => continue,
                    },
                };
                if run.outcome(&file.shown, result) {
                    break 'created;
                }
            }
        }
    }
    if run.summary.stopped.is_some() {
        bar.finish_and_clear();
        return Ok(run.summary);
    }

    // Files the store may hold: read, compared, then written or left alone, a few at a time.
    let shared_bar = &bar;
    for group in present.chunks(IN_FLIGHT * 8) {
        let each = group.iter().map(|file| async move {
            let bar = shared_bar;
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
                bar.finish_and_clear();
                return Ok(run.summary);
            }
        }
    }
    bar.finish_and_clear();
    Ok(run.summary)
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

/// The deepest directory that holds every one of `files` (`/memories` when they share none).
fn common_directory<'a>(files: impl Iterator<Item = &'a MemoryPath>) -> MemoryPath {
    let mut common: Option<Vec<String>> = None;
    for file in files {
        let dir = &file.segments()[..file.segments().len().saturating_sub(1)];
        common = Some(match common {
            None => dir.to_vec(),
            Some(mut c) => {
                let same = c.iter().zip(dir).take_while(|(a, b)| a == b).count();
                c.truncate(same);
                c
            }
        });
    }
    common
        .and_then(|c| MemoryPath::from_segments(&c).ok())
        .unwrap_or_else(MemoryPath::root)
}

/// The path of the file at `segments` below `/memories`, refusing a second file the store
/// would keep under the same key as an earlier one.
fn claim<S: Store>(
    store: &S,
    keys: &mut std::collections::HashMap<String, String>,
    segments: &[String],
    shown: &str,
) -> Result<MemoryPath, Error> {
    let path = MemoryPath::from_segments(segments)?;
    match keys.entry(store.key(&path)) {
        std::collections::hash_map::Entry::Occupied(first) => Err(Error::Io {
            operation: "import",
            path: shown.to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} and {} are one file in this store (its names are not case-sensitive here); not imported, rename one of them",
                    path.normalized(),
                    first.get()
                ),
            ),
        }),
        std::collections::hash_map::Entry::Vacant(slot) => {
            slot.insert(path.normalized());
            Ok(path)
        }
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

    fn dir_of(files: &[&str]) -> String {
        let paths: Vec<MemoryPath> = files
            .iter()
            .map(|f| MemoryPath::parse(f).unwrap())
            .collect();
        common_directory(paths.iter()).normalized()
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
