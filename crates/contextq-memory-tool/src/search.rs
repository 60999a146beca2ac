//! Search for Claude (docs/search.md): a second tool, `memory_search`, beside `memory` (whose
//! six commands have no search), what [`Store::search`](crate::Store::search) answers (the
//! bounded scan of stores without an index is [`crate::store::steps::search`]), and Claude's
//! answer: each file's `/memories` path and its matching lines numbered as `view`
//! numbers them, so that Claude can `view_range` or `str_replace` straight from it.
//!
//! The query language is the contract's (`contextq_api::search`): words in any order and any
//! case, `"quoted phrases"`, `prefix*`, identifiers with punctuation found as written, accents
//! and Chinese/Japanese found. ContextQ's server ranks with its index (extension `search`); a
//! ContextQ without it answers Claude that search is not available there, never a listing.

pub use contextq_api::search::{LineMatch, Query, QueryError};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::path::MemoryPath;

/// The tool's name.
pub const TOOL_NAME: &str = "memory_search";

/// Files in one answer when Claude gives no `limit`.
pub const DEFAULT_LIMIT: usize = 10;

/// Most files in one answer.
pub const MAX_LIMIT: usize = 50;

/// Most files a scanning store reads for one search (it says so when it stops there).
pub const MAX_SCAN_FILES: usize = 10_000;

/// Most bytes a scanning store reads for one search.
pub const MAX_SCAN_BYTES: usize = 64 << 20;

/// What Claude is told the tool is for.
pub const DESCRIPTION: &str = "Search the files of your memory directory (/memories) for words, \
before walking directories or reading files one by one. Use it to find what you noted earlier \
(a person, a decision, an error message, a ticket like OPS-4471, a version like v1.31.4). Words \
match in any order and any case; \"quoted words\" must be adjacent; a word ending in * matches \
words that start with it. Results: each file's path (best first) with its matching lines, \
numbered as the memory tool's view numbers them, so you can view or str_replace from there. \
Optional: path (a directory under /memories to search in), limit (files, 1 to 50, default 10).";

/// The tool's input.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchInput {
    /// What to look for.
    pub query: String,
    /// The directory to search in (default `/memories`).
    #[serde(default)]
    pub path: Option<String>,
    /// Most files in the answer (default [`DEFAULT_LIMIT`], at most [`MAX_LIMIT`]).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// The JSON schema of the tool's input.
pub fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words to find: any order, any case; \"quoted phrase\"; prefix*"},
            "path": {"type": "string", "description": "A directory under /memories to search in (default /memories)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "description": "Most files in the answer (default 10)"}
        },
        "required": ["query"],
        "additionalProperties": false
    })
}

/// The tool as a Messages API client tool (`name`, `description`, `input_schema`).
pub fn tool_definition() -> Value {
    json!({"name": TOOL_NAME, "description": DESCRIPTION, "input_schema": input_schema()})
}

/// One file a search found.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Its path.
    pub path: MemoryPath,
    /// How well it matches (higher is better; compare within one answer).
    pub score: f64,
    /// Up to three matching lines (none when only the path matched).
    pub lines: Vec<LineMatch>,
}

/// What [`Store::search`](crate::Store::search) answers.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Searched {
    /// The best files first, at most the limit asked.
    pub found: Vec<Found>,
    /// More files match than were returned.
    pub more: bool,
    /// A scanning store stopped before reading everything: how many files it read.
    pub scan_stopped_at: Option<usize>,
    /// The words are in so many files that only some of them were ranked (contextq-server:
    /// `contextq_api::search::MAX_RANKED`, the newest on SQLite).
    pub capped: bool,
}

/// The sentence for a query the rules refuse.
pub fn refused_query(e: &QueryError) -> String {
    format!("The search query was not run: {e}. Nothing was searched.")
}

/// The sentence for a store that cannot search.
pub fn not_available() -> String {
    "Search is not available for this memory store (the ContextQ server does not offer the \
     `search` extension). Use the memory tool's view command to browse /memories instead."
        .to_string()
}

/// Claude's answer: the files found, best first, each with its matching lines (the `view`
/// numbering), within `budget` characters, with one closing line when anything was left out.
pub fn answer(
    query: &str,
    dir: &MemoryPath,
    limit: usize,
    searched: &Searched,
    budget: usize,
) -> String {
    if searched.found.is_empty() {
        let mut out = format!("No files in {} match {query:?}.", dir.raw());
        if let Some(n) = searched.scan_stopped_at {
            out.push_str(&scan_note(n));
        }
        return out;
    }
    let n = searched.found.len();
    let mut out = format!(
        "{n} file{} in {} match {query:?}, best first:\n",
        if n == 1 { "" } else { "s" },
        dir.raw()
    );
    let (mut shown, mut chars) = (0, out.chars().count());
    for f in &searched.found {
        let mut block = format!("\n{}\n", f.path.raw());
        if f.lines.is_empty() {
            block.push_str("  (its path matches)\n");
        }
        for l in &f.lines {
            let cut = if l.cut { " (line cut)" } else { "" };
            block.push_str(&format!("{:>6}\t{}{cut}\n", l.line, l.text));
        }
        let block_chars = block.chars().count();
        // 0: no limit, as for every budget of [`crate::AnswerBudget`].
        if !crate::AnswerBudget::within(budget, chars + block_chars) && shown > 0 {
            break;
        }
        chars += block_chars;
        out.push_str(&block);
        shown += 1;
    }
    if shown < n {
        out.push_str(&format!(
            "\nNote: {} more matching file{} not shown, to keep this answer short; narrow the query or the path.",
            n - shown,
            if n - shown == 1 { " is" } else { "s are" }
        ));
    } else if searched.more {
        out.push_str(&format!(
            "\nNote: more files match than the {limit} shown; narrow the query or the path{}.",
            if limit < MAX_LIMIT {
                format!(", or ask for a higher limit (at most {MAX_LIMIT})")
            } else {
                String::new()
            }
        ));
    }
    if let Some(n) = searched.scan_stopped_at {
        out.push_str(&scan_note(n));
    }
    if searched.capped {
        out.push_str(&format!(
            "\nNote: these words are in at least {} files, so only {} of them were ranked; add a word to narrow the search.",
            contextq_api::search::MAX_RANKED,
            contextq_api::search::MAX_RANKED
        ));
    }
    out.trim_end().to_string()
}

fn scan_note(read: usize) -> String {
    format!(
        "\nNote: only the first {read} files were searched (this store reads files to search them); search a subdirectory to reach the others."
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> MemoryPath {
        MemoryPath::parse(s).unwrap()
    }

    #[test]
    fn a_cut_answer_says_so() {
        let found: Vec<Found> = (0..5)
            .map(|i| Found {
                path: p(&format!("/memories/f{i}.md")),
                score: 1.0,
                lines: vec![LineMatch {
                    line: 1,
                    text: "x".repeat(100),
                    marks: vec![],
                    cut: false,
                }],
            })
            .collect();
        let s = Searched {
            found,
            more: false,
            scan_stopped_at: Some(10_000),
            capped: false,
        };
        let text = answer("x", &MemoryPath::root(), 10, &s, 300);
        assert!(
            text.contains("3 more matching files are not shown"),
            "{text}"
        );
        assert!(text.ends_with("search a subdirectory to reach the others."));
        // 0 is no limit (`--max-listing-chars 0`): every file, and no note of a cut.
        let text = answer("x", &MemoryPath::root(), 10, &s, 0);
        assert_eq!(text.matches("/memories/f").count(), 5, "{text}");
        assert!(!text.contains("not shown"), "{text}");
        // The budget counts characters, not bytes: 100 'é' fit where 200 bytes would not.
        let mut wide = s.clone();
        for f in &mut wide.found {
            f.lines[0].text = "é".repeat(100);
        }
        let narrow = answer("x", &MemoryPath::root(), 10, &s, 300);
        let text = answer("x", &MemoryPath::root(), 10, &wide, 300);
        assert_eq!(
            text.matches("/memories/f").count(),
            narrow.matches("/memories/f").count(),
            "{text}"
        );
    }

    #[test]
    fn a_capped_ranking_tells_claude_to_add_a_word() {
        let found = vec![Found {
            path: p("/memories/f.md"),
            score: 1.0,
            lines: vec![],
        }];
        let capped = |capped| Searched {
            found: found.clone(),
            more: false,
            scan_stopped_at: None,
            capped,
        };
        let text = answer("x", &MemoryPath::root(), 10, &capped(true), 10_000);
        assert!(
            text.ends_with(
                "these words are in at least 2000 files, so only 2000 of them were ranked; add a word to narrow the search."
            ),
            "{text}"
        );
        let text = answer("x", &MemoryPath::root(), 10, &capped(false), 10_000);
        assert!(!text.contains("were ranked"), "{text}");
    }
}
