//! `MemoryTool<S>`: the six commands written once, over any [`Store`].
//!
//! Because every backend goes through this one implementation, every backend answers with the
//! same strings and the same edge cases; the conformance suite checks the stores underneath.
//!
//! Each command is parse, policy (read-only, the secret guard), one [`Store`] operation, and
//! the answer rendered: like one of mini-redis's commands. What a store cannot do in one step
//! its trait's defaults do in several ([`crate::store::steps`]): a `str_replace` that loses a
//! race to another writer is read again and re-applied for the store's edit budget, a rename
//! is copies and conditional deletes. A store that reports no versions gets unconditional
//! writes (the TypeScript package's documented gap).
//!
//! Round trips (for a store where each method is one request): view file 1, view directory 2
//! (1 for the root), create 1, str_replace 1 (store edit) or 2, insert 1 or 2, delete file 2,
//! rename file 3 (or one native rename), and per file for directory delete and rename.

use async_trait::async_trait;

use crate::budget::AnswerBudget;
use crate::effects::{Applied, Effects};
use crate::error::Error;
use crate::handlers::{MemoryToolHandlers, ToolError};
use crate::path::MemoryPath;
use crate::protocol::{
    CreateCommand, DeleteCommand, InsertCommand, RenameCommand, StrReplaceCommand, ViewCommand,
};
use crate::render;
use crate::store::{Edited, PutMode, Store, TextEdit, Version, Viewed};

/// Claude's memory tool over the store `S`.
#[derive(Debug, Clone)]
pub struct MemoryTool<S> {
    store: S,
    answer_budget: AnswerBudget,
    read_only: bool,
    secret_guard: bool,
}

type Outcome = Result<String, ToolError>;

impl<S: Store> MemoryTool<S> {
    /// The tool over `store`.
    pub fn new(store: S) -> Self {
        MemoryTool {
            store,
            answer_budget: AnswerBudget::default(),
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

    /// Applies `edit` ([`Store::edit`]) and words the answer.
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
        match self.store.edit(path, &edit).await {
            Ok(Edited {
                snippet: Some(snippet),
                ..
            }) if matches!(edit, TextEdit::StrReplace { .. }) => {
                Ok(render::str_replace_snippet(&snippet))
            }
            Ok(Edited {
                content: Some(content),
                changed_line,
                ..
            }) => Ok(answer(&content, changed_line)),
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
                Ok(answer(&content, changed_line))
            }
            Err(Error::EditRefused { failure, .. }) => Err(ToolError::new(render::edit_refused(
                path.raw(),
                &edit,
                &failure,
            ))),
            Err(Error::NotFound { .. }) => Err(self.not_a_file(path).await),
            Err(Error::OutcomeUnknown { cause, .. }) => Err(outcome_unknown(path, "edit", &cause)),
            Err(e) => Err(e.into()),
        }
    }
}

impl Effects {
    /// The tool's error with these effects.
    fn error(self, message: String) -> ToolError {
        ToolError::with_effects(message, self.into_vec())
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
    /// `delete` of a path that holds no file: the directory there ([`Store::delete_dir`]), or
    /// "does not exist".
    async fn delete_directory(&self, path: &MemoryPath) -> Outcome {
        match self.store.delete_dir(path).await {
            Ok(()) => Ok(render::deleted(path.raw())),
            Err(Error::NotFound { .. }) => Err(ToolError::new(render::does_not_exist(path.raw()))),
            Err(Error::OutcomeUnknown { cause, .. }) => {
                Err(outcome_unknown(path, "delete", &cause))
            }
            Err(e) => Err(e.into()),
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
        match self.store.delete_file(&path).await {
            Ok(true) => Ok(render::deleted(path.raw())),
            Ok(false) => self.delete_directory(&path).await,
            Err(Error::OutcomeUnknown { cause, .. }) => {
                Err(outcome_unknown(&path, "delete", &cause))
            }
            Err(e) => Err(e.into()),
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
            Ok(()) => Ok(render::renamed(old.raw(), new.raw())),
            Err(Error::NotFound { .. }) => Err(ToolError::new(render::does_not_exist(old.raw()))),
            Err(Error::AlreadyExists { .. }) => {
                Err(ToolError::new(render::destination_exists(new.raw())))
            }
            // A native rename is one step: either both paths changed or neither did.
            Err(Error::OutcomeUnknown { cause, .. }) => {
                let mut effects = Effects::default();
                effects.add(&old, Applied::Unknown);
                effects.add(&new, Applied::Unknown);
                Err(effects.error(render::rename_unknown(
                    old.raw(),
                    new.raw(),
                    &cause.to_string(),
                )))
            }
            Err(e) => Err(e.into()),
        }
    }
}
