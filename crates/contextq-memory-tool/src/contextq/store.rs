//! `ContextQStore`: memory files as ContextQ contexts, over the typed client.
//!
//! # Path model (the TypeScript package's, plus pinning)
//! - Per-workspace mode (default): `/memories` lists workspaces, `/memories/<ws>` is a workspace
//!   (slug lowercased), `/memories/<ws>/a/b.md` is the context with external id
//!   `<tag>:<ws>/a/b.md` (`mem-tool:` by default: external ids are unique per tenant, so the
//!   workspace is part of the key).
//! - Pinned mode (`workspace` option): the whole tree lives in one workspace;
//!   `/memories/a/b.md` is `<tag>:<ws>/a/b.md`.
//!
//! # Rules
//! - Every row written carries the configured `type` and tag; only rows carrying the tag, and
//!   living in the workspace their external id names, are ever read, listed, changed or
//!   deleted (a row of workspace `other` holding `mem-tool:acme/x.md` is absent for `acme`).
//! - Listings page through `nextCursor` (no 500-row cap), filter by `externalIdPrefix` on the
//!   server and again here (segment-aligned), and report `sizeBytes` (or `updatedAt` when the
//!   server has no sizes).
//! - The server's extensions ([`Extensions`]) are known before the first write: from its first
//!   answer, or from one probe request. Extension fields and parameters (`ifAbsent`,
//!   `externalIdPrefix`) are only sent to a server that shows them.
//! - With conditional requests, create is create-only (`ifAbsent`) and updates and deletes send
//!   `If-Match`. Without them (a plain ContextQ (the contract without extensions)) create checks, then upserts, and
//!   edits write unconditionally: the TypeScript package's documented non-atomic behaviour.
//! - A write whose outcome is unknown (timeout, dropped connection, 5xx) is reconciled by
//!   reading the row back: applied, not applied (then retried once), or, when the read-back
//!   cannot settle it, [`Error::OutcomeUnknown`]; never guessed.
//!
//! - With the `text-edit` extension, `str_replace` and `insert` are one request each, applied on
//!   the server under the row's lock (so concurrent edits never conflict), with a random
//!   `Idempotency-Key` so that a repeat after a lost answer is applied at most once.
//!
//! # Layout, by role
//! This file: the store, its path model (`Target`, external ids), the id cache, the extension
//! probe, the [`Store`] implementation and `native_else`, the one place that chooses between
//! an extension and the seed's steps. `read` (a file, a `view`), `write` (creates, updates,
//! deletes, bulk creates, settling unknown outcomes), `list` (directories, pages, search),
//! `native` (the one-request operations of the extensions).
//!
//! Requests per store call: `get` 1, `list` 1 per 500 rows (+1 at the root in per-workspace
//! mode), `put` 1 (an update needs the row id: known from the `get` that precedes it),
//! `delete` 1 (same), `edit` 1.

mod list;
mod native;
mod read;
mod write;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;

use super::client::{
    Client, ContextInput, ContextSummary, DeletePrefix, EditContext, Extensions, Fetched,
    ListParams, PrefixChanges, RenameContext, RenamePrefix, SearchParams,
};
use super::error::{ContextQError, ErrorCode};
use crate::error::{Error, Result};
use crate::path::MemoryPath;
use crate::search::{Query, Searched};
use crate::store::{
    DirMeta, Edited, Entry, FileMeta, Listing, Page, PutMode, Store, TextEdit, Version, Viewed,
    steps,
};
use contextq_api::Context;
use contextq_api::bodies::Within;
use contextq_api::limits::{MAX_BULK_ITEMS, MAX_LARGE_BULK_ITEMS};

/// At most this much content in one bulk-upsert of [`Store::create_many`]: within
/// contextq-server's 8 MiB body (content escapes into JSON up to twice over) and small enough
/// for another ContextQ to take.
pub const BULK_BYTES: usize = 2 << 20;

/// Where a path lives in ContextQ.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    workspace: String,
    /// Segments below the workspace joined with `/` (empty: the workspace itself).
    rel: String,
}

impl Target {
    /// The one format of an external id: `<tag>:<workspace>/<rel>` (a file).
    fn external_id(&self, tag: &str) -> String {
        format!("{tag}:{}/{}", self.workspace, self.rel)
    }

    /// The prefix of every external id beneath it as a directory: `<tag>:<workspace>/` or
    /// `<tag>:<workspace>/<rel>/`.
    fn prefix(&self, tag: &str) -> String {
        if self.rel.is_empty() {
            format!("{tag}:{}/", self.workspace)
        } else {
            format!("{tag}:{}/{}/", self.workspace, self.rel)
        }
    }
}

/// A [`Store`] on ContextQ.
#[derive(Debug)]
pub struct ContextQStore {
    client: Client,
    tag: String,
    context_type: String,
    workspace: Option<String>,
    create_workspaces: bool,
    ids: Mutex<HashMap<String, String>>,
    edit_budget: Duration,
}

/// Whether a failed write may still have been applied ([`ContextQError::may_have_applied`]).
fn is_ambiguous(e: &Error) -> bool {
    e.contextq().is_some_and(ContextQError::may_have_applied)
}

/// Whether `e` is ContextQ's refusal with `code`.
fn refused(e: &Error, code: ErrorCode) -> bool {
    e.contextq_code() == Some(code)
}

fn unknown(path: &MemoryPath, operation: &'static str, cause: Error) -> Error {
    Error::OutcomeUnknown {
        path: path.normalized(),
        operation,
        cause: Box::new(cause),
    }
}

/// The workspace slug a folder name stands for: lowercased, and valid by the contract's rule.
pub(crate) fn workspace_slug(segment: &str) -> Result<String> {
    let slug = segment.to_lowercase();
    if contextq_api::valid_slug(&slug) {
        Ok(slug)
    } else {
        Err(Error::from(ContextQError::NotAWorkspace {
            segment: segment.to_string(),
        }))
    }
}

impl ContextQStore {
    /// A store over `client`. `workspace` pins the tree to one workspace.
    pub fn new(
        client: Client,
        tag: impl Into<String>,
        context_type: impl Into<String>,
        workspace: Option<String>,
        create_workspaces: bool,
    ) -> Result<Self> {
        let tag = tag.into();
        if tag.is_empty() || tag.contains(['/', ':']) || tag.len() > 64 {
            return Err(Error::Config {
                message: format!(
                    "the tag {tag:?} must be 1 to 64 characters without '/' or ':' (default mem-tool)"
                ),
            });
        }
        let workspace = match workspace {
            Some(ws) => Some(workspace_slug(&ws).map_err(|_| Error::Config {
                message: format!(
                    "the workspace {ws:?} is not a ContextQ slug: use 1 to 63 of a-z, 0-9 and '-'"
                ),
            })?),
            None => None,
        };
        Ok(ContextQStore {
            client,
            tag,
            context_type: context_type.into(),
            workspace,
            create_workspaces,
            ids: Mutex::new(HashMap::new()),
            edit_budget: steps::DEFAULT_EDIT_BUDGET,
        })
    }

    /// How long an edit, delete or rename done in steps (a server without the extension for
    /// it) keeps retrying when other writers keep changing the file (default
    /// [`steps::DEFAULT_EDIT_BUDGET`]; zero: one attempt).
    pub fn with_edit_budget(mut self, budget: Duration) -> Self {
        self.edit_budget = budget;
        self
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The tag every row carries.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The pinned workspace, if any.
    pub fn pinned_workspace(&self) -> Option<&str> {
        self.workspace.as_deref()
    }

    /// Whether the server showed conditional requests (`None` until its first answer).
    pub fn conditional_requests(&self) -> Option<bool> {
        self.client
            .known_extensions()
            .map(|e| e.conditional_requests)
    }

    /// The server's extensions (one probe request if nothing was learnt yet).
    async fn extensions(&self) -> Result<Extensions> {
        self.client.extensions().await
    }

    /// The external id of a memory path (`None` for directories only a workspace can be).
    pub fn external_id(&self, path: &MemoryPath) -> Result<Option<String>> {
        Ok(self
            .target(path)?
            .filter(|t| !t.rel.is_empty())
            .map(|t| t.external_id(&self.tag)))
    }

    /// Where the history of `path` lives: its workspace, and its external id (a file) or the
    /// prefix of the external ids beneath it (a directory). `None`: the root in per-workspace
    /// mode, which spans workspaces.
    pub(crate) fn history_key(
        &self,
        path: &MemoryPath,
        dir: bool,
    ) -> Result<Option<(String, String)>> {
        Ok(self.target(path)?.map(|t| {
            let key = if dir {
                t.prefix(&self.tag)
            } else {
                t.external_id(&self.tag)
            };
            (t.workspace, key)
        }))
    }

    /// The memory path of one of this store's external ids (`None` if it is not one).
    pub(crate) fn path_of(&self, external_id: &str) -> Option<MemoryPath> {
        let rest = external_id
            .strip_prefix(self.tag.as_str())?
            .strip_prefix(':')?;
        let (ws, rel) = rest.split_once('/')?;
        match &self.workspace {
            Some(pinned) if pinned == ws => MemoryPath::root().join(rel).ok(),
            Some(_) => None,
            None => MemoryPath::root().join(&format!("{ws}/{rel}")).ok(),
        }
    }

    fn target(&self, path: &MemoryPath) -> Result<Option<Target>> {
        let segs = path.segments();
        Ok(match &self.workspace {
            Some(ws) => Some(Target {
                workspace: ws.clone(),
                rel: segs.join("/"),
            }),
            None if segs.is_empty() => None,
            None => Some(Target {
                workspace: workspace_slug(&segs[0])?,
                rel: segs[1..].join("/"),
            }),
        })
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn remember(&self, external_id: &str, id: &str) {
        let mut ids = self.ids();
        if ids.len() > 100_000 {
            ids.clear();
        }
        ids.insert(external_id.to_string(), id.to_string());
    }

    fn forget(&self, external_id: &str) {
        self.ids().remove(external_id);
    }

    /// Whether a row is ours: it carries the tag, and it lives in the workspace its external id
    /// names (`<tag>:<workspace>/<rel>`). External ids are unique per tenant, not per workspace,
    /// so a row of another workspace can hold an external id of this namespace (put there by
    /// another client, or by anyone with the tenant's key); it is treated as absent on every
    /// path (read, listing, edit, rename, delete), or a tool pinned to one workspace would read
    /// and change another's rows.
    pub(crate) fn owns(&self, external_id: &str, workspace: &str, tags: &[String]) -> bool {
        let named = external_id
            .strip_prefix(self.tag.as_str())
            .and_then(|rest| rest.strip_prefix(':'))
            .and_then(|rest| rest.split_once('/'))
            .map(|(ws, _)| ws);
        tags.contains(&self.tag) && named == Some(workspace)
    }

    /// Where the file `path` is written, and its external id: refused outside a workspace, and
    /// at a workspace itself (a directory).
    fn file_target(&self, path: &MemoryPath) -> Result<(Target, String)> {
        if self.workspace.is_none() && path.segments().len() < 2 {
            return Err(Error::from(ContextQError::OutsideWorkspace {
                path: path.raw().to_string(),
            }));
        }
        let target = self
            .target(path)?
            .filter(|t| !t.rel.is_empty())
            .ok_or_else(|| Error::IsADirectory {
                path: path.raw().to_string(),
            })?;
        let external_id = target.external_id(&self.tag);
        Ok((target, external_id))
    }
}

#[async_trait]
impl Store for ContextQStore {
    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        self.entry(path).await
    }

    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        self.listing(dir).await
    }

    /// With the `start-after`, `cursor` and `external-id-prefix` extensions (those
    /// [`Store::list_after`] pages with); a server that cannot be asked: no.
    async fn pages(&self) -> bool {
        self.extensions()
            .await
            .is_ok_and(|e| e.start_after && e.cursor && e.external_id_prefix)
    }

    /// With the `start-after`, `cursor` and `external-id-prefix` extensions: the server's pages
    /// from the file after `after`, never the whole directory; else the whole listing, cut.
    async fn list_after(&self, dir: &MemoryPath, page: Page<'_>) -> Result<Vec<FileMeta>> {
        self.page_after(dir, page).await
    }

    /// With the `audit-log` extension: the tenant's activity log under `dir`'s prefix, newest
    /// first, read down to `since` (pages of 500); its newest row's number is the cursor. A key
    /// limited to workspaces may not read the log (403): `None`, as without the extension.
    async fn changes(
        &self,
        dir: &MemoryPath,
        since: Option<&str>,
    ) -> Result<Option<crate::store::Changes>> {
        if !self.extensions().await?.audit_log {
            return Ok(None);
        }
        let since = match since {
            None => None,
            Some(s) => Some(s.parse::<i64>().map_err(|_| Error::Config {
                message: format!("a changes cursor of this store is a number, got {s:?}"),
            })?),
        };
        let prefix = match self.history_key(dir, true)? {
            Some((_, prefix)) => prefix,
            None => format!("{}:", self.tag),
        };
        let (mut page, mut head, mut paths) = (None::<String>, None, Vec::new());
        'pages: loop {
            let got = match self.client.audit_page(&prefix, 500, page.as_deref()).await {
                Ok(got) => got,
                Err(e) if refused(&e, ErrorCode::Forbidden) => return Ok(None),
                Err(e) => return Err(e),
            };
            for entry in &got.entries {
                head.get_or_insert(entry.seq);
                match since {
                    Some(s) if entry.seq > s => {}
                    _ => break 'pages,
                }
                if let Some(p) = entry.external_id.as_deref().and_then(|x| self.path_of(x)) {
                    paths.push(p);
                }
            }
            match got.next_cursor {
                Some(c) => page = Some(c),
                None => break,
            }
        }
        paths.sort();
        paths.dedup();
        let cursor = head.or(since).unwrap_or(0).to_string();
        Ok(Some(crate::store::Changes { cursor, paths }))
    }

    /// With the `search` extension: the server's ranked search, within this store's tag, its
    /// workspace (or every workspace in per-workspace mode at the root) and `dir`'s prefix;
    /// hits that are not this store's rows or that `view` hides are left out. Without it:
    /// [`Error::NotSupported`] (never a listing instead).
    async fn search(&self, query: &Query, dir: &MemoryPath, limit: usize) -> Result<Searched> {
        self.search_files(query, dir, limit).await
    }

    /// With the `tree` extension: one request, the server adding sizes up; the same listing
    /// as [`Store::list`] would render, without the files deeper than two levels.
    async fn outline(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        if !self.extensions().await?.tree {
            return self.list(dir).await;
        }
        Ok(self.tree_of(dir, None).await?.0)
    }

    async fn view(&self, path: &MemoryPath) -> Result<Viewed> {
        self.view_path(path).await
    }

    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        self.put_file(path, text, mode).await
    }

    /// Bulk-upserts of at most 100 files (1,000 to a server with `large-bulk`) and
    /// [`BULK_BYTES`] of content each. With
    /// `conditional-requests` the items are create-only (`ifAbsent`: the request fails whole if
    /// any exists); without, each file is checked first (`GET`) and only the absent are sent:
    /// the TypeScript package's non-atomic create, as `put` does it. A request that is refused
    /// or whose answer is lost is not guessed about: its files go one by one through `put`,
    /// which settles each.
    async fn create_many(&self, files: &[(MemoryPath, String)]) -> Vec<Result<Option<Version>>> {
        self.create_files(files).await
    }

    async fn edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        native_else(self.native_edit(path, edit), || {
            steps::edit(self, path, edit)
        })
        .await
    }

    async fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        native_else(self.native_rename(from, to), || {
            steps::rename(self, from, to)
        })
        .await
    }

    async fn delete_dir(&self, dir: &MemoryPath) -> Result<()> {
        native_else(self.native_delete_dir(dir), || steps::delete_dir(self, dir)).await
    }

    async fn delete_file(&self, path: &MemoryPath) -> Result<bool> {
        native_else(self.native_delete_file(path), || {
            steps::delete_file(self, path)
        })
        .await
    }

    fn edit_budget(&self) -> Duration {
        self.edit_budget
    }

    fn key(&self, path: &MemoryPath) -> String {
        match self.external_id(path) {
            Ok(Some(id)) => id,
            _ => path.normalized(),
        }
    }

    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        self.delete_row(path, expected).await
    }
}

/// The one place where the adapter chooses: the operation done natively where the server has
/// the extension (`native` answers `NotSupported` where it does not), else by the seed's steps
/// ([`steps`], the same outcome through the contract's own endpoints).
async fn native_else<T, S>(
    native: impl std::future::Future<Output = Result<T>>,
    steps: impl FnOnce() -> S,
) -> Result<T>
where
    S: std::future::Future<Output = Result<T>>,
{
    match native.await {
        Err(Error::NotSupported { .. }) => steps().await,
        done => done,
    }
}
