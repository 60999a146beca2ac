//! What a command that failed is known to have done, path by path: the data a
//! [`ToolError`](crate::ToolError) and an [`Error::Stopped`](crate::Error::Stopped) carry, below
//! both so that neither imports the other.

use crate::path::MemoryPath;

/// Whether one step of a failed command was applied to one path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// It was: the path holds the command's new state (a copy created, a source deleted).
    Yes,
    /// It was not: the path holds what it held before the command.
    No,
    /// It may or may not have been: the path holds either state.
    Unknown,
}

/// What a failed command is known to have done to one path (normalised).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathEffect {
    /// The path, normalised (`/memories/a/b.md`).
    pub path: String,
    /// Whether the command's step on it was applied.
    pub applied: Applied,
}

/// What a multi-step command did, path by path, as it goes: becomes a
/// [`ToolError`](crate::ToolError)'s effects or, in a store's step-wise default, those of a
/// [`crate::Error::Stopped`].
#[derive(Default)]
pub(crate) struct Effects(Vec<PathEffect>);

impl Effects {
    /// `path` (normalised) was, was not, or may have been changed.
    pub(crate) fn add(&mut self, path: &MemoryPath, applied: Applied) {
        self.0.push(PathEffect {
            path: path.normalized(),
            applied,
        });
    }

    /// What was recorded, in order.
    pub(crate) fn into_vec(self) -> Vec<PathEffect> {
        self.0
    }
}
