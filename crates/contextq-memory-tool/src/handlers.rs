//! The handler trait: the Rust shape of the TypeScript SDK's `MemoryToolHandlers`.
//!
//! Implement [`MemoryToolHandlers`] to put the memory tool on any backend without the [`Store`]
//! abstraction; [`crate::MemoryTool`] implements it for every store. The provided
//! [`MemoryToolHandlers::execute`] takes Claude's raw tool input and always returns a
//! [`ToolResult`]: malformed input, refused paths and backend failures all come back as
//! `is_error` results, never as a panic or an `Err`.
//!
//! [`Store`]: crate::Store

use async_trait::async_trait;
use serde_json::Value;

pub use crate::effects::{Applied, PathEffect};
use crate::protocol::{
    Command, CreateCommand, DeleteCommand, InsertCommand, RenameCommand, StrReplaceCommand,
    ToolResult, ViewCommand,
};

/// A failed command: the sentence Claude reads after `Error: `, and, for programs (tests,
/// logs, a soak's model), what it is known to have changed.
///
/// [`ToolError::effects`] is empty when nothing was changed, which is what almost every error
/// means. A write whose outcome is unknown lists its path as [`Applied::Unknown`]; a multi-step
/// command that stopped part way (rename, directory delete) lists every path it touched. The
/// message says the same in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    message: String,
    effects: Vec<PathEffect>,
    store_failed: bool,
}

impl ToolError {
    /// A tool error with this message (without the `Error: ` prefix); nothing was changed.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            effects: Vec::new(),
            store_failed: false,
        }
    }

    /// A tool error for a command that changed, or may have changed, these paths.
    pub fn with_effects(message: impl Into<String>, effects: Vec<PathEffect>) -> Self {
        ToolError {
            message: message.into(),
            effects,
            store_failed: false,
        }
    }

    /// The message (without the `Error: ` prefix).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// What the command is known to have done, path by path (empty: nothing was changed).
    pub fn effects(&self) -> &[PathEffect] {
        &self.effects
    }

    /// Whether the command is known to have changed nothing.
    pub fn changed_nothing(&self) -> bool {
        self.effects.iter().all(|e| e.applied == Applied::No)
    }

    /// Whether the command failed because of the store, not because of what Claude asked: the
    /// store could not be reached, refused the key, failed, or did not confirm a write. A
    /// script running commands (`contextq-memory exec`) exits non-zero for these.
    pub fn store_failed(&self) -> bool {
        self.store_failed
    }
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<crate::Error> for ToolError {
    fn from(e: crate::Error) -> Self {
        let effects = match &e {
            crate::Error::OutcomeUnknown { path, .. } => vec![PathEffect {
                path: path.clone(),
                applied: Applied::Unknown,
            }],
            crate::Error::Stopped { effects, .. } => effects.clone(),
            _ => Vec::new(),
        };
        let store_failed = e.is_store_failure();
        ToolError {
            store_failed,
            ..ToolError::with_effects(e.tool_message(), effects)
        }
    }
}

impl From<crate::path::PathError> for ToolError {
    fn from(e: crate::path::PathError) -> Self {
        ToolError::new(e.message())
    }
}

/// The six commands of the memory tool. Each returns the success text or a [`ToolError`].
#[async_trait]
pub trait MemoryToolHandlers: Send + Sync {
    /// `view`
    async fn view(&self, command: ViewCommand) -> Result<String, ToolError>;
    /// `create`
    async fn create(&self, command: CreateCommand) -> Result<String, ToolError>;
    /// `str_replace`
    async fn str_replace(&self, command: StrReplaceCommand) -> Result<String, ToolError>;
    /// `insert`
    async fn insert(&self, command: InsertCommand) -> Result<String, ToolError>;
    /// `delete`
    async fn delete(&self, command: DeleteCommand) -> Result<String, ToolError>;
    /// `rename`
    async fn rename(&self, command: RenameCommand) -> Result<String, ToolError>;

    /// The `memory_search` tool beside `memory` (`crate::search`): the files beneath
    /// `input.path` that `input.query` matches, best first, with their matching lines. Default:
    /// an error result saying search is not available here.
    async fn search(&self, input: crate::search::SearchInput) -> Result<String, ToolError> {
        let _ = input;
        Err(ToolError::new(crate::search::not_available()))
    }

    /// [`MemoryToolHandlers::search`] on Claude's raw input; never fails, never panics on any
    /// input.
    async fn execute_search(&self, input: Value) -> ToolResult {
        match serde_json::from_value::<crate::search::SearchInput>(input) {
            Err(e) => ToolResult::error(format!(
                "memory_search takes {{\"query\": \"words\", \"path\"?: \"/memories/...\", \"limit\"?: 1-{}}}: {e}",
                crate::search::MAX_LIMIT
            )),
            Ok(input) => match self.search(input).await {
                Ok(text) => ToolResult::ok(text),
                Err(e) => ToolResult::error(e.message()),
            },
        }
    }

    /// Runs one parsed command, keeping the typed error (with its effects).
    async fn handle(&self, command: Command) -> Result<String, ToolError> {
        match command {
            Command::View(c) => self.view(c).await,
            Command::Create(c) => self.create(c).await,
            Command::StrReplace(c) => self.str_replace(c).await,
            Command::Insert(c) => self.insert(c).await,
            Command::Delete(c) => self.delete(c).await,
            Command::Rename(c) => self.rename(c).await,
        }
    }

    /// Runs one parsed command.
    async fn run(&self, command: Command) -> ToolResult {
        match self.handle(command).await {
            Ok(text) => ToolResult::ok(text),
            Err(e) => ToolResult::error(e.message()),
        }
    }

    /// Runs Claude's raw tool input; never fails, never panics on any input.
    async fn execute(&self, input: Value) -> ToolResult {
        match Command::from_value(&input) {
            Ok(command) => self.run(command).await,
            Err(message) => ToolResult::error(message),
        }
    }
}

#[async_trait]
impl<T: MemoryToolHandlers + ?Sized> MemoryToolHandlers for std::sync::Arc<T> {
    async fn view(&self, c: ViewCommand) -> Result<String, ToolError> {
        (**self).view(c).await
    }
    async fn create(&self, c: CreateCommand) -> Result<String, ToolError> {
        (**self).create(c).await
    }
    async fn str_replace(&self, c: StrReplaceCommand) -> Result<String, ToolError> {
        (**self).str_replace(c).await
    }
    async fn insert(&self, c: InsertCommand) -> Result<String, ToolError> {
        (**self).insert(c).await
    }
    async fn delete(&self, c: DeleteCommand) -> Result<String, ToolError> {
        (**self).delete(c).await
    }
    async fn rename(&self, c: RenameCommand) -> Result<String, ToolError> {
        (**self).rename(c).await
    }
    async fn search(&self, input: crate::search::SearchInput) -> Result<String, ToolError> {
        (**self).search(input).await
    }
}
