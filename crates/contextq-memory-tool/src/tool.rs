//! `MemoryTool<S>`: the six commands written once, over any [`Store`].
//!
//! Because every backend goes through this one implementation, every backend answers with the
//! same strings and the same edge cases; the conformance suite checks the stores underneath.
//!
//! Concurrency: `str_replace` and `insert` go to [`Store::edit`] first: a store that applies
//! edits itself (ContextQ with the `text-edit` extension) does so atomically, and concurrent
//! edits never conflict. Otherwise they write with [`PutMode::Update`] at the version they read
//! and, when another writer got there first, back off (exponential, with jitter: [`Backoff`],
//! the retry engine's)
//! and read again and re-apply the same edit, for as long as the edit budget
//! ([`MemoryTool::edit_budget`], default [`DEFAULT_EDIT_BUDGET`]) lasts; only then is Claude
//! told that the file kept changing. Deletes and renames that lose a race to a writer retry
//! the same way. A store that reports no versions gets unconditional writes (the TypeScript package's
//! documented gap).
//!
//! Round trips (for a store where each method is one request): view file 1, view directory 2
//! (1 for the root), create 1, str_replace 1 (store edit) or 2, insert 1 or 2, delete file 2,
//! rename file 3 (or one native rename), and per file for directory delete and rename.

use std::time::Duration;

use async_trait::async_trait;

use crate::budget::AnswerBudget;
use crate::error::Error;
use crate::handlers::{Applied, MemoryToolHandlers, PathEffect, ToolError};
use crate::path::MemoryPath;
use crate::protocol::{
    CreateCommand, DeleteCommand, InsertCommand, RenameCommand, StrReplaceCommand, ViewCommand,
};
use crate::render;
pub use crate::retry::Backoff;
use crate::store::{Edited, Entry, Listing, PutMode, Store, TextEdit, Version, Viewed};

/// How long an edit (or delete, or rename) that keeps losing races to other writers keeps
/// retrying before Claude is told the file kept changing: 10 seconds.
pub const DEFAULT_EDIT_BUDGET: Duration = Duration::from_secs(10);

/// Claude's memory tool over the store `S`.
#[derive(Debug, Clone)]
pub struct MemoryTool<S> {
    store: S,
    answer_budget: AnswerBudget,
    edit_budget: Duration,
    read_only: bool,
    secret_guard: bool,
}

impl Backoff {
    /// The message for Claude when the budget is spent.
    fn gave_up(&self, path: &MemoryPath) -> ToolError {
        ToolError::new(render::edit_conflict(
            path.raw(),
            self.attempts(),
            self.elapsed(),
        ))
    }
}

type Outcome = Result<String, ToolError>;

impl<S: Store> MemoryTool<S> {
    /// The tool over `store`.
    pub fn new(store: S) -> Self {
        MemoryTool {
            store,
            answer_budget: AnswerBudget::default(),
            edit_budget: DEFAULT_EDIT_BUDGET,
            read_only: false,
            secret_guard: true,
        }
    }

    /// Read-only use (default off): `view` works as always, and every write command (`create`,
    /// `str_replace`, `insert`, `delete`, `rename`) is refused before the store is touched,
    /// with an error result telling Claude that the memory is read-only here and nothing
    /// changed.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// Whether the tool is read-only ([`MemoryTool::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The secret guard (default on): `create`, `str_replace` and `insert` whose text holds a
    /// credential-shaped string ([`crate::secrets::PATTERNS`]) are refused with an error
    /// result telling Claude not to store credentials in memory; nothing is written.
    pub fn secret_guard(mut self, on: bool) -> Self {
        self.secret_guard = on;
        self
    }

    /// The write policy, in one place: refuses a write by `command` when the tool is read-only
    /// ([`Error::ReadOnly`]), and `text` (what it would write) when the secret guard finds a
    /// credential in it ([`Error::SecretRefused`]). The six commands, [`MemoryTool::put`],
    /// [`MemoryTool::delete`] and the restores all ask it first.
    fn may_write(
        &self,
        command: &'static str,
        path: &MemoryPath,
        text: Option<&str>,
    ) -> Result<(), Error> {
        self.refuse_if_read_only(command)?;
        text.map_or(Ok(()), |text| self.secret_in(path, text))
    }

    /// [`Error::ReadOnly`] for a write by `command` when the tool is read-only.
    pub(crate) fn refuse_if_read_only(&self, command: &'static str) -> Result<(), Error> {
        if self.read_only {
            return Err(Error::ReadOnly { command });
        }
        Ok(())
    }

    /// The secret guard alone: [`Error::SecretRefused`] when it finds a credential in `text`.
    fn secret_in(&self, path: &MemoryPath, text: &str) -> Result<(), Error> {
        match crate::secrets::find(text).filter(|_| self.secret_guard) {
            Some(f) => Err(Error::SecretRefused {
                path: path.raw().to_string(),
                kind: f.kind,
                line: f.line,
            }),
            None => Ok(()),
        }
    }

    /// Refuses a write command when the tool is read-only.
    fn writable(&self, command: &'static str) -> Result<(), ToolError> {
        Ok(self.refuse_if_read_only(command)?)
    }

    /// Refuses `text` (what a command would write to `path`) when the secret guard finds a
    /// credential in it.
    fn no_secret(&self, path: &MemoryPath, text: &str) -> Result<(), ToolError> {
        Ok(self.secret_in(path, text)?)
    }

    /// [`Store::put`] through this tool's write policy (read-only, the secret guard): what every
    /// write outside the six commands should call (restores do; the CLI's `import` does).
    /// `command` names the write in a refusal. Refused writes change nothing.
    pub async fn put(
        &self,
        command: &'static str,
        path: &MemoryPath,
        content: &str,
        mode: PutMode,
    ) -> Result<Option<Version>, Error> {
        self.may_write(command, path, Some(content))?;
        self.store.put(path, content, mode).await
    }

    /// [`Store::create_many`] through this tool's write policy: a file the policy refuses (the
    /// secret guard, a read-only tool) gets its refusal and is not sent; the others are created
    /// together where the store can. One result per file, in order.
    pub async fn create_many(
        &self,
        command: &'static str,
        files: &[(MemoryPath, String)],
    ) -> Vec<Result<Option<Version>, Error>> {
        let mut out: Vec<Option<Result<Option<Version>, Error>>> = Vec::with_capacity(files.len());
        let mut allowed = Vec::new();
        for (path, text) in files {
            match self.may_write(command, path, Some(text)) {
                Ok(()) => {
                    allowed.push((path.clone(), text.clone()));
                    out.push(None);
                }
                Err(e) => out.push(Some(Err(e))),
            }
        }
        let mut created = self.store.create_many(&allowed).await.into_iter();
        out.into_iter()
            .map(|r| {
                r.or_else(|| created.next()).unwrap_or_else(|| {
                    Err(Error::Io {
                        operation: command,
                        path: String::new(),
                        source: std::io::Error::other("the store answered fewer files than sent"),
                    })
                })
            })
            .collect()
    }

    /// [`Store::delete`] through this tool's write policy (read-only).
    pub async fn delete(
        &self,
        command: &'static str,
        path: &MemoryPath,
        expected: Option<Version>,
    ) -> Result<(), Error> {
        self.may_write(command, path, None)?;
        self.store.delete(path, expected).await
    }

    /// How long a conditional edit, delete or rename that keeps losing races to other writers
    /// keeps retrying, with [`Backoff`], before Claude is told the file kept changing (default
    /// [`DEFAULT_EDIT_BUDGET`]; zero: one attempt).
    pub fn edit_budget(mut self, budget: Duration) -> Self {
        self.edit_budget = budget;
        self
    }

    /// How much a directory listing or a file read may hold before it is cut, with a last line
    /// that says what was left out and how to see it (default [`AnswerBudget::default`]:
    /// 1,000 entries and 40,000 characters a listing, 100,000 characters a read;
    /// [`AnswerBudget::UNLIMITED`]: always the reference tool's whole answer).
    pub fn answer_budget(mut self, budget: AnswerBudget) -> Self {
        self.answer_budget = budget;
        self
    }

    /// The store underneath.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// Whether `path` is a directory (`false` also when nothing is there).
    async fn is_dir(&self, path: &MemoryPath) -> Result<bool, ToolError> {
        Ok(self.store.list(path).await?.is_some())
    }

    /// The answer for a path that is not a file: "not a file" or "does not exist".
    async fn not_a_file(&self, path: &MemoryPath) -> ToolError {
        match self.is_dir(path).await {
            Ok(true) => ToolError::new(render::not_a_file(path.raw())),
            Ok(false) => ToolError::new(render::does_not_exist_valid(path.raw())),
            Err(e) => e,
        }
    }

    /// Applies `edit`: in the store when it can ([`Store::edit`]), else reads, applies and
    /// writes back conditionally, re-applying on a concurrent change within the edit budget.
    async fn edit(&self, path: &MemoryPath, edit: TextEdit) -> Outcome {
        if path.is_root() {
            return Err(ToolError::new(render::not_a_file(path.raw())));
        }
        let answer = |content: &str, changed_line: Option<usize>| match &edit {
            TextEdit::StrReplace { .. } => {
                render::str_replace_done(content, changed_line.unwrap_or(1))
            }
            TextEdit::Insert { .. } => render::inserted(path.raw()),
        };
        let refused = |failure| ToolError::new(render::edit_refused(path.raw(), &edit, &failure));
        match self.store.edit(path, &edit).await {
            Ok(Edited {
                snippet: Some(snippet),
                ..
            }) if matches!(edit, TextEdit::StrReplace { .. }) => {
                return Ok(render::str_replace_snippet(&snippet));
            }
            Ok(Edited {
                content: Some(content),
                changed_line,
                ..
            }) => return Ok(answer(&content, changed_line)),
            Ok(Edited {
                content: None,
                changed_line,
                ..
            }) => {
                // Applied, but the store sent neither content nor snippet: read it back for
                // the answer (an insert needs none).
                if matches!(edit, TextEdit::Insert { .. }) {
                    return Ok(answer("", changed_line));
                }
                let content = match self.store.get(path).await {
                    Ok(Some(entry)) => entry.content,
                    _ => String::new(),
                };
                return Ok(answer(&content, changed_line));
            }
            Err(Error::NotSupported { .. }) => {}
            Err(Error::EditRefused { failure, .. }) => return Err(refused(failure)),
            Err(Error::NotFound { .. }) => return Err(self.not_a_file(path).await),
            Err(Error::OutcomeUnknown { cause, .. }) => {
                return Err(outcome_unknown(path, "edit", &cause));
            }
            Err(e) => return Err(e.into()),
        }
        let mut backoff = Backoff::new(self.edit_budget);
        loop {
            let Some(entry) = self.store.get(path).await? else {
                return Err(self.not_a_file(path).await);
            };
            let applied = contextq_api::edit::apply(&entry.content, &edit).map_err(refused)?;
            let mode = entry.version.map_or(PutMode::Overwrite, PutMode::Update);
            match self.store.put(path, &applied.content, mode).await {
                Ok(_) => return Ok(answer(&applied.content, applied.changed_line)),
                Err(Error::Precondition { .. }) => {
                    if !backoff.retry().await {
                        return Err(backoff.gave_up(path));
                    }
                }
                Err(Error::NotFound { .. }) => {
                    return Err(ToolError::new(render::does_not_exist_valid(path.raw())));
                }
                Err(Error::OutcomeUnknown { cause, .. }) => {
                    return Err(outcome_unknown(path, "edit", &cause));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Deletes every file beneath `dir`, listing again while the store capped the listing.
    async fn delete_tree(&self, dir: &MemoryPath, mut listing: Listing) -> Outcome {
        let mut effects = Effects::default();
        let mut deleted = 0usize;
        loop {
            let mut files: Vec<_> = listing.files.into_iter().map(|f| f.path).collect();
            files.sort();
            let before = deleted;
            for (i, file) in files.iter().enumerate() {
                let e = match self.store.delete(file, None).await {
                    Ok(()) | Err(Error::NotFound { .. }) => {
                        effects.add(file, Applied::Yes);
                        deleted += 1;
                        continue;
                    }
                    Err(e) => e,
                };
                // Stopped: this file's outcome is unknown or it is still there, and so is the rest.
                let (unknown, cause) = match e {
                    Error::OutcomeUnknown { cause, .. } => (true, cause.to_string()),
                    e => (false, e.tool_message()),
                };
                effects.add(
                    file,
                    if unknown {
                        Applied::Unknown
                    } else {
                        Applied::No
                    },
                );
                let rest = &files[i + 1..];
                rest.iter().for_each(|p| effects.add(p, Applied::No));
                let mut left: Vec<String> = rest.iter().map(MemoryPath::normalized).collect();
                if !unknown {
                    left.insert(0, file.normalized());
                }
                let total = deleted + files.len() - i;
                return Err(effects.error(render::delete_tree_stopped(
                    dir.raw(),
                    deleted,
                    total,
                    unknown.then(|| file.normalized()).as_deref(),
                    &left,
                    &cause,
                )));
            }
            if !listing.truncated {
                break;
            }
            // The store showed one page only: look again for what is left.
            match self.store.list(dir).await {
                Ok(Some(next)) if !next.files.is_empty() && deleted > before => listing = next,
                Ok(Some(next)) if next.files.is_empty() && !next.truncated => break,
                Ok(None) => break,
                Ok(Some(_)) => {
                    return Err(effects.error(render::capped_listing_stopped(
                        dir.raw(),
                        deleted,
                        "deleted",
                    )));
                }
                Err(e) => return Err(effects.error(e.tool_message())),
            }
        }
        self.store.remove_dir(dir).await?;
        Ok(render::deleted(dir.raw()))
    }

    async fn rename_file(&self, old: &MemoryPath, new: &MemoryPath, mut entry: Entry) -> Outcome {
        let mut backoff = Backoff::new(self.edit_budget);
        loop {
            let created = match self.store.put(new, &entry.content, PutMode::Create).await {
                Ok(v) => v,
                Err(Error::AlreadyExists { .. }) => {
                    return Err(ToolError::new(render::destination_exists(new.raw())));
                }
                Err(Error::OutcomeUnknown { cause, .. }) => {
                    let mut effects = Effects::default();
                    effects.add(new, Applied::Unknown);
                    effects.add(old, Applied::No);
                    return Err(effects.error(render::rename_copy_unknown(
                        old.raw(),
                        new.raw(),
                        &cause.to_string(),
                    )));
                }
                Err(e) => return Err(e.into()),
            };
            let cause = match self.store.delete(old, entry.version).await {
                Ok(()) | Err(Error::NotFound { .. }) => {
                    return Ok(render::renamed(old.raw(), new.raw()));
                }
                Err(Error::OutcomeUnknown { cause, .. }) => {
                    // The source may be gone: the copy is all that is sure to remain, so it stays.
                    let mut effects = Effects::default();
                    effects.add(new, Applied::Yes);
                    effects.add(old, Applied::Unknown);
                    return Err(effects.error(render::rename_source_unknown(
                        old.raw(),
                        new.raw(),
                        entry.id.as_deref().unwrap_or("unknown"),
                        &cause.to_string(),
                    )));
                }
                Err(e) => e,
            };
            // The source is known to be still there: remove the copy again if it is still ours.
            let mut effects = Effects::default();
            match self.store.delete(new, created).await {
                Ok(()) | Err(Error::NotFound { .. }) => {}
                Err(Error::OutcomeUnknown { cause: undo, .. }) => {
                    effects.add(new, Applied::Unknown);
                    effects.add(old, Applied::No);
                    return Err(effects.error(render::rename_undo_unknown(
                        old.raw(),
                        new.raw(),
                        &cause.tool_message(),
                        &undo.to_string(),
                    )));
                }
                Err(_) => {
                    effects.add(new, Applied::Yes);
                    effects.add(old, Applied::No);
                    return Err(effects.error(render::rename_both_exist(
                        old.raw(),
                        new.raw(),
                        entry.id.as_deref().unwrap_or("unknown"),
                        &cause.tool_message(),
                    )));
                }
            }
            if matches!(cause, Error::Precondition { .. }) {
                // The source changed while we copied it: start again from its new content.
                if !backoff.retry().await {
                    return Err(backoff.gave_up(old));
                }
                match self.store.get(old).await? {
                    Some(fresh) => {
                        entry = fresh;
                        continue;
                    }
                    None => return Err(ToolError::new(render::does_not_exist(old.raw()))),
                }
            }
            return Err(ToolError::new(render::rename_failed(
                old.raw(),
                new.raw(),
                &cause.tool_message(),
            )));
        }
    }

    /// Moves every file beneath `old` to `new`: copies (create-only), then deletes the sources;
    /// lists again while the store capped the listing.
    async fn rename_dir(
        &self,
        old: &MemoryPath,
        new: &MemoryPath,
        mut listing: Listing,
    ) -> Outcome {
        if self.store.get(new).await?.is_some() || self.store.list(new).await?.is_some() {
            return Err(ToolError::new(render::destination_exists(new.raw())));
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
                let step = match self.store.get(src).await {
                    Ok(None) => continue, // deleted meanwhile: nothing to move
                    Ok(Some(entry)) => self
                        .store
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
                let (cause, failed_unknown) = match e {
                    Error::OutcomeUnknown { cause, .. } => (cause.to_string(), true),
                    e => (e.tool_message(), false),
                };
                let mut both = Vec::new();
                let mut maybe = Vec::new();
                if failed_unknown {
                    effects.add(&dst, Applied::Unknown);
                    maybe.push(dst.normalized());
                }
                for c in &copied {
                    effects.add(&c.src, Applied::No);
                    match self.store.delete(&c.dst, c.dst_version.clone()).await {
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
                return Err(effects.error(render::rename_dir_copy_failed(
                    old.raw(),
                    new.raw(),
                    &src.normalized(),
                    &cause,
                    &state,
                )));
            }
            // Phase 2: delete the sources.
            for (i, c) in copied.iter().enumerate() {
                let e = match self.store.delete(&c.src, c.src_version.clone()).await {
                    Ok(()) | Err(Error::NotFound { .. }) => {
                        effects.add(&c.src, Applied::Yes);
                        effects.add(&c.dst, Applied::Yes);
                        continue;
                    }
                    Err(e) => e,
                };
                let (cause, unknown) = match e {
                    Error::OutcomeUnknown { cause, .. } => (cause.to_string(), true),
                    e => (e.tool_message(), false),
                };
                effects.add(&c.dst, Applied::Yes);
                effects.add(
                    &c.src,
                    if unknown {
                        Applied::Unknown
                    } else {
                        Applied::No
                    },
                );
                let mut left: Vec<String> = Vec::new();
                if !unknown {
                    left.push(c.src.normalized());
                }
                for rest in &copied[i + 1..] {
                    effects.add(&rest.dst, Applied::Yes);
                    effects.add(&rest.src, Applied::No);
                    left.push(rest.src.normalized());
                }
                return Err(effects.error(render::rename_dir_delete_failed(
                    old.raw(),
                    new.raw(),
                    &left,
                    unknown.then(|| c.src.normalized()).as_deref(),
                    moved + copied.len(),
                    &cause,
                )));
            }
            moved += copied.len();
            if !listing.truncated {
                break;
            }
            // The store showed one page only: look again for what is left.
            match self.store.list(old).await {
                Ok(Some(next)) if !next.files.is_empty() && !copied.is_empty() => listing = next,
                Ok(Some(next)) if next.files.is_empty() && !next.truncated => break,
                Ok(None) => break,
                Ok(Some(_)) => {
                    return Err(effects.error(render::capped_listing_stopped(
                        old.raw(),
                        moved,
                        "moved",
                    )));
                }
                Err(e) => return Err(effects.error(e.tool_message())),
            }
        }
        self.store.remove_dir(old).await?;
        Ok(render::renamed(old.raw(), new.raw()))
    }
}

/// One file copied by a directory rename.
struct Copied {
    src: MemoryPath,
    dst: MemoryPath,
    src_version: Option<Version>,
    dst_version: Option<Version>,
}

/// What a multi-step command did, path by path (see [`ToolError::effects`]).
#[derive(Default)]
struct Effects(Vec<PathEffect>);

impl Effects {
    fn add(&mut self, path: &MemoryPath, applied: Applied) {
        self.0.push(PathEffect {
            path: path.normalized(),
            applied,
        });
    }

    fn error(self, message: String) -> ToolError {
        ToolError::with_effects(message, self.0)
    }
}

/// A write whose outcome the store could not settle (the message names the path as written).
fn outcome_unknown(path: &MemoryPath, operation: &str, cause: &Error) -> ToolError {
    let mut effects = Effects::default();
    effects.add(path, Applied::Unknown);
    effects.error(render::outcome_unknown(
        operation,
        path.raw(),
        &cause.to_string(),
    ))
}

impl<S: Store> MemoryTool<S> {
    /// `delete` of a path that holds no file: a directory, in one step where the store can,
    /// else file by file; nothing there, "does not exist".
    async fn delete_directory(&self, path: &MemoryPath) -> Outcome {
        match self.store.delete_dir(path).await {
            Ok(()) => return Ok(render::deleted(path.raw())),
            Err(Error::NotFound { .. }) => {
                return Err(ToolError::new(render::does_not_exist(path.raw())));
            }
            Err(Error::NotSupported { .. }) => {}
            Err(Error::OutcomeUnknown { cause, .. }) => {
                return Err(outcome_unknown(path, "delete", &cause));
            }
            Err(e) => return Err(e.into()),
        }
        match self.store.list(path).await? {
            Some(listing) => self.delete_tree(path, listing).await,
            None => Err(ToolError::new(render::does_not_exist(path.raw()))),
        }
    }

    /// `str_replace` or `insert` (`command`) at the path `raw`, under the write policy: the text
    /// it adds goes through the secret guard.
    async fn text_edit(&self, command: &'static str, raw: &str, edit: TextEdit) -> Outcome {
        self.writable(command)?;
        let path = parse(raw)?;
        let added = match &edit {
            TextEdit::StrReplace { new_str, .. } => new_str,
            TextEdit::Insert { text, .. } => text,
        };
        self.no_secret(&path, added)?;
        self.edit(&path, edit).await
    }
}

fn parse(raw: &str) -> Result<MemoryPath, ToolError> {
    MemoryPath::parse(raw).map_err(ToolError::from)
}

#[async_trait]
impl<S: Store> MemoryToolHandlers for MemoryTool<S> {
    /// The `memory_search` tool (`crate::search`): the files beneath `input.path` (default
    /// `/memories`) that `input.query` matches, best first, each with its matching lines
    /// numbered as `view` numbers them, within the listing's answer budget. Every refusal (a
    /// bad query, path or limit, a store that cannot search) is an error Claude can act on.
    async fn search(&self, input: crate::search::SearchInput) -> Result<String, ToolError> {
        use crate::search::{DEFAULT_LIMIT, MAX_LIMIT, Query};
        let dir = match input.path.as_deref() {
            None => MemoryPath::root(),
            Some(p) => MemoryPath::parse(p)?,
        };
        let limit = match input.limit {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => n as usize,
            Some(n) => {
                return Err(ToolError::new(format!(
                    "limit must be from 1 to {MAX_LIMIT} (got {n}). Nothing was searched."
                )));
            }
        };
        let query = Query::parse(&input.query)
            .map_err(|e| ToolError::new(crate::search::refused_query(&e)))?;
        match self.store.search(&query, &dir, limit).await {
            Ok(found) => Ok(crate::search::answer(
                &input.query,
                &dir,
                limit,
                &found,
                self.answer_budget.listing_chars,
            )),
            Err(Error::NotSupported { .. }) => Err(ToolError::new(crate::search::not_available())),
            Err(e) => Err(e.into()),
        }
    }

    async fn view(&self, c: ViewCommand) -> Outcome {
        let path = parse(&c.path)?;
        match self.store.view(&path).await? {
            Viewed::File(entry) => {
                let range = c.view_range.map(|[a, b]| (a, b));
                render::view_file(path.raw(), &entry.content, range, &self.answer_budget)
                    .map_err(ToolError::new)
            }
            Viewed::Directory(listing) => {
                Ok(render::view_listing(&path, &listing, &self.answer_budget))
            }
            Viewed::Missing => Err(ToolError::new(render::does_not_exist_valid(path.raw()))),
        }
    }

    async fn create(&self, c: CreateCommand) -> Outcome {
        self.writable("create")?;
        let path = parse(&c.path)?;
        if path.is_root() {
            return Err(ToolError::new(render::is_a_directory(path.raw())));
        }
        self.no_secret(&path, &c.file_text)?;
        match self.store.put(&path, &c.file_text, PutMode::Create).await {
            Ok(_) => Ok(render::created(path.raw())),
            Err(Error::AlreadyExists { .. }) => {
                Err(ToolError::new(render::already_exists(path.raw())))
            }
            Err(Error::OutcomeUnknown { cause, .. }) => {
                Err(outcome_unknown(&path, "creation", &cause))
            }
            Err(e) => Err(e.into()),
        }
    }

    async fn str_replace(&self, c: StrReplaceCommand) -> Outcome {
        let (old_str, new_str) = (c.old_str, c.new_str);
        let edit = TextEdit::StrReplace { old_str, new_str };
        self.text_edit("str_replace", &c.path, edit).await
    }

    async fn insert(&self, c: InsertCommand) -> Outcome {
        let (line, text) = (c.insert_line, c.insert_text);
        self.text_edit("insert", &c.path, TextEdit::Insert { line, text })
            .await
    }

    async fn delete(&self, c: DeleteCommand) -> Outcome {
        self.writable("delete")?;
        if crate::path::resolves_to_root(&c.path) {
            return Err(ToolError::new(render::cannot_delete_root()));
        }
        let path = parse(&c.path)?;
        if path.is_root() {
            return Err(ToolError::new(render::cannot_delete_root()));
        }
        // The file at the path, whatever its version, in one step where the store can.
        match self.store.delete_file(&path).await {
            Ok(true) => return Ok(render::deleted(path.raw())),
            Ok(false) => return self.delete_directory(&path).await,
            Err(Error::NotSupported { .. }) => {}
            Err(Error::OutcomeUnknown { cause, .. }) => {
                return Err(outcome_unknown(&path, "delete", &cause));
            }
            Err(e) => return Err(e.into()),
        }
        let mut backoff = Backoff::new(self.edit_budget);
        loop {
            let Some(entry) = self.store.get(&path).await? else {
                return self.delete_directory(&path).await;
            };
            match self.store.delete(&path, entry.version).await {
                Ok(()) => return Ok(render::deleted(path.raw())),
                // Changed or deleted since it was read: look again.
                Err(Error::Precondition { .. } | Error::NotFound { .. }) => {
                    if !backoff.retry().await {
                        return Err(backoff.gave_up(&path));
                    }
                }
                Err(Error::OutcomeUnknown { cause, .. }) => {
                    return Err(outcome_unknown(&path, "delete", &cause));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    async fn rename(&self, c: RenameCommand) -> Outcome {
        self.writable("rename")?;
        if crate::path::resolves_to_root(&c.old_path) {
            return Err(ToolError::new(render::cannot_rename_root()));
        }
        let old = parse(&c.old_path)?;
        let new = parse(&c.new_path)?;
        if old.is_root() {
            return Err(ToolError::new(render::cannot_rename_root()));
        }
        if new.is_root() || new == old {
            return Err(ToolError::new(render::destination_exists(new.raw())));
        }
        if new.starts_with(&old) {
            return Err(ToolError::new(render::rename_into_itself(
                old.raw(),
                new.raw(),
            )));
        }
        match self.store.rename(&old, &new).await {
            Ok(()) => return Ok(render::renamed(old.raw(), new.raw())),
            Err(Error::NotFound { .. }) => {
                return Err(ToolError::new(render::does_not_exist(old.raw())));
            }
            Err(Error::AlreadyExists { .. }) => {
                return Err(ToolError::new(render::destination_exists(new.raw())));
            }
            Err(Error::NotSupported { .. }) => {}
            // One transaction on the server: either both paths changed or neither did.
            Err(Error::OutcomeUnknown { cause, .. }) => {
                let mut effects = Effects::default();
                effects.add(&old, Applied::Unknown);
                effects.add(&new, Applied::Unknown);
                return Err(effects.error(render::rename_unknown(
                    old.raw(),
                    new.raw(),
                    &cause.to_string(),
                )));
            }
            Err(e) => return Err(e.into()),
        }
        if let Some(entry) = self.store.get(&old).await? {
            return self.rename_file(&old, &new, entry).await;
        }
        match self.store.list(&old).await? {
            Some(listing) => self.rename_dir(&old, &new, listing).await,
            None => Err(ToolError::new(render::does_not_exist(old.raw()))),
        }
    }
}
