//! The six commands' results and refusals, byte for byte as the reference tools word them,
//! and the wording of refused paths and malformed input.

use super::*;
use crate::path::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, PathError};
use crate::store::{EditFailure, TextEdit};

/// `File created successfully at: {path}`
pub fn created(path: &str) -> String {
    format!("File created successfully at: {path}")
}

/// `File {path} already exists`
pub fn already_exists(path: &str) -> String {
    format!("File {path} already exists")
}

/// ``No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.``
pub fn str_replace_not_found(old_str: &str, path: &str) -> String {
    format!("No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}.")
}

/// ``No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: {lines}. Please ensure it is unique``
pub fn str_replace_multiple(old_str: &str, lines: &[usize]) -> String {
    let lines: Vec<String> = lines.iter().map(usize::to_string).collect();
    format!(
        "No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: {}. Please ensure it is unique",
        lines.join(", ")
    )
}

/// An empty `old_str` (not in the spec: it would match everywhere).
pub fn str_replace_empty(path: &str) -> String {
    format!(
        "No replacement was performed, old_str is empty. Give the exact text to replace in {path}."
    )
}

/// `The file {path} has been edited.`
pub fn inserted(path: &str) -> String {
    format!("The file {path} has been edited.")
}

/// ``Invalid `insert_line` parameter: {n}. It should be within the range of lines of the file: [0, {n_lines}]``
pub fn insert_out_of_range(n: i64, n_lines: usize) -> String {
    format!(
        "Invalid `insert_line` parameter: {n}. It should be within the range of lines of the file: [0, {n_lines}]"
    )
}

/// `Successfully deleted {path}`
pub fn deleted(path: &str) -> String {
    format!("Successfully deleted {path}")
}

/// `Cannot delete the /memories directory itself`
pub fn cannot_delete_root() -> String {
    format!("Cannot delete the {ROOT} directory itself")
}

/// `Successfully renamed {old_path} to {new_path}`
pub fn renamed(old_path: &str, new_path: &str) -> String {
    format!("Successfully renamed {old_path} to {new_path}")
}

/// `The destination {new_path} already exists`
pub fn destination_exists(new_path: &str) -> String {
    format!("The destination {new_path} already exists")
}

/// `Cannot rename the /memories directory itself`
pub fn cannot_rename_root() -> String {
    format!("Cannot rename the {ROOT} directory itself")
}

/// A directory renamed into itself (not in the spec).
pub fn rename_into_itself(old_path: &str, new_path: &str) -> String {
    format!("Cannot rename {old_path} to {new_path}: the destination is inside the source")
}

/// `The path {path} does not exist` (delete, rename).
pub fn does_not_exist(path: &str) -> String {
    format!("The path {path} does not exist")
}

/// `The path {path} does not exist. Please provide a valid path.` (view, str_replace, insert).
pub fn does_not_exist_valid(path: &str) -> String {
    format!("The path {path} does not exist. Please provide a valid path.")
}

/// `The path {path} is not a file.`
pub fn not_a_file(path: &str) -> String {
    format!("The path {path} is not a file.")
}

/// `create` aimed at a directory (not in the spec).
pub fn is_a_directory(path: &str) -> String {
    format!("The path {path} is a directory; create needs a file path")
}

/// `Path must start with /memories, got: {path}`
pub fn outside_root(path: &str) -> String {
    format!("Path must start with {ROOT}, got: {path}")
}

/// `Path {path} would escape /memories directory`
pub fn would_escape(path: &str) -> String {
    format!("Path {path} would escape {ROOT} directory")
}

/// A path over the length limits (not in the spec).
pub fn path_too_long(path: &str) -> String {
    let shown: String = path.chars().take(80).collect();
    format!(
        "Path {shown}... is too long: a memory path is at most {MAX_PATH_BYTES} bytes, and each name in it at most {MAX_SEGMENT_BYTES}; use a shorter one"
    )
}

/// A server's message without its own closing "nothing was changed" (the tool's sentence says
/// it once) nor its final period.
pub(crate) fn without_nothing_changed(message: &str) -> &str {
    let m = message.trim_end().trim_end_matches('.');
    for tail in [
        "; nothing was changed",
        ", nothing was changed",
        ": nothing was changed",
    ] {
        if let Some(head) = m.strip_suffix(tail) {
            return head;
        }
    }
    m
}

/// A path holding an invisible or direction-changing character (not in the spec).
pub fn invisible_character(path: &str, c: u32) -> String {
    let shown: String = path
        .chars()
        .filter(|c| !crate::path::invisible(*c))
        .take(80)
        .collect();
    format!(
        "Path {shown} holds an invisible or direction-changing character (U+{c:04X}), which would make it look like another path; use visible characters only"
    )
}

/// `Unknown command: {name}`
pub fn unknown_command(name: &str) -> String {
    format!("Unknown command: {name}")
}

/// A tool input without a `command` string.
pub fn missing_command() -> String {
    "Missing required parameter `command` (one of: view, create, str_replace, insert, delete, rename)".to_string()
}

/// A tool input that is not a JSON object.
pub fn input_not_object() -> String {
    "The tool input must be a JSON object with a `command` field".to_string()
}

/// A required field missing from a command.
pub fn missing_field(command: &str, field: &str) -> String {
    format!("Missing required parameter `{field}` for command `{command}`")
}

/// A field of the wrong JSON type.
pub fn wrong_type(command: &str, field: &str, expected: &str) -> String {
    format!("Parameter `{field}` of command `{command}` must be {expected}")
}

/// An edit that cannot apply to the file's content: the protocol's string for each case.
pub fn edit_refused(path: &str, edit: &TextEdit, failure: &EditFailure) -> String {
    match (failure, edit) {
        (EditFailure::EmptyOldStr, _) => str_replace_empty(path),
        (EditFailure::NotFound, TextEdit::StrReplace { old_str, .. }) => {
            str_replace_not_found(old_str, path)
        }
        (EditFailure::Multiple { lines }, TextEdit::StrReplace { old_str, .. }) => {
            str_replace_multiple(old_str, lines)
        }
        (EditFailure::LineOutOfRange { line, line_count }, _) => {
            insert_out_of_range(*line, *line_count)
        }
        (failure, _) => format!("No change was made to {path}: {failure}."),
    }
}

/// An MCP call of a tool other than `memory` (not in the spec).
pub fn unknown_tool(name: &str) -> String {
    format!("Unknown tool: {name}")
}

impl PathError {
    /// The sentence for Claude, byte for byte as the protocol says.
    pub fn message(&self) -> String {
        match self {
            PathError::OutsideRoot(p) => outside_root(p),
            PathError::Escape(p) => would_escape(p),
            PathError::TooLong(p) => path_too_long(p),
            PathError::Invisible(p, c) => invisible_character(p, *c),
        }
    }
}
