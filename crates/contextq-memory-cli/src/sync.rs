//! `contextq-memory sync`: a local memory folder and the store kept in step, both ways
//! (docs/sync.md). Three-way: a baseline of the last agreed state (per file: its content's
//! SHA-256, size, modification time and inode on disk, and the store's version) kept beside the
//! folder in `.contextq-sync/` (written atomically), compared per file with the folder and the
//! store. A change on one side is copied to the other with a conditional write (at the
//! baseline's version, or create-only); changes on both sides are a conflict, both kept, never
//! resolved by overwriting; a delete on one side of a file unchanged on the other is a delete
//! there (in the store, a version, so it can be restored); a delete on one side and a change on
//! the other: the change wins. A write refused because someone wrote in between is decided
//! again on the next pass. After a kill at any point a re-run converges: a file found equal on
//! both sides is agreed whatever the baseline says, so nothing is copied twice (the baseline is
//! saved every 500 files acted on or 2 s, [`Saved`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use contextq_memory_tool::store::{PutMode, Store, Version};
use contextq_memory_tool::{Error, MemoryPath};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::transfer::walk::Walk;

mod ignore;
pub use ignore::{IGNORE_FILE, Rules};

/// The folder beside the files where the baseline lives (left out of the sync).
pub const STATE_DIR: &str = ".contextq-sync";

/// Which side's content stays in place when both changed (the other's is kept beside it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Default)]
pub enum Prefer {
    /// The store's content stays at the path; the local one is kept as a conflict file.
    #[default]
    Store,
    /// The local content stays at the path; the store's is kept as a conflict file.
    Local,
}

/// How a sync runs.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// Where the folder's files live in the store (`/memories` or below).
    pub prefix: MemoryPath,
    /// Who wins the path in a conflict.
    pub prefer: Prefer,
    /// Decide and report, change nothing.
    pub dry_run: bool,
    /// This machine's name, in conflict files' names.
    pub host: String,
    /// Also sync what `view` hides (names starting with `.`, `node_modules`); never
    /// `.contextq-sync` itself. The folder's `.contextq-syncignore` decides before it
    /// ([`Rules`]).
    pub include_hidden: bool,
}

/// The last agreed state of one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Agreed {
    /// SHA-256 of its content, hex.
    pub sha256: String,
    /// Size on disk when agreed.
    pub size: u64,
    /// Modification time on disk when agreed (nanoseconds since 1970).
    pub mtime_ns: i128,
    /// Inode on disk when agreed (0 where there is none).
    pub ino: u64,
    /// The store's version when agreed (`None`: the store does not show versions).
    pub version: Option<StoredVersion>,
}

/// A store [`Version`] as the baseline keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredVersion {
    /// Its number.
    pub n: u64,
    /// Its row, on stores with rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row: Option<String>,
}

impl StoredVersion {
    fn of(v: &Version) -> Self {
        StoredVersion {
            n: v.number(),
            row: v.row().map(str::to_string),
        }
    }

    fn version(&self) -> Version {
        match &self.row {
            Some(r) => Version::of_row(r, self.n),
            None => Version::new(self.n),
        }
    }
}

/// The baseline: every agreed file by its path below the folder (`a/b.md`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// The store's prefix it was agreed with: another prefix starts afresh.
    pub prefix: String,
    /// The files.
    pub files: BTreeMap<String, Agreed>,
    /// The store's changes cursor when the pass that wrote it began ([`Store::changes`]): the
    /// next pass asks only what changed since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Files the last pass left undecided (a race, a skip): read from the store again next
    /// pass whatever the changes say.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub recheck: BTreeSet<String>,
}

impl Baseline {
    fn path(dir: &Path) -> PathBuf {
        dir.join(STATE_DIR).join("baseline.json")
    }

    /// The baseline of `dir`, or an empty one.
    pub fn load(dir: &Path, prefix: &MemoryPath) -> Result<Baseline> {
        let file = Self::path(dir);
        let b: Baseline = match std::fs::read(&file) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is damaged: remove it to sync afresh (files equal on both sides are agreed again, nothing is lost)", file.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Baseline::default(),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", file.display())),
        };
        Ok(if b.prefix == prefix.normalized() {
            b
        } else {
            Baseline {
                prefix: prefix.normalized(),
                files: BTreeMap::new(),
                cursor: None,
                recheck: BTreeSet::new(),
            }
        })
    }

    /// Writes it atomically (a temporary file, flushed, renamed over), 0600 in a 0700 folder.
    pub fn save(&self, dir: &Path) -> Result<()> {
        let state = dir.join(STATE_DIR);
        create_private_dir(&state)?;
        let bytes = serde_json::to_vec_pretty(self)?;
        write_private_atomic(&Self::path(dir), &bytes)
            .with_context(|| format!("cannot write {}", Self::path(dir).display()))
    }
}

/// Creates `dir` (and its parents) with mode 0700 where it creates them.
fn create_private_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt as _;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("cannot create {}", dir.display()))
    }
    #[cfg(not(unix))]
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))
}

/// Writes `target` whole or not at all: a temporary file beside it (0600), flushed, renamed.
fn write_private_atomic(target: &Path, content: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = target.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".cqmem-sync-{}-{:08x}",
        std::process::id(),
        fastrand::u32(..)
    ));
    let result = (|| {
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut f = options.open(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
        std::fs::rename(&tmp, target)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// A file as found on disk.
#[derive(Debug, Clone)]
struct LocalFile {
    disk: PathBuf,
    size: u64,
    mtime_ns: i128,
    ino: u64,
}

impl LocalFile {
    fn of(disk: PathBuf) -> std::io::Result<LocalFile> {
        let meta = std::fs::metadata(&disk)?;
        let mtime_ns = meta
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as i128);
        #[cfg(unix)]
        let ino = std::os::unix::fs::MetadataExt::ino(&meta);
        #[cfg(not(unix))]
        let ino = 0;
        Ok(LocalFile {
            disk,
            size: meta.len(),
            mtime_ns,
            ino,
        })
    }

    /// Whether it is as it was when `agreed` (size, time and inode: no content read).
    fn unchanged_since(&self, agreed: &Agreed) -> bool {
        self.size == agreed.size && self.mtime_ns == agreed.mtime_ns && self.ino == agreed.ino
    }

    fn agreed(&self, sha256: String, version: Option<StoredVersion>) -> Agreed {
        Agreed {
            sha256,
            size: self.size,
            mtime_ns: self.mtime_ns,
            ino: self.ino,
            version,
        }
    }
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// What a pass did to one file (one line of its report).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Action {
    /// `pushed`, `pulled`, `deleted in the store`, `deleted here`, `conflict`, `agreed`,
    /// `skipped`, `raced` (decided again next pass).
    pub action: &'static str,
    /// The file, below the folder.
    pub path: String,
    /// Why, for conflicts, skips and races.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What a pass did.
#[derive(Debug, Default, Serialize)]
pub struct Report {
    /// One per file acted on.
    pub actions: Vec<Action>,
    /// Files compared.
    pub files: usize,
    /// Files whose content was read to decide (the rest were unchanged by size, time, inode).
    pub hashed: usize,
    /// Files the store said changed since the last pass, when it can say
    /// ([`Store::changes`]); `None`: the store's files were listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub changed: Option<usize>,
    /// Files of the store this pass saw under names the rules leave out ([`Rules`]): left
    /// alone, as the folder's are.
    #[serde(skip_serializing_if = "is_zero")]
    pub ignored: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Report {
    fn push(&mut self, action: &'static str, path: &str, detail: Option<String>) {
        self.actions.push(Action {
            action,
            path: path.to_string(),
            detail,
        });
    }

    /// Conflicts this pass.
    #[cfg(test)]
    pub fn conflicts(&self) -> usize {
        self.actions
            .iter()
            .filter(|a| a.action == "conflict")
            .count()
    }
}

/// The name a conflict keeps the other side's content under: `notes.md` ->
/// `notes.conflict-<host>-<time>.md`.
fn conflict_name(rel: &str, host: &str, n: u32) -> String {
    let time = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    let host: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let (dir, name) = match rel.rfind('/') {
        Some(i) => (&rel[..=i], &rel[i + 1..]),
        None => ("", rel),
    };
    // A second conflict of the same file in the same second: `-2`, `-3`...
    let time = if n > 1 {
        format!("{time}-{n}")
    } else {
        time.to_string()
    };
    match name.rfind('.').filter(|&i| i > 0) {
        Some(i) => format!("{dir}{}.conflict-{host}-{time}{}", &name[..i], &name[i..]),
        None => format!("{dir}{name}.conflict-{host}-{time}"),
    }
}

/// One sync of `dir` with `store` (see the module documentation). The baseline is saved as the
/// pass goes ([`Saved`]) and at its end; a kill loses at most the record of the last files,
/// which the next pass finds equal on both sides.
pub async fn sync(store: &dyn Store, dir: &Path, options: &SyncOptions) -> Result<Report> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("cannot use {}", dir.display()))?;
    let mut base = Baseline::load(&dir, &options.prefix)?;
    let mut report = Report::default();
    let rules = std::sync::Arc::new(Rules::of(&dir, options.include_hidden)?);

    // The folder: every file by its path below it (no link followed), as the rules allow (a
    // directory they leave out is not entered).
    let mut local: BTreeMap<String, LocalFile> = BTreeMap::new();
    let keep = rules.clone();
    for found in Walk::filtered(&dir, Box::new(move |s, is_dir| !keep.ignored(s, is_dir)))? {
        let (segments, disk) = found?;
        local.insert(segments.join("/"), LocalFile::of(disk)?);
    }
    // The store: what changed since the baseline's cursor (asked first, so that nothing
    // changed during the pass is missed next time), or every file under the prefix.
    let root = format!("{}/", options.prefix.normalized());
    let changes = store
        .changes(&options.prefix, base.cursor.as_deref())
        .await?;
    let remote = match (&changes, &base.cursor) {
        (Some(c), Some(_)) if base.files.values().all(|a| a.version.is_some()) => {
            report.changed = Some(c.paths.len());
            let mut remote: BTreeMap<String, Option<Version>> = base
                .files
                .iter()
                .filter(|(rel, _)| !rules.ignores_file(rel))
                .map(|(rel, a)| (rel.clone(), a.version.as_ref().map(StoredVersion::version)))
                .collect();
            let again = base.recheck.iter().filter_map(|rel| {
                MemoryPath::parse(&format!("{}/{rel}", options.prefix.normalized())).ok()
            });
            let asked: BTreeSet<MemoryPath> = c.paths.iter().cloned().chain(again).collect();
            for p in &asked {
                let n = p.normalized();
                let Some(rel) = n.strip_prefix(&root) else {
                    continue;
                };
                if rules.ignores_file(rel) {
                    report.ignored += 1;
                    continue;
                }
                match store.get(p).await? {
                    Some(e) => remote.insert(rel.to_string(), e.version),
                    None => remote.remove(rel),
                };
            }
            remote
        }
        _ => {
            let mut remote = BTreeMap::new();
            if let Some(listing) = store.list(&options.prefix).await? {
                for f in listing.files {
                    let n = f.path.normalized();
                    match n.strip_prefix(&root) {
                        Some(rel) if rules.ignores_file(rel) => report.ignored += 1,
                        Some(rel) => {
                            remote.insert(rel.to_string(), f.version);
                        }
                        None => {}
                    }
                }
            }
            remote
        }
    };
    // Recorded when the pass ends whole: a pass stopped part way leaves the old cursor, so its
    // changes are asked again.
    let cursor = changes.map(|c| c.cursor);
    let mut undecided = BTreeSet::new();
    // What the baseline agreed under names now left out stays as agreed, untouched, so that
    // taking a pattern out later finds the three sides as they were.
    let paths: BTreeSet<String> = local
        .keys()
        .chain(remote.keys())
        .chain(base.files.keys().filter(|rel| !rules.ignores_file(rel)))
        .cloned()
        .collect();
    report.files = paths.len();
    let mut saved = Saved::new();
    // New files of the folder go to the store together (one bulk write per `BATCH` on
    // ContextQ), create-only.
    let mut batch: Vec<NewFile> = Vec::new();
    for rel in paths {
        let agreed = base.files.get(&rel).cloned();
        let here = local.get(&rel).cloned();
        let there = remote.get(&rel).cloned();
        if let (Some(l), None, None) = (&here, &there, &agreed) {
            match new_file(options, &rel, l, &mut report)? {
                Some(file) => batch.push(file),
                None => continue,
            }
            if batch.len() >= BATCH {
                create_new(store, &mut batch, options.dry_run, &mut base, &mut report).await?;
                saved.maybe(&base, &dir, options.dry_run, BATCH)?;
            }
            continue;
        }
        let outcome = decide(
            store,
            &dir,
            options,
            &rel,
            (here, there, agreed),
            &mut report,
        )
        .await;
        match outcome {
            Ok(Some(entry)) => {
                base.files.insert(rel.clone(), entry);
            }
            Ok(None) => {
                base.files.remove(&rel);
            }
            Err(Skip::Keep) => {
                undecided.insert(rel.clone());
                continue;
            }
            Err(Skip::Fail(e)) => {
                // What was agreed so far is kept; the error names the file.
                if !options.dry_run {
                    base.save(&dir)?;
                }
                return Err(e.context(format!("syncing {rel}")));
            }
        }
        if report.actions.last().is_some_and(|a| a.path == rel) {
            saved.maybe(&base, &dir, options.dry_run, 1)?;
        }
    }
    create_new(store, &mut batch, options.dry_run, &mut base, &mut report).await?;
    if !options.dry_run {
        // New files the batches did not create are read again next pass.
        undecided.extend(
            local
                .keys()
                .filter(|rel| !base.files.contains_key(*rel))
                .cloned(),
        );
        base.cursor = cursor;
        base.recheck = undecided;
        base.save(&dir)?;
    }
    Ok(report)
}

/// New files of the folder written to the store per bulk write.
const BATCH: usize = 1_000;

/// When the baseline is saved during a pass: every 500 files acted on or every 2 s (a kill
/// loses the record of at most those, which the next pass finds equal on both sides and
/// agrees: nothing is copied twice); saving it after every file rewrote it whole each time.
struct Saved {
    at: std::time::Instant,
    unsaved: usize,
}

impl Saved {
    fn new() -> Self {
        Saved {
            at: std::time::Instant::now(),
            unsaved: 0,
        }
    }

    fn maybe(&mut self, base: &Baseline, dir: &Path, dry_run: bool, acted: usize) -> Result<()> {
        self.unsaved += acted;
        if dry_run || (self.unsaved < 500 && self.at.elapsed() < std::time::Duration::from_secs(2))
        {
            return Ok(());
        }
        base.save(dir)?;
        *self = Saved::new();
        Ok(())
    }
}

/// A new file of the folder, read, for [`create_new`].
struct NewFile {
    rel: String,
    path: MemoryPath,
    local: LocalFile,
    text: String,
}

/// `rel` read as a new file to create in the store, or `None` when it is skipped (reported).
fn new_file(
    options: &SyncOptions,
    rel: &str,
    l: &LocalFile,
    report: &mut Report,
) -> Result<Option<NewFile>> {
    let path = match MemoryPath::parse(&format!("{}/{rel}", options.prefix.normalized())) {
        Ok(p) => p,
        Err(e) => {
            report.push("skipped", rel, Some(format!("not a memory path: {e}")));
            return Ok(None);
        }
    };
    report.hashed += 1;
    let bytes = std::fs::read(&l.disk)?;
    match String::from_utf8(bytes) {
        Ok(text) => Ok(Some(NewFile {
            rel: rel.to_string(),
            path,
            local: l.clone(),
            text,
        })),
        Err(_) => {
            report.push(
                "skipped",
                rel,
                Some("not UTF-8 text: memory files are text".into()),
            );
            Ok(None)
        }
    }
}

/// Creates `batch` in the store (create-only, together), each agreed or reported.
async fn create_new(
    store: &dyn Store,
    batch: &mut Vec<NewFile>,
    dry_run: bool,
    base: &mut Baseline,
    report: &mut Report,
) -> Result<()> {
    let files: Vec<NewFile> = std::mem::take(batch);
    if files.is_empty() {
        return Ok(());
    }
    if dry_run {
        for f in &files {
            report.push("pushed", &f.rel, None);
        }
        return Ok(());
    }
    let pairs: Vec<(MemoryPath, String)> = files
        .iter()
        .map(|f| (f.path.clone(), f.text.clone()))
        .collect();
    let results = store.create_many(&pairs).await;
    for (f, result) in files.into_iter().zip(results) {
        match result {
            Ok(v) => {
                report.push("pushed", &f.rel, None);
                let agreed = f.local.agreed(
                    sha256_hex(f.text.as_bytes()),
                    v.as_ref().map(StoredVersion::of),
                );
                base.files.insert(f.rel, agreed);
            }
            Err(e) => match refused(e, &f.rel, report) {
                Skip::Keep => {}
                // What the batch created before is found equal on both sides next pass.
                Skip::Fail(e) => return Err(e.context(format!("syncing {}", f.rel))),
            },
        }
    }
    Ok(())
}

/// A file the pass leaves as it was: reported (a race, a path the store refuses), or failed.
enum Skip {
    Keep,
    Fail(anyhow::Error),
}

impl From<anyhow::Error> for Skip {
    fn from(e: anyhow::Error) -> Self {
        Skip::Fail(e)
    }
}

impl From<std::io::Error> for Skip {
    fn from(e: std::io::Error) -> Self {
        Skip::Fail(e.into())
    }
}

/// A write the store refused because someone wrote in between, or a path it refuses: reported,
/// decided again next pass.
fn refused(e: Error, rel: &str, report: &mut Report) -> Skip {
    match e {
        Error::Precondition { .. } | Error::AlreadyExists { .. } | Error::NotFound { .. } => {
            report.push(
                "raced",
                rel,
                Some("another writer changed it meanwhile; decided again next pass".into()),
            );
            Skip::Keep
        }
        Error::Path(p) => {
            report.push(
                "skipped",
                rel,
                Some(format!("the store refuses this path: {p}")),
            );
            Skip::Keep
        }
        other if !other.is_store_failure() => {
            report.push("skipped", rel, Some(other.to_string()));
            Skip::Keep
        }
        other => Skip::Fail(anyhow::Error::new(other)),
    }
}

/// Decides one file: the new agreed state (`None`: it is gone on both sides).
async fn decide(
    store: &dyn Store,
    dir: &Path,
    options: &SyncOptions,
    rel: &str,
    (here, there, agreed): (Option<LocalFile>, Option<Option<Version>>, Option<Agreed>),
    report: &mut Report,
) -> std::result::Result<Option<Agreed>, Skip> {
    let path = match MemoryPath::parse(&format!("{}/{rel}", options.prefix.normalized())) {
        Ok(p) => p,
        Err(e) => {
            report.push("skipped", rel, Some(format!("not a memory path: {e}")));
            return Err(Skip::Keep);
        }
    };
    // The local side: its content's hash, read only when size, time or inode moved.
    let mut text: Option<String> = None;
    let here_sha = match (&here, &agreed) {
        (None, _) => None,
        (Some(l), Some(a)) if l.unchanged_since(a) => Some(a.sha256.clone()),
        (Some(l), _) => {
            report.hashed += 1;
            let bytes = std::fs::read(&l.disk)?;
            let sha = sha256_hex(&bytes);
            match String::from_utf8(bytes) {
                Ok(t) => text = Some(t),
                Err(_) => {
                    report.push(
                        "skipped",
                        rel,
                        Some("not UTF-8 text: memory files are text".into()),
                    );
                    return Err(Skip::Keep);
                }
            }
            Some(sha)
        }
    };
    let local_changed = match (&here_sha, &agreed) {
        (None, None) => false,
        (Some(h), Some(a)) => *h != a.sha256,
        _ => true,
    };
    let there_version = there.as_ref().map(|v| v.as_ref().map(StoredVersion::of));
    let store_changed = match (&there_version, &agreed) {
        (None, None) => false,
        (Some(Some(v)), Some(a)) => a.version.as_ref() != Some(v),
        // A store that shows no versions: its content decides (read below).
        (Some(None), Some(_)) => true,
        _ => true,
    };
    let dry = options.dry_run;
    let read_local = |text: &mut Option<String>,
                      l: &LocalFile|
     -> std::result::Result<String, Skip> {
        if let Some(t) = text.take() {
            return Ok(t);
        }
        let bytes = std::fs::read(&l.disk)?;
        String::from_utf8(bytes).map_err(|_| Skip::Fail(anyhow::anyhow!("{rel} is not UTF-8 text")))
    };

    match (here, there) {
        (None, None) => Ok(None),
        // Unchanged on both sides.
        (Some(l), Some(_)) if !local_changed && !store_changed => {
            let a = agreed.expect("unchanged means agreed");
            Ok(Some(l.agreed(a.sha256, a.version)))
        }
        // Changed here only: push.
        (Some(l), there) if !store_changed => {
            let content = read_local(&mut text, &l)?;
            let mode = match there {
                Some(Some(v)) => PutMode::Update(v),
                Some(None) => PutMode::Overwrite,
                None => PutMode::Create,
            };
            report.push("pushed", rel, None);
            if dry {
                return Err(Skip::Keep);
            }
            push(store, (&path, rel), &l, &content, mode, report).await
        }
        // Deleted here, unchanged in the store: delete it there (a version: restorable).
        (None, Some(v)) if !store_changed => {
            report.push("deleted in the store", rel, None);
            if dry {
                return Err(Skip::Keep);
            }
            match store.delete(&path, v).await {
                Ok(()) | Err(Error::NotFound { .. }) => Ok(None),
                Err(e) => {
                    report.actions.pop();
                    Err(refused(e, rel, report))
                }
            }
        }
        // Deleted in the store, unchanged here: delete it here.
        (Some(l), None) if !local_changed => {
            report.push("deleted here", rel, None);
            if dry {
                return Err(Skip::Keep);
            }
            std::fs::remove_file(&l.disk)?;
            Ok(None)
        }
        // Changed in the store only (or deleted here and changed there: the change wins).
        (here, Some(_)) if !local_changed || here.is_none() => {
            let Some(entry) = store.get(&path).await.map_err(|e| Skip::Fail(e.into()))? else {
                return Err(Skip::Keep);
            };
            let sha = sha256_hex(entry.content.as_bytes());
            let version = entry.version.as_ref().map(StoredVersion::of);
            // A store without versions: the same content is no change.
            if let (Some(l), Some(a)) = (&here, &agreed)
                && a.sha256 == sha
            {
                return Ok(Some(l.agreed(sha, version)));
            }
            let disk = dir.join(rel);
            let detail = (here.is_none() && agreed.is_some())
                .then(|| "deleted here but changed in the store: the change wins".to_string());
            report.push("pulled", rel, detail);
            if dry {
                return Err(Skip::Keep);
            }
            write_file(&disk, entry.content.as_bytes())?;
            let l = LocalFile::of(disk)?;
            Ok(Some(l.agreed(sha, version)))
        }
        // Changed here and deleted in the store: the change wins (created again there).
        (Some(l), None) => {
            let content = read_local(&mut text, &l)?;
            report.push(
                "pushed",
                rel,
                Some("deleted in the store but changed here: the change wins".into()),
            );
            if dry {
                return Err(Skip::Keep);
            }
            push(store, (&path, rel), &l, &content, PutMode::Create, report).await
        }
        // Changed on both sides.
        (Some(l), Some(_)) => {
            let mine = read_local(&mut text, &l)?;
            let Some(theirs) = store.get(&path).await.map_err(|e| Skip::Fail(e.into()))? else {
                return Err(Skip::Keep);
            };
            let version = theirs.version.as_ref().map(StoredVersion::of);
            let theirs_sha = sha256_hex(theirs.content.as_bytes());
            // A store without versions whose content is still the agreed one: changed here only.
            if agreed.as_ref().is_some_and(|a| a.sha256 == theirs_sha) {
                report.push("pushed", rel, None);
                if dry {
                    return Err(Skip::Keep);
                }
                let mode = match &theirs.version {
                    Some(v) => PutMode::Update(v.clone()),
                    None => PutMode::Overwrite,
                };
                return push(store, (&path, rel), &l, &mine, mode, report).await;
            }
            if theirs.content == mine {
                // The same content: agreed (also what a re-run after a kill finds).
                if agreed.is_some() {
                    report.push("agreed", rel, None);
                }
                return Ok(Some(l.agreed(sha256_hex(mine.as_bytes()), version)));
            }
            let mut side = conflict_name(rel, &options.host, 1);
            let (kept, aside) = match options.prefer {
                Prefer::Store => (&theirs.content, &mine),
                Prefer::Local => (&mine, &theirs.content),
            };
            let detail = |side: &str| {
                format!(
                    "changed on both sides: the {} version is at the path, the other kept as {side}",
                    match options.prefer {
                        Prefer::Store => "store's",
                        Prefer::Local => "local",
                    }
                )
            };
            report.push("conflict", rel, Some(detail(&side)));
            if dry {
                return Err(Skip::Keep);
            }
            // The side copy first, on both sides, create-only under a name free on both:
            // nothing is overwritten.
            let mut n = 1;
            loop {
                let side_path =
                    MemoryPath::parse(&format!("{}/{side}", options.prefix.normalized()))
                        .map_err(|e| Skip::Fail(e.into()))?;
                if !dir.join(&side).exists() {
                    match store.put(&side_path, aside, PutMode::Create).await {
                        Ok(_) => break,
                        Err(Error::AlreadyExists { .. }) if n < 100 => {}
                        Err(e) => return Err(Skip::Fail(e.into())),
                    }
                }
                n += 1;
                side = conflict_name(rel, &options.host, n);
            }
            write_file(&dir.join(&side), aside.as_bytes())?;
            if let Some(a) = report.actions.last_mut() {
                a.detail = Some(detail(&side));
            }
            let version = match options.prefer {
                Prefer::Store => {
                    write_file(&l.disk, kept.as_bytes())?;
                    version
                }
                Prefer::Local => {
                    let mode = match &theirs.version {
                        Some(v) => PutMode::Update(v.clone()),
                        None => PutMode::Overwrite,
                    };
                    match store.put(&path, kept, mode).await {
                        Ok(v) => v.as_ref().map(StoredVersion::of),
                        Err(e) => return Err(refused(e, rel, report)),
                    }
                }
            };
            let l = LocalFile::of(l.disk.clone())?;
            let entry = l.agreed(sha256_hex(kept.as_bytes()), version);
            // The side copy is agreed too, so the next pass leaves it.
            Ok(Some(entry))
        }
        (None, Some(_)) => unreachable!("handled above: deleted here"),
    }
}

/// Writes the local `content` of `l` to the store under `mode`: its new agreed state, or the
/// refusal reported in place of the action just announced.
async fn push(
    store: &dyn Store,
    (path, rel): (&MemoryPath, &str),
    l: &LocalFile,
    content: &str,
    mode: PutMode,
    report: &mut Report,
) -> std::result::Result<Option<Agreed>, Skip> {
    match store.put(path, content, mode).await {
        Ok(v) => Ok(Some(l.agreed(
            sha256_hex(content.as_bytes()),
            v.as_ref().map(StoredVersion::of),
        ))),
        Err(e) => {
            report.actions.pop();
            Err(refused(e, rel, report))
        }
    }
}

/// Writes a file of the folder whole (atomic, 0600; its folders 0700 where created).
fn write_file(disk: &Path, content: &[u8]) -> std::io::Result<()> {
    if let Some(parent) = disk.parent() {
        create_private_dir(parent).map_err(std::io::Error::other)?;
    }
    write_private_atomic(disk, content)
}

/// The files below `dir` as the store would name them (for tests and `--dry-run`).
#[cfg(test)]
fn folder(dir: &Path) -> BTreeMap<String, String> {
    Walk::new(dir, false)
        .unwrap()
        .map(|f| f.unwrap())
        .filter(|(s, _)| s[0] != STATE_DIR)
        .map(|(s, p)| (s.join("/"), std::fs::read_to_string(p).unwrap()))
        .collect()
}

#[cfg(test)]
mod tests;
