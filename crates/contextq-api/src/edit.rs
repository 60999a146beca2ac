//! Text edits, defined once: the memory tool's `str_replace` and `insert` applied to a content,
//! and the body of the `text-edit` extension (`POST /api/contexts/by-external/:id/edit`), which
//! applies them on the server in one request. The memory tool and the server both call
//! [`apply`], so an edit means the same thing wherever it runs.

use serde::{Deserialize, Serialize};

/// One edit of a whole content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum TextEdit {
    /// Replace the one occurrence of `old_str` (which may span lines) by `new_str`.
    #[serde(rename_all = "camelCase")]
    StrReplace {
        /// The text to find; it must occur exactly once.
        old_str: String,
        /// Its replacement.
        new_str: String,
    },
    /// Insert `text` after line `line` (0: first).
    #[serde(rename_all = "camelCase")]
    Insert {
        /// The line after which to insert.
        line: i64,
        /// The text (one trailing `\n` is dropped; the file ends with `\n` afterwards).
        text: String,
    },
}

/// An edit applied: the new content, and for `str_replace` the line where the change starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The whole new content.
    pub content: String,
    /// 1-based line where the replacement starts (`str_replace` only).
    pub changed_line: Option<usize>,
}

/// Why an edit cannot apply; nothing is changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum EditFailure {
    /// `old_str` is empty (it would match everywhere).
    #[error("old_str is empty")]
    EmptyOldStr,
    /// `old_str` does not occur.
    #[error("old_str does not occur")]
    NotFound,
    /// `old_str` occurs more than once; the distinct lines where occurrences start, ascending.
    #[error("old_str occurs more than once (lines {lines:?})")]
    Multiple {
        /// 1-based lines.
        lines: Vec<usize>,
    },
    /// `insert` past the end (or before the start).
    #[error("line {line} is outside [0, {line_count}]")]
    LineOutOfRange {
        /// The line asked for.
        line: i64,
        /// Lines in the content.
        #[serde(rename = "lineCount")]
        line_count: usize,
    },
}

/// The lines around a change: what the memory tool shows after `str_replace`, and what the
/// `edit-snippet` extension answers instead of the whole new content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Snippet {
    /// The 1-based number of the first line.
    pub first_line: usize,
    /// The lines, without their `\n`.
    pub lines: Vec<String>,
}

/// Lines `changed_line - around ..= changed_line + around` (1-based, within the content) of
/// `content` split at `\n` (a content ending in `\n` has an empty last line).
pub fn snippet(content: &str, changed_line: usize, around: usize) -> Snippet {
    let line_count = content.bytes().filter(|&b| b == b'\n').count() + 1;
    let first = changed_line.saturating_sub(around).max(1);
    let last = changed_line.saturating_add(around).min(line_count);
    let lines = content
        .split('\n')
        .skip(first - 1)
        .take((last + 1).saturating_sub(first))
        .map(str::to_string)
        .collect();
    Snippet {
        first_line: first,
        lines,
    }
}

/// Applies `edit` to `content`.
pub fn apply(content: &str, edit: &TextEdit) -> Result<Applied, EditFailure> {
    match edit {
        TextEdit::StrReplace { old_str, new_str } => str_replace(content, old_str, new_str),
        TextEdit::Insert { line, text } => insert(content, *line, text),
    }
}

fn str_replace(content: &str, old_str: &str, new_str: &str) -> Result<Applied, EditFailure> {
    if old_str.is_empty() {
        return Err(EditFailure::EmptyOldStr);
    }
    match occurrences(content, old_str)[..] {
        [] => Err(EditFailure::NotFound),
        [(at, line)] => {
            let mut out = String::with_capacity(content.len() - old_str.len() + new_str.len());
            out.push_str(&content[..at]);
            out.push_str(new_str);
            out.push_str(&content[at + old_str.len()..]);
            Ok(Applied {
                content: out,
                changed_line: Some(line),
            })
        }
        ref found => {
            let mut lines: Vec<usize> = found.iter().map(|(_, l)| *l).collect();
            lines.dedup();
            Err(EditFailure::Multiple { lines })
        }
    }
}

/// Every non-overlapping match of `needle`: its byte offset and 1-based line, in one pass.
fn occurrences(haystack: &str, needle: &str) -> Vec<(usize, usize)> {
    let (mut line, mut counted_to) = (1, 0);
    haystack
        .match_indices(needle)
        .map(|(i, _)| {
            line += haystack[counted_to..i].matches('\n').count();
            counted_to = i;
            (i, line)
        })
        .collect()
}

fn insert(content: &str, line: i64, text: &str) -> Result<Applied, EditFailure> {
    let mut lines: Vec<&str> = content.split('\n').collect();
    if content.ends_with('\n') || content.is_empty() {
        lines.pop();
    }
    let line_count = lines.len();
    let at = usize::try_from(line)
        .ok()
        .filter(|n| *n <= line_count)
        .ok_or(EditFailure::LineOutOfRange { line, line_count })?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    let mut out: Vec<&str> = Vec::with_capacity(line_count + 1);
    out.extend_from_slice(&lines[..at]);
    out.extend(text.split('\n'));
    out.extend_from_slice(&lines[at..]);
    let mut content = out.join("\n");
    content.push('\n');
    Ok(Applied {
        content,
        changed_line: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_is_the_lines_around_within_the_content() {
        let seven = "a\nb\nc\nd\ne\nf\ng";
        let lines = |s: Snippet| (s.first_line, s.lines.join(","));
        assert_eq!(lines(snippet(seven, 4, 1)), (3, "c,d,e".into()));
        assert_eq!(lines(snippet(seven, 1, 4)), (1, "a,b,c,d,e".into()));
        assert_eq!(lines(snippet(seven, 7, 4)), (3, "c,d,e,f,g".into()));
        assert_eq!(lines(snippet(seven, 5, 0)), (5, "e".into()));
        // A content ending in a newline has an empty last line.
        assert_eq!(lines(snippet("a\nb\n", 2, 4)), (1, "a,b,".into()));
        assert_eq!(lines(snippet("", 1, 4)), (1, "".into()));
        // Lines are counted by newlines, whatever else the content holds.
        assert_eq!(lines(snippet("\n\n\n\n", 3, 1)), (2, ",,".into()));
    }

    #[test]
    fn a_large_replacement_is_made_whole() {
        let content = format!("head\n{}\ntail\n", "x".repeat(200_000));
        let new = "y".repeat(200_000);
        let done = apply(&content, &sr("head", &new)).unwrap();
        assert_eq!(done.content.len(), content.len() - 4 + new.len());
        assert!(done.content.starts_with(&new) && done.content.ends_with("\ntail\n"));
        assert_eq!(done.changed_line, Some(1));
    }

    fn sr(old: &str, new: &str) -> TextEdit {
        TextEdit::StrReplace {
            old_str: old.into(),
            new_str: new.into(),
        }
    }

    #[test]
    fn str_replace_finds_one_occurrence_or_says_why_not() {
        assert_eq!(
            apply("a\nbb\nc", &sr("bb", "B")).unwrap(),
            Applied {
                content: "a\nB\nc".into(),
                changed_line: Some(2)
            }
        );
        assert_eq!(
            apply("x", &sr("", "y")).unwrap_err(),
            EditFailure::EmptyOldStr
        );
        assert_eq!(
            apply("x", &sr("z", "y")).unwrap_err(),
            EditFailure::NotFound
        );
        assert_eq!(
            apply("ab ab\nx\nab", &sr("ab", "z")).unwrap_err(),
            EditFailure::Multiple { lines: vec![1, 3] }
        );
        assert_eq!(
            apply("a\nb\na\nb", &sr("a\nb", "z")).unwrap_err(),
            EditFailure::Multiple { lines: vec![1, 3] }
        );
    }

    #[test]
    fn insert_counts_lines_as_the_tool_does() {
        let ins = |line: i64, text: &str| TextEdit::Insert {
            line,
            text: text.into(),
        };
        assert_eq!(
            apply("a\nb\n", &ins(0, "top\n")).unwrap().content,
            "top\na\nb\n"
        );
        assert_eq!(
            apply("a\nb\n", &ins(2, "end")).unwrap().content,
            "a\nb\nend\n"
        );
        assert_eq!(apply("x", &ins(1, "y")).unwrap().content, "x\ny\n");
        assert_eq!(
            apply("a\nb\n", &ins(3, "z")).unwrap_err(),
            EditFailure::LineOutOfRange {
                line: 3,
                line_count: 2
            }
        );
        assert_eq!(
            apply("", &ins(-1, "z")).unwrap_err(),
            EditFailure::LineOutOfRange {
                line: -1,
                line_count: 0
            }
        );
    }

    #[test]
    fn wire_shapes() {
        assert_eq!(
            serde_json::to_value(sr("a", "b")).unwrap(),
            serde_json::json!({"strReplace": {"oldStr": "a", "newStr": "b"}})
        );
        assert_eq!(
            serde_json::to_value(EditFailure::LineOutOfRange {
                line: 9,
                line_count: 2
            })
            .unwrap(),
            serde_json::json!({"reason": "line_out_of_range", "line": 9, "lineCount": 2})
        );
    }
}
