//! `LocalStore`: memory files in a directory on disk, the official SDKs' reference behaviour made safe.
//!
//! `/memories` maps to `DIR/memories`, the layout the official SDKs' local memory tools use, so a
//! directory written by them can be used (and imported) as is.
//!
//! Safety and durability:
//! - writes go to a hidden temporary file in the target directory, are `fsync`ed, then put in
//!   place with `rename(2)` (overwrite) or `link(2)` (create: fails if anything is there, so a
//!   create never overwrites, even against another process); the directory is `fsync`ed after
//!   ([`Durability::Synced`], the default; [`Durability::Ordered`] leaves that flush out, as the
//!   reference tools do);
//! - files are created `0600` and directories `0700` (Unix);
//! - a symbolic link that stays inside the root is listed and read through, as Anthropic's
//!   SDKs do (on Linux: each read is one `openat2` beneath the root with `RESOLVE_BENEATH`, so a
//!   link that leaves it is refused by the kernel even when it was swapped in between a check
//!   and the open; elsewhere links are not followed); a link that leaves the root is refused,
//!   and nothing is ever written through a link (a write would replace the link, not its
//!   target): nothing outside the root can be read or written through one;
//! - conditional operations (update at a version, delete at a version, rename) hold a lock inside
//!   this process; across processes only create is race-free (see `docs/stores.md`).

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;

use super::{
    DirMeta, Durability, Edited, Entry, FileMeta, Listing, PutMode, Store, TextEdit, Version,
    content_version,
};
use crate::error::{Error, Result};
use crate::path::{MemoryPath, PathError};

/// A [`Store`] over a directory on disk.
#[derive(Debug, Clone)]
pub struct LocalStore {
    root: Arc<PathBuf>,
    lock: Arc<tokio::sync::Mutex<()>>,
    durability: Durability,
    io: FileIo,
}

/// Where a [`LocalStore`] makes its file system calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FileIo {
    /// On tokio's blocking pool (`spawn_blocking`): the runtime's other tasks run meanwhile,
    /// at the price of handing each call to another thread and back. The default.
    #[default]
    BlockingPool,
    /// On the calling task's thread (with `block_in_place` on a multi-thread runtime): no
    /// hand-off, but on a current-thread runtime its other tasks wait for each call (at most
    /// one file write and its flush). For one client at a time, as the CLI's `exec` and `mcp`
    /// serve; docs/benchmarks.md has what the hand-off costs.
    Inline,
}

fn io(operation: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> Error + use<> {
    let path = path.display().to_string();
    move |source| Error::Io {
        operation,
        path,
        source,
    }
}

impl LocalStore {
    /// A store whose `/memories` is `dir/memories` (created, `0700`, if missing).
    pub fn new(dir: impl AsRef<Path>) -> Result<Self> {
        let root = dir.as_ref().join("memories");
        create_dir_all_private(&root)?;
        Ok(LocalStore {
            root: Arc::new(root),
            lock: Arc::new(tokio::sync::Mutex::new(())),
            durability: Durability::default(),
            io: FileIo::default(),
        })
    }

    /// Where file system calls run (default [`FileIo::BlockingPool`]).
    pub fn with_file_io(mut self, io: FileIo) -> Self {
        self.io = io;
        self
    }

    /// How far a write goes before it is answered (default [`Durability::Synced`]).
    pub fn with_durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Flushes a directory whose entries a write changed, when the durability asks for it.
    fn sync_dir(&self, dir: &Path) {
        if self.durability == Durability::Synced {
            sync_dir(dir);
        }
    }

    /// [`LocalStore::sync_dir`] of a path's parent, when it has one.
    fn sync_dir_of(&self, dir: Option<&Path>) {
        if let Some(dir) = dir {
            self.sync_dir(dir);
        }
    }

    /// Creates `dir` and its missing parents (0700); when the durability asks for it, flushes
    /// the directory that holds each one it created, so that a file acknowledged in a new
    /// directory does not lose the directory at a power cut.
    fn create_parents(&self, dir: &Path) -> Result<()> {
        let missing: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|d| fs::symlink_metadata(d).is_err())
            .map(Path::to_path_buf)
            .collect();
        create_dir_all_private(dir)?;
        for created in missing.iter().rev() {
            if let Some(parent) = created.parent() {
                self.sync_dir(parent);
            }
        }
        Ok(())
    }

    /// The directory that holds `/memories`.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The file system path of `path`, refusing symbolic links on the way.
    fn resolve(&self, path: &MemoryPath) -> Result<PathBuf> {
        let mut fs_path = (*self.root).clone();
        for segment in path.segments() {
            fs_path.push(segment);
            match fs::symlink_metadata(&fs_path) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    // As for any path that would leave the root: Claude's path, as written.
                    return Err(Error::Path(PathError::Escape(path.raw().to_string())));
                }
                _ => {}
            }
        }
        Ok(fs_path)
    }

    /// The text of the file at `path`, through links that stay beneath the root (module docs).
    fn read(&self, path: &MemoryPath) -> Result<Option<String>> {
        #[cfg(target_os = "linux")]
        {
            let rel: PathBuf = path.segments().iter().collect();
            if rel.as_os_str().is_empty() {
                return Ok(None);
            }
            let shown = self.root.join(&rel);
            match read_beneath(&self.root, &rel) {
                Ok(None) => Ok(None),
                Ok(Some(bytes)) => String::from_utf8(bytes).map(Some).map_err(|_| Error::Io {
                    operation: "read",
                    path: shown.display().to_string(),
                    source: std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        "the file is not UTF-8 text",
                    ),
                }),
                Err(None) => Err(Error::Path(PathError::Escape(path.raw().to_string()))),
                Err(Some(e)) => Err(io("read", &shown)(e)),
            }
        }
        #[cfg(not(target_os = "linux"))]
        {
            let fs_path = self.resolve(path)?;
            read_text(&fs_path)
        }
    }

    async fn blocking<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&LocalStore) -> Result<T> + Send + 'static,
    {
        if self.io == FileIo::Inline {
            return match tokio::runtime::Handle::try_current().map(|h| h.runtime_flavor()) {
                // Tells the runtime this worker blocks, so that its other tasks move on.
                Ok(tokio::runtime::RuntimeFlavor::MultiThread) => {
                    tokio::task::block_in_place(|| f(self))
                }
                _ => f(self),
            };
        }
        let this = self.clone();
        tokio::task::spawn_blocking(move || f(&this))
            .await
            .map_err(|e| Error::Io {
                operation: "run a file operation",
                path: String::new(),
                source: std::io::Error::other(e.to_string()),
            })?
    }
}

fn create_dir_all_private(dir: &Path) -> Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir).map_err(io("create directory", dir))
}

/// Reads `rel` (a path below `root`) as text through any symbolic links that stay beneath
/// `root`, in one `openat2` with `RESOLVE_BENEATH`: the kernel refuses a link that leaves it,
/// whenever it appeared. `Ok(None)`: nothing there, or not a file; `Err(None)`: it leaves the
/// root.
#[cfg(target_os = "linux")]
fn read_beneath(
    root: &Path,
    rel: &Path,
) -> std::result::Result<Option<Vec<u8>>, Option<std::io::Error>> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use std::io::Read;
    let dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| Some(e.into()))?;
    let fd = match rustix::fs::openat2(
        &dir,
        rel,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Ok(None),
        Err(rustix::io::Errno::XDEV | rustix::io::Errno::LOOP) => return Err(None),
        Err(e) => return Err(Some(e.into())),
    };
    let mut file = std::fs::File::from(fd);
    let meta = file.metadata().map_err(Some)?;
    if !meta.is_file() {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(Some)?;
    Ok(Some(bytes))
}

/// The size and kind of `rel` below `root` through links that stay beneath it (as
/// [`read_beneath`]); `None` when it leaves the root or is neither a file nor a directory.
#[cfg(target_os = "linux")]
fn stat_beneath(root: &Path, rel: &Path) -> Option<fs::Metadata> {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let fd = rustix::fs::openat2(
        &dir,
        rel,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
    .ok()?;
    std::fs::File::from(fd).metadata().ok()
}

fn read_text(fs_path: &Path) -> Result<Option<String>> {
    match fs::symlink_metadata(fs_path) {
        Ok(meta) if meta.is_file() => {}
        Ok(_) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(20) => return Ok(None), // ENOTDIR: a parent is a file
        Err(e) => return Err(io("read", fs_path)(e)),
    }
    let bytes = fs::read(fs_path).map_err(io("read", fs_path))?;
    String::from_utf8(bytes).map(Some).map_err(|_| Error::Io {
        operation: "read",
        path: fs_path.display().to_string(),
        source: std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "the file is not UTF-8 text",
        ),
    })
}

fn sync_dir(dir: &Path) {
    // Durability of the directory entry; not all platforms allow opening a directory, and a
    // failure here does not undo the (already atomic) write, so it is best effort.
    if let Ok(d) = fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Writes `content` to a new hidden temporary file next to `dest`, synced, mode 0600.
fn write_temp(dest: &Path, content: &str) -> Result<PathBuf> {
    let dir = dest.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".cqmem-tmp-{}-{:016x}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let mut options = fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let result = (|| {
        let mut f = options.open(&tmp)?;
        f.write_all(content.as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(io("write", dest)(e));
    }
    Ok(tmp)
}

/// Lists `dir` (which is `base`) into `listing`, recursively; `root` is the store's root, within
/// which symbolic links are listed (not descended into).
fn walk(root: &Path, dir: &Path, base: &MemoryPath, listing: &mut Listing) -> Result<()> {
    let entries = fs::read_dir(dir).map_err(io("list", dir))?;
    for entry in entries {
        let entry = entry.map_err(io("list", dir))?;
        let Ok(name) = entry.file_name().into_string() else {
            continue; // not UTF-8: cannot be named by Claude, so not listed
        };
        if name.starts_with(".cqmem-tmp-") {
            continue;
        }
        let meta = entry.metadata().map_err(io("stat", &entry.path()))?;
        let Ok(path) = base.join(&name) else {
            continue; // a name the path rules refuse cannot be addressed either
        };
        if meta.file_type().is_symlink() {
            // Listed when it stays beneath the root (as the SDKs do), never descended into.
            #[cfg(target_os = "linux")]
            if let Ok(rel) = entry.path().strip_prefix(root)
                && let Some(target) = stat_beneath(root, rel)
            {
                if target.is_file() {
                    listing.files.push(FileMeta {
                        path,
                        size: Some(target.len()),
                        version: None,
                        modified: None,
                    });
                } else if target.is_dir() {
                    listing.dirs.push(DirMeta {
                        path,
                        size: Some(target.len()),
                    });
                }
            }
            continue;
        } else if meta.is_dir() {
            listing.dirs.push(DirMeta {
                path: path.clone(),
                size: Some(meta.len()),
            });
            walk(root, &entry.path(), &path, listing)?;
        } else if meta.is_file() {
            listing.files.push(FileMeta {
                path,
                size: Some(meta.len()),
                version: None,
                modified: None,
            });
        }
    }
    Ok(())
}

#[async_trait]
impl Store for LocalStore {
    /// No index here: search reads every file ([`super::steps::search`]).
    fn scans(&self) -> bool {
        true
    }

    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        let path = path.clone();
        self.blocking(move |s| {
            let content = s.read(&path)?;
            Ok(content.map(|content| Entry {
                version: Some(content_version(content.as_bytes())),
                content,
                id: None,
            }))
        })
        .await
    }

    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        let dir = dir.clone();
        self.blocking(move |s| {
            let fs_path = s.resolve(&dir)?;
            let meta = match fs::symlink_metadata(&fs_path) {
                Ok(m) if m.is_dir() => m,
                _ if dir.is_root() => {
                    create_dir_all_private(&fs_path)?;
                    fs::metadata(&fs_path).map_err(io("stat", &fs_path))?
                }
                _ => return Ok(None),
            };
            let mut listing = Listing {
                own_size: Some(meta.len()),
                ..Listing::default()
            };
            walk(&s.root, &fs_path, &dir.normalized_copy(), &mut listing)?;
            Ok(Some(listing))
        })
        .await
    }

    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        let _guard = match mode {
            PutMode::Create => None,
            _ => Some(self.lock.lock().await),
        };
        let path = path.clone();
        let content = text.to_string();
        self.blocking(move |s| {
            let fs_path = s.resolve(&path)?;
            // A create refused before anything is written (the link below still decides a
            // race with another process).
            if matches!(mode, PutMode::Create) && fs::symlink_metadata(&fs_path).is_ok() {
                return Err(Error::AlreadyExists {
                    path: path.normalized(),
                });
            }
            if let Some(parent) = fs_path.parent() {
                s.create_parents(parent).map_err(|_| Error::ParentIsAFile {
                    path: path.normalized(),
                    operation: "create",
                })?;
            }
            if let PutMode::Update(want) = &mode {
                match read_text(&fs_path)? {
                    None => {
                        return Err(Error::NotFound {
                            path: path.normalized(),
                        });
                    }
                    Some(old) if content_version(old.as_bytes()) != *want => {
                        return Err(Error::Precondition {
                            path: path.normalized(),
                        });
                    }
                    Some(_) => {}
                }
            }
            let tmp = write_temp(&fs_path, &content)?;
            let placed = match mode {
                PutMode::Create => {
                    let linked = fs::hard_link(&tmp, &fs_path);
                    let _ = fs::remove_file(&tmp);
                    linked.map_err(|e| {
                        if e.kind() == std::io::ErrorKind::AlreadyExists {
                            Error::AlreadyExists {
                                path: path.normalized(),
                            }
                        } else {
                            io("create", &fs_path)(e)
                        }
                    })
                }
                _ => fs::rename(&tmp, &fs_path).map_err(|e| {
                    let _ = fs::remove_file(&tmp);
                    io("write", &fs_path)(e)
                }),
            };
            placed?;
            if let Some(parent) = fs_path.parent() {
                s.sync_dir(parent);
            }
            Ok(Some(content_version(content.as_bytes())))
        })
        .await
    }

    /// Read, applied and written back in one step under this process's lock (one trip to the
    /// blocking pool instead of a read and a conditional write).
    async fn edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        let _guard = self.lock.lock().await;
        let (path, edit) = (path.clone(), edit.clone());
        self.blocking(move |s| {
            let fs_path = s.resolve(&path)?;
            let Some(old) = read_text(&fs_path)? else {
                return Err(Error::NotFound {
                    path: path.normalized(),
                });
            };
            let applied =
                contextq_api::edit::apply(&old, &edit).map_err(|failure| Error::EditRefused {
                    path: path.normalized(),
                    failure,
                })?;
            let tmp = write_temp(&fs_path, &applied.content)?;
            fs::rename(&tmp, &fs_path).map_err(|e| {
                let _ = fs::remove_file(&tmp);
                io("write", &fs_path)(e)
            })?;
            if let Some(parent) = fs_path.parent() {
                s.sync_dir(parent);
            }
            Ok(Edited {
                version: Some(content_version(applied.content.as_bytes())),
                content: Some(applied.content),
                snippet: None,
                changed_line: applied.changed_line,
            })
        })
        .await
    }

    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        let _guard = self.lock.lock().await;
        let path = path.clone();
        self.blocking(move |s| {
            let fs_path = s.resolve(&path)?;
            match read_text(&fs_path) {
                Ok(None) => {
                    return Err(Error::NotFound {
                        path: path.normalized(),
                    });
                }
                Ok(Some(old)) => {
                    if let Some(want) = expected
                        && content_version(old.as_bytes()) != want
                    {
                        return Err(Error::Precondition {
                            path: path.normalized(),
                        });
                    }
                }
                // A file that is not UTF-8 can still be deleted unconditionally.
                Err(_) if expected.is_none() => {}
                Err(e) => return Err(e),
            }
            fs::remove_file(&fs_path).map_err(io("delete", &fs_path))?;
            if let Some(parent) = fs_path.parent() {
                s.sync_dir(parent);
            }
            Ok(())
        })
        .await
    }

    async fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        let _guard = self.lock.lock().await;
        let (from, to) = (from.clone(), to.clone());
        self.blocking(move |s| {
            let src = s.resolve(&from)?;
            let dst = s.resolve(&to)?;
            if fs::symlink_metadata(&src).is_err() {
                return Err(Error::NotFound {
                    path: from.normalized(),
                });
            }
            if fs::symlink_metadata(&dst).is_ok() {
                return Err(Error::AlreadyExists {
                    path: to.normalized(),
                });
            }
            if let Some(parent) = dst.parent() {
                s.create_parents(parent).map_err(|_| Error::ParentIsAFile {
                    path: to.normalized(),
                    operation: "rename to",
                })?;
            }
            fs::rename(&src, &dst).map_err(io("rename", &src))?;
            // The directories whose entries changed, each flushed once.
            let (from_dir, to_dir) = (src.parent(), dst.parent());
            s.sync_dir_of(from_dir);
            if to_dir != from_dir {
                s.sync_dir_of(to_dir);
            }
            Ok(())
        })
        .await
    }

    async fn remove_dir(&self, dir: &MemoryPath) -> Result<()> {
        if dir.is_root() {
            return Ok(());
        }
        let dir = dir.clone();
        self.blocking(move |s| {
            let fs_path = s.resolve(&dir)?;
            match fs::remove_dir_all(&fs_path) {
                Ok(()) => {
                    if let Some(parent) = fs_path.parent() {
                        s.sync_dir(parent);
                    }
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(io("delete directory", &fs_path)(e)),
            }
        })
        .await
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn p(s: &str) -> MemoryPath {
        MemoryPath::parse(s).unwrap()
    }

    /// A store over a new temporary directory (removed when the guard drops).
    fn store() -> (tempfile::TempDir, LocalStore) {
        let tmp = tempfile::tempdir().unwrap();
        let store = LocalStore::new(tmp.path()).unwrap();
        (tmp, store)
    }

    /// A directory outside the store's root, holding a file `secret` that must stay out of reach.
    fn outside() -> tempfile::TempDir {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("secret"), "s3cret").unwrap();
        outside
    }

    #[tokio::test]
    async fn files_are_private_and_writes_atomic() {
        let (tmp, store) = store();
        store
            .put(&p("/memories/a/b.md"), "hi", PutMode::Create)
            .await
            .unwrap();
        let file = tmp.path().join("memories/a/b.md");
        assert_eq!(
            fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let dir = tmp.path().join("memories/a");
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        // No temporary file is left behind.
        let names: Vec<_> = fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec!["b.md"]);
        // Create never overwrites.
        let err = store
            .put(&p("/memories/a/b.md"), "x", PutMode::Create)
            .await
            .unwrap_err();
        assert!(matches!(err, Error::AlreadyExists { .. }));
        assert_eq!(fs::read_to_string(&file).unwrap(), "hi");
    }

    #[tokio::test]
    async fn links_that_leave_the_root_are_refused() {
        let (tmp, store) = store();
        let outside = outside();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("memories/link")).unwrap();
        assert!(store.get(&p("/memories/link/secret")).await.is_err());
        assert!(
            store
                .put(&p("/memories/link/new"), "x", PutMode::Overwrite)
                .await
                .is_err()
        );
        assert!(!outside.path().join("new").exists());
        let listing = store.list(&MemoryPath::root()).await.unwrap().unwrap();
        assert!(listing.files.is_empty() && listing.dirs.is_empty());
        // Claude reads exactly the escape message, with the path as it wrote it.
        let tool = crate::MemoryTool::new(store);
        for (input, path) in [
            (
                serde_json::json!({"command": "view", "path": "/memories//link/secret"}),
                "/memories//link/secret",
            ),
            (
                serde_json::json!({"command": "create", "path": "/memories/link/new/", "file_text": "x"}),
                "/memories/link/new/",
            ),
        ] {
            use crate::MemoryToolHandlers;
            let r = tool.execute(input).await;
            assert_eq!(
                (r.is_error, r.content),
                (
                    true,
                    format!("Error: Path {path} would escape /memories directory")
                )
            );
        }
        assert!(!outside.path().join("new").exists());
    }

    /// A link that stays inside the root is listed and read through (as Anthropic's SDKs do,
    /// since Python 2.17.0 and TypeScript 1.17.0); swapped for one that leaves, it is refused;
    /// nothing is written through either.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn links_inside_the_root_are_listed_and_read() {
        let (tmp, store) = store();
        let outside = outside();
        store
            .put(&p("/memories/notes/real.md"), "real\n", PutMode::Create)
            .await
            .unwrap();
        let link = tmp.path().join("memories/alias.md");
        std::os::unix::fs::symlink("notes/real.md", &link).unwrap();
        let dir_link = tmp.path().join("memories/shortcut");
        std::os::unix::fs::symlink("notes", &dir_link).unwrap();
        let listing = store.list(&MemoryPath::root()).await.unwrap().unwrap();
        let files: Vec<String> = listing.files.iter().map(|f| f.path.normalized()).collect();
        assert!(
            files.contains(&"/memories/alias.md".to_string()),
            "{files:?}"
        );
        assert!(
            listing
                .dirs
                .iter()
                .any(|d| d.path.normalized() == "/memories/shortcut"),
            "{:?}",
            listing.dirs
        );
        assert_eq!(
            store
                .get(&p("/memories/alias.md"))
                .await
                .unwrap()
                .unwrap()
                .content,
            "real\n"
        );
        assert_eq!(
            store
                .get(&p("/memories/shortcut/real.md"))
                .await
                .unwrap()
                .unwrap()
                .content,
            "real\n"
        );
        // Swapped for a link that leaves the root: refused, and no longer listed.
        fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), &link).unwrap();
        assert!(matches!(
            store.get(&p("/memories/alias.md")).await,
            Err(Error::Path(PathError::Escape(_)))
        ));
        let relative = tmp.path().join("memories/up.md");
        std::os::unix::fs::symlink("../../../../../../../../../etc/hostname", &relative).unwrap();
        assert!(store.get(&p("/memories/up.md")).await.is_err());
        let listing = store.list(&MemoryPath::root()).await.unwrap().unwrap();
        let files: Vec<String> = listing.files.iter().map(|f| f.path.normalized()).collect();
        assert!(
            !files
                .iter()
                .any(|f| f.contains("alias") || f.contains("up.md")),
            "{files:?}"
        );
        // Never written through.
        assert!(
            store
                .put(&p("/memories/shortcut/new.md"), "x", PutMode::Overwrite)
                .await
                .is_err()
        );
        assert_eq!(
            fs::read_to_string(outside.path().join("secret")).unwrap(),
            "s3cret"
        );
    }
}
