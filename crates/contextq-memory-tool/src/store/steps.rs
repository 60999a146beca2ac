//! The optional [`Store`] operations done in steps of the required ones: the trait's defaults,
//! as `object_store`'s default `rename` is a copy and a delete.
//!
//! A store with a native operation (ContextQ's `text-edit`, `rename`, `by-prefix` and
//! `delete-by-external` extensions, a directory's atomic rename) overrides the method; one that
//! has it only sometimes (a server without the extension) calls these functions itself. Each
//! step keeps the [`Store`] contract: a conditional write lost to another writer is read again
//! and retried with [`Backoff`] for [`Store::edit_budget`]; a command that stops part way
//! answers [`Error::Stopped`], with Claude's sentence and what each path it touched holds.

use std::time::Duration;

use super::{Edited, Entry, FileMeta, Listing, Page, PutMode, Store, TextEdit, Version, Viewed};
use crate::effects::{Applied, Effects};
use crate::error::{Error, Result};
use crate::path::MemoryPath;
use crate::render;
use crate::retry::Backoff;
use crate::search::{Found, MAX_SCAN_BYTES, MAX_SCAN_FILES, Query, Searched};
use contextq_api::search::{MAX_CONTENT_TERMS, MAX_PATH_TERMS, index_terms};

/// How long an edit (or delete, or rename) that keeps losing races to other writers keeps
/// retrying before Claude is told the file kept changing: 10 seconds ([`Store::edit_budget`]).
pub const DEFAULT_EDIT_BUDGET: Duration = Duration::from_secs(10);

/// [`Store::view`] in two steps: [`Store::get`] (not at the root), then [`Store::outline`].
pub async fn view<S: Store + ?Sized>(store: &S, path: &MemoryPath) -> Result<Viewed> {
    if !path.is_root()
        && let Some(entry) = store.get(path).await?
    {
        return Ok(Viewed::File(entry));
    }
    Ok(match store.outline(path).await? {
        Some(listing) => Viewed::Directory(listing),
        None => Viewed::Missing,
    })
}

/// [`Store::list_after`] from [`Store::list`]: every file beneath `dir`, sorted by path as text,
/// those after `page.after`, at most `page.limit`.
pub async fn list_after<S: Store + ?Sized>(
    store: &S,
    dir: &MemoryPath,
    page: Page<'_>,
) -> Result<Vec<FileMeta>> {
    let Page { after, limit } = page;
    let after = after.map(MemoryPath::normalized);
    let mut files: Vec<(String, FileMeta)> = store
        .list(dir)
        .await?
        .map(|l| l.files)
        .unwrap_or_default()
        .into_iter()
        .map(|f| (f.path.normalized(), f))
        .filter(|(p, _)| after.as_ref().is_none_or(|a| p > a))
        .collect();
    files.sort_by(|a, b| a.0.cmp(&b.0));
    files.truncate(limit);
    Ok(files.into_iter().map(|(_, f)| f).collect())
}

/// [`Store::search`] by reading every file beneath `dir` (at most [`MAX_SCAN_FILES`] files
/// and [`MAX_SCAN_BYTES`] bytes), with the contract's query rules; hidden files (what `view`
/// leaves out) are not searched. For stores without an index.
pub async fn search<S: Store + ?Sized>(
    store: &S,
    query: &Query,
    dir: &MemoryPath,
    limit: usize,
) -> Result<Searched> {
    let Some(listing) = store.list(dir).await? else {
        return Ok(Searched::default());
    };
    let mut files: Vec<MemoryPath> = listing
        .files
        .into_iter()
        .map(|f| f.path)
        .filter(|p| !p.segments().iter().any(|s| crate::render::hidden(s)))
        .collect();
    files.sort_by_key(|p| p.raw().to_string());
    let (mut read, mut bytes) = (0, 0);
    let mut stopped = None;
    let mut found = Vec::new();
    for path in files {
        if read >= MAX_SCAN_FILES || bytes >= MAX_SCAN_BYTES {
            stopped = Some(read);
            break;
        }
        let Some(entry) = store.get(&path).await? else {
            continue;
        };
        read += 1;
        bytes += entry.content.len();
        let path_terms = index_terms(path.raw(), MAX_PATH_TERMS);
        let content_terms = index_terms(&entry.content, MAX_CONTENT_TERMS);
        if query.matches(&path_terms, &content_terms) {
            found.push(Found {
                score: query.scan_score(&path_terms, &content_terms),
                lines: query.snippets(&entry.content),
                path,
            });
        }
    }
    found.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.path.raw().cmp(b.path.raw()))
    });
    let more = found.len() > limit;
    found.truncate(limit);
    Ok(Searched {
        found,
        more,
        scan_stopped_at: stopped,
        capped: false,
    })
}

/// [`Store::edit`] as read, apply, write back at the version read; on a concurrent change,
/// read again and re-apply. [`Error::NotFound`] when no file is there.
pub async fn edit<S: Store + ?Sized>(
    store: &S,
    path: &MemoryPath,
    edit: &TextEdit,
) -> Result<Edited> {
    let mut backoff = Backoff::new(store.edit_budget());
    loop {
        let Some(entry) = store.get(path).await? else {
            return Err(Error::NotFound {
                path: path.normalized(),
            });
        };
        let applied = contextq_api::edit::apply(&entry.content, edit).map_err(|failure| {
            Error::EditRefused {
                path: path.normalized(),
                failure,
            }
        })?;
        let mode = entry.version.map_or(PutMode::Overwrite, PutMode::Update);
        match store.put(path, &applied.content, mode).await {
            Ok(version) => {
                return Ok(Edited {
                    content: Some(applied.content),
                    snippet: None,
                    changed_line: applied.changed_line,
                    version,
                });
            }
            Err(Error::Precondition { .. }) => {
                if !backoff.retry().await {
                    return Err(gave_up(&backoff, path));
                }
            }
            // Deleted since it was read: said as it is, not looked up again.
            Err(Error::NotFound { .. }) => {
                return Err(stopped(render::does_not_exist_valid(path.raw())));
            }
            Err(e) => return Err(e),
        }
    }
}

/// [`Store::delete_file`] as read, then delete at the version read; on a concurrent change,
/// read again. `Ok(false)` when no file is there.
pub async fn delete_file<S: Store + ?Sized>(store: &S, path: &MemoryPath) -> Result<bool> {
    let mut backoff = Backoff::new(store.edit_budget());
    loop {
        let Some(entry) = store.get(path).await? else {
            return Ok(false);
        };
        match store.delete(path, entry.version).await {
            Ok(()) => return Ok(true),
            // Changed or deleted since it was read: look again.
            Err(Error::Precondition { .. } | Error::NotFound { .. }) => {
                if !backoff.retry().await {
                    return Err(gave_up(&backoff, path));
                }
            }
            Err(e) => return Err(e),
        }
    }
}

/// [`Store::delete_dir`] file by file, listing again while the store capped the listing, then
/// [`Store::remove_dir`]. [`Error::NotFound`] when `dir` is not a directory.
pub async fn delete_dir<S: Store + ?Sized>(store: &S, dir: &MemoryPath) -> Result<()> {
    let Some(mut listing) = store.list(dir).await? else {
        return Err(Error::NotFound {
            path: dir.normalized(),
        });
    };
    let mut effects = Effects::default();
    let mut deleted = 0usize;
    loop {
        let mut files: Vec<_> = listing.files.into_iter().map(|f| f.path).collect();
        files.sort();
        let before = deleted;
        for (i, file) in files.iter().enumerate() {
            let e = match store.delete(file, None).await {
                Ok(()) | Err(Error::NotFound { .. }) => {
                    effects.add(file, Applied::Yes);
                    deleted += 1;
                    continue;
                }
                Err(e) => e,
            };
            // Stopped: this file's outcome is unknown or it is still there, and so is the rest.
            let (unknown, cause) = cause_of(e);
            effects.add(file, failed(unknown));
            let rest = &files[i + 1..];
            rest.iter().for_each(|p| effects.add(p, Applied::No));
            let mut left: Vec<String> = rest.iter().map(MemoryPath::normalized).collect();
            if !unknown {
                left.insert(0, file.normalized());
            }
            let total = deleted + files.len() - i;
            return Err(effects.stopped(render::delete_tree_stopped(
                dir.raw(),
                deleted,
                total,
                unknown.then(|| file.normalized()).as_deref(),
                &left,
                &cause,
            )));
        }
        let pass = Pass {
            truncated: listing.truncated,
            progressed: deleted > before,
            done: deleted,
            verb: "deleted",
        };
        match next_pass(store, dir, pass).await {
            Ok(Some(next)) => listing = next,
            Ok(None) => break,
            Err(message) => return Err(effects.stopped(message)),
        }
    }
    store.remove_dir(dir).await.map_err(as_told)
}

/// [`Store::rename`] as create-only copies, then deletes of the sources at the versions
/// copied: a file, else every file beneath a directory. [`Error::NotFound`] when nothing is at
/// `from`, [`Error::AlreadyExists`] when something is at `to`.
pub async fn rename<S: Store + ?Sized>(
    store: &S,
    from: &MemoryPath,
    to: &MemoryPath,
) -> Result<()> {
    if let Some(entry) = store.get(from).await? {
        return rename_file(store, from, to, entry).await;
    }
    match store.list(from).await? {
        Some(listing) => rename_dir(store, from, to, listing).await,
        None => Err(Error::NotFound {
            path: from.normalized(),
        }),
    }
}

async fn rename_file<S: Store + ?Sized>(
    store: &S,
    old: &MemoryPath,
    new: &MemoryPath,
    mut entry: Entry,
) -> Result<()> {
    let mut backoff = Backoff::new(store.edit_budget());
    loop {
        let created = match store.put(new, &entry.content, PutMode::Create).await {
            Ok(v) => v,
            Err(e @ Error::AlreadyExists { .. }) => return Err(e),
            Err(Error::OutcomeUnknown { cause, .. }) => {
                let message = render::rename_copy_unknown(old.raw(), new.raw(), &cause.to_string());
                return Err(rename_stopped(
                    (new, Applied::Unknown),
                    (old, Applied::No),
                    message,
                ));
            }
            Err(e) => return Err(as_told(e)),
        };
        let cause = match store.delete(old, entry.version).await {
            Ok(()) | Err(Error::NotFound { .. }) => return Ok(()),
            Err(Error::OutcomeUnknown { cause, .. }) => {
                // The source may be gone: the copy is all that is sure to remain, so it stays.
                let message = render::rename_source_unknown(
                    old.raw(),
                    new.raw(),
                    entry.id.as_deref().unwrap_or("unknown"),
                    &cause.to_string(),
                );
                return Err(rename_stopped(
                    (new, Applied::Yes),
                    (old, Applied::Unknown),
                    message,
                ));
            }
            Err(e) => e,
        };
        // The source is known to be still there: remove the copy again if it is still ours.
        match store.delete(new, created).await {
            Ok(()) | Err(Error::NotFound { .. }) => {}
            Err(Error::OutcomeUnknown { cause: undo, .. }) => {
                let message = render::rename_undo_unknown(
                    old.raw(),
                    new.raw(),
                    &cause.tool_message(),
                    &undo.to_string(),
                );
                return Err(rename_stopped(
                    (new, Applied::Unknown),
                    (old, Applied::No),
                    message,
                ));
            }
            Err(_) => {
                let message = render::rename_both_exist(
                    old.raw(),
                    new.raw(),
                    entry.id.as_deref().unwrap_or("unknown"),
                    &cause.tool_message(),
                );
                return Err(rename_stopped(
                    (new, Applied::Yes),
                    (old, Applied::No),
                    message,
                ));
            }
        }
        if matches!(cause, Error::Precondition { .. }) {
            // The source changed while we copied it: start again from its new content.
            if !backoff.retry().await {
                return Err(gave_up(&backoff, old));
            }
            match store.get(old).await? {
                Some(fresh) => {
                    entry = fresh;
                    continue;
                }
                None => {
                    return Err(Error::NotFound {
                        path: old.normalized(),
                    });
                }
            }
        }
        return Err(stopped(render::rename_failed(
            old.raw(),
            new.raw(),
            &cause.tool_message(),
        )));
    }
}

/// Moves every file beneath `old` to `new`: copies (create-only), then deletes the sources;
/// lists again while the store capped the listing.
async fn rename_dir<S: Store + ?Sized>(
    store: &S,
    old: &MemoryPath,
    new: &MemoryPath,
    mut listing: Listing,
) -> Result<()> {
    if store.get(new).await?.is_some() || store.list(new).await?.is_some() {
        return Err(Error::AlreadyExists {
            path: new.normalized(),
        });
    }
    let mut effects = Effects::default();
    // Files moved by earlier passes (a capped listing needs more than one).
    let mut moved = 0usize;
    loop {
        let mut files: Vec<_> = listing.files.into_iter().map(|f| f.path).collect();
        files.sort();
        // Phase 1: copy every file (create-only). On failure, undo this pass's copies.
        let mut copied: Vec<Copied> = Vec::new();
        for src in &files {
            let Some(dst) = src.rebase(old, new) else {
                continue; // not beneath `old`: never listed by a conforming store
            };
            let step = match store.get(src).await {
                Ok(None) => continue, // deleted meanwhile: nothing to move
                Ok(Some(entry)) => store
                    .put(&dst, &entry.content, PutMode::Create)
                    .await
                    .map(|v| (entry.version, v)),
                Err(e) => Err(e),
            };
            let e = match step {
                Ok((src_version, dst_version)) => {
                    copied.push(Copied {
                        src: src.clone(),
                        dst,
                        src_version,
                        dst_version,
                    });
                    continue;
                }
                Err(e) => e,
            };
            let (failed_unknown, cause) = cause_of(e);
            let mut both = Vec::new();
            let mut maybe = Vec::new();
            if failed_unknown {
                effects.add(&dst, Applied::Unknown);
                maybe.push(dst.normalized());
            }
            for c in &copied {
                effects.add(&c.src, Applied::No);
                match store.delete(&c.dst, c.dst_version.clone()).await {
                    Ok(()) | Err(Error::NotFound { .. }) => effects.add(&c.dst, Applied::No),
                    Err(Error::OutcomeUnknown { .. }) => {
                        effects.add(&c.dst, Applied::Unknown);
                        maybe.push(c.dst.normalized());
                    }
                    Err(_) => {
                        effects.add(&c.dst, Applied::Yes);
                        both.push(c.dst.normalized());
                    }
                }
            }
            let state = render::rename_dir_state(moved, new.raw(), &both, &maybe);
            return Err(effects.stopped(render::rename_dir_copy_failed(
                old.raw(),
                new.raw(),
                &src.normalized(),
                &cause,
                &state,
            )));
        }
        // Phase 2: delete the sources.
        for (i, c) in copied.iter().enumerate() {
            let e = match store.delete(&c.src, c.src_version.clone()).await {
                Ok(()) | Err(Error::NotFound { .. }) => {
                    effects.add(&c.src, Applied::Yes);
                    effects.add(&c.dst, Applied::Yes);
                    continue;
                }
                Err(e) => e,
            };
            let (unknown, cause) = cause_of(e);
            effects.add(&c.dst, Applied::Yes);
            effects.add(&c.src, failed(unknown));
            let mut left: Vec<String> = Vec::new();
            if !unknown {
                left.push(c.src.normalized());
            }
            for rest in &copied[i + 1..] {
                effects.add(&rest.dst, Applied::Yes);
                effects.add(&rest.src, Applied::No);
                left.push(rest.src.normalized());
            }
            return Err(effects.stopped(render::rename_dir_delete_failed(
                old.raw(),
                new.raw(),
                &left,
                unknown.then(|| c.src.normalized()).as_deref(),
                moved + copied.len(),
                &cause,
            )));
        }
        moved += copied.len();
        let pass = Pass {
            truncated: listing.truncated,
            progressed: !copied.is_empty(),
            done: moved,
            verb: "moved",
        };
        match next_pass(store, old, pass).await {
            Ok(Some(next)) => listing = next,
            Ok(None) => break,
            Err(message) => return Err(effects.stopped(message)),
        }
    }
    store.remove_dir(old).await.map_err(as_told)
}

/// A pass over one listing of a directory, done.
struct Pass {
    /// The listing was capped: there may be more.
    truncated: bool,
    /// The pass changed something (else listing again would show the same page).
    progressed: bool,
    /// Files done so far, and how (`deleted`, `moved`).
    done: usize,
    verb: &'static str,
}

/// The listing of `dir` for the next pass after `pass`: `None` when nothing is left. A store
/// that showed one page only is asked again; a pass that changed nothing while more is left,
/// or a listing that fails, stops the operation (Claude's sentence).
async fn next_pass<S: Store + ?Sized>(
    store: &S,
    dir: &MemoryPath,
    pass: Pass,
) -> std::result::Result<Option<Listing>, String> {
    if !pass.truncated {
        return Ok(None);
    }
    match store.list(dir).await {
        Ok(Some(next)) if !next.files.is_empty() && pass.progressed => Ok(Some(next)),
        Ok(Some(next)) if next.files.is_empty() && !next.truncated => Ok(None),
        Ok(None) => Ok(None),
        Ok(Some(_)) => Err(render::capped_listing_stopped(
            dir.raw(),
            pass.done,
            pass.verb,
        )),
        Err(e) => Err(e.tool_message()),
    }
}

/// One file copied by a directory rename.
struct Copied {
    src: MemoryPath,
    dst: MemoryPath,
    src_version: Option<Version>,
    dst_version: Option<Version>,
}

impl Effects {
    /// A step-wise operation stopped with these effects.
    fn stopped(self, message: String) -> Error {
        Error::Stopped {
            message,
            effects: self.into_vec(),
        }
    }
}

/// A file's rename stopped: what is known of its copy at `new` and of its source at `old`.
fn rename_stopped(
    (new, copy): (&MemoryPath, Applied),
    (old, source): (&MemoryPath, Applied),
    message: String,
) -> Error {
    let mut effects = Effects::default();
    effects.add(new, copy);
    effects.add(old, source);
    effects.stopped(message)
}

/// Stopped before changing anything, with this sentence.
fn stopped(message: String) -> Error {
    Effects::default().stopped(message)
}

/// What a failed step did to its path: unknown when its outcome is, else nothing.
fn failed(unknown: bool) -> Applied {
    if unknown {
        Applied::Unknown
    } else {
        Applied::No
    }
}

/// Whether a failed step's outcome is unknown, and its cause in words.
fn cause_of(e: Error) -> (bool, String) {
    match e {
        Error::OutcomeUnknown { cause, .. } => (true, cause.to_string()),
        e => (false, e.tool_message()),
    }
}

/// An error of a step that the caller would otherwise read as the operation's own outcome
/// ("nothing at the source", "something at the destination"): passed on as its own sentence.
fn as_told(e: Error) -> Error {
    match e {
        Error::NotFound { .. } | Error::AlreadyExists { .. } => stopped(e.tool_message()),
        e => e,
    }
}

/// Claude's answer when the budget is spent.
fn gave_up(backoff: &Backoff, path: &MemoryPath) -> Error {
    stopped(render::edit_conflict(
        path.raw(),
        backoff.attempts(),
        backoff.elapsed(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Listing, MemoryStore};

    fn p(raw: &str) -> MemoryPath {
        MemoryPath::parse(raw).unwrap()
    }

    async fn text(store: &impl Store, raw: &str) -> Option<String> {
        store.get(&p(raw)).await.unwrap().map(|e| e.content)
    }

    /// A store with only the required methods renames, edits and deletes through the trait's
    /// defaults, with the contract's outcomes.
    #[tokio::test]
    async fn a_store_with_the_required_methods_only_does_the_rest_in_steps() {
        let store = MemoryStore::new();
        for (path, body) in [("/memories/a.md", "one\n"), ("/memories/d/x.md", "x\n")] {
            store.put(&p(path), body, PutMode::Create).await.unwrap();
        }
        store
            .rename(&p("/memories/a.md"), &p("/memories/b.md"))
            .await
            .unwrap();
        assert_eq!(text(&store, "/memories/a.md").await, None);
        assert_eq!(
            text(&store, "/memories/b.md").await.as_deref(),
            Some("one\n")
        );
        let e = store.rename(&p("/memories/d"), &p("/memories/b.md")).await;
        assert!(matches!(e, Err(Error::AlreadyExists { .. })), "{e:?}");
        let e = store.rename(&p("/memories/none"), &p("/memories/c")).await;
        assert!(matches!(e, Err(Error::NotFound { .. })), "{e:?}");
        store
            .rename(&p("/memories/d"), &p("/memories/e"))
            .await
            .unwrap();
        assert_eq!(
            text(&store, "/memories/e/x.md").await.as_deref(),
            Some("x\n")
        );

        let edit = TextEdit::StrReplace {
            old_str: "one".into(),
            new_str: "two".into(),
        };
        let edited = store.edit(&p("/memories/b.md"), &edit).await.unwrap();
        assert_eq!(edited.content.as_deref(), Some("two\n"));
        assert_eq!(edited.changed_line, Some(1));
        let e = store.edit(&p("/memories/b.md"), &edit).await;
        assert!(matches!(e, Err(Error::EditRefused { .. })), "{e:?}");
        let e = store.edit(&p("/memories/none.md"), &edit).await;
        assert!(matches!(e, Err(Error::NotFound { .. })), "{e:?}");

        assert!(store.delete_file(&p("/memories/b.md")).await.unwrap());
        assert!(!store.delete_file(&p("/memories/b.md")).await.unwrap());
        assert!(!store.delete_file(&p("/memories/e")).await.unwrap());
        store.delete_dir(&p("/memories/e")).await.unwrap();
        assert!(store.list(&p("/memories/e")).await.unwrap().is_none());
        let e = store.delete_dir(&p("/memories/e")).await;
        assert!(matches!(e, Err(Error::NotFound { .. })), "{e:?}");
    }

    /// A memory store whose deletes of one path fail (not applied).
    struct FailingDelete(MemoryStore, &'static str);

    #[async_trait::async_trait]
    impl Store for FailingDelete {
        async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
            self.0.get(path).await
        }
        async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
            self.0.list(dir).await
        }
        async fn put(
            &self,
            path: &MemoryPath,
            text: &str,
            mode: PutMode,
        ) -> Result<Option<Version>> {
            self.0.put(path, text, mode).await
        }
        async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
            if path.normalized() == self.1 {
                return Err(Error::Io {
                    operation: "delete",
                    path: self.1.into(),
                    source: std::io::Error::other("disk on fire"),
                });
            }
            self.0.delete(path, expected).await
        }
    }

    /// A default that stops part way says what each path holds, and words it for Claude.
    #[tokio::test]
    async fn a_default_stopped_part_way_says_what_each_path_holds() {
        let store = FailingDelete(MemoryStore::new(), "/memories/d/b.md");
        for name in ["a", "b", "c"] {
            let path = p(&format!("/memories/d/{name}.md"));
            store.put(&path, name, PutMode::Create).await.unwrap();
        }
        let Err(Error::Stopped { message, effects }) = store.delete_dir(&p("/memories/d")).await
        else {
            panic!("not stopped");
        };
        let applied: Vec<(&str, Applied)> = effects
            .iter()
            .map(|e| (e.path.as_str(), e.applied))
            .collect();
        assert_eq!(
            applied,
            [
                ("/memories/d/a.md", Applied::Yes),
                ("/memories/d/b.md", Applied::No),
                ("/memories/d/c.md", Applied::No),
            ]
        );
        assert!(message.contains("disk on fire"), "{message}");
        assert!(message.contains("/memories/d/b.md"), "{message}");
        assert_eq!(text(&store, "/memories/d/a.md").await, None);
        assert_eq!(text(&store, "/memories/d/c.md").await.as_deref(), Some("c"));

        // A file rename whose source delete fails takes its copy back: nothing changed.
        let e = store
            .rename(&p("/memories/d/b.md"), &p("/memories/z.md"))
            .await;
        let Err(Error::Stopped { effects, .. }) = e else {
            panic!("{e:?}");
        };
        assert!(effects.is_empty(), "{effects:?}");
        assert_eq!(text(&store, "/memories/z.md").await, None);
        assert_eq!(text(&store, "/memories/d/b.md").await.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn a_scan_finds_ranks_and_numbers_lines() {
        let store = MemoryStore::new();
        for (path, text) in [
            (
                "/memories/ops.md",
                "intro\nTicket OPS-4471 rotated the staging password\n",
            ),
            ("/memories/staging.md", "staging staging\nstaging"),
            ("/memories/.hidden/x.md", "staging"),
            ("/memories/other.md", "nothing here"),
        ] {
            store.put(&p(path), text, PutMode::Overwrite).await.unwrap();
        }
        let q = Query::parse("staging").unwrap();
        let s = search(&store, &q, &MemoryPath::root(), 10).await.unwrap();
        let paths: Vec<&str> = s.found.iter().map(|f| f.path.raw()).collect();
        assert_eq!(paths, ["/memories/staging.md", "/memories/ops.md"]);
        assert_eq!(s.found[1].lines[0].line, 2);
        let q = Query::parse("OPS-4471").unwrap();
        let s = search(&store, &q, &MemoryPath::root(), 10).await.unwrap();
        let text = crate::search::answer("OPS-4471", &MemoryPath::root(), 10, &s, 20_000);
        assert_eq!(
            text,
            "1 file in /memories match \"OPS-4471\", best first:\n\n/memories/ops.md\n     2\tTicket OPS-4471 rotated the staging password"
        );
        let s = search(
            &store,
            &Query::parse("staging").unwrap(),
            &MemoryPath::root(),
            1,
        )
        .await
        .unwrap();
        assert!(s.more);
        let text = crate::search::answer("staging", &MemoryPath::root(), 1, &s, 20_000);
        assert!(
            text.ends_with("or ask for a higher limit (at most 50)."),
            "{text}"
        );
    }
}
