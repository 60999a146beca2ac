//! The small storage trait the memory tool is written once against, and its neutral backends
//! (memory and a local directory; ContextQ's is [`crate::contextq::ContextQStore`]).
//!
//! # The contract
//!
//! A [`Store`] holds **files** (text, UTF-8) at [`MemoryPath`]s below `/memories`. Directories are
//! either real (a [`LocalStore`]) or derived from file paths (ContextQ, [`MemoryStore`]): a path
//! is a directory when a file exists beneath it (or, with real directories, when it exists as
//! one). Every method is independent and may be called concurrently from many tasks.
//!
//! - [`Store::get`] returns the file with its [`Version`], or `None` when no *file* is there (a
//!   directory is not a file).
//! - [`Store::list`] returns every file beneath a directory, recursively, with sizes (and the
//!   real directories for stores that have them), or `None` when the path is not a directory.
//!   Listing the root always succeeds.
//! - [`Store::put`] writes a whole file under a [`PutMode`]: `Create` fails with
//!   [`Error::AlreadyExists`](crate::Error::AlreadyExists) if anything is there and never overwrites; `Update(v)` fails with
//!   [`Error::Precondition`](crate::Error::Precondition) unless the stored version is `v` (and with [`Error::NotFound`](crate::Error::NotFound) if
//!   the file is gone); `Overwrite` writes unconditionally. Parent directories are implied.
//!   Returns the new version.
//! - [`Store::delete`] removes one file; with `Some(v)` only if its version is `v`
//!   ([`Error::Precondition`](crate::Error::Precondition) otherwise); [`Error::NotFound`](crate::Error::NotFound) if it is not there.
//! - An error from `put` or `delete` means the write was **not** applied, except
//!   [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown), which a store returns when it cannot tell (an answer lost and
//!   not settled by reading back). The tool relies on this: it never undoes or reports as
//!   undone a step whose outcome is unknown.
//! - The optional operations ([`Store::rename`], [`Store::edit`], [`Store::delete_file`],
//!   [`Store::delete_dir`], [`Store::view`], [`Store::list_after`]) have defaults made of the
//!   required ones, in [`steps`]: rename as create-only copies and conditional deletes, edit as
//!   read, apply and write back at the version read, and so on, retrying a step lost to another
//!   writer for [`Store::edit_budget`]. A store with a native operation overrides it: an atomic
//!   rename of files and directories (never overwriting), a `str_replace` or `insert` applied
//!   in one step (ContextQ's `text-edit` extension; [`Error::EditRefused`](crate::Error::EditRefused) says it cannot
//!   apply), a file deleted whatever its version (`delete-by-external`), a directory deleted in
//!   one transaction (`by-prefix`). Like `put`, an error means not applied, except
//!   [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown), and [`Error::Stopped`](crate::Error::Stopped) for a default that stopped part way
//!   (it says what each path holds).
//! - [`Store::view`] is what the tool's `view` reads: the file at the path, else the directory's
//!   [`Store::outline`]. The default asks for one, then the other; a store that can ask for
//!   both at once (ContextQ's `tree-file` extension) overrides it.
//! - [`Store::remove_dir`] is called after every file beneath a directory was deleted; stores
//!   with real directories remove it (and anything left in it), others do nothing.
//! - [`Store::create_many`] is `put` with `Create` for many independent files, one result
//!   each, with the same guarantees per file; a store may send them together (ContextQ: one
//!   bulk-upsert per 100 files) and the default sends them one by one.
//!
//! Versions are opaque: a store may leave them out ([`Entry::version`] `None`) when it cannot
//! check them, and then the tool writes unconditionally (the TypeScript package's documented non-atomic mode).
//!
//! The shared conformance suite (`conformance`, feature `test-util`) checks all of this on every
//! backend.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::path::MemoryPath;
use crate::search::{Query, Searched};
pub use contextq_api::{EditFailure, TextEdit};

pub mod local;
pub mod memory;
pub mod steps;

pub use local::{FileIo, LocalStore};
pub use memory::MemoryStore;

/// An opaque version of a file: it changes whenever the content does. On a store whose files
/// live in rows that can be deleted and created again under one path (ContextQ), it also names
/// the row it was read from, so that a precondition never matches another row at that path.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    number: u64,
    row: Option<Arc<str>>,
}

impl Version {
    /// A version that is a number alone (a counter or a content hash).
    pub fn new(number: u64) -> Self {
        Version { number, row: None }
    }

    /// Version `number` of the row `row`: matches no other row, whatever its number.
    pub fn of_row(row: &str, number: u64) -> Self {
        Version {
            number,
            row: Some(Arc::from(row)),
        }
    }

    /// The number (ContextQ: the row's own `version`).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The row it was read from, on stores that have rows.
    pub fn row(&self) -> Option<&str> {
        self.row.as_deref()
    }
}

/// A file as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The whole content.
    pub content: String,
    /// Its version, when the store can check versions.
    pub version: Option<Version>,
    /// The backend's own identifier (ContextQ's row id), used in messages about partial failures.
    pub id: Option<String>,
}

/// What `view` finds at a path ([`Store::view`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Viewed {
    /// The file there (a file wins over a directory of the same name).
    File(Entry),
    /// The directory there, as [`Store::outline`] gives it.
    Directory(Listing),
    /// Neither.
    Missing,
}

/// How far a write goes before a store answers it (docs/stores.md, "Durability").
///
/// Both levels keep every file whole: after any crash a file holds its old or its new content,
/// never a mix, and a store never answers a write it did not apply. They differ in what a power
/// cut or an operating-system crash may take back.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Durability {
    /// An answered write is on stable storage: it survives a power cut. `LocalStore` flushes the
    /// file and then its directory; the embedded server commits with SQLite's
    /// `synchronous = FULL`. The default.
    #[default]
    Synced,
    /// An answered write survives a crash of the process; a power cut or an OS crash may take
    /// back the last writes (never tearing one), as with Anthropic's reference memory tools,
    /// which flush a file's data but not the rename that puts it in place. `LocalStore` flushes
    /// the file's data, not the directory; the embedded server commits with SQLite's
    /// `synchronous = NORMAL` (write-ahead log).
    Ordered,
}

impl Durability {
    /// `synced` or `ordered`.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Synced => "synced",
            Durability::Ordered => "ordered",
        }
    }
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "synced" => Ok(Durability::Synced),
            "ordered" => Ok(Durability::Ordered),
            other => Err(format!(
                "unknown durability {other:?}: use synced (the default: every answered write survives a power cut) or ordered (it survives a crash of the process; a power cut may take back the last writes)"
            )),
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How [`Store::put`] may treat an existing file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutMode {
    /// Only if nothing is there.
    Create,
    /// Whatever is there.
    Overwrite,
    /// Only if the file is at this version.
    Update(Version),
}

/// A file after a [`Store::edit`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edited {
    /// The whole new content; `None` when the store answered only the lines around the change
    /// (`snippet`).
    pub content: Option<String>,
    /// For `str_replace`, the lines around the change ([`crate::render::SNIPPET_CONTEXT`] each
    /// side), when the store answered them instead of the content.
    pub snippet: Option<contextq_api::Snippet>,
    /// For `str_replace`, the 1-based line where the replacement starts.
    pub changed_line: Option<usize>,
    /// The new version, when the store can check versions.
    pub version: Option<Version>,
}

/// A file in a listing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// Its path.
    pub path: MemoryPath,
    /// Size in bytes, when known.
    pub size: Option<u64>,
    /// Its version, when known.
    pub version: Option<Version>,
    /// Last change (RFC 3339), when known; shown instead of a size when the size is unknown.
    pub modified: Option<String>,
}

/// A real directory in a listing (stores with real directories only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirMeta {
    /// Its path.
    pub path: MemoryPath,
    /// Its size as the store reports it (a file system's directory size).
    pub size: Option<u64>,
}

/// Everything beneath a directory.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listing {
    /// The listed directory's own size, when the store has real directories.
    pub own_size: Option<u64>,
    /// Every file beneath it, at any depth, in any order.
    pub files: Vec<FileMeta>,
    /// Real directories beneath it (empty for stores with derived directories).
    pub dirs: Vec<DirMeta>,
    /// The store could not show everything (a ContextQ without cursors caps a listing at one
    /// page): there may be files beneath the directory that `files` lacks. The tool tells
    /// Claude so, and directory delete and rename list again until nothing is left.
    pub truncated: bool,
}

/// What [`Store::changes`] answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Changes {
    /// The cursor of now: pass it as `since` next time.
    pub cursor: String,
    /// The files changed since the cursor given (empty when none was given).
    pub paths: Vec<MemoryPath>,
}

/// Where the memory tool keeps its files. See the module docs for the contract.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// The file at `path`, or `None`.
    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>>;

    /// Everything beneath the directory `dir`, or `None` if it is not a directory.
    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>>;

    /// What `view` of the directory `dir` shows: its files and directories two levels deep, each
    /// directory with its size ([`DirMeta::size`], everything beneath it added up) and the
    /// directory's own size ([`Listing::own_size`]); files deeper may be left out. `None` if it
    /// is not a directory. Default: [`Store::list`] (the tool adds sizes up itself). A store
    /// that can add them up where it keeps the files overrides it, so that a view reads two
    /// levels, not everything beneath.
    async fn outline(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        self.list(dir).await
    }

    /// What `view` of `path` shows: the file there (not at the root), else the directory's
    /// [`Store::outline`], else [`Viewed::Missing`]. Default: [`Store::get`], then
    /// [`Store::outline`]. A store that can look for both at once overrides it, so that a view
    /// of a directory is one step, not two.
    async fn view(&self, path: &MemoryPath) -> Result<Viewed> {
        steps::view(self, path).await
    }

    /// At most `page.limit` files beneath `dir` whose path comes after `page.after` (all when
    /// `None`), in the order of their paths as text (`/memories/d-1/y` before `/memories/d/x`):
    /// a page of a walk that stays stable under concurrent writes (a file there for the whole
    /// walk is seen once). Default: the whole listing, sorted and cut; a store that can start a
    /// listing at a key overrides it, so that a page costs a page.
    async fn list_after(&self, dir: &MemoryPath, page: Page<'_>) -> Result<Vec<FileMeta>> {
        steps::list_after(self, dir, page).await
    }

    /// Whether [`Store::list_after`] costs a page (the store starts a listing at a path) rather
    /// than the whole listing cut, so that a caller walking a large store in windows (an import)
    /// may ask it once per window. Default: no.
    async fn pages(&self) -> bool {
        false
    }

    /// Writes `text` (the whole file) at `path` under `mode`; returns the new version.
    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>>;

    /// Deletes the file at `path`, only at version `expected` when given.
    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()>;

    /// Moves a file or directory; never overwrites ([`Error::AlreadyExists`](crate::Error::AlreadyExists); nothing at
    /// `from`: [`Error::NotFound`](crate::Error::NotFound)). Default: [`steps::rename`] (create-only copies, then
    /// conditional deletes of the sources); a store with an atomic rename overrides it.
    async fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        steps::rename(self, from, to).await
    }

    /// Applies `edit` to the file at `path` ([`Error::NotFound`](crate::Error::NotFound) when none is there,
    /// [`Error::EditRefused`](crate::Error::EditRefused) when it cannot apply). Default: [`steps::edit`] (read, apply,
    /// write back at the version read); a store that applies it in one atomic step overrides
    /// it.
    async fn edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        steps::edit(self, path, edit).await
    }

    /// Deletes the file at `path`, whatever its version: `Ok(true)`; `Ok(false)` when no file
    /// is there (nothing, or a directory), nothing changed. Like `delete`, an error means not
    /// applied, except [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown). Default: [`steps::delete_file`] (read, then
    /// delete at the version read); ContextQ's `delete-by-external` extension saves the read.
    async fn delete_file(&self, path: &MemoryPath) -> Result<bool> {
        steps::delete_file(self, path).await
    }

    /// Deletes the directory `dir` and everything beneath it ([`Error::NotFound`](crate::Error::NotFound) when it is
    /// not a directory). Default: [`steps::delete_dir`] (file by file, then
    /// [`Store::remove_dir`], [`Error::Stopped`](crate::Error::Stopped) naming what is left when it stops part way); a
    /// store that deletes it in one atomic step overrides it.
    async fn delete_dir(&self, dir: &MemoryPath) -> Result<()> {
        steps::delete_dir(self, dir).await
    }

    /// How long the step-wise defaults ([`steps`]) keep retrying a step that loses races to
    /// other writers before answering that the file kept changing. Default
    /// [`steps::DEFAULT_EDIT_BUDGET`] (10 s).
    fn edit_budget(&self) -> Duration {
        steps::DEFAULT_EDIT_BUDGET
    }

    /// Removes the (emptied) directory `dir`; a no-op for stores with derived directories.
    async fn remove_dir(&self, dir: &MemoryPath) -> Result<()> {
        let _ = dir;
        Ok(())
    }

    /// Creates each file of `files` (path, whole text) as [`Store::put`] with
    /// [`PutMode::Create`] would: only where nothing is there. One result per file, in order;
    /// a file that exists is [`crate::Error::AlreadyExists`]. The default puts them one by
    /// one; a store that can write many files in one request (ContextQ's bulk-upsert)
    /// overrides it. For imports: the files are independent, so a failure of one is its own.
    async fn create_many(&self, files: &[(MemoryPath, String)]) -> Vec<Result<Option<Version>>> {
        let mut out = Vec::with_capacity(files.len());
        for (path, text) in files {
            out.push(self.put(path, text, PutMode::Create).await);
        }
        out
    }

    /// The files beneath `dir` that `query` matches, best first, at most `limit`, each with its
    /// matching lines (`crate::search`). Default: [`steps::search`], which reads every file
    /// (bounded), when the store [`Store::scans`]; else [`crate::Error::NotSupported`], and the
    /// tool tells Claude search is not available (never a listing in its place). A store with
    /// an index (ContextQ's `search` extension) overrides it.
    async fn search(&self, query: &Query, dir: &MemoryPath, limit: usize) -> Result<Searched> {
        if !self.scans() {
            return Err(crate::Error::NotSupported {
                operation: "search",
            });
        }
        steps::search(self, query, dir, limit).await
    }

    /// Whether [`Store::search`] may read every file to search them: a store without an index
    /// whose reads are cheap (memory, a local directory). Default: no.
    fn scans(&self) -> bool {
        false
    }

    /// The files beneath `dir` changed (created, written, deleted, moved) after `since`, a
    /// cursor an earlier call answered, and the cursor of now; with `since` `None`, only the
    /// cursor of now. `Ok(None)`: the store cannot tell (the caller lists `dir` instead).
    /// A path may be named although nothing changed for the caller (its own writes, a
    /// redaction); none that changed is left out. Default: `None`. ContextQ's reads the
    /// tenant's activity log (extension `audit-log`), a cost that grows with the changes since
    /// the cursor, not with the files.
    async fn changes(&self, dir: &MemoryPath, since: Option<&str>) -> Result<Option<Changes>> {
        let _ = (dir, since);
        Ok(None)
    }

    /// The name the store keeps the file at `path` under: two paths with one key are one file
    /// (ContextQ lowercases a workspace folder's name into its slug, so `/memories/Acme/x.md`
    /// and `/memories/acme/x.md` are one row in per-workspace mode). Default: the normalized
    /// path.
    fn key(&self, path: &MemoryPath) -> String {
        path.normalized()
    }
}

#[async_trait]
impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        (**self).get(path).await
    }
    async fn changes(&self, dir: &MemoryPath, since: Option<&str>) -> Result<Option<Changes>> {
        (**self).changes(dir, since).await
    }
    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        (**self).list(dir).await
    }
    async fn outline(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        (**self).outline(dir).await
    }
    async fn view(&self, path: &MemoryPath) -> Result<Viewed> {
        (**self).view(path).await
    }
    async fn list_after(&self, dir: &MemoryPath, page: Page<'_>) -> Result<Vec<FileMeta>> {
        (**self).list_after(dir, page).await
    }
    async fn pages(&self) -> bool {
        (**self).pages().await
    }
    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        (**self).put(path, text, mode).await
    }
    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        (**self).delete(path, expected).await
    }
    async fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        (**self).rename(from, to).await
    }
    async fn edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        (**self).edit(path, edit).await
    }

    async fn remove_dir(&self, dir: &MemoryPath) -> Result<()> {
        (**self).remove_dir(dir).await
    }

    async fn delete_dir(&self, dir: &MemoryPath) -> Result<()> {
        (**self).delete_dir(dir).await
    }
    async fn delete_file(&self, path: &MemoryPath) -> Result<bool> {
        (**self).delete_file(path).await
    }

    async fn create_many(&self, files: &[(MemoryPath, String)]) -> Vec<Result<Option<Version>>> {
        (**self).create_many(files).await
    }

    async fn search(&self, query: &Query, dir: &MemoryPath, limit: usize) -> Result<Searched> {
        (**self).search(query, dir, limit).await
    }

    fn key(&self, path: &MemoryPath) -> String {
        (**self).key(path)
    }
    fn edit_budget(&self) -> Duration {
        (**self).edit_budget()
    }
    fn scans(&self) -> bool {
        (**self).scans()
    }
}

/// Where a page of [`Store::list_after`] starts and how long it is.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The page starts after this path (`None`: at the first file).
    pub after: Option<&'a MemoryPath>,
    /// At most this many files.
    pub limit: usize,
}

/// A 64-bit FNV-1a hash: the version of content for stores without a counter.
pub(crate) fn content_version(content: &[u8]) -> Version {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in content {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Version::new(h)
}
