//! A directory's answer: the two-level tree of `view`, with the reference tools' sizes, cut
//! within the answer budget with a closing line that says what was left out.

use crate::budget::AnswerBudget;
use crate::path::MemoryPath;
use crate::store::Listing;
use std::collections::BTreeMap;

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
pub(super) const NOTE_ROOM: usize = 400;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{DirMeta, FileMeta};

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
}
