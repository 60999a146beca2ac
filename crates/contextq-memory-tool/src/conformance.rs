//! The conformance suite every [`Store`] must pass (feature `test-util`).
//!
//! Each case is a `pub async fn` that takes a fresh, empty store, drives it through
//! [`MemoryTool`] with Claude-shaped JSON input and checks the results byte for byte against
//! the protocol (`docs/protocol.md`); [`run_all`] runs them all. A [`Profile`] says what the
//! store shows where it may differ: stores with real directories ([`Dirs::Real`]) show
//! file-system directory sizes, which the suite does not pin (the `LocalStore` tests check them
//! against the file system); stores with derived directories ([`Dirs::Derived`]) must show the
//! total size of the files beneath; a store that cannot know sizes ([`Sizes::Timestamps`], a
//! ContextQ without `sizeBytes`) shows each row's last change instead, and the suite checks
//! that it is an RFC 3339 time.
//!
//! A third-party store passes the suite like this:
//!
//! ```ignore
//! contextq_memory_tool::conformance::run_all(|| async { MyStore::new() }, Profile::DERIVED).await;
//! ```

use std::future::Future;

use serde_json::{Value, json};

use crate::handlers::MemoryToolHandlers;
use crate::path::MemoryPath;
use crate::protocol::ToolResult;
use crate::store::{PutMode, Store};
use crate::{Error, MemoryTool};

/// How a store shows directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dirs {
    /// Derived from file paths; size = total of the files beneath.
    Derived,
    /// Real directories with sizes from the store (not pinned by the suite).
    Real,
}

/// What a store shows in a listing's size column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sizes {
    /// Human-readable byte counts.
    Bytes,
    /// Last-change times (RFC 3339), where the store cannot know sizes.
    Timestamps,
}

/// What the suite expects of a store where stores may differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// How it shows directories.
    pub dirs: Dirs,
    /// What its size column holds.
    pub sizes: Sizes,
    /// The largest file it takes, in bytes (the suite writes one of at most 1 MiB).
    pub largest_file: usize,
}

impl Profile {
    /// Derived directories, byte sizes (`MemoryStore`, `ContextQStore` on contextq-server).
    pub const DERIVED: Profile = Profile {
        dirs: Dirs::Derived,
        sizes: Sizes::Bytes,
        largest_file: 1 << 20,
    };
    /// Real directories, byte sizes (`LocalStore`).
    pub const REAL: Profile = Profile {
        dirs: Dirs::Real,
        sizes: Sizes::Bytes,
        largest_file: 1 << 20,
    };
    /// Derived directories, times instead of sizes (`ContextQStore` on a ContextQ without
    /// `sizeBytes`).
    pub const DERIVED_WITHOUT_SIZES: Profile = Profile {
        dirs: Dirs::Derived,
        sizes: Sizes::Timestamps,
        largest_file: 1 << 20,
    };
    /// Derived directories, byte sizes, files of at most 102,400 bytes (`MemoryStoresStore`:
    /// the Memory Stores API's limit).
    pub const MEMORY_STORES: Profile = Profile {
        dirs: Dirs::Derived,
        sizes: Sizes::Bytes,
        largest_file: 102_400,
    };
}

const LIST_HEADER: &str = "Here're the files and directories up to 2 levels deep in";

async fn call<S: Store>(tool: &MemoryTool<S>, input: Value) -> ToolResult {
    tool.execute(input).await
}

async fn ok<S: Store>(tool: &MemoryTool<S>, input: Value) -> String {
    let r = call(tool, input.clone()).await;
    assert!(!r.is_error, "expected success for {input}, got {r:?}");
    r.content
}

async fn err<S: Store>(tool: &MemoryTool<S>, input: Value) -> String {
    let r = call(tool, input.clone()).await;
    assert!(r.is_error, "expected an error for {input}, got {r:?}");
    assert!(r.content.starts_with("Error: "), "{r:?}");
    r.content
}

/// Runs each input in turn and checks its answer: `Ok` a success, `Err` an error, with exactly
/// that text.
async fn answers<S: Store>(
    tool: &MemoryTool<S>,
    cases: impl IntoIterator<Item = (Value, Result<&str, &str>)>,
) {
    for (input, want) in cases {
        match want {
            Ok(text) => assert_eq!(ok(tool, input.clone()).await, text, "{input}"),
            Err(text) => assert_eq!(err(tool, input.clone()).await, text, "{input}"),
        }
    }
}

async fn create<S: Store>(tool: &MemoryTool<S>, path: &str, text: &str) {
    let out = ok(
        tool,
        json!({"command": "create", "path": path, "file_text": text}),
    )
    .await;
    assert_eq!(out, format!("File created successfully at: {path}"));
}

async fn view<S: Store>(tool: &MemoryTool<S>, path: &str) -> String {
    ok(tool, json!({"command": "view", "path": path})).await
}

/// The paths a search found, sorted.
fn found_paths(searched: crate::search::Searched) -> Vec<String> {
    let mut paths: Vec<String> = searched
        .found
        .into_iter()
        .map(|f| f.path.raw().to_string())
        .collect();
    paths.sort();
    paths
}

/// Checks that the view of the file `path` ends with `tail` (its last numbered lines).
async fn assert_view_ends<S: Store>(tool: &MemoryTool<S>, path: &str, tail: &str) {
    let shown = view(tool, path).await;
    assert!(
        shown.ends_with(tail),
        "{path} should end with {tail:?}: {shown}"
    );
}

/// `create` of `path` that must fail: its error.
async fn create_err<S: Store>(tool: &MemoryTool<S>, path: &str, text: &str) -> String {
    err(
        tool,
        json!({"command": "create", "path": path, "file_text": text}),
    )
    .await
}

/// Renames `from` to `to`, checking the answer, and that `to` now ends with the line `last`.
async fn renamed<S: Store>(tool: &MemoryTool<S>, (from, to): (&str, &str), last: &str) {
    let input = json!({"command": "rename", "old_path": from, "new_path": to});
    let answer = format!("Successfully renamed {from} to {to}");
    assert_eq!(ok(tool, input).await, answer);
    assert_view_ends(tool, to, &format!("\t{last}")).await;
}

/// Masks the size column where `profile` lets stores differ: directory rows (and the first
/// row) of real directories become `<dir>`; with timestamps every row becomes `<time>`, after
/// checking, in the store's output (`actual`), that it is an RFC 3339 time.
fn mask(listing: &str, profile: Profile, actual: bool) -> String {
    listing
        .lines()
        .enumerate()
        .map(|(i, line)| match line.split_once('\t') {
            Some((size, path)) if i > 0 && profile.sizes == Sizes::Timestamps => {
                if actual {
                    assert!(is_rfc3339(size), "not a time in {line:?} of:\n{listing}");
                }
                format!("<time>\t{path}")
            }
            Some((_, path)) if profile.dirs == Dirs::Real && (i == 1 || path.ends_with('/')) => {
                format!("<dir>\t{path}")
            }
            _ => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `2026-12-02T17:59:25.123Z` and the like.
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() >= 20
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && (s.ends_with('Z') || s[19..].contains(['+', '-']))
}

/// The store's listing and the expected one, masked alike.
fn assert_listing(actual: &str, expected: &str, profile: Profile) {
    assert_eq!(mask(actual, profile, true), mask(expected, profile, false));
}

/// Runs every case, each on a fresh store from `make`.
pub async fn run_all<S, F, Fut>(make: F, profile: Profile)
where
    S: Store,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    empty_root(make().await).await;
    view_file(make().await).await;
    create_never_overwrites(make().await).await;
    listing(make().await, profile).await;
    str_replace(make().await).await;
    insert(make().await).await;
    delete(make().await).await;
    rename(make().await, profile).await;
    shared_errors(make().await).await;
    bad_input(make().await).await;
    store_contract(make().await, profile).await;
    search(make().await).await;
}

/// `memory_search`: a store that searches finds exactly the files a scan with the contract's
/// rules finds (after a rename and a delete), numbers lines as `view` does, and scopes to a
/// directory; a store that cannot search says so as an error result, never a listing.
pub async fn search<S: Store>(store: S) {
    use crate::search::Query;
    use crate::store::steps::search as by_scan;
    let tool = MemoryTool::new(store);
    create(
        &tool,
        "/memories/a/one.md",
        "intro\nthe staging password OPS-4471\n",
    )
    .await;
    create(&tool, "/memories/a/two.md", "Herr Müller, staging\n").await;
    create(&tool, "/memories/b/three.md", "nothing here\n").await;
    ok(&tool, json!({"command": "rename", "old_path": "/memories/b/three.md", "new_path": "/memories/b/staging.md"})).await;
    ok(
        &tool,
        json!({"command": "delete", "path": "/memories/a/two.md"}),
    )
    .await;
    create(&tool, "/memories/a/four.md", "muller\n").await;
    let r = tool.execute_search(json!({"query": "staging"})).await;
    if r.is_error {
        assert!(
            r.content.contains("Search is not available"),
            "{}",
            r.content
        );
        return;
    }
    let mirror = crate::MemoryStore::new();
    for (path, text) in [
        (
            "/memories/a/one.md",
            "intro\nthe staging password OPS-4471\n",
        ),
        ("/memories/b/staging.md", "nothing here\n"),
        ("/memories/a/four.md", "muller\n"),
    ] {
        mirror
            .put(
                &crate::MemoryPath::parse(path).unwrap(),
                text,
                crate::PutMode::Create,
            )
            .await
            .unwrap();
    }
    for q in [
        "staging",
        "OPS-4471",
        "müller",
        "\"staging password\"",
        "stag*",
        "nothing",
    ] {
        let query = Query::parse(q).unwrap();
        let root = crate::MemoryPath::root();
        let want = found_paths(by_scan(&mirror, &query, &root, 50).await.unwrap());
        let got = found_paths(tool.store().search(&query, &root, 50).await.unwrap());
        assert_eq!(got, want, "{q}");
    }
    let r = tool
        .execute_search(json!({"query": "OPS-4471", "path": "/memories/a"}))
        .await;
    assert_eq!(
        r.content,
        "1 file in /memories/a match \"OPS-4471\", best first:\n\n/memories/a/one.md\n     2\tthe staging password OPS-4471"
    );
    let r = tool
        .execute_search(json!({"query": "OPS-4471", "path": "/memories/b"}))
        .await;
    assert_eq!(r.content, "No files in /memories/b match \"OPS-4471\".");
}

/// `view /memories` on an empty store.
pub async fn empty_root<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    let out = view(&tool, "/memories").await;
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some(
            "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:"
        )
    );
    let first = lines.next().expect("the root's own line");
    assert!(first.ends_with("\t/memories"), "{out}");
    assert_eq!(lines.next(), None, "{out}");
}

/// `view` of files: whole, ranges, trailing newline, unicode, empty file.
pub async fn view_file<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    create(&tool, "/memories/notes.md", "alpha\nbeta\ngamma\n").await;
    let h = "Here's the content of /memories/notes.md with line numbers:\n";
    assert_eq!(
        view(&tool, "/memories/notes.md").await,
        format!("{h}     1\talpha\n     2\tbeta\n     3\tgamma\n     4\t")
    );
    let ranged = |a: i64, b: i64| json!({"command": "view", "path": "/memories/notes.md", "view_range": [a, b]});
    assert_eq!(
        ok(&tool, ranged(2, 3)).await,
        format!("{h}     2\tbeta\n     3\tgamma")
    );
    assert_eq!(
        ok(&tool, ranged(3, -1)).await,
        format!("{h}     3\tgamma\n     4\t")
    );
    assert_eq!(ok(&tool, ranged(0, 1)).await, format!("{h}     1\talpha"));
    assert_eq!(
        ok(&tool, ranged(2, 100)).await,
        format!("{h}     2\tbeta\n     3\tgamma\n     4\t")
    );
    assert_eq!(ok(&tool, ranged(10, 12)).await, h);
    assert_eq!(ok(&tool, ranged(3, 2)).await, h);
    // A view_range that is not two integers is ignored.
    let whole = view(&tool, "/memories/notes.md").await;
    assert_eq!(
        ok(
            &tool,
            json!({"command": "view", "path": "/memories/notes.md", "view_range": "1-2"})
        )
        .await,
        whole
    );
    // Trailing and repeated slashes are normalised; the header keeps the path as written.
    assert_eq!(
        view(&tool, "/memories//notes.md").await,
        whole.replace("/memories/notes.md", "/memories//notes.md")
    );

    create(&tool, "/memories/ünïcode/日本.md", "héllo → 世界").await;
    assert_eq!(
        view(&tool, "/memories/ünïcode/日本.md").await,
        "Here's the content of /memories/ünïcode/日本.md with line numbers:\n     1\théllo → 世界"
    );
    create(&tool, "/memories/empty.md", "").await;
    assert_eq!(
        view(&tool, "/memories/empty.md").await,
        "Here's the content of /memories/empty.md with line numbers:\n     1\t"
    );
    assert_eq!(
        err(
            &tool,
            json!({"command": "view", "path": "/memories/missing.md"})
        )
        .await,
        "Error: The path /memories/missing.md does not exist. Please provide a valid path."
    );
}

/// `create` on an existing file fails and keeps the old content.
pub async fn create_never_overwrites<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    create(&tool, "/memories/a/b.md", "first").await;
    assert_eq!(
        create_err(&tool, "/memories/a/b.md", "second").await,
        "Error: File /memories/a/b.md already exists"
    );
    assert_view_ends(&tool, "/memories/a/b.md", "     1\tfirst").await;
    // Parents are implied.
    create(&tool, "/memories/x/y/z/deep.md", "d").await;
    assert!(
        view(&tool, "/memories/x/y")
            .await
            .contains("/memories/x/y/z/")
    );
    // The root is a directory.
    assert!(
        create_err(&tool, "/memories", "x")
            .await
            .starts_with("Error: The path /memories is a directory")
    );
}

/// Directory listings: two levels, order, hidden items, sizes.
pub async fn listing<S: Store>(store: S, profile: Profile) {
    let tool = MemoryTool::new(store);
    create(&tool, "/memories/zeta.md", "").await;
    create(&tool, "/memories/alpha.md", "eighteen bytes!!!\n").await;
    create(&tool, "/memories/proj/readme.md", &"x".repeat(1030)).await;
    create(&tool, "/memories/proj/sub/deep.md", &"y".repeat(4000)).await;
    create(&tool, "/memories/proj/sub/deeper/z.md", "z").await;
    create(&tool, "/memories/.hidden/secret.md", "s").await;
    create(&tool, "/memories/proj/.dot.md", "d").await;
    create(&tool, "/memories/node_modules/m.js", "m").await;
    // The most ContextQ takes (1 MiB), or the store's own limit.
    let big = profile.largest_file.min(1 << 20);
    create(&tool, "/memories/Big.md", &"b".repeat(big)).await;

    let out = view(&tool, "/memories").await;
    // 1 MiB: 1,048,576 + 18 + 1030 + 4000 + 1 + 3 = 1,053,628 bytes, "1.0M".
    let expected_sizes_root = crate::render::human_size(big as u64 + 5052);
    let big_size = crate::render::human_size(big as u64);
    let expected = format!(
        "{LIST_HEADER} /memories, excluding hidden items and node_modules:\n\
         {expected_sizes_root}\t/memories\n\
         {big_size}\t/memories/Big.md\n\
         18B\t/memories/alpha.md\n\
         4.9K\t/memories/proj/\n\
         1.0K\t/memories/proj/readme.md\n\
         3.9K\t/memories/proj/sub/\n\
         0B\t/memories/zeta.md"
    );
    assert_listing(&out, &expected, profile);

    // A sub-directory, written with a trailing slash: header as written, entries normalised.
    let out = view(&tool, "/memories/proj/").await;
    let expected = format!(
        "{LIST_HEADER} /memories/proj/, excluding hidden items and node_modules:\n\
         4.9K\t/memories/proj/\n\
         1.0K\t/memories/proj/readme.md\n\
         3.9K\t/memories/proj/sub/\n\
         3.9K\t/memories/proj/sub/deep.md\n\
         1B\t/memories/proj/sub/deeper/"
    );
    assert_listing(&out, &expected, profile);
}

/// `str_replace`: 0, 1 and several matches, multi-line `old_str`, directories, missing files.
pub async fn str_replace<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    let path = "/memories/edit.md";
    create(&tool, path, "one\ntwo\nthree\nfour\nfive\nsix\nseven\n").await;
    let sr = |old: &str, new: &str| json!({"command": "str_replace", "path": path, "old_str": old, "new_str": new});
    answers(
        &tool,
        [
            (sr("four", "FOUR"), Ok("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     2\ttwo\n     3\tthree\n     4\tFOUR\n     5\tfive\n     6\tsix")),
            (sr("one\ntwo", "1\n2"), Ok("The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\t1\n     2\t2\n     3\tthree")),
            (sr("nine", "9"), Err("Error: No replacement was performed, old_str `nine` did not appear verbatim in /memories/edit.md.")),
        ],
    )
    .await;
    create(&tool, "/memories/dup.md", "ab\nab ab\nx\nab").await;
    assert_eq!(
        err(&tool, json!({"command": "str_replace", "path": "/memories/dup.md", "old_str": "ab", "new_str": "z"})).await,
        "Error: No replacement was performed. Multiple occurrences of old_str `ab` in lines: 1, 2, 4. Please ensure it is unique"
    );
    assert_eq!(
        view(&tool, path).await,
        "Here's the content of /memories/edit.md with line numbers:\n     1\t1\n     2\t2\n     3\tthree\n     4\tFOUR\n     5\tfive\n     6\tsix\n     7\tseven\n     8\t"
    );
    create(&tool, "/memories/dir/f.md", "f").await;
    let at = |p: &str| json!({"command": "str_replace", "path": p, "old_str": "a", "new_str": "b"});
    answers(
        &tool,
        [
            (at("/memories/dir"), Err("Error: The path /memories/dir is not a file.")),
            (at("/memories/nope.md"), Err("Error: The path /memories/nope.md does not exist. Please provide a valid path.")),
        ],
    )
    .await;
}

/// `insert` at 0, n, the end, out of range and negative.
pub async fn insert<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    let path = "/memories/list.md";
    create(&tool, path, "a\nb\nc\n").await;
    let ins = |line: i64, text: &str| json!({"command": "insert", "path": path, "insert_line": line, "insert_text": text});
    let edited = Ok("The file /memories/list.md has been edited.");
    answers(
        &tool,
        [
            (ins(0, "top\n"), edited),
            (ins(2, "after-a"), edited),
            (ins(5, "end\nend2"), edited),
            (
                json!({"command": "view", "path": path}),
                Ok("Here's the content of /memories/list.md with line numbers:\n     1\ttop\n     2\ta\n     3\tafter-a\n     4\tb\n     5\tc\n     6\tend\n     7\tend2\n     8\t"),
            ),
            (ins(8, "x"), Err("Error: Invalid `insert_line` parameter: 8. It should be within the range of lines of the file: [0, 7]")),
            (ins(-1, "x"), Err("Error: Invalid `insert_line` parameter: -1. It should be within the range of lines of the file: [0, 7]")),
        ],
    )
    .await;
    // A file without a trailing newline gets one; an empty file has 0 lines.
    create(&tool, "/memories/nonl.md", "x").await;
    ok(&tool, json!({"command": "insert", "path": "/memories/nonl.md", "insert_line": 1, "insert_text": "y"})).await;
    assert_view_ends(&tool, "/memories/nonl.md", "     1\tx\n     2\ty\n     3\t").await;
    create(&tool, "/memories/empty.md", "").await;
    assert_eq!(
        err(&tool, json!({"command": "insert", "path": "/memories/empty.md", "insert_line": 1, "insert_text": "y"})).await,
        "Error: Invalid `insert_line` parameter: 1. It should be within the range of lines of the file: [0, 0]"
    );
    create(&tool, "/memories/d/f", "f").await;
    assert_eq!(
        err(&tool, json!({"command": "insert", "path": "/memories/d", "insert_line": 0, "insert_text": "y"})).await,
        "Error: The path /memories/d is not a file."
    );
}

/// `delete` of files and directories; missing paths; the root.
pub async fn delete<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    create(&tool, "/memories/a.md", "a").await;
    create(&tool, "/memories/dir/one.md", "1").await;
    create(&tool, "/memories/dir/sub/two.md", "2").await;
    create(&tool, "/memories/dir/.hidden", "h").await;
    create(&tool, "/memories/dirx.md", "keep").await;
    let del = |p: &str| json!({"command": "delete", "path": p});
    let root = Err("Error: Cannot delete the /memories directory itself");
    answers(
        &tool,
        [
            (
                del("/memories/a.md"),
                Ok("Successfully deleted /memories/a.md"),
            ),
            (
                del("/memories/dir/"),
                Ok("Successfully deleted /memories/dir/"),
            ),
            (
                del("/memories/dir"),
                Err("Error: The path /memories/dir does not exist"),
            ),
            (
                del("/memories/a.md"),
                Err("Error: The path /memories/a.md does not exist"),
            ),
            (del("/memories"), root),
            (del("/memories/"), root),
            // What resolves to the root is the root (the references, since Python SDK 2.17.0).
            (del("/memories/."), root),
            (del("/memories/dirx.md/.."), root),
        ],
    )
    .await;
    // Only whole segments: deleting dir did not touch dirx.md.
    assert_view_ends(&tool, "/memories/dirx.md", "\tkeep").await;
    let root = view(&tool, "/memories").await;
    assert!(!root.contains("/memories/dir/"), "{root}");
}

/// `rename` of files and directories, and its refusals.
pub async fn rename<S: Store>(store: S, profile: Profile) {
    let tool = MemoryTool::new(store);
    let mv = |a: &str, b: &str| json!({"command": "rename", "old_path": a, "new_path": b});
    create(&tool, "/memories/a.md", "A").await;
    create(&tool, "/memories/b.md", "B").await;
    renamed(&tool, ("/memories/a.md", "/memories/archive/a2.md"), "A").await;
    err(&tool, json!({"command": "view", "path": "/memories/a.md"})).await;
    assert_eq!(
        err(&tool, mv("/memories/b.md", "/memories/archive/a2.md")).await,
        "Error: The destination /memories/archive/a2.md already exists"
    );
    assert_view_ends(&tool, "/memories/b.md", "\tB").await;
    let root = Err("Error: Cannot rename the /memories directory itself");
    answers(
        &tool,
        [
            (
                mv("/memories/nope.md", "/memories/c.md"),
                Err("Error: The path /memories/nope.md does not exist"),
            ),
            (mv("/memories", "/memories/x"), root),
            (mv("/memories/.", "/memories/x"), root),
            (mv("/memories/sub/..", "/memories/x"), root),
        ],
    )
    .await;
    // Directories move with everything beneath them.
    create(&tool, "/memories/proj/one.md", "1").await;
    create(&tool, "/memories/proj/sub/two.md", "22").await;
    let answer = ok(&tool, mv("/memories/proj", "/memories/old/proj")).await;
    assert_eq!(
        answer,
        "Successfully renamed /memories/proj to /memories/old/proj"
    );
    assert_view_ends(&tool, "/memories/old/proj/sub/two.md", "\t22").await;
    assert_eq!(
        err(&tool, json!({"command": "view", "path": "/memories/proj"})).await,
        "Error: The path /memories/proj does not exist. Please provide a valid path."
    );
    let listing = view(&tool, "/memories/old").await;
    let expected = format!(
        "{LIST_HEADER} /memories/old, excluding hidden items and node_modules:\n\
         3B\t/memories/old\n\
         3B\t/memories/old/proj/\n\
         1B\t/memories/old/proj/one.md\n\
         2B\t/memories/old/proj/sub/"
    );
    assert_listing(&listing, &expected, profile);
    assert_eq!(
        err(&tool, mv("/memories/archive", "/memories/old")).await,
        "Error: The destination /memories/old already exists"
    );
    assert!(
        err(&tool, mv("/memories/old", "/memories/old/inner"))
            .await
            .contains("inside the source")
    );
}

/// Errors shared by commands: paths outside the root or escaping it.
pub async fn shared_errors<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    answers(
        &tool,
        [
            (
                json!({"command": "view", "path": "/etc/passwd"}),
                Err("Error: Path must start with /memories, got: /etc/passwd"),
            ),
            (
                json!({"command": "create", "path": "/memoriesX/a", "file_text": "x"}),
                Err("Error: Path must start with /memories, got: /memoriesX/a"),
            ),
            (
                json!({"command": "rename", "old_path": "/memories/a", "new_path": "/tmp/a"}),
                Err("Error: Path must start with /memories, got: /tmp/a"),
            ),
        ],
    )
    .await;
    for p in [
        "/memories/../etc/passwd",
        "/memories/%2e%2e/x",
        "/memories/a\\b",
        "/memories/a\u{0}b",
    ] {
        assert_eq!(
            create_err(&tool, p, "x").await,
            format!("Error: Path {p} would escape /memories directory")
        );
    }
}

/// Malformed input: unknown commands, missing and mistyped fields.
pub async fn bad_input<S: Store>(store: S) {
    let tool = MemoryTool::new(store);
    answers(
        &tool,
        [
            (json!({"command": "bogus"}), Err("Error: Unknown command: bogus")),
            (json!({"command": "view"}), Err("Error: Missing required parameter `path` for command `view`")),
            (json!({"command": "rename", "old_path": "/memories/a"}), Err("Error: Missing required parameter `new_path` for command `rename`")),
            (
                json!({"command": "insert", "path": "/memories/a", "insert_line": 1.5, "insert_text": "x"}),
                Err("Error: Parameter `insert_line` of command `insert` must be an integer"),
            ),
        ],
    )
    .await;
    err(&tool, json!("view /memories")).await;
    err(&tool, json!(null)).await;
    // Lookalike names: NFC and NFD spellings are one file; invisible and bidi characters are
    // refused, naming the character.
    let nfc = "/memories/unicode/caf\u{e9}.md";
    let nfd = "/memories/unicode/cafe\u{301}.md";
    create(&tool, nfc, "one").await;
    assert_eq!(
        create_err(&tool, nfd, "two").await,
        format!("Error: File {nfd} already exists")
    );
    assert_view_ends(&tool, nfd, "\tone").await;
    let bidi = "/memories/unicode/\u{202e}dm.exe";
    let refused = create_err(&tool, bidi, "x").await;
    assert!(
        refused.contains("U+202E") && refused.contains("visible characters only"),
        "{refused}"
    );
    // One path limit, worded for Claude, on every store.
    let long = format!("/memories/{}", "a".repeat(crate::path::MAX_PATH_BYTES));
    let refused = create_err(&tool, &long, "x").await;
    assert!(refused.contains("at most 900 bytes"), "{refused}");
}

/// The `Store` contract itself: put modes, versions, conditional delete.
pub async fn store_contract<S: Store>(store: S, profile: Profile) {
    let p = MemoryPath::parse("/memories/contract/file.md").expect("valid");
    assert!(store.get(&p).await.expect("get").is_none());
    let v1 = store.put(&p, "one", PutMode::Create).await.expect("create");
    assert!(matches!(
        store.put(&p, "two", PutMode::Create).await,
        Err(Error::AlreadyExists { .. })
    ));
    let entry = store.get(&p).await.expect("get").expect("present");
    assert_eq!(entry.content, "one");
    assert_eq!(entry.version, v1);
    if let Some(v1) = v1 {
        let v2 = store
            .put(&p, "two", PutMode::Update(v1.clone()))
            .await
            .expect("update");
        assert_ne!(v2, Some(v1.clone()));
        assert!(matches!(
            store.put(&p, "three", PutMode::Update(v1.clone())).await,
            Err(Error::Precondition { .. })
        ));
        assert!(matches!(
            store.delete(&p, Some(v1)).await,
            Err(Error::Precondition { .. })
        ));
        assert_eq!(
            store.get(&p).await.expect("get").expect("present").content,
            "two"
        );
        store.delete(&p, v2).await.expect("delete at version");
    } else {
        store
            .put(&p, "two", PutMode::Overwrite)
            .await
            .expect("overwrite");
        store.delete(&p, None).await.expect("delete");
    }
    assert!(store.get(&p).await.expect("get").is_none());
    assert!(matches!(
        store.delete(&p, None).await,
        Err(Error::NotFound { .. })
    ));
    let dir = MemoryPath::parse("/memories/contract").expect("valid");
    let missing = MemoryPath::parse("/memories/never").expect("valid");
    assert!(store.list(&missing).await.expect("list").is_none());
    store
        .put(&p, "x", PutMode::Overwrite)
        .await
        .expect("overwrite creates");
    let listing = store.list(&dir).await.expect("list").expect("a directory");
    assert_eq!(listing.files.len(), 1);
    assert_eq!(listing.files[0].path, p);
    let size = (profile.sizes == Sizes::Bytes).then_some(1);
    assert_eq!(listing.files[0].size, size);
    // A file is not a directory.
    assert!(store.list(&p).await.expect("list").is_none());
    assert!(
        store
            .list(&MemoryPath::root())
            .await
            .expect("list")
            .is_some()
    );
}
