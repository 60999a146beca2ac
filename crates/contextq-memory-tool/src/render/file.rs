//! A file's answers: `view` of a file (numbered lines, cut within the answer budget) and
//! what `str_replace` shows of the edited file.

use super::*;
use crate::budget::AnswerBudget;

/// Lines beyond which a file is refused by `view`.
pub const MAX_LINES: usize = 999_999;

/// Lines of context shown on each side of the first changed line by `str_replace`.
pub const SNIPPET_CONTEXT: usize = 2;

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
