//! Full-text search (extension `search`, docs/search.md): what a query means, how a text becomes
//! the terms an index holds, which lines of a file a query matches, and the wire types of
//! `GET /api/contexts/search`. Defined once so that the server's two databases (SQLite FTS5,
//! PostgreSQL `tsvector`) and the library's scanning stores find the same files for one query.
//!
//! A text's terms are its runs of letters and digits, case-folded, Latin, Greek and Cyrillic
//! accents removed, `ß` as `ss`; Chinese and Japanese (which have no spaces) as overlapping pairs
//! of characters. Punctuation separates terms, and a query word with punctuation in it is the
//! phrase of its terms, so `OPS-4471`, `v1.31.4` or `a.b@example.pt` find exactly that sequence.
//! The engines never see the user's query: [`Query::parse`] checks it and gives its terms
//! ([`Query::items`]), which the server's dialects write each quoted in their engine's syntax
//! (contextq-server's `db::dialect`), so no character of the query is engine syntax. This crate
//! holds no engine's syntax itself.

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;

/// Longest query, in bytes.
pub const MAX_QUERY_BYTES: usize = 512;

/// Most words and phrases in one query.
pub const MAX_QUERY_ITEMS: usize = 16;

/// Longest term, in bytes: longer runs are cut there (the same in a text and in a query, so a
/// long identifier is still found).
pub const MAX_TERM_BYTES: usize = 32;

/// Most terms of a file's content that are indexed (about 100 KB of prose); the rest of a longer
/// file is not searched. PostgreSQL positions end at 16,383.
pub const MAX_CONTENT_TERMS: usize = 16_000;

/// Most terms of a path that are indexed.
pub const MAX_PATH_TERMS: usize = 256;

/// Most positions one term keeps in a file (PostgreSQL keeps 256); later occurrences are
/// indexed as [`FILLER`], so both databases agree on phrases.
pub const MAX_TERM_POSITIONS: usize = 255;

/// What stands in the index for an occurrence past [`MAX_TERM_POSITIONS`]: no query term can be
/// `_` (an underscore separates terms).
pub const FILLER: &str = "_";

/// Fewest characters before a `*` (one for Chinese and Japanese).
pub const MIN_PREFIX_CHARS: usize = 2;

/// Default `limit` of a search.
pub const DEFAULT_LIMIT: u32 = 20;

/// Largest `limit` of a search.
pub const MAX_LIMIT: u32 = 100;

/// Most hits reachable by paging one query: refine the query past that.
pub const MAX_OFFSET: u32 = 1_000;

/// Most documents one query ranks: a query matching more is ranked among this many of them
/// (`SearchPage::capped`; contextq-server takes the newest on SQLite, the first its index yields
/// on PostgreSQL), so its cost is bounded however common its words are.
pub const MAX_RANKED: usize = 2_000;

/// Most matching lines shown for one file.
pub const MAX_SNIPPETS: usize = 3;

/// Longest line shown in a snippet, in characters; a longer one is cut around its first match
/// and the cut marked with `…`.
pub const MAX_SNIPPET_CHARS: usize = 240;

/// One term of a text and where it is: characters `start..end` of the text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The term.
    pub term: String,
    /// First character (a `char` index, not a byte).
    pub start: usize,
    /// One past the last character.
    pub end: usize,
    /// The last character of a Chinese or Japanese run, alone after the run's pairs, so that a
    /// one-character query finds it; a query leaves it out of its phrases.
    tail: bool,
}

/// Chinese, Japanese kana and Hangul-free CJK: scripts written without spaces, indexed as pairs.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x31F0..=0x31FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF | 0xFF66..=0xFF9F | 0x20000..=0x2FFFF)
}

/// Scripts whose accents are removed (Latin, Greek, Cyrillic).
fn folds_accents(base: char) -> bool {
    (base as u32) < 0x0530 || (0x1E00..=0x1FFF).contains(&(base as u32))
}

/// `c` case-folded, decomposed, its Latin/Greek/Cyrillic accents removed; pushed onto `out`.
fn fold_into(c: char, base: Option<char>, out: &mut String) {
    if c.is_ascii() {
        out.push(c.to_ascii_lowercase());
        return;
    }
    if c == 'ß' || c == 'ẞ' {
        out.push_str("ss");
        return;
    }
    if is_combining_mark(c) {
        if !base.is_some_and(folds_accents) {
            out.push(c);
        }
        return;
    }
    let accents = folds_accents(c);
    for d in std::iter::once(c).nfkd() {
        if is_combining_mark(d) && accents {
            continue;
        }
        out.extend(d.to_lowercase());
    }
}

/// A finished term: composed (NFC) and cut at [`MAX_TERM_BYTES`].
fn finish(raw: &str) -> String {
    // ASCII is already composed: most terms skip the normalizer.
    let mut term: String = if raw.is_ascii() {
        raw.to_string()
    } else {
        raw.nfc().collect()
    };
    if term.len() > MAX_TERM_BYTES {
        let mut end = MAX_TERM_BYTES;
        while !term.is_char_boundary(end) {
            end -= 1;
        }
        term.truncate(end);
    }
    term
}

/// The word `word` (characters `start..end`) as a term of `out`, if there is one; `word` emptied.
fn end_word(out: &mut Vec<Token>, word: &mut String, start: usize, end: usize) {
    if !word.is_empty() {
        out.push(Token {
            term: finish(word),
            start,
            end,
            tail: false,
        });
        word.clear();
    }
}

/// Every term of `text`, in order, with its place.
pub fn tokens(text: &str) -> Vec<Token> {
    scan(text, true)
}

/// [`tokens`]; `ascii_shortcut` false takes every character through the Unicode branches (so a
/// test holds the shortcut to what they do).
fn scan(text: &str, ascii_shortcut: bool) -> Vec<Token> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut word_start = 0;
    let mut base: Option<char> = None;
    let mut run: Vec<(String, usize)> = Vec::new();
    let flush_run = |run: &mut Vec<(String, usize)>, out: &mut Vec<Token>| {
        match run.len() {
            0 => {}
            1 => out.push(Token {
                term: finish(&run[0].0),
                start: run[0].1,
                end: run[0].1 + 1,
                tail: false,
            }),
            n => {
                for w in run.windows(2) {
                    out.push(Token {
                        term: finish(&format!("{}{}", w[0].0, w[1].0)),
                        start: w[0].1,
                        end: w[1].1 + 1,
                        tail: false,
                    });
                }
                out.push(Token {
                    term: finish(&run[n - 1].0),
                    start: run[n - 1].1,
                    end: run[n - 1].1 + 1,
                    tail: true,
                });
            }
        }
        run.clear();
    };
    for (i, c) in text.chars().enumerate() {
        // ASCII is neither Chinese nor Japanese nor a combining mark, and folds by itself: what
        // the branches below do for it, without their Unicode tables (most text is ASCII).
        if ascii_shortcut && c.is_ascii() {
            if c.is_ascii_alphanumeric() {
                flush_run(&mut run, &mut out);
                if word.is_empty() {
                    word_start = i;
                }
                word.push(c.to_ascii_lowercase());
                base = Some(c);
            } else {
                end_word(&mut out, &mut word, word_start, i);
                flush_run(&mut run, &mut out);
                base = None;
            }
            continue;
        }
        if is_cjk(c) {
            end_word(&mut out, &mut word, word_start, i);
            let mut folded = String::new();
            fold_into(c, None, &mut folded);
            run.push((folded.nfc().collect(), i));
            base = Some(c);
        } else if c.is_alphanumeric()
            || (is_combining_mark(c) && (!word.is_empty() || !run.is_empty()))
        {
            if is_combining_mark(c) && !run.is_empty() && word.is_empty() {
                // A mark on the run's last character (half-width kana's voicing marks).
                if let Some(last) = run.last_mut() {
                    last.0.push(c);
                    last.0 = last.0.nfc().collect();
                }
            } else {
                flush_run(&mut run, &mut out);
                if word.is_empty() {
                    word_start = i;
                }
                fold_into(c, base, &mut word);
                if !is_combining_mark(c) {
                    base = Some(c);
                }
            }
        } else {
            end_word(&mut out, &mut word, word_start, i);
            flush_run(&mut run, &mut out);
            base = None;
        }
    }
    end_word(&mut out, &mut word, word_start, text.chars().count());
    flush_run(&mut run, &mut out);
    out.retain(|t| !t.term.is_empty());
    out
}

/// The terms an index holds for a text, in order, at most `max`; an occurrence of a term past
/// its [`MAX_TERM_POSITIONS`]th is [`FILLER`].
pub fn index_terms(text: &str, max: usize) -> Vec<String> {
    let mut terms: Vec<String> = if text.is_ascii() {
        ascii_terms(text, max)
    } else {
        tokens(text).into_iter().take(max).map(|t| t.term).collect()
    };
    // Fewer terms than a term may occur: none occurs too often (most files), no counting.
    if terms.len() <= MAX_TERM_POSITIONS {
        return terms;
    }
    let mut seen: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(terms.len() / 4);
    let filler: Vec<bool> = terms
        .iter()
        .map(|t| {
            let n = seen.entry(t.as_str()).or_default();
            *n += 1;
            *n > MAX_TERM_POSITIONS
        })
        .collect();
    for (term, filler) in terms.iter_mut().zip(filler) {
        if filler {
            *term = FILLER.to_string();
        }
    }
    terms
}

/// [`tokens`]' terms of an ASCII text, at most `max`, without their places: runs of letters and
/// digits, lowercased and cut at [`MAX_TERM_BYTES`] (what the ASCII shortcut of `scan` makes of
/// them), found by bytes rather than characters. Most files are ASCII; this is most of the
/// tokenizing a large file's write does (docs/benchmarks.md, "Terms of ASCII text").
fn ascii_terms(text: &str, max: usize) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity((bytes.len() / 6).min(max));
    let mut i = 0;
    while out.len() < max {
        while i < bytes.len() && !bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_alphanumeric() {
            i += 1;
        }
        if start == i {
            break;
        }
        let word = &bytes[start..i.min(start + MAX_TERM_BYTES)];
        let mut term = String::with_capacity(word.len());
        term.extend(word.iter().map(|b| char::from(b.to_ascii_lowercase())));
        out.push(term);
    }
    out
}

/// One term of a query: matched as the whole term, or (`prefix`) as the start of one.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct QueryTerm {
    /// The term (folded as a text's terms are).
    pub term: String,
    /// Whether the term matches any term that starts with it.
    pub prefix: bool,
}

impl QueryTerm {
    fn matches(&self, term: &str) -> bool {
        if self.prefix {
            term.starts_with(&self.term)
        } else {
            term == self.term
        }
    }
}

/// A query's refusal: what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    /// No letter or digit to search for.
    #[error("the query has no letters or digits to search for")]
    Empty,
    /// Longer than [`MAX_QUERY_BYTES`].
    #[error("the query is {bytes} bytes; at most {MAX_QUERY_BYTES} are allowed")]
    TooLong {
        /// Its length.
        bytes: usize,
    },
    /// It contains a control character (NUL among them).
    #[error("the query contains a control character (U+{code:04X}); search for words")]
    Control {
        /// The character's code point.
        code: u32,
    },
    /// A `"` without its closing `"`.
    #[error("the query has a \" without its closing \"; close the phrase or leave the quote out")]
    UnbalancedQuote,
    /// A `*` after too few characters (or alone).
    #[error(
        "a * must end a word of at least {MIN_PREFIX_CHARS} letters or digits (found {found:?})"
    )]
    ShortPrefix {
        /// The word.
        found: String,
    },
    /// More words and phrases than [`MAX_QUERY_ITEMS`].
    #[error("the query has {items} words and phrases; at most {MAX_QUERY_ITEMS} are allowed")]
    TooManyWords {
        /// How many.
        items: usize,
    },
}

/// A checked query: words and phrases that must all match, in any order, each in the path or
/// in the content of a file. Each item is a phrase (one term for a plain word): its terms at
/// consecutive positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    text: String,
    items: Vec<Vec<QueryTerm>>,
}

impl Query {
    /// Parses and checks `q`: words in any order and any case; `"quoted phrases"`; `prefix*`;
    /// a word with punctuation in it as the phrase of its terms. Engine operators (`OR`, `NEAR`,
    /// `-`, parentheses) are plain words or punctuation here.
    pub fn parse(q: &str) -> Result<Query, QueryError> {
        if q.len() > MAX_QUERY_BYTES {
            return Err(QueryError::TooLong { bytes: q.len() });
        }
        if let Some(c) = q.chars().find(|c| c.is_control() && !c.is_whitespace()) {
            return Err(QueryError::Control { code: c as u32 });
        }
        if q.matches('"').count() % 2 == 1 {
            return Err(QueryError::UnbalancedQuote);
        }
        let mut items: Vec<Vec<QueryTerm>> = Vec::new();
        for (n, part) in q.split('"').enumerate() {
            if n % 2 == 1 {
                // Inside quotes: one phrase, every character literal.
                push_item(&mut items, item(part, false));
                continue;
            }
            for word in part.split_whitespace() {
                let stripped = word.trim_end_matches('*');
                let prefix = stripped.len() < word.len();
                let terms = item(stripped, prefix);
                if prefix {
                    let last = terms.last().map(|t| t.term.clone()).unwrap_or_default();
                    let cjk = last.chars().all(is_cjk) && !last.is_empty();
                    if last.chars().count() < MIN_PREFIX_CHARS && !cjk
                        || !stripped.ends_with(|c: char| c.is_alphanumeric())
                    {
                        return Err(QueryError::ShortPrefix {
                            found: word.to_string(),
                        });
                    }
                }
                push_item(&mut items, terms);
            }
        }
        if items.is_empty() {
            return Err(QueryError::Empty);
        }
        if items.len() > MAX_QUERY_ITEMS {
            return Err(QueryError::TooManyWords { items: items.len() });
        }
        Ok(Query {
            text: q.to_string(),
            items,
        })
    }

    /// The query as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The words and phrases, each as its terms.
    pub fn items(&self) -> &[Vec<QueryTerm>] {
        &self.items
    }

    /// Every distinct term of the query.
    pub fn terms(&self) -> impl Iterator<Item = &QueryTerm> {
        self.items.iter().flatten()
    }

    /// Whether every item matches in `path_terms` or in `content_terms` (as
    /// [`index_terms`] gives them).
    pub fn matches(&self, path_terms: &[String], content_terms: &[String]) -> bool {
        self.items
            .iter()
            .all(|i| occurrences(i, path_terms) > 0 || occurrences(i, content_terms) > 0)
    }

    /// A score for stores that scan instead of indexing: occurrences of each item, a match in
    /// the path counting four, damped by the file's length. Higher is better.
    pub fn scan_score(&self, path_terms: &[String], content_terms: &[String]) -> f64 {
        let hits: usize = self
            .items
            .iter()
            .map(|i| 4 * occurrences(i, path_terms) + occurrences(i, content_terms))
            .sum();
        hits as f64 / (1.0 + (1.0 + content_terms.len() as f64 / 100.0).ln())
    }

    /// Up to [`MAX_SNIPPETS`] lines of `content` that the query matches best (most items, then
    /// first), in line order, numbered from 1 as `view` numbers them, the matched terms marked.
    pub fn snippets(&self, content: &str) -> Vec<LineMatch> {
        let mut scored: Vec<(usize, usize, &str, Vec<[usize; 2]>)> = Vec::new();
        for (n, line) in content.split('\n').enumerate() {
            let line = line.strip_suffix('\r').unwrap_or(line);
            let toks = tokens(line);
            if toks.is_empty() {
                continue;
            }
            let terms: Vec<&str> = toks.iter().map(|t| t.term.as_str()).collect();
            let mut marks: Vec<[usize; 2]> = Vec::new();
            let mut matched = 0;
            for item in &self.items {
                let starts = phrase_starts(item, &terms);
                if !starts.is_empty() {
                    matched += 1;
                }
                for s in starts {
                    marks.push([toks[s].start, toks[s + item.len() - 1].end]);
                }
            }
            if matched > 0 {
                scored.push((matched, n, line, merge(marks)));
            }
        }
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.truncate(MAX_SNIPPETS);
        scored.sort_by_key(|s| s.1);
        scored
            .into_iter()
            .map(|(_, n, line, marks)| cut(n as u64 + 1, line, marks))
            .collect()
    }
}

/// The terms of one query word or phrase: the tail of a CJK run left out (its pairs already
/// say it), a lone CJK character matched as the start of a pair, the last term a prefix when
/// the word ended with `*`.
fn item(text: &str, prefix: bool) -> Vec<QueryTerm> {
    let toks = tokens(text);
    let n = toks.len();
    toks.into_iter()
        .enumerate()
        .filter(|(_, t)| !t.tail)
        .map(|(i, t)| {
            let cjk = t.term.chars().count() == 1 && t.term.chars().all(is_cjk);
            QueryTerm {
                prefix: cjk || (prefix && i + 1 == n),
                term: t.term,
            }
        })
        .collect()
}

fn push_item(items: &mut Vec<Vec<QueryTerm>>, terms: Vec<QueryTerm>) {
    if !terms.is_empty() && !items.contains(&terms) {
        items.push(terms);
    }
}

/// Positions where `item`'s terms start, consecutive, in `terms`.
fn phrase_starts<S: AsRef<str>>(item: &[QueryTerm], terms: &[S]) -> Vec<usize> {
    if item.is_empty() || terms.len() < item.len() {
        return Vec::new();
    }
    (0..=terms.len() - item.len())
        .filter(|&s| {
            item.iter()
                .enumerate()
                .all(|(k, q)| q.matches(terms[s + k].as_ref()))
        })
        .collect()
}

fn occurrences(item: &[QueryTerm], terms: &[String]) -> usize {
    phrase_starts(item, terms).len()
}

/// Sorted, overlapping spans joined.
fn merge(mut marks: Vec<[usize; 2]>) -> Vec<[usize; 2]> {
    marks.sort();
    let mut out: Vec<[usize; 2]> = Vec::new();
    for m in marks {
        match out.last_mut() {
            Some(last) if m[0] <= last[1] => last[1] = last[1].max(m[1]),
            _ => out.push(m),
        }
    }
    out
}

/// Line `line` (its text and marks in characters) cut to [`MAX_SNIPPET_CHARS`] around its first
/// mark.
fn cut(line: u64, text: &str, marks: Vec<[usize; 2]>) -> LineMatch {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= MAX_SNIPPET_CHARS {
        return LineMatch {
            line,
            text: text.to_string(),
            marks,
            cut: false,
        };
    }
    let first = marks.first().map_or(0, |m| m[0]);
    let start = first.saturating_sub(MAX_SNIPPET_CHARS / 4);
    let end = (start + MAX_SNIPPET_CHARS).min(chars.len());
    let lead = usize::from(start > 0);
    let mut shown = String::new();
    if start > 0 {
        shown.push('…');
    }
    shown.extend(&chars[start..end]);
    if end < chars.len() {
        shown.push('…');
    }
    let marks = marks
        .into_iter()
        .filter(|m| m[0] >= start && m[1] <= end)
        .map(|m| [m[0] - start + lead, m[1] - start + lead])
        .collect();
    LineMatch {
        line,
        text: shown,
        marks,
        cut: true,
    }
}

/// One line of a file that a query matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LineMatch {
    /// Its number, from 1 (as `view` numbers lines).
    pub line: u64,
    /// The line, cut to [`MAX_SNIPPET_CHARS`] around its first match when longer (`cut`).
    pub text: String,
    /// The matched terms: `[start, end)` in characters (Unicode scalar values) of `text`.
    #[serde(default)]
    pub marks: Vec<[usize; 2]>,
    /// Whether `text` is only part of the line (each cut end shown as `…`).
    #[serde(default)]
    pub cut: bool,
}

/// One file a search found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    /// The context's id.
    pub id: String,
    /// Its external id.
    pub external_id: String,
    /// The slug of its workspace.
    #[serde(default)]
    pub workspace: String,
    /// Its version.
    #[serde(default)]
    pub version: i64,
    /// Its size in bytes.
    #[serde(default)]
    pub size_bytes: u64,
    /// How well it matches: higher is better (on contextq-server BM25's term-frequency and
    /// length parts on SQLite, `ts_rank_cd` on PostgreSQL, each from the matched file alone;
    /// compare within one answer only).
    pub score: f64,
    /// Up to [`MAX_SNIPPETS`] matching lines; none when only the path matched.
    #[serde(default)]
    pub snippets: Vec<LineMatch>,
}

/// The answer of `GET /api/contexts/search`: the best hits first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchPage {
    /// The hits of this page.
    pub hits: Vec<SearchHit>,
    /// The cursor of the next page, when there may be one.
    #[serde(default)]
    pub next_cursor: Option<String>,
    /// At least [`MAX_RANKED`] files matched and only that many of them were ranked: add a word
    /// to narrow the query.
    #[serde(default)]
    pub capped: bool,
}

/// The cursor of the page after `offset + shown` hits, or `None` past [`MAX_OFFSET`].
pub fn next_cursor(offset: u32, shown: u32) -> Option<String> {
    let next = offset.checked_add(shown)?;
    (next < MAX_OFFSET).then(|| format!("o{next}"))
}

/// The offset a cursor stands for.
pub fn parse_cursor(cursor: &str) -> Option<u32> {
    cursor
        .strip_prefix('o')
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| *n < MAX_OFFSET && cursor.len() <= 6)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The ASCII shortcut of [`tokens`] finds what the Unicode branches find, in text that
        /// mixes ASCII with accents, combining marks, `ß`, Chinese, kana and their voicing marks.
        #[test]
        fn the_ascii_shortcut_changes_no_term(
            text in "[a-zA-Z0-9 .,_\\-@/\n\tÀéßẞ\u{0301}\u{0308}日本語かなｶﾞ\u{FF9E}Ωж]{0,80}"
        ) {
            prop_assert_eq!(scan(&text, true), scan(&text, false));
        }

        /// An ASCII text's terms found by bytes are [`tokens`]' terms, up to any `max`, with
        /// runs longer than a term cut the same way.
        #[test]
        fn ascii_terms_are_the_tokens_terms(
            text in "[a-zA-Z0-9 .,_\\-@/\n\t]{0,120}|([a-z]{30,40}[ .]){1,4}",
            max in 0usize..40
        ) {
            let slow: Vec<String> = tokens(&text).into_iter().take(max).map(|t| t.term).collect();
            prop_assert_eq!(ascii_terms(&text, max), slow);
        }
    }

    fn terms(text: &str) -> Vec<String> {
        index_terms(text, MAX_CONTENT_TERMS)
    }

    fn finds(q: &str, text: &str) -> bool {
        Query::parse(q).unwrap().matches(&[], &terms(text))
    }

    #[test]
    fn words_fold_case_and_accents() {
        assert_eq!(
            terms("Müller STRASSE Straße café"),
            ["muller", "strasse", "strasse", "cafe"]
        );
        assert!(finds("muller", "Herr Müller"));
        assert!(finds("MÜLLER", "herr muller"));
        assert!(finds("Ελλάδα", "ελλαδα"));
        // A decomposed accent is the same as a composed one.
        assert!(finds("cafe\u{301}", "café"));
    }

    #[test]
    fn identifiers_are_found_as_written() {
        let text = "Ticket OPS-4471 ships deploy_v2 in v1.31.4 (commit 9f3ab27), mail a.b@example.pt, probe /healthz/deep.";
        for q in [
            "OPS-4471",
            "deploy_v2",
            "v1.31.4",
            "9f3ab27",
            "a.b@example.pt",
            "/healthz/deep",
            "ops-4471 9F3AB27",
        ] {
            assert!(finds(q, text), "{q}");
        }
        for q in [
            "OPS-4472",
            "v1.31.5",
            "deploy_v3",
            "healthz/shallow",
            "b@example.com",
        ] {
            assert!(!finds(q, text), "{q}");
        }
    }

    #[test]
    fn japanese_is_found_by_pairs() {
        let text = "明日は東京タワーで会議があります";
        for q in ["東京", "東京タワー", "会議", "タワー", "議", "明", "す"] {
            assert!(finds(q, text), "{q}");
        }
        for q in ["大阪", "京都"] {
            assert!(!finds(q, text), "{q}");
        }
    }

    #[test]
    fn phrases_words_and_prefixes() {
        let text = "the staging password is in the vault\nproduction uses another one";
        assert!(finds("\"staging password\"", text));
        assert!(!finds("\"password staging\"", text));
        assert!(finds("password staging", text));
        assert!(finds("stag* vault", text));
        assert!(!finds("staging missing", text));
        assert!(finds("produc*", text));
    }

    #[test]
    fn hostile_queries_are_refused_or_literal() {
        assert_eq!(Query::parse(""), Err(QueryError::Empty));
        assert_eq!(Query::parse("-"), Err(QueryError::Empty));
        assert_eq!(Query::parse("( ) - + :"), Err(QueryError::Empty));
        assert_eq!(
            Query::parse("\"unbalanced"),
            Err(QueryError::UnbalancedQuote)
        );
        assert!(matches!(
            Query::parse("*"),
            Err(QueryError::ShortPrefix { .. })
        ));
        assert!(matches!(
            Query::parse("a*"),
            Err(QueryError::ShortPrefix { .. })
        ));
        assert!(matches!(
            Query::parse("ab-*"),
            Err(QueryError::ShortPrefix { .. })
        ));
        assert_eq!(Query::parse("a\0b"), Err(QueryError::Control { code: 0 }));
        assert!(matches!(
            Query::parse(&"x".repeat(10 * 1024)),
            Err(QueryError::TooLong { .. })
        ));
        // Engine operators are words.
        let q = Query::parse("NEAR( OR NOT foo:bar").unwrap();
        assert_eq!(q.items().len(), 4);
        assert_eq!(q.items()[0][0].term, "near");
        assert_eq!(Query::parse("it's").unwrap().items()[0].len(), 2);
    }

    #[test]
    fn snippets_number_lines_and_mark_terms() {
        let q = Query::parse("vault staging").unwrap();
        let s = q.snippets("intro\nthe staging password\n\nkept in the Vault and staging\n");
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].line, 2);
        assert_eq!(s[0].marks, vec![[4, 11]]);
        assert_eq!(s[1].line, 4);
        assert_eq!(&s[1].text[12..17], "Vault");
        let long = format!("{} needle {}", "a ".repeat(300), "b ".repeat(300));
        let s = Query::parse("needle").unwrap().snippets(&long);
        assert!(s[0].cut && s[0].text.starts_with('…') && s[0].text.ends_with('…'));
        let chars: Vec<char> = s[0].text.chars().collect();
        let [a, b] = s[0].marks[0];
        assert_eq!(chars[a..b].iter().collect::<String>(), "needle");
    }

    #[test]
    fn a_term_past_its_positions_is_filler() {
        let text = "x ".repeat(MAX_TERM_POSITIONS + 3);
        let t = terms(&text);
        assert_eq!(t.iter().filter(|t| *t == "x").count(), MAX_TERM_POSITIONS);
        assert_eq!(t.iter().filter(|t| *t == FILLER).count(), 3);
        assert!(Query::parse("_").is_err());
    }

    #[test]
    fn long_terms_are_cut_the_same_in_text_and_query() {
        let long = "a".repeat(100);
        assert!(finds(&long, &format!("x {long} y")));
        assert_eq!(terms(&long)[0].len(), MAX_TERM_BYTES);
    }

    #[test]
    fn cursors_round_trip_and_stop() {
        assert_eq!(parse_cursor(&next_cursor(0, 20).unwrap()), Some(20));
        assert_eq!(next_cursor(990, 20), None);
        assert_eq!(parse_cursor("o5000"), None);
        assert_eq!(parse_cursor("garbage"), None);
    }
}
