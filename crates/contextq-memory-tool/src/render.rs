//! Every string Claude reads, in one place: the results and errors of the memory tool byte for
//! byte as the protocol says (`docs/protocol.md`), the directory tree of a listing, the
//! sentences for every store failure ([`Error::tool_message`]) and for refused paths
//! ([`PathError::message`]).
//!
//! Claude was trained on the outputs of Anthropic's reference memory tools, so the wording, the
//! tabs, the number widths and the absence of trailing newlines all matter. Messages returned by
//! the error functions here do not carry the `Error: ` prefix: [`crate::ToolResult::error`] adds
//! it, so that the prefix exists in exactly one place too.
//!
//! Messages for situations the spec does not name (documented in `docs/protocol.md`) follow the
//! same style: they say what happened and what Claude can do next.

use std::collections::BTreeMap;

use crate::budget::AnswerBudget;
use crate::contextq::error::{ContextQError, ErrorCode};
use crate::error::Error;
use crate::path::{MAX_PATH_BYTES, MAX_SEGMENT_BYTES, MemoryPath, PathError};
use crate::store::{EditFailure, Listing, TextEdit};
use crate::transport::TransportError;

/// The memory root, as every message names it.
const ROOT: &str = "/memories";

/// Lines beyond which a file is refused by `view`.
pub const MAX_LINES: usize = 999_999;

/// Lines of context shown on each side of the first changed line by `str_replace`.
pub const SNIPPET_CONTEXT: usize = 2;

/// Formats a byte count the way the reference tools do: `0B`, `18B`, `1K`, `1.0K`, `4.9K`,
/// `1.2M`; bytes divided by 1024 per unit (`B K M G`), integer when exact, else one decimal
/// rounded half up.
pub fn human_size(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "K", "M", "G"];
    let mut unit = 0usize;
    let mut divisor: u128 = 1;
    while unit + 1 < UNITS.len() && u128::from(bytes) >= divisor * 1024 {
        divisor *= 1024;
        unit += 1;
    }
    let bytes = u128::from(bytes);
    if bytes % divisor == 0 {
        return format!("{}{}", bytes / divisor, UNITS[unit]);
    }
    // Tenths, rounded half up, in exact integer arithmetic (as JavaScript's toFixed(1) does on
    // the exact quotient, which a division by a power of two always is).
    let tenths_num = bytes * 10;
    let mut tenths = tenths_num / divisor;
    if (tenths_num % divisor) * 2 >= divisor {
        tenths += 1;
    }
    format!("{}.{}{}", tenths / 10, tenths % 10, UNITS[unit])
}

/// One numbered line: the number right-aligned to width 6, a tab, the text.
fn numbered(n: usize, line: &str) -> String {
    format!("{n:>6}\t{line}")
}

/// Result of `view` on a file. `range` is the parsed `view_range`, if a valid one was given.
/// Without a range and past `budget.read_chars`, the first lines that fit are shown, whole,
/// then a blank line and [`read_cut`]; a `view_range` read is never cut.
///
/// Returns `Err(message)` when the file is over [`MAX_LINES`].
pub fn view_file(
    path: &str,
    content: &str,
    range: Option<(i64, i64)>,
    budget: &AnswerBudget,
) -> Result<String, String> {
    let lines: Vec<&str> = content.split('\n').collect();
    if lines.len() > MAX_LINES {
        return Err(file_too_long(path));
    }
    let total = lines.len() as i64;
    let (start, end) = match range {
        None => (1, total),
        Some((start, end)) => {
            let start = start.max(1);
            let end = if end == -1 { total } else { end.min(total) };
            (start, end)
        }
    };
    let mut out = format!("Here's the content of {path} with line numbers:\n");
    if range.is_none() && budget.read_chars > 0 {
        // Each numbered line is its number's width (at least 6), a tab, the line, a break.
        let row = |n: usize, line: &str| n.to_string().len().max(6) + 1 + line.chars().count() + 1;
        // Bytes bound characters from above: the exact count only for a file that may not fit.
        let width = lines.len().to_string().len().max(6);
        let bytes = out.len() + content.len() + lines.len() * (width + 2);
        let whole = || {
            out.chars().count()
                + lines
                    .iter()
                    .enumerate()
                    .map(|(i, l)| row(i + 1, l))
                    .sum::<usize>()
        };
        if bytes > budget.read_chars && whole() > budget.read_chars {
            let room = budget
                .read_chars
                .saturating_sub(NOTE_ROOM + out.chars().count());
            let (mut shown, mut used) = (0usize, 0usize);
            for (i, line) in lines.iter().enumerate() {
                if used + row(i + 1, line) > room {
                    break;
                }
                used += row(i + 1, line);
                shown += 1;
            }
            let body: Vec<String> = (1..=shown).map(|n| numbered(n, lines[n - 1])).collect();
            out.push_str(&body.join("\n"));
            out.push_str("\n\n");
            out.push_str(&read_cut(path, lines.len(), content.len() as u64, shown));
            return Ok(out);
        }
    }
    if start <= end {
        let body: Vec<String> = (start..=end)
            .map(|n| numbered(n as usize, lines[(n - 1) as usize]))
            .collect();
        out.push_str(&body.join("\n"));
    }
    Ok(out)
}

/// The last line of a file `view` cut to its budget (not in the spec): how long the file is
/// and the `view_range` to read on with (as many lines again).
pub fn read_cut(path: &str, total: usize, bytes: u64, shown: usize) -> String {
    let size = human_size(bytes);
    if shown == 0 {
        return format!(
            "Note: {path} has {total} lines ({size}) and its first line alone is too long to show here; read it with view_range [1, 1]."
        );
    }
    let next = shown + 1;
    let until = (shown + shown).min(total);
    format!(
        "Note: {path} has {total} lines ({size}); only lines 1-{shown} are shown, to keep this answer short. Read on with view_range [{next}, {until}]."
    )
}

/// `File {path} exceeds maximum line limit of 999,999 lines.`
pub fn file_too_long(path: &str) -> String {
    format!("File {path} exceeds maximum line limit of 999,999 lines.")
}

/// One row of a directory listing, already in display order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingRow {
    /// The text of the size column (see [`human_size`]).
    pub size: String,
    /// The full path shown, directories ending with `/`.
    pub path: String,
    /// 1 for an entry of the directory viewed, 2 for an entry of one of its directories.
    pub depth: u8,
}

impl ListingRow {
    /// Characters the row takes in a listing, its line break included.
    fn chars(&self) -> usize {
        self.size.chars().count() + 1 + self.path.chars().count() + 1
    }
}

/// Result of `view` on a directory: the header, the directory itself, then the rows; when the
/// store could not show everything (`truncated`), a blank line and a note saying so.
pub fn view_directory(path: &str, own_size: &str, rows: &[ListingRow], truncated: bool) -> String {
    let mut out = listing_head(path, own_size);
    for row in rows {
        push_row(&mut out, row);
    }
    if truncated {
        out.push_str("\n\n");
        out.push_str(&listing_may_be_incomplete());
    }
    out
}

fn listing_head(path: &str, own_size: &str) -> String {
    format!(
        "Here're the files and directories up to 2 levels deep in {path}, excluding hidden items and node_modules:\n{own_size}\t{path}"
    )
}

fn push_row(out: &mut String, row: &ListingRow) {
    out.push('\n');
    out.push_str(&row.size);
    out.push('\t');
    out.push_str(&row.path);
}

/// Room kept for the note of a cut answer, so that the answer with its note stays within the
/// budget.
const NOTE_ROOM: usize = 400;

/// Result of `view` on a directory, from everything the store listed beneath it: the
/// 2-level tree of the protocol, with derived directories and sizes. Within `budget` it is the
/// reference listing byte for byte; past it, see [`view_directory_within`].
pub fn view_listing(dir: &MemoryPath, listing: &Listing, budget: &AnswerBudget) -> String {
    let (own, rows) = listing_rows(dir, listing);
    view_directory_within(dir.raw(), &own, &rows, listing.truncated, budget)
}

/// [`view_directory`] within `budget`: when the rows do not fit (entries or characters), the
/// entries of the directory come first (so the shape of the tree survives), then as many
/// entries of its directories as fit, in listing order, each row whole; the listing ends with a
/// blank line and [`listing_cut`].
pub fn view_directory_within(
    path: &str,
    own_size: &str,
    rows: &[ListingRow],
    truncated: bool,
    budget: &AnswerBudget,
) -> String {
    let head = listing_head(path, own_size).chars().count();
    // Bytes bound characters from above: count characters only when the bytes do not fit.
    let bytes: usize = rows.iter().map(|r| r.size.len() + r.path.len() + 2).sum();
    let fits = |total: usize| AnswerBudget::within(budget.listing_chars, head + total);
    if AnswerBudget::within(budget.listing_entries, rows.len())
        && (fits(bytes) || fits(rows.iter().map(ListingRow::chars).sum()))
    {
        return view_directory(path, own_size, rows, truncated);
    }
    let chars_left = |used: usize| match budget.listing_chars {
        0 => usize::MAX,
        limit => limit.saturating_sub(used + NOTE_ROOM),
    };
    let entries = match budget.listing_entries {
        0 => usize::MAX,
        n => n,
    };
    let mut keep = vec![false; rows.len()];
    let (mut kept, mut used) = (0usize, head);
    for depth in [1, 2] {
        for (i, row) in rows.iter().enumerate().filter(|(_, r)| r.depth == depth) {
            if kept == entries || row.chars() > chars_left(used) {
                break;
            }
            keep[i] = true;
            kept += 1;
            used += row.chars();
        }
    }
    let mut out = listing_head(path, own_size);
    let mut left_out = 0;
    let mut left_chars = 0;
    let mut example = None;
    for (row, shown) in rows.iter().zip(&keep) {
        if *shown {
            push_row(&mut out, row);
        } else {
            left_out += 1;
            left_chars += row.chars();
            if example.is_none() && row.depth == 2 {
                // The directory whose entries were cut.
                example = row
                    .path
                    .trim_end_matches('/')
                    .rsplit_once('/')
                    .map(|(dir, _)| dir.to_string());
            }
        }
    }
    out.push_str("\n\n");
    out.push_str(&listing_cut(
        left_out,
        rows.len(),
        left_chars,
        example.as_deref(),
    ));
    if truncated {
        out.push('\n');
        out.push_str(&listing_may_be_incomplete());
    }
    out
}

/// The last line of a listing cut to its budget (not in the spec).
pub fn listing_cut(left_out: usize, total: usize, chars: usize, example: Option<&str>) -> String {
    let how = match example {
        Some(dir) => format!("view a subdirectory to see its entries, e.g. {dir}"),
        None => "view a subdirectory, or a file by its path, to see what is not listed".to_string(),
    };
    format!(
        "Note: {left_out} of {total} entries ({chars} characters) are not shown, to keep this answer short; {how}."
    )
}

/// Whether a name is left out of listings (`view`): a hidden name (`.git`, `.env`) or
/// `node_modules`, as the spec's listing says.
pub fn hidden(name: &str) -> bool {
    name.starts_with('.') || name == "node_modules"
}

/// The 2-level tree of the spec from a recursive listing.
fn listing_rows(dir: &MemoryPath, listing: &Listing) -> (String, Vec<ListingRow>) {
    #[derive(Default)]
    struct Node {
        is_dir: bool,
        real_size: Option<u64>,
        bytes: u64,
        unknown: bool,
        modified: Option<String>,
        children: BTreeMap<String, Node>,
    }
    impl Node {
        fn add_file(&mut self, size: Option<u64>, modified: &Option<String>) {
            match size {
                Some(s) => self.bytes += s,
                None => self.unknown = true,
            }
            if modified.as_ref() > self.modified.as_ref() {
                self.modified = modified.clone();
            }
        }
        fn size_text(&self) -> String {
            if let Some(s) = self.real_size {
                return human_size(s);
            }
            if self.unknown {
                return self.modified.clone().unwrap_or_else(|| "-".to_string());
            }
            human_size(self.bytes)
        }
    }

    let mut root = Node {
        is_dir: true,
        real_size: listing.own_size,
        ..Node::default()
    };
    for file in &listing.files {
        let Some(rel) = file.path.strip_prefix(dir) else {
            continue;
        };
        if rel.is_empty() {
            continue;
        }
        root.add_file(file.size, &file.modified);
        let mut node = &mut root;
        for (depth, seg) in rel.iter().enumerate().take(2) {
            let is_last = depth + 1 == rel.len();
            let child = node.children.entry(seg.clone()).or_default();
            child.add_file(file.size, &file.modified);
            if !is_last {
                child.is_dir = true;
            }
            node = child;
        }
    }
    for d in &listing.dirs {
        let Some(rel) = d.path.strip_prefix(dir) else {
            continue;
        };
        let mut node = &mut root;
        for seg in rel.iter().take(2) {
            node = node.children.entry(seg.clone()).or_default();
            node.is_dir = true;
        }
        if rel.len() <= 2 && !rel.is_empty() {
            node.real_size = d.size;
        }
    }

    // Each entry, then (one level down only) its own entries; hidden names are skipped with
    // everything beneath them.
    fn rows_of(node: &Node, prefix: &str, depth: usize, rows: &mut Vec<ListingRow>) {
        for (name, child) in node.children.iter().filter(|(name, _)| !hidden(name)) {
            let path = format!("{prefix}/{name}");
            let slash = if child.is_dir { "/" } else { "" };
            rows.push(ListingRow {
                size: child.size_text(),
                path: format!("{path}{slash}"),
                depth: if depth > 1 { 1 } else { 2 },
            });
            if depth > 1 {
                rows_of(child, &path, depth - 1, rows);
            }
        }
    }
    let mut rows = Vec::new();
    rows_of(&root, &dir.normalized(), 2, &mut rows);
    (root.size_text(), rows)
}

/// The note under a listing the store capped (not in the spec).
pub fn listing_may_be_incomplete() -> String {
    "Note: this memory store returned one full page of entries and no way to the next, so this listing may be incomplete.".to_string()
}

/// `File created successfully at: {path}`
pub fn created(path: &str) -> String {
    format!("File created successfully at: {path}")
}

/// `File {path} already exists`
pub fn already_exists(path: &str) -> String {
    format!("File {path} already exists")
}

/// Success of `str_replace`: the snippet around `changed_line` (1-based) of `new_content`.
pub fn str_replace_done(new_content: &str, changed_line: usize) -> String {
    str_replace_snippet(&contextq_api::edit::snippet(
        new_content,
        changed_line,
        SNIPPET_CONTEXT,
    ))
}

/// Success of `str_replace` from the lines around the change alone (what a store with the
/// `edit-snippet` extension answers): the same text as [`str_replace_done`].
pub fn str_replace_snippet(snippet: &contextq_api::Snippet) -> String {
    let body: Vec<String> = snippet
        .lines
        .iter()
        .enumerate()
        .map(|(i, line)| numbered(snippet.first_line + i, line))
        .collect();
    format!(
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{}",
        body.join("\n")
    )
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
fn without_nothing_changed(message: &str) -> &str {
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

/// A write the store could not confirm either way (not in the spec).
pub fn outcome_unknown(operation: &str, path: &str, cause: &str) -> String {
    format!(
        "The memory store did not confirm whether the {operation} of {path} was applied ({cause}). View {path} to check before retrying."
    )
}

/// A one-step rename (the server's transaction) whose answer was lost and could not be read
/// back: all or nothing, so which one the new path tells.
pub fn rename_unknown(old_path: &str, new_path: &str, cause: &str) -> String {
    format!(
        "The memory store did not confirm whether the rename of {old_path} to {new_path} was applied ({cause}). It is all or nothing: view {new_path}; if it exists the rename was applied, if not {old_path} is unchanged and the rename can be retried."
    )
}

/// A rename that failed before anything changed (not in the spec).
pub fn rename_failed(old_path: &str, new_path: &str, cause: &str) -> String {
    format!("Rename of {old_path} to {new_path} failed and nothing was changed: {cause}")
}

/// A rename whose copy was made but whose source could not be deleted, nor the copy removed
/// again: the TypeScript package's explicit error, naming both paths and the source row's id.
pub fn rename_both_exist(old_path: &str, new_path: &str, source_id: &str, cause: &str) -> String {
    format!(
        "Rename of {old_path} to {new_path} is incomplete: {new_path} was created, but deleting the source {old_path} (id {source_id}) failed: {cause} Both files now exist; delete one of them."
    )
}

/// A rename whose copy was made but whose source delete has an unknown outcome.
pub fn rename_source_unknown(
    old_path: &str,
    new_path: &str,
    source_id: &str,
    cause: &str,
) -> String {
    format!(
        "Rename of {old_path} to {new_path} is incomplete: {new_path} was created, but the memory store did not confirm whether the source {old_path} (id {source_id}) was deleted ({cause}). View {old_path}: if it still exists, delete it to finish the rename; {new_path} holds its content."
    )
}

/// A rename whose copy has an unknown outcome; the source is untouched.
pub fn rename_copy_unknown(old_path: &str, new_path: &str, cause: &str) -> String {
    format!(
        "Rename of {old_path} to {new_path} did not finish: {old_path} is unchanged, but the memory store did not confirm whether the copy at {new_path} was created ({cause}). View {new_path}: if it exists, delete {old_path} to finish the rename; if not, retry it."
    )
}

/// A rename whose source delete failed, and whose undo of the copy has an unknown outcome.
pub fn rename_undo_unknown(old_path: &str, new_path: &str, cause: &str, undo: &str) -> String {
    format!(
        "Rename of {old_path} to {new_path} failed: deleting the source failed ({cause}), so the copy at {new_path} was removed again, but the memory store did not confirm that removal ({undo}). {old_path} is unchanged; view {new_path} and delete it if it still exists."
    )
}

/// At most ten paths, then "and N more".
pub fn path_list(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    if paths.len() <= SHOWN {
        paths.join(", ")
    } else {
        format!(
            "{}, and {} more",
            paths[..SHOWN].join(", "),
            paths.len() - SHOWN
        )
    }
}

/// A directory delete that stopped part way (not in the spec): what was deleted, what has an
/// unknown outcome, what is still there.
pub fn delete_tree_stopped(
    dir: &str,
    deleted: usize,
    total: usize,
    unknown: Option<&str>,
    remaining: &[String],
    cause: &str,
) -> String {
    let unknown = unknown
        .map(|p| format!(" whether {p} was deleted is unknown;"))
        .unwrap_or_default();
    let remaining = if remaining.is_empty() {
        String::new()
    } else {
        format!(" still present: {}.", path_list(remaining))
    };
    format!(
        "Deleting {dir} stopped part way: {deleted} of {total} files were deleted;{unknown}{remaining} Cause: {cause} Run delete on {dir} again to finish."
    )
}

/// A directory delete or rename on a store that caps listings and showed nothing more beneath
/// the directory, though there may be more (not in the spec).
pub fn capped_listing_stopped(dir: &str, done: usize, verb: &str) -> String {
    format!(
        "{done} files beneath {dir} were {verb}, but this memory store lists only one page of entries and its last page showed no more files beneath {dir}; some may remain. View {dir} to check."
    )
}

/// A directory rename that failed while copying (not in the spec).
pub fn rename_dir_copy_failed(
    old_path: &str,
    new_path: &str,
    failed: &str,
    cause: &str,
    state: &str,
) -> String {
    // The cause's own "nothing was changed" (it speaks of the one copy) would say it twice.
    format!(
        "Rename of {old_path} to {new_path} failed while copying {failed}: {}; {state}.",
        without_nothing_changed(cause)
    )
}

/// What a failed directory rename left (the end of [`rename_dir_copy_failed`]): files moved by
/// earlier passes, copies at both places, copies whose removal is unknown; else nothing.
pub fn rename_dir_state(moved: usize, new_path: &str, both: &[String], maybe: &[String]) -> String {
    let mut state = Vec::new();
    if moved > 0 {
        state.push(format!(
            "{moved} files had already been moved to {new_path}"
        ));
    }
    if !both.is_empty() {
        state.push(format!(
            "these copies could not be removed and now exist at both places: {}",
            path_list(both)
        ));
    }
    if !maybe.is_empty() {
        state.push(format!(
            "the memory store did not confirm whether these copies exist: {}",
            path_list(maybe)
        ));
    }
    if state.is_empty() {
        state.push("nothing was changed".to_string());
    }
    state.join("; ")
}

/// A directory rename whose sources could not all be deleted (not in the spec).
pub fn rename_dir_delete_failed(
    old_path: &str,
    new_path: &str,
    left: &[String],
    unknown: Option<&str>,
    copied: usize,
    cause: &str,
) -> String {
    let unknown = unknown
        .map(|p| format!(" Whether {p} was deleted is unknown."))
        .unwrap_or_default();
    format!(
        "Rename of {old_path} to {new_path} is incomplete: every file was copied to {new_path}, but {} of {copied} sources could not be deleted and now exist at both places: {}.{unknown} Cause: {cause} Delete them from {old_path} to finish.",
        left.len(),
        path_list(left),
    )
}

/// An edit gave up because other writers kept changing the file for the whole edit budget.
pub fn edit_conflict(path: &str, attempts: usize, spent: std::time::Duration) -> String {
    format!(
        "The file {path} was changed by other writers while this edit was being saved ({attempts} attempts in {:.1} s); nothing was changed by this command. View the file again and retry the edit.",
        spent.as_secs_f64()
    )
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

/// What Claude reads when a write is refused because the memory is read-only here.
pub fn read_only(command: &str) -> String {
    format!(
        "The memory is read-only here: {command} is not allowed and nothing was changed. Memory can still be viewed."
    )
}

impl Error {
    /// A sentence Claude can act on (without the `Error: ` prefix).
    pub fn tool_message(&self) -> String {
        match self {
            Error::NotFound { path } => does_not_exist(path),
            Error::AlreadyExists { path } => already_exists(path),
            Error::Precondition { path } => format!(
                "The file {path} was changed by another writer; nothing was changed. View it again and retry."
            ),
            Error::EditRefused { path, failure } => {
                format!("No change was made to {path}: {failure}.")
            }
            Error::NotSupported { operation } => {
                format!("This memory store does not support {operation}")
            }
            Error::OutcomeUnknown {
                path,
                operation,
                cause,
            } => outcome_unknown(operation, path, &cause.to_string()),
            Error::Path(e) => e.message(),
            Error::IsADirectory { path } => format!("{path} is a directory, not a file"),
            Error::ParentIsAFile { path, operation } => {
                format!("Cannot {operation} {path}: a parent of it is a file, not a directory")
            }
            Error::Io {
                operation, source, ..
            } => format!("The memory store failed to {operation}: {source}"),
            Error::Config { message } => format!("The memory tool is misconfigured: {message}"),
            Error::ReadOnly { command } => read_only(command),
            Error::SecretRefused { path, kind, line } => format!(
                "Nothing was written to {path}: line {line} of the content looks like {kind}. Do not store credentials (API keys, tokens, passwords, private keys) in memory; write the fact without the secret, e.g. where the credential is kept."
            ),
            Error::VersionNotFound { path, version } => {
                format!("{path} has no version {version}; nothing was changed.")
            }
            Error::Redacted { path, version, .. } => format!(
                "Version {version} of {path} was redacted: its content is gone; nothing was changed."
            ),
            Error::Stopped { message, .. } => message.clone(),
            Error::ContextQ(e) => contextq_message(e),
            #[cfg(feature = "runner")]
            Error::Anthropic(e) => format!("The Anthropic API failed: {}", e.message()),
        }
    }
}

/// What Claude reads when ContextQ failed or refused: by the contract's error code.
fn contextq_message(e: &ContextQError) -> String {
    match e {
        ContextQError::NotAWorkspace { segment } => format!(
            "{segment:?} cannot be a workspace: the first folder under {ROOT} is a ContextQ workspace, named with 1 to 63 of a-z, 0-9 and '-' (e.g. {ROOT}/acme/notes.md)"
        ),
        ContextQError::OutsideWorkspace { path } => format!(
            "{path} is not inside a workspace: the first folder under {ROOT} is a ContextQ workspace, so write to {ROOT}/<workspace>/{}",
            path.rsplit('/')
                .find(|s| !s.is_empty())
                .unwrap_or("notes.md")
        ),
        ContextQError::WorkspaceNotFound {
            workspace,
            create_allowed: false,
        } => format!(
            "The workspace {workspace:?} does not exist in ContextQ; ask the operator to create it (or enable create_workspaces)"
        ),
        ContextQError::WorkspaceNotFound { workspace, .. } => {
            format!("The workspace {workspace:?} could not be created")
        }
        ContextQError::Api {
            code,
            code_text,
            status,
            message,
            retry_after,
        } => match code {
            Some(ErrorCode::QuotaExceeded) => format!(
                "The memory store is full: {message}. Delete memories you no longer need, then retry."
            ),
            // Read-only only when it is: a key without the write scope, or a read-only server;
            // a key limited to other workspaces may write, just not there.
            Some(ErrorCode::Forbidden)
                if message.contains("lacks the write scope") || message.contains("read-only") =>
            {
                format!(
                    "The memory is read-only here: {}; nothing was changed.",
                    without_nothing_changed(message)
                )
            }
            Some(ErrorCode::Forbidden) => format!(
                "The ContextQ API key may not make this change: {}; nothing was changed.",
                without_nothing_changed(message)
            ),
            Some(ErrorCode::Unauthorized) => format!(
                "The memory store rejected its API key (401: {}); the operator must fix the key.",
                without_nothing_changed(message)
            ),
            Some(ErrorCode::PayloadTooLarge) => format!(
                "The content is too large for the memory store ({message}); at most 1 MiB per file. Split it into smaller files."
            ),
            Some(ErrorCode::Conflict | ErrorCode::EditFailed) => {
                format!("The memory store refused the change: {message}")
            }
            Some(ErrorCode::RateLimited) => format!(
                "The memory store is rate limiting requests{}; nothing was changed by this command. Retry later.",
                retry_after
                    .map(|s| format!(" (retry after {s}s)"))
                    .unwrap_or_default()
            ),
            Some(ErrorCode::Internal) => format!(
                "The memory store failed ({status} {code_text}: {message}); nothing was changed. Retry later."
            ),
            Some(ErrorCode::Unavailable) => format!(
                "The memory store is unavailable for now ({status} {code_text}: {message}); nothing was changed. Retry later."
            ),
            _ => format!("The memory store answered {status} {code_text}: {message}"),
        },
        ContextQError::Transport(TransportError {
            message, timeout, ..
        }) => {
            if *timeout {
                format!(
                    "The memory store did not answer in time ({message}); nothing was changed. Retry later."
                )
            } else {
                format!(
                    "The memory store is unreachable ({message}); nothing was changed. Retry later."
                )
            }
        }
        ContextQError::Protocol { message, .. } => {
            format!("The memory store gave an unexpected answer: {message}")
        }
        ContextQError::HistoryUnavailable { .. } => {
            "This memory store keeps no history; nothing was changed.".to_string()
        }
        ContextQError::RedactionUnavailable { .. } => {
            "This memory store cannot redact; nothing was changed.".to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{DirMeta, FileMeta};

    /// The snippet as the reference tool computes it (every line split out first).
    fn reference_snippet(new_content: &str, changed_line: usize) -> String {
        let lines: Vec<&str> = new_content.split('\n').collect();
        let first = changed_line.saturating_sub(SNIPPET_CONTEXT).max(1);
        let last = (changed_line + SNIPPET_CONTEXT).min(lines.len());
        let body: Vec<String> = (first..=last).map(|n| numbered(n, lines[n - 1])).collect();
        format!(
            "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n{}",
            body.join("\n")
        )
    }

    #[test]
    fn a_snippet_alone_renders_as_the_whole_content_does() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..2_000 {
            let lines = rng.usize(0..12);
            let content: String = (0..lines)
                .map(|i| {
                    let text = "x".repeat(rng.usize(0..3));
                    if i + 1 < lines || rng.bool() {
                        format!("{text}\n")
                    } else {
                        text
                    }
                })
                .collect();
            let count = content.split('\n').count();
            let line = rng.usize(1..=count);
            assert_eq!(
                str_replace_done(&content, line),
                reference_snippet(&content, line),
                "{content:?} at {line}"
            );
        }
    }

    fn p(s: &str) -> MemoryPath {
        MemoryPath::parse(s).unwrap()
    }

    fn tree(n: usize, children: usize) -> Vec<ListingRow> {
        let mut rows = Vec::new();
        for d in 0..n {
            rows.push(ListingRow {
                size: "4.0K".into(),
                path: format!("/memories/d{d:03}/"),
                depth: 1,
            });
            for c in 0..children {
                rows.push(ListingRow {
                    size: "1.0K".into(),
                    path: format!("/memories/d{d:03}/f{c:03}.md"),
                    depth: 2,
                });
            }
        }
        rows
    }

    #[test]
    fn a_listing_within_its_budget_is_the_reference_listing() {
        let rows = tree(3, 2);
        let exact = view_directory("/memories", "12K", &rows, false);
        for budget in [
            AnswerBudget::default(),
            AnswerBudget::UNLIMITED,
            AnswerBudget::default().listing_entries(rows.len()),
            AnswerBudget::default().listing_chars(exact.chars().count()),
        ] {
            assert_eq!(
                view_directory_within("/memories", "12K", &rows, false, &budget),
                exact
            );
        }
    }

    #[test]
    fn a_listing_past_its_budget_keeps_the_tree_and_says_what_is_left_out() {
        let rows = tree(10, 10);
        let budget = AnswerBudget::default().listing_entries(25);
        let out = view_directory_within("/memories", "110K", &rows, false, &budget);
        let lines: Vec<&str> = out.lines().collect();
        // Header, the directory's own line, 25 rows, a blank line, the note.
        assert_eq!(lines.len(), 2 + 25 + 2, "{out}");
        // Every entry of the directory is there, in listing order, with the first 15 of the
        // entries beneath them.
        for d in 0..10 {
            assert!(out.contains(&format!("\t/memories/d{d:03}/\n")), "{out}");
        }
        assert!(out.contains("/memories/d001/f004.md\n"), "{out}");
        assert!(!out.contains("/memories/d001/f005.md"), "{out}");
        assert_eq!(
            lines.last().unwrap(),
            &"Note: 85 of 110 entries (2380 characters) are not shown, to keep this answer short; view a subdirectory to see its entries, e.g. /memories/d001."
        );
        // Every line shown is a whole row of the reference listing.
        let exact = view_directory("/memories", "110K", &rows, false);
        for line in &lines[..lines.len() - 2] {
            assert!(exact.lines().any(|l| l == *line), "{line}");
        }
        // By characters: the answer, note included, stays within the budget.
        for chars in [500, 2_000, 3_000] {
            let budget = AnswerBudget::default().listing_chars(chars);
            let out = view_directory_within("/memories", "110K", &rows, true, &budget);
            assert!(
                out.chars().count() <= chars,
                "{chars}: {}",
                out.chars().count()
            );
            assert!(out.ends_with(&listing_may_be_incomplete()), "{out}");
        }
        // More entries of its own than the budget: cut at a whole line, no example to give.
        let flat = tree(50, 0);
        let out = view_directory_within(
            "/memories",
            "200K",
            &flat,
            false,
            &AnswerBudget::default().listing_entries(10),
        );
        assert!(out.ends_with("Note: 40 of 50 entries (840 characters) are not shown, to keep this answer short; view a subdirectory, or a file by its path, to see what is not listed."), "{out}");
    }

    #[test]
    fn a_read_past_its_budget_shows_whole_lines_and_where_to_read_on() {
        let content: String = (1..=1000).map(|n| format!("line {n}\n")).collect();
        let whole = view_file("/memories/a", &content, None, &AnswerBudget::UNLIMITED).unwrap();
        assert_eq!(
            view_file("/memories/a", &content, None, &AnswerBudget::default()).unwrap(),
            whole,
            "within the default budget"
        );
        let budget = AnswerBudget::default().read_chars(2_000);
        let cut = view_file("/memories/a", &content, None, &budget).unwrap();
        assert!(cut.chars().count() <= 2_000, "{}", cut.chars().count());
        assert!(whole.starts_with(cut.split("\n\nNote:").next().unwrap()));
        assert!(
            cut.ends_with("Note: /memories/a has 1001 lines (8.7K); only lines 1-103 are shown, to keep this answer short. Read on with view_range [104, 206]."),
            "{cut}"
        );
        // A range is read exactly, whatever the budget.
        assert_eq!(
            view_file("/memories/a", &content, Some((1, -1)), &budget).unwrap(),
            whole
        );
        // A first line longer than the budget.
        let long = "x".repeat(5_000);
        assert!(
            view_file("/memories/a", &long, None, &budget)
                .unwrap()
                .ends_with(
                    "its first line alone is too long to show here; read it with view_range [1, 1]."
                )
        );
    }

    /// Listing rows as `size<TAB>path`.
    fn rows_text(rows: &[ListingRow]) -> Vec<String> {
        rows.iter()
            .map(|r| format!("{}\t{}", r.size, r.path))
            .collect()
    }

    fn file(path: &str, size: u64) -> FileMeta {
        FileMeta {
            path: p(path),
            size: Some(size),
            version: None,
            modified: None,
        }
    }

    #[test]
    fn tree_is_two_levels_sorted_depth_first_with_derived_sizes() {
        let listing = Listing {
            own_size: None,
            files: vec![
                file("/memories/b.md", 18),
                file("/memories/a/x.md", 1000),
                file("/memories/a/deep/y.md", 30),
                file("/memories/a/deep/more/z.md", 2),
                file("/memories/.hidden/q", 5),
                file("/memories/node_modules/m", 5),
                file("/memories/a/.secret", 1),
                file("/memories/A.md", 0),
            ],
            dirs: vec![],
            truncated: false,
        };
        let (own, rows) = listing_rows(&MemoryPath::root(), &listing);
        assert_eq!(own, "1.0K"); // 1061 bytes in all
        let got = rows_text(&rows);
        assert_eq!(
            got,
            vec![
                "0B\t/memories/A.md",
                "1.0K\t/memories/a/",
                "32B\t/memories/a/deep/",
                "1000B\t/memories/a/x.md",
                "18B\t/memories/b.md",
            ]
        );
    }

    #[test]
    fn tree_uses_real_dir_sizes_and_modified_fallback() {
        let listing = Listing {
            own_size: Some(4096),
            files: vec![FileMeta {
                path: p("/memories/d/f"),
                size: None,
                version: None,
                modified: Some("2026-01-01T00:00:00Z".into()),
            }],
            dirs: vec![
                DirMeta {
                    path: p("/memories/d"),
                    size: Some(4096),
                },
                DirMeta {
                    path: p("/memories/empty"),
                    size: Some(4096),
                },
            ],
            truncated: false,
        };
        let (own, rows) = listing_rows(&MemoryPath::root(), &listing);
        assert_eq!(own, "4K");
        let got = rows_text(&rows);
        assert_eq!(
            got,
            vec![
                "4K\t/memories/d/",
                "2026-01-01T00:00:00Z\t/memories/d/f",
                "4K\t/memories/empty/",
            ]
        );
    }

    #[test]
    fn sizes() {
        assert_eq!(human_size(0), "0B");
        assert_eq!(human_size(18), "18B");
        assert_eq!(human_size(1023), "1023B");
        assert_eq!(human_size(1024), "1K");
        assert_eq!(human_size(1030), "1.0K");
        assert_eq!(human_size(4096), "4K");
        assert_eq!(human_size(5017), "4.9K");
        assert_eq!(human_size(1280), "1.3K"); // 1.25 rounds half up, as toFixed(1) does
        assert_eq!(human_size(1_258_291), "1.2M");
        assert_eq!(human_size(1 << 20), "1M");
        assert_eq!(human_size(3 << 30), "3G");
        assert_eq!(human_size(u64::MAX), "17179869184.0G");
    }

    #[test]
    fn view_file_shapes() {
        assert_eq!(
            view_file("/memories/a", "x\ny", None, &AnswerBudget::default()).unwrap(),
            "Here's the content of /memories/a with line numbers:\n     1\tx\n     2\ty"
        );
        assert_eq!(
            view_file("/memories/a", "x\n", None, &AnswerBudget::default()).unwrap(),
            "Here's the content of /memories/a with line numbers:\n     1\tx\n     2\t"
        );
        assert_eq!(
            view_file(
                "/memories/a",
                "a\nb\nc",
                Some((2, -1)),
                &AnswerBudget::default()
            )
            .unwrap(),
            "Here's the content of /memories/a with line numbers:\n     2\tb\n     3\tc"
        );
        assert_eq!(
            view_file(
                "/memories/a",
                "a\nb\nc",
                Some((5, 9)),
                &AnswerBudget::default()
            )
            .unwrap(),
            "Here's the content of /memories/a with line numbers:\n"
        );
        assert_eq!(
            view_file(
                "/memories/a",
                "a\nb\nc",
                Some((-3, 1)),
                &AnswerBudget::default()
            )
            .unwrap(),
            "Here's the content of /memories/a with line numbers:\n     1\ta"
        );
        let big = "\n".repeat(MAX_LINES);
        assert_eq!(
            view_file("/memories/big", &big, None, &AnswerBudget::default()).unwrap_err(),
            "File /memories/big exceeds maximum line limit of 999,999 lines."
        );
    }

    #[test]
    fn numbers_wider_than_six() {
        assert_eq!(numbered(1_234_567, "x"), "1234567\tx");
    }

    /// Every store failure's sentence, exactly (the conformance suite cannot provoke ContextQ's
    /// refusals on the in-memory store, so they are pinned here).
    #[test]
    fn every_store_failure_has_its_sentence() {
        let api = |status: u16, code: &str, retry_after: Option<u64>| {
            Error::ContextQ(ContextQError::Api {
                code: ErrorCode::of_answer(status, Some(code)),
                code_text: code.into(),
                status,
                message: "m".into(),
                retry_after,
            })
        };
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::NotFound {
                    path: "/memories/a".into(),
                },
                "The path /memories/a does not exist",
            ),
            (
                Error::AlreadyExists {
                    path: "/memories/a".into(),
                },
                "File /memories/a already exists",
            ),
            (
                Error::Precondition {
                    path: "/memories/a".into(),
                },
                "The file /memories/a was changed by another writer; nothing was changed. View it again and retry.",
            ),
            (
                Error::NotSupported {
                    operation: "rename",
                },
                "This memory store does not support rename",
            ),
            (
                Error::OutcomeUnknown {
                    path: "/memories/a".into(),
                    operation: "delete",
                    cause: Box::new(Error::ContextQ(ContextQError::Protocol {
                        url: "u".into(),
                        message: "lost".into(),
                    })),
                },
                "The memory store did not confirm whether the delete of /memories/a was applied (unexpected answer from ContextQ at u: lost). View /memories/a to check before retrying.",
            ),
            (
                Error::Path(PathError::Escape("/memories/../x".into())),
                "Path /memories/../x would escape /memories directory",
            ),
            (
                Error::ContextQ(ContextQError::NotAWorkspace {
                    segment: "Bad Slug".into(),
                }),
                "\"Bad Slug\" cannot be a workspace: the first folder under /memories is a ContextQ workspace, named with 1 to 63 of a-z, 0-9 and '-' (e.g. /memories/acme/notes.md)",
            ),
            (
                Error::ContextQ(ContextQError::OutsideWorkspace {
                    path: "/memories/n.md".into(),
                }),
                "/memories/n.md is not inside a workspace: the first folder under /memories is a ContextQ workspace, so write to /memories/<workspace>/n.md",
            ),
            (
                Error::IsADirectory {
                    path: "/memories/acme".into(),
                },
                "/memories/acme is a directory, not a file",
            ),
            (
                Error::ContextQ(ContextQError::WorkspaceNotFound {
                    workspace: "acme".into(),
                    create_allowed: false,
                }),
                "The workspace \"acme\" does not exist in ContextQ; ask the operator to create it (or enable create_workspaces)",
            ),
            (
                Error::ContextQ(ContextQError::WorkspaceNotFound {
                    workspace: "acme".into(),
                    create_allowed: true,
                }),
                "The workspace \"acme\" could not be created",
            ),
            (
                Error::ParentIsAFile {
                    path: "/memories/f/x".into(),
                    operation: "create",
                },
                "Cannot create /memories/f/x: a parent of it is a file, not a directory",
            ),
            (
                api(402, "quota_exceeded", None),
                "The memory store is full: m. Delete memories you no longer need, then retry.",
            ),
            (
                api(403, "forbidden", None),
                "The ContextQ API key may not make this change: m; nothing was changed.",
            ),
            (
                api(401, "unauthorized", None),
                "The memory store rejected its API key (401: m); the operator must fix the key.",
            ),
            (
                api(413, "payload_too_large", None),
                "The content is too large for the memory store (m); at most 1 MiB per file. Split it into smaller files.",
            ),
            (
                api(409, "conflict", None),
                "The memory store refused the change: m",
            ),
            (
                api(429, "rate_limited", Some(3)),
                "The memory store is rate limiting requests (retry after 3s); nothing was changed by this command. Retry later.",
            ),
            (
                api(500, "internal", None),
                "The memory store failed (500 internal: m); nothing was changed. Retry later.",
            ),
            (
                api(503, "unavailable", Some(1)),
                "The memory store is unavailable for now (503 unavailable: m); nothing was changed. Retry later.",
            ),
            (
                api(418, "teapot", None),
                "The memory store answered 418 teapot: m",
            ),
            (
                Error::ContextQ(ContextQError::Transport(TransportError {
                    url: "u".into(),
                    message: "refused".into(),
                    timeout: false,
                    sent: false,
                })),
                "The memory store is unreachable (refused); nothing was changed. Retry later.",
            ),
            (
                Error::ContextQ(ContextQError::Transport(TransportError {
                    url: "u".into(),
                    message: "slow".into(),
                    timeout: true,
                    sent: true,
                })),
                "The memory store did not answer in time (slow); nothing was changed. Retry later.",
            ),
            (
                Error::ContextQ(ContextQError::Protocol {
                    url: "u".into(),
                    message: "not JSON".into(),
                }),
                "The memory store gave an unexpected answer: not JSON",
            ),
            (
                Error::Config {
                    message: "no key".into(),
                },
                "The memory tool is misconfigured: no key",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.tool_message(), want, "{error:?}");
        }
        assert_eq!(unknown_tool("notes"), "Unknown tool: notes");
        assert_eq!(
            listing_may_be_incomplete(),
            "Note: this memory store returned one full page of entries and no way to the next, so this listing may be incomplete."
        );
    }
}
