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
//! Requests per store call: `get` 1, `list` 1 per 500 rows (+1 at the root in per-workspace
//! mode), `put` 1 (an update needs the row id: known from the `get` that precedes it),
//! `delete` 1 (same), `edit` 1.

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

    /// Fetches a row by external id, only if it is ours ([`ContextQStore::owns`]).
    async fn fetch(&self, external_id: &str) -> Result<Option<Fetched>> {
        let fetched = self.client.get_by_external(external_id).await?;
        Ok(match fetched {
            Some(f) if self.owns(external_id, &f.context.workspace, &f.context.tags) => {
                self.remember(external_id, &f.context.id);
                Some(f)
            }
            Some(_) | None => {
                self.forget(external_id);
                None
            }
        })
    }

    async fn id_of(&self, external_id: &str) -> Result<Option<String>> {
        if let Some(id) = self.ids().get(external_id).cloned() {
            return Ok(Some(id));
        }
        Ok(self.fetch(external_id).await?.map(|f| f.context.id))
    }

    fn input(
        &self,
        target: &Target,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
        if_absent: bool,
    ) -> ContextInput {
        ContextInput {
            external_id: external_id.to_string(),
            workspace: target.workspace.clone(),
            kind: self.context_type.clone(),
            title: Some(path.normalized()),
            content: content.to_string(),
            tags: Some(vec![self.tag.clone()]),
            if_absent,
        }
    }

    /// Upserts one row; creates a missing workspace when allowed. Returns the row's id and
    /// version.
    async fn upsert(&self, target: &Target, input: ContextInput) -> Result<(String, i64)> {
        for attempt in 0..2 {
            match self.client.bulk_upsert(std::slice::from_ref(&input)).await {
                Ok(results) => {
                    let r = results.into_iter().next().ok_or_else(|| {
                        Error::from(ContextQError::Protocol {
                            url: format!("{}/api/contexts/bulk-upsert", self.client.base_url()),
                            message: "no result for the one item sent".into(),
                        })
                    })?;
                    self.remember(&input.external_id, &r.id);
                    return Ok((r.id, r.version));
                }
                Err(e) if refused(&e, ErrorCode::NotFound) && attempt == 0 => {
                    if !self.create_workspaces {
                        return Err(Error::from(ContextQError::WorkspaceNotFound {
                            workspace: target.workspace.clone(),
                            create_allowed: false,
                        }));
                    }
                    match self
                        .client
                        .create_workspace(&target.workspace, &target.workspace)
                        .await
                    {
                        Ok(_) => continue,
                        Err(e) if refused(&e, ErrorCode::Conflict) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::from(ContextQError::WorkspaceNotFound {
            workspace: target.workspace.clone(),
            create_allowed: true,
        }))
    }

    /// Where the file `path` is written: refused outside a workspace, and at a workspace itself
    /// (a directory).
    fn file_target(&self, path: &MemoryPath) -> Result<Target> {
        if self.workspace.is_none() && path.segments().len() < 2 {
            return Err(Error::from(ContextQError::OutsideWorkspace {
                path: path.raw().to_string(),
            }));
        }
        self.target(path)?
            .filter(|t| !t.rel.is_empty())
            .ok_or_else(|| Error::IsADirectory {
                path: path.raw().to_string(),
            })
    }

    /// The bulk-upsert item that creates `path`, or `None` when a server without conditional
    /// requests already holds it (checked with a `GET`, as [`Self::create`] does).
    async fn create_input(
        &self,
        path: &MemoryPath,
        text: &str,
        conditional: bool,
    ) -> Result<Option<ContextInput>> {
        let target = self.file_target(path)?;
        let external_id = target.external_id(&self.tag);
        if !conditional && self.client.get_by_external(&external_id).await?.is_some() {
            return Ok(None);
        }
        Ok(Some(self.input(
            &target,
            &external_id,
            path,
            text,
            conditional,
        )))
    }

    /// Sends `chunk` as one bulk-upsert and records each file's outcome in `out`; when the
    /// request fails, leaves them to [`Self::one_by_one`].
    async fn send_chunk(
        &self,
        chunk: Vec<(usize, ContextInput)>,
        conditional: bool,
        out: &mut [Option<Result<Option<Version>>>],
    ) {
        let inputs: Vec<ContextInput> = chunk.iter().map(|(_, input)| input.clone()).collect();
        let results = match self.client.bulk_upsert(&inputs).await {
            Ok(results) => results,
            // Perhaps applied: a file of this request sent again on its own would find itself
            // there and be refused, so each is settled here (keyed, the client already asked
            // again with the key): a row holding our content (at version 1 for a create-only
            // write) is ours; anything else unknown.
            Err(e) if is_ambiguous(&e) => {
                for (i, input) in &chunk {
                    let path = self
                        .path_of(&input.external_id)
                        .unwrap_or_else(MemoryPath::root);
                    let back = self.client.get_by_external(&input.external_id).await.ok();
                    out[*i] = Some(match back {
                        Some(Some(f))
                            if f.context.content == input.content
                                && (!conditional || f.context.version == 1) =>
                        {
                            self.remember(&input.external_id, &f.context.id);
                            Ok(conditional.then(|| Version::of_row(&f.context.id, 1)))
                        }
                        _ => Err(unknown(
                            &path,
                            "write",
                            Error::from(ContextQError::Protocol {
                                url: self.client.base_url().to_string(),
                                message: e.to_string(),
                            }),
                        )),
                    });
                }
                return;
            }
            // Refused: nothing of it was applied. A large request (`large-bulk`) is sent again
            // as requests of the contract's size, so that one file there already costs a
            // hundred files' requests one by one, not a thousand; the files of a refused
            // request of that size go on their own.
            Err(_) => {
                if chunk.len() > MAX_BULK_ITEMS {
                    for part in chunk.chunks(MAX_BULK_ITEMS) {
                        Box::pin(self.send_chunk(part.to_vec(), conditional, out)).await;
                    }
                }
                return;
            }
        };
        let answers_what_was_sent = results.len() == chunk.len()
            && chunk
                .iter()
                .zip(&results)
                .all(|((_, input), r)| r.external_id == input.external_id);
        if !answers_what_was_sent {
            // Settle each file on its own.
            return;
        }
        for ((i, input), r) in chunk.iter().zip(results) {
            self.remember(&input.external_id, &r.id);
            out[*i] = Some(Ok(
                conditional.then(|| Version::of_row(&r.id, r.version as u64))
            ));
        }
    }

    /// Each file without an outcome in `out` through `put` with `Create`.
    async fn one_by_one(
        &self,
        files: &[(MemoryPath, String)],
        out: Vec<Option<Result<Option<Version>>>>,
    ) -> Vec<Result<Option<Version>>> {
        let mut done = Vec::with_capacity(files.len());
        for ((path, text), r) in files.iter().zip(out) {
            done.push(match r {
                Some(r) => r,
                None => self.put(path, text, PutMode::Create).await,
            });
        }
        done
    }

    /// A directory moved whole with the `by-prefix` extension, within one workspace and below
    /// its top level; `NotSupported` otherwise (and for a directory over the server's limit),
    /// and the tool moves file by file.
    async fn rename_dir(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        source: &Target,
        target: &Target,
    ) -> Result<()> {
        if !self.extensions().await?.by_prefix {
            return Err(Error::NotSupported {
                operation: "rename",
            });
        }
        let body = RenamePrefix {
            from: source.prefix(&self.tag),
            to: target.prefix(&self.tag),
            title_from: Some(format!("{}/", from.normalized())),
            title_to: Some(format!("{}/", to.normalized())),
            within: Within::new(&self.tag, &source.workspace),
        };
        match self.client.rename_prefix(&body).await {
            Ok(done) => self.note(&done),
            Err(e) if refused(&e, ErrorCode::Conflict) => Err(Error::AlreadyExists {
                path: to.normalized(),
            }),
            Err(e) if directory_refusal(&e) => Err(directory_refused(e, from, "rename")),
            // No answer: unknown. A read-back cannot tell this move from another writer's, nor
            // "not applied" from "applied late"; keyed, the engine already asked again.
            Err(e) if is_ambiguous(&e) => Err(unknown(from, "rename", e)),
            Err(e) => Err(e),
        }
    }

    /// Notes what a directory's delete or rename changed (the old ids are gone, the new ones
    /// name the same rows): the request succeeded.
    fn note(&self, done: &PrefixChanges) -> Result<()> {
        for c in &done.changed {
            self.forget(&c.external_id);
            if let Some(new_id) = &c.to {
                self.remember(new_id, &c.id);
            }
        }
        Ok(())
    }

    /// The file a listed row is, when it is ours and beneath `prefix` (the listing of `dir`;
    /// `at_root`: the root of per-workspace mode, where the workspace is the first segment).
    fn file_of(
        &self,
        row: ContextSummary,
        prefix: &str,
        dir: &MemoryPath,
        at_root: bool,
        versions: bool,
    ) -> Option<FileMeta> {
        // A server without externalIdPrefix lists more: filter here.
        let rel = row.external_id.strip_prefix(prefix)?;
        if rel.is_empty() || !self.owns(&row.external_id, &row.workspace, &row.tags) {
            return None;
        }
        let path = if at_root {
            MemoryPath::root().join(rel)
        } else {
            dir.join(rel)
        };
        let Ok(path) = path else {
            tracing::warn!(external_id = %row.external_id, "skipping a row whose external id is not a valid memory path");
            return None;
        };
        self.remember(&row.external_id, &row.id);
        Some(FileMeta {
            path,
            size: row.size_bytes,
            version: versions.then(|| Version::of_row(&row.id, row.version as u64)),
            modified: Some(row.updated_at),
        })
    }

    /// [`Store::outline`] of `dir` through the server's tree (extension `tree`), and, with
    /// `file` (extension `tree-file`), the context the server found at that external id.
    async fn tree_of(
        &self,
        dir: &MemoryPath,
        file: Option<&str>,
    ) -> Result<(Option<Listing>, Option<Context>)> {
        let dir = dir.normalized_copy();
        let (target, prefix, workspace, mut listing) = self.listing_of(&dir).await?;
        let tree = match self
            .client
            .tree(
                &prefix,
                Some(&self.tag),
                workspace.as_deref(),
                target.is_none(),
                file,
            )
            .await
        {
            Ok(tree) => tree,
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                return Ok((dir.is_root().then(Listing::default), None));
            }
            Err(e) => return Err(e),
        };
        let workspace_level = matches!(&target, Some(t) if t.rel.is_empty());
        if tree.files == 0 && !dir.is_root() && !workspace_level {
            return Ok((None, tree.file));
        }
        listing.own_size = Some(tree.size_bytes);
        for entry in tree.entries {
            let is_dir = entry.path.ends_with('/');
            let rel = entry.path.trim_end_matches('/');
            let path = match &target {
                None => MemoryPath::root().join(rel),
                Some(_) => dir.join(rel),
            };
            let Ok(path) = path else {
                continue; // not a valid memory path: never listed (its bytes still count above)
            };
            if is_dir {
                // A workspace already listed gets its size.
                listing.dirs.retain(|d| d.path != path);
                listing.dirs.push(DirMeta {
                    path,
                    size: Some(entry.size_bytes),
                });
            } else {
                listing.files.push(FileMeta {
                    path,
                    size: Some(entry.size_bytes),
                    version: None,
                    modified: Some(entry.updated_at),
                });
            }
        }
        Ok((Some(listing), tree.file))
    }

    /// Where a listing of `dir` looks (its target, external-id prefix and workspace) and how it
    /// starts: at the root of per-workspace mode, every workspace as a directory.
    async fn listing_of(
        &self,
        dir: &MemoryPath,
    ) -> Result<(Option<Target>, String, Option<String>, Listing)> {
        let target = self.target(dir)?;
        let (prefix, workspace) = match &target {
            None => (format!("{}:", self.tag), None),
            Some(t) => (t.prefix(&self.tag), Some(t.workspace.clone())),
        };
        let mut listing = Listing::default();
        if target.is_none() {
            for ws in self.client.list_workspaces().await? {
                if let Ok(path) = dir.join(&ws.slug) {
                    listing.dirs.push(DirMeta { path, size: None });
                }
            }
        }
        Ok((target, prefix, workspace, listing))
    }

    async fn create(
        &self,
        target: &Target,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
    ) -> Result<Option<Version>> {
        let exists = || Error::AlreadyExists {
            path: path.normalized(),
        };
        if !self.extensions().await?.conditional_requests {
            // The TypeScript package's documented gap: check, then upsert (not atomic on such a server: a
            // create racing this one between the two requests can be overwritten).
            if self.client.get_by_external(external_id).await?.is_some() {
                return Err(exists());
            }
            let input = self.input(target, external_id, path, content, false);
            return match self.upsert(target, input).await {
                Ok(_) => Ok(None), // no versions without conditional requests
                // Our content there is ours; nothing there may still be applied late.
                Err(e) if is_ambiguous(&e) => self
                    .read_back(external_id, path, e, |f| f.context.content == content)
                    .await
                    .map(|_| None),
                Err(e) => Err(e),
            };
        }
        let input = self.input(target, external_id, path, content, true);
        match self.upsert(target, input).await {
            Ok((id, v)) => Ok(Some(Version::of_row(&id, v as u64))),
            // Exists, or refused for another reason (archived workspace, ...).
            Err(e) if refused(&e, ErrorCode::Conflict) => {
                match self.client.get_by_external(external_id).await? {
                    Some(_) => Err(exists()),
                    None => Err(e),
                }
            }
            // Keyed, the client already asked again with the key. Our content at version 1 is
            // ours. Nothing there says nothing: not applied, or applied and deleted since (a
            // second try could resurrect it), or applied late.
            Err(e) if is_ambiguous(&e) => {
                let f = self
                    .read_back(external_id, path, e, |f| {
                        f.context.content == content && f.context.version == 1
                    })
                    .await?;
                self.remember(external_id, &f.context.id);
                Ok(Some(Version::of_row(&f.context.id, 1)))
            }
            Err(e) => Err(e),
        }
    }

    /// `PUT` with `If-Match: expected` to the row `expected` was read from (a version comes only
    /// from a server's `ETag`). A precondition is never carried to another row: when that row is
    /// gone the file changed (deleted, perhaps created again) and the write is refused.
    async fn update(
        &self,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
        expected: &Version,
    ) -> Result<Option<Version>> {
        let precondition = || Error::Precondition {
            path: path.normalized(),
        };
        // A version that names no row was not read from this store: it matches nothing here.
        let Some(id) = expected.row() else {
            return Err(precondition());
        };
        let expected = expected.number() as i64;
        // The row at `expected + 1` with our content is our write.
        let ours = |f: &Fetched| f.context.content == content && f.context.version == expected + 1;
        // An attempt read back as "not applied" may commit late, so after one a 412 is read back.
        let mut lost = false;
        for attempt in 0..2 {
            match self
                .client
                .update(id, content, None, None, Some(expected))
                .await
            {
                Ok(f) => return Ok(f.etag.map(|v| Version::of_row(id, v as u64))),
                Err(e) if refused(&e, ErrorCode::PreconditionFailed) && lost => {
                    return match self.client.get(id).await {
                        Ok(Some(f)) if ours(&f) => {
                            Ok(Some(Version::of_row(id, expected as u64 + 1)))
                        }
                        // Changed by someone, perhaps after ours: not known.
                        _ => Err(unknown(path, "write", e)),
                    };
                }
                Err(e) if refused(&e, ErrorCode::PreconditionFailed) => return Err(precondition()),
                // Gone after an attempt that may still have applied first: not known.
                Err(e) if refused(&e, ErrorCode::NotFound) && lost => {
                    return Err(unknown(path, "write", e));
                }
                Err(e) if refused(&e, ErrorCode::NotFound) => {
                    return Err(self.row_gone(external_id, path).await?);
                }
                Err(e) if is_ambiguous(&e) => {
                    // Unknown outcome: read back.
                    let back = match self.client.get(id).await {
                        Ok(back) => back,
                        Err(_) => return Err(unknown(path, "write", e)),
                    };
                    match back {
                        Some(f) if ours(&f) => {
                            return Ok(Some(Version::of_row(id, expected as u64 + 1)));
                        }
                        // Still at the version we wrote against: not applied (yet).
                        Some(f) if f.context.version == expected && attempt == 0 => {
                            lost = true;
                            continue;
                        }
                        Some(f) if f.context.version == expected => return Err(e),
                        // Changed by someone (ours may be among the changes) or gone.
                        _ => return Err(unknown(path, "write", e)),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// What a conditional write says when the row it was read from is gone: the file is not
    /// found if nothing is at its path now, else it changed (another row holds the path).
    async fn row_gone(&self, external_id: &str, path: &MemoryPath) -> Result<Error> {
        self.forget(external_id);
        Ok(match self.fetch(external_id).await? {
            None => Error::NotFound {
                path: path.normalized(),
            },
            Some(_) => Error::Precondition {
                path: path.normalized(),
            },
        })
    }

    /// A plain upsert: writes whatever is there.
    async fn overwrite(
        &self,
        target: &Target,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
    ) -> Result<Option<Version>> {
        let input = self.input(target, external_id, path, content, false);
        match self.upsert(target, input).await {
            Ok((id, v)) => Ok(self
                .client
                .known_extensions()
                .filter(|e| e.conditional_requests)
                .map(|_| Version::of_row(&id, v as u64))),
            Err(e) if is_ambiguous(&e) => {
                let f = self
                    .read_back(external_id, path, e, |f| f.context.content == content)
                    .await?;
                Ok(f.etag
                    .map(|_| Version::of_row(&f.context.id, f.context.version as u64)))
            }
            Err(e) => Err(e),
        }
    }

    /// Settles a write at `external_id` whose answer was `lost` (after the retry engine's own
    /// repeats): the row read back there is the write's when `ours` says so; anything else,
    /// or no answer to the read, leaves it unknown ([`Error::OutcomeUnknown`]).
    async fn read_back(
        &self,
        external_id: &str,
        path: &MemoryPath,
        lost: Error,
        ours: impl Fn(&Fetched) -> bool,
    ) -> Result<Fetched> {
        match self.client.get_by_external(external_id).await {
            Ok(Some(f)) if ours(&f) => Ok(f),
            _ => Err(unknown(path, "write", lost)),
        }
    }
}

/// A `by-prefix` refusal the store answers for: nothing beneath the directory, or too much for
/// one request.
fn directory_refusal(e: &Error) -> bool {
    refused(e, ErrorCode::NotFound) || refused(e, ErrorCode::PayloadTooLarge)
}

/// What a [`directory_refusal`] means to the tool: no such directory, or (over the server's
/// limit) `NotSupported`, so that it goes file by file.
fn directory_refused(e: Error, dir: &MemoryPath, operation: &'static str) -> Error {
    if refused(&e, ErrorCode::NotFound) {
        Error::NotFound {
            path: dir.normalized(),
        }
    } else {
        Error::NotSupported { operation }
    }
}

#[async_trait]
impl Store for ContextQStore {
    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        let Some(external_id) = self.external_id(path)? else {
            return Ok(None);
        };
        Ok(self.fetch(&external_id).await?.map(|f| Entry {
            version: f.etag.map(|v| Version::of_row(&f.context.id, v as u64)),
            content: f.context.content,
            id: Some(f.context.id),
        }))
    }

    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        let dir = dir.normalized_copy();
        let (target, prefix, workspace, mut listing) = self.listing_of(&dir).await?;
        let extensions = self.extensions().await?;
        let params = ListParams {
            workspace,
            tag: Some(self.tag.clone()),
            external_id_prefix: extensions.external_id_prefix.then(|| prefix.clone()),
            limit: Some(500),
            cursor: None,
            start_after: None,
        };
        let pages = match self.client.list_all(&params).await {
            Ok(pages) => pages,
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                // The workspace does not exist (yet).
                return Ok(dir.is_root().then(Listing::default));
            }
            Err(e) => return Err(e),
        };
        listing.truncated = !pages.complete;
        let versions = extensions.conditional_requests;
        listing.files = pages
            .contexts
            .into_iter()
            .filter_map(|row| self.file_of(row, &prefix, &dir, target.is_none(), versions))
            .collect();
        let workspace_level = matches!(&target, Some(t) if t.rel.is_empty());
        // Nothing seen beneath it: not a directory. (On a server that caps listings, files beyond
        // its one page cannot be seen: the contract's documented limit.)
        if listing.files.is_empty() && !dir.is_root() && !workspace_level {
            return Ok(None);
        }
        Ok(Some(listing))
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
        let extensions = self.extensions().await?;
        if !(extensions.start_after && extensions.cursor && extensions.external_id_prefix) {
            return steps::list_after(self, dir, page).await;
        }
        let dir = dir.normalized_copy();
        let target = self.target(&dir)?;
        let (prefix, workspace) = match &target {
            None => (format!("{}:", self.tag), None),
            Some(t) => (t.prefix(&self.tag), Some(t.workspace.clone())),
        };
        let mut params = ListParams {
            workspace,
            tag: Some(self.tag.clone()),
            external_id_prefix: Some(prefix.clone()),
            limit: Some(page.limit.clamp(1, 500) as u32),
            cursor: None,
            start_after: match page.after {
                Some(a) => self.external_id(a)?,
                None => None,
            },
        };
        let mut files = Vec::new();
        loop {
            let answer = match self.client.list_contexts(&params).await {
                Ok(answer) => answer,
                Err(e) if refused(&e, ErrorCode::NotFound) => return Ok(files),
                Err(e) => return Err(e),
            };
            for row in answer.contexts {
                let versions = extensions.conditional_requests;
                if let Some(f) = self.file_of(row, &prefix, &dir, target.is_none(), versions) {
                    files.push(f);
                    if files.len() == page.limit {
                        return Ok(files);
                    }
                }
            }
            match answer.next_cursor {
                Some(next) if params.cursor.as_ref() != Some(&next) => {
                    params.cursor = Some(next);
                    params.start_after = None;
                }
                _ => return Ok(files),
            }
        }
    }

    /// With the `search` extension: the server's ranked search, within this store's tag, its
    /// workspace (or every workspace in per-workspace mode at the root) and `dir`'s prefix;
    /// hits that are not this store's rows or that `view` hides are left out. Without it:
    /// [`Error::NotSupported`] (never a listing instead).
    async fn search(
        &self,
        query: &crate::search::Query,
        dir: &MemoryPath,
        limit: usize,
    ) -> Result<crate::search::Searched> {
        if !self.extensions().await?.search {
            return Err(Error::NotSupported {
                operation: "search",
            });
        }
        let dir = dir.normalized_copy();
        let (prefix, workspace) = match self.target(&dir)? {
            None => (format!("{}:", self.tag), None),
            Some(t) => (t.prefix(&self.tag), Some(t.workspace.clone())),
        };
        let params = SearchParams {
            query: query.text().to_string(),
            workspace,
            tag: Some(self.tag.clone()),
            prefix: Some(prefix),
            limit: Some((limit + 1).clamp(1, 100) as u32),
            cursor: None,
        };
        let page = match self.client.search(&params).await {
            Ok(page) => page,
            // The workspace does not exist (yet): nothing to find.
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                return Ok(crate::search::Searched::default());
            }
            Err(e) => return Err(e),
        };
        let more = page.hits.len() > limit || page.next_cursor.is_some();
        let capped = page.capped;
        let found = page
            .hits
            .into_iter()
            .filter(|h| {
                self.owns(
                    &h.external_id,
                    &h.workspace,
                    std::slice::from_ref(&self.tag),
                )
            })
            .filter_map(|h| {
                let path = self.path_of(&h.external_id)?;
                let hidden = path.segments().iter().any(|s| crate::render::hidden(s));
                (!hidden).then_some(crate::search::Found {
                    path,
                    score: h.score,
                    lines: h.snippets,
                })
            })
            .take(limit)
            .collect();
        Ok(crate::search::Searched {
            found,
            more,
            scan_stopped_at: None,
            capped,
        })
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
        let extensions = self.extensions().await?;
        let file = match path.is_root() {
            true => None,
            false => self.external_id(path)?,
        };
        let (true, true, Some(external_id)) = (extensions.tree, extensions.tree_file, file) else {
            return steps::view(self, path).await;
        };
        // The file at the path and the directory beneath it, in one request.
        let (listing, file) = self.tree_of(path, Some(&external_id)).await?;
        match file {
            Some(c) if self.owns(&external_id, &c.workspace, &c.tags) => {
                self.remember(&external_id, &c.id);
                return Ok(Viewed::File(Entry {
                    version: extensions
                        .conditional_requests
                        .then(|| Version::of_row(&c.id, c.version as u64)),
                    content: c.content,
                    id: Some(c.id),
                }));
            }
            _ => self.forget(&external_id),
        }
        Ok(match listing {
            Some(listing) => Viewed::Directory(listing),
            None => Viewed::Missing,
        })
    }

    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        let target = self.file_target(path)?;
        let external_id = target.external_id(&self.tag);
        match mode {
            PutMode::Create => self.create(&target, &external_id, path, text).await,
            PutMode::Overwrite => self.overwrite(&target, &external_id, path, text).await,
            PutMode::Update(expected) => self.update(&external_id, path, text, &expected).await,
        }
    }

    /// Bulk-upserts of at most 100 files (1,000 to a server with `large-bulk`) and
    /// [`BULK_BYTES`] of content each. With
    /// `conditional-requests` the items are create-only (`ifAbsent`: the request fails whole if
    /// any exists); without, each file is checked first (`GET`) and only the absent are sent:
    /// the TypeScript package's non-atomic create, as `put` does it. A request that is refused
    /// or whose answer is lost is not guessed about: its files go one by one through `put`,
    /// which settles each.
    async fn create_many(&self, files: &[(MemoryPath, String)]) -> Vec<Result<Option<Version>>> {
        let mut out: Vec<Option<Result<Option<Version>>>> =
            (0..files.len()).map(|_| None).collect();
        let Ok(extensions) = self.extensions().await else {
            // The server did not answer: each file's own `put` reports it.
            return self.one_by_one(files, out).await;
        };
        let conditional = extensions.conditional_requests;
        let most = if extensions.large_bulk {
            MAX_LARGE_BULK_ITEMS
        } else {
            MAX_BULK_ITEMS
        };
        // (index, input) of the files to send, in chunks.
        let mut chunk: Vec<(usize, ContextInput)> = Vec::new();
        let mut bytes = 0;
        for (i, (path, text)) in files.iter().enumerate() {
            let input = match self.create_input(path, text, conditional).await {
                Ok(Some(input)) => input,
                Ok(None) => {
                    out[i] = Some(Err(Error::AlreadyExists {
                        path: path.normalized(),
                    }));
                    continue;
                }
                Err(e) => {
                    out[i] = Some(Err(e));
                    continue;
                }
            };
            if chunk.len() == most || (bytes + text.len() > BULK_BYTES && !chunk.is_empty()) {
                self.send_chunk(std::mem::take(&mut chunk), conditional, &mut out)
                    .await;
                bytes = 0;
            }
            bytes += text.len();
            chunk.push((i, input));
        }
        if !chunk.is_empty() {
            self.send_chunk(chunk, conditional, &mut out).await;
        }
        self.one_by_one(files, out).await
    }

    async fn edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        match self.native_edit(path, edit).await {
            Err(Error::NotSupported { .. }) => steps::edit(self, path, edit).await,
            done => done,
        }
    }

    async fn rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        match self.native_rename(from, to).await {
            Err(Error::NotSupported { .. }) => steps::rename(self, from, to).await,
            done => done,
        }
    }

    async fn delete_dir(&self, dir: &MemoryPath) -> Result<()> {
        match self.native_delete_dir(dir).await {
            Err(Error::NotSupported { .. }) => steps::delete_dir(self, dir).await,
            done => done,
        }
    }

    async fn delete_file(&self, path: &MemoryPath) -> Result<bool> {
        match self.native_delete_file(path).await {
            Err(Error::NotSupported { .. }) => steps::delete_file(self, path).await,
            done => done,
        }
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
        let not_found = || Error::NotFound {
            path: path.normalized(),
        };
        let Some(external_id) = self.external_id(path)? else {
            return Err(not_found());
        };
        // With a precondition, the row it was read from (never another row at this path);
        // without, whatever row holds the path.
        let id = match &expected {
            Some(v) => match v.row() {
                Some(row) => row.to_string(),
                None => {
                    return Err(Error::Precondition {
                        path: path.normalized(),
                    });
                }
            },
            None => match self.id_of(&external_id).await? {
                Some(id) => id,
                None => return Err(not_found()),
            },
        };
        // A version comes only from a server's `ETag`, so If-Match is only sent to one that has
        // conditional requests.
        let if_match = expected.as_ref().map(|v| v.number() as i64);
        let mut lost: Option<Error> = None;
        let result = loop {
            break match self.client.delete(&id, if_match).await {
                Err(e) if refused(&e, ErrorCode::PreconditionFailed) && lost.is_none() => {
                    Err(Error::Precondition {
                        path: path.normalized(),
                    })
                }
                // After a lost attempt: ours committed late, or another writer's delete (or
                // change) came first. Not known.
                Err(e)
                    if lost.is_some()
                        && (refused(&e, ErrorCode::NotFound)
                            || refused(&e, ErrorCode::PreconditionFailed)) =>
                {
                    Err(unknown(path, "delete", lost.take().unwrap_or(e)))
                }
                Err(e) if refused(&e, ErrorCode::NotFound) && expected.is_some() => {
                    Err(self.row_gone(&external_id, path).await?)
                }
                Err(e) if refused(&e, ErrorCode::NotFound) => Err(not_found()),
                // (Keyed, the client already asked again with the key.) The row still there and
                // unchanged (ids are never reused) is deleted once more, conditionally where it
                // was; gone may be another writer's delete.
                Err(e) if is_ambiguous(&e) => match self.client.get(&id).await {
                    Ok(Some(f))
                        if lost.is_none() && if_match.is_none_or(|v| f.context.version == v) =>
                    {
                        lost = Some(e);
                        continue;
                    }
                    _ => Err(unknown(path, "delete", lost.take().unwrap_or(e))),
                },
                other => other,
            };
        };
        if !matches!(result, Err(Error::Precondition { .. })) {
            self.forget(&external_id);
        }
        result
    }
}

/// The operations done natively where the server has the extension; each answers
/// `NotSupported` where it does not, and the trait's method goes on with [`steps`].
impl ContextQStore {
    /// One request with the `text-edit` extension (the edit applied on the server, under the
    /// row's lock, for a row carrying the tag in the path's workspace); `NotSupported` without
    /// it, and the tool reads, applies and writes back conditionally.
    async fn native_edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        let not_found = || Error::NotFound {
            path: path.normalized(),
        };
        let extensions = self.extensions().await?;
        if !extensions.text_edit {
            return Err(Error::NotSupported { operation: "edit" });
        }
        let Some(target) = self.target(path)?.filter(|t| !t.rel.is_empty()) else {
            return Err(not_found());
        };
        let external_id = target.external_id(&self.tag);
        let body = EditContext {
            edit: edit.clone(),
            within: Within::new(&self.tag, target.workspace),
            // The answer Claude gets is a few lines: ask for those, not the whole file.
            snippet_lines: extensions
                .edit_snippet
                .then_some(crate::render::SNIPPET_CONTEXT),
        };
        // Random and unique per edit: a repeat after a lost answer is applied at most once.
        let key = format!("mt-{:032x}", fastrand::u128(..));
        // The row edited (remembered for the next command), and what Claude is shown of it.
        let edited = |(id, v): (&str, i64), content, snippet, changed_line| {
            self.remember(&external_id, id);
            Edited {
                version: extensions
                    .conditional_requests
                    .then(|| Version::of_row(id, v as u64)),
                content,
                snippet,
                changed_line,
            }
        };
        let answer = if extensions.edit_snippet {
            let e = self.client.edit_summary(&external_id, &body, None, &key);
            e.await.map(|e| {
                let c = e.context;
                edited((&c.id, c.version), None, e.snippet, e.changed_line)
            })
        } else {
            let e = self.client.edit(&external_id, &body, None, &key);
            e.await.map(|e| {
                let c = e.context;
                edited((&c.id, c.version), Some(c.content), None, e.changed_line)
            })
        };
        match answer {
            Ok(edited) => Ok(edited),
            Err(e) if refused(&e, ErrorCode::NotFound) => Err(not_found()),
            Err(Error::EditRefused { failure, .. }) => Err(Error::EditRefused {
                path: path.normalized(),
                failure,
            }),
            // The engine repeated it (same key) as long as it could: still no answer.
            Err(e) if is_ambiguous(&e) => Err(unknown(path, "edit", e)),
            Err(e) => Err(e),
        }
    }

    /// One request with the `rename` extension, for a file moving within its workspace: the
    /// server moves the row in one transaction (never over an existing file or directory) and
    /// keeps its history. Directories, moves between workspaces and servers without the
    /// extension answer `NotSupported`, and the tool moves file by file.
    async fn native_rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        let unsupported = || Error::NotSupported {
            operation: "rename",
        };
        if !self.extensions().await?.rename {
            return Err(unsupported());
        }
        let (Some(source), Some(target)) = (self.target(from)?, self.target(to)?) else {
            return Err(unsupported());
        };
        if source.rel.is_empty() || target.rel.is_empty() || source.workspace != target.workspace {
            return Err(unsupported());
        }
        let old_id = source.external_id(&self.tag);
        let new_id = target.external_id(&self.tag);
        let body = RenameContext {
            to: new_id.clone(),
            title: Some(to.normalized()),
            within: Within::new(&self.tag, &source.workspace),
        };
        match self.client.rename(&old_id, &body).await {
            Ok(renamed) => {
                self.forget(&old_id);
                self.remember(&new_id, &renamed.context.id);
                Ok(())
            }
            // No file there: perhaps a directory, moved whole where the server can.
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                self.rename_dir(from, to, &source, &target).await
            }
            Err(e) if refused(&e, ErrorCode::Conflict) => Err(Error::AlreadyExists {
                path: to.normalized(),
            }),
            // No answer: unknown (as for a directory).
            Err(e) if is_ambiguous(&e) => {
                self.forget(&old_id);
                Err(unknown(from, "rename", e))
            }
            Err(e) => Err(e),
        }
    }

    /// With the `by-prefix` extension a directory is deleted in one transaction (all or
    /// nothing). Without it, at the workspace level of per-workspace mode, or for a directory
    /// over the server's limit, `NotSupported`: the tool deletes file by file.
    async fn native_delete_dir(&self, dir: &MemoryPath) -> Result<()> {
        let unsupported = || Error::NotSupported {
            operation: "delete_dir",
        };
        if !self.extensions().await?.by_prefix {
            return Err(unsupported());
        }
        let Some(target) = self.target(dir)?.filter(|t| !t.rel.is_empty()) else {
            return Err(unsupported());
        };
        let body = DeletePrefix {
            prefix: target.prefix(&self.tag),
            within: Within::new(&self.tag, &target.workspace),
        };
        match self.client.delete_prefix(&body).await {
            Ok(done) => self.note(&done),
            Err(e) if directory_refusal(&e) => Err(directory_refused(e, dir, "delete_dir")),
            // No answer: unknown. Nothing left beneath it may be another writer's delete, and
            // something left may still be deleted late; keyed, the engine already asked again.
            Err(e) if is_ambiguous(&e) => Err(unknown(dir, "delete", e)),
            Err(e) => Err(e),
        }
    }

    /// With the `delete-by-external` extension, one request: the row at the path's external
    /// id, within this store's tag and the path's workspace, whatever its version. A 404 is no
    /// file there. An answer lost is read back against the row known at the path before: gone,
    /// deleted; that row still there, deleted again at the version read, so that the first
    /// request committing late cannot make the answer wrong (gone by then: deleted); anything
    /// else unknown (a directory's path, where no row was known, reads back as gone too).
    async fn native_delete_file(&self, path: &MemoryPath) -> Result<bool> {
        if !self.extensions().await?.delete_by_external {
            return Err(Error::NotSupported {
                operation: "delete_file",
            });
        }
        let (Some(target), Some(external_id)) = (self.target(path)?, self.external_id(path)?)
        else {
            return Ok(false);
        };
        let known = self.ids().get(&external_id).cloned();
        let delete = |if_match| {
            self.client.delete_by_external(
                &external_id,
                Some(&self.tag),
                Some(&target.workspace),
                if_match,
            )
        };
        let e = match delete(None).await {
            Ok(()) => {
                self.forget(&external_id);
                return Ok(true);
            }
            Err(e) if refused(&e, ErrorCode::NotFound) => return Ok(false),
            Err(e) if is_ambiguous(&e) => e,
            Err(e) => return Err(e),
        };
        // (Keyed, the client already asked again with the key.) The row known at the path
        // still there is deleted again at the version read (a conditional repeat cannot delete
        // anything else); gone, or gone by then, may be another writer's delete: unknown.
        let deleted = match self.client.get_by_external(&external_id).await {
            Ok(Some(now)) if known.as_deref() == Some(now.context.id.as_str()) => {
                delete(Some(now.context.version)).await.is_ok()
            }
            _ => false,
        };
        if deleted {
            self.forget(&external_id);
            Ok(true)
        } else {
            Err(unknown(path, "delete", e))
        }
    }
}
