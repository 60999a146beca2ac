//! `contextq-memory redact` through the binary on the embedded default, while another process
//! (`serve`) keeps the same database open: the plan, `--dry-run`, `--version N`, `--matching`
//! (also from stdin) on a file and with `--all-paths`; the exact report; `history`, `show`,
//! `diff` and `restore` on a redacted version; a refusal that changes nothing; and the text
//! gone from the SQLite files once the command returns.

use crate::common;
use common::{Killed, embedded, run_with_input};

use std::path::Path;
use std::process::Output;

use serde_json::{Value, json};

const SECRET: &str = "hunter2-Zq8-vault-pass";

/// Kills the child when dropped.
fn run(data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = embedded(data)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    said(out)
}

fn said(out: Output) -> (bool, String, String) {
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

fn exec(data: &Path, inputs: &[Value]) {
    let text: String = inputs.iter().map(|i| format!("{i}\n")).collect();
    let out = run_with_input(embedded(data).args(["exec"]), text.as_bytes());
    assert!(out.status.success(), "{out:?}");
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["is_error"], false, "{v}");
    }
}

/// The files of the data directory whose bytes hold `text`.
fn files_holding(data: &Path, text: &str) -> Vec<String> {
    std::fs::read_dir(data)
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).ok()?;
            bytes
                .windows(text.len())
                .any(|w| w == text.as_bytes())
                .then(|| path.file_name().unwrap().to_string_lossy().to_string())
        })
        .collect()
}

#[test]
fn redact_through_the_binary() {
    let data = tempfile::tempdir().unwrap();
    let data = data.path();
    exec(
        data,
        &[
            json!({"command": "create", "path": "/memories/db.md", "file_text": format!("password: {SECRET}\n")}),
            json!({"command": "str_replace", "path": "/memories/db.md", "old_str": SECRET, "new_str": "(in the vault)"}),
            json!({"command": "create", "path": "/memories/notes/a.md", "file_text": format!("also {SECRET}\n")}),
        ],
    );
    // Another process holds the database open from here on (its WAL stays).
    let (child, _url) = contextq_server::testing::spawn_serving(embedded(data).args([
        "serve",
        "--listen",
        "127.0.0.1:0",
    ]));
    let _serve = Killed(child);

    // A live file holds the text: refused, nothing changed, exit 1.
    let (ok, _, err) = run(
        data,
        &["redact", "/memories", "--all-paths", "--matching", SECRET],
    );
    assert!(!ok);
    assert!(err.contains("holds the text"), "{err}");
    // A directory without --all-paths.
    let (ok, _, err) = run(data, &["redact", "/memories/notes", "--matching", SECRET]);
    assert!(!ok && err.contains("--all-paths"), "{err}");
    exec(
        data,
        &[json!({"command": "delete", "path": "/memories/notes/a.md"})],
    );

    // The plan only.
    let (ok, out, err) = run(
        data,
        &[
            "redact",
            "/memories",
            "--all-paths",
            "--matching",
            SECRET,
            "--dry-run",
        ],
    );
    assert!(ok, "{err}");
    assert!(
        out.starts_with("Redact 2 versions of /memories:\n"),
        "{out}"
    );
    assert!(out.contains("/memories/db.md version 1 (create,"), "{out}");
    assert!(
        out.contains("/memories/notes/a.md version 1 (create,"),
        "{out}"
    );
    assert!(out.ends_with("Dry run: nothing was redacted.\n"), "{out}");
    assert!(
        !files_holding(data, SECRET).is_empty(),
        "a dry run changes nothing"
    );

    // One version of one file, by number; then the rest by matching text read from stdin.
    let (ok, out, err) = run(data, &["redact", "/memories/db.md", "--version", "1"]);
    assert!(ok, "{err}");
    assert!(
        out.ends_with("Redacted 1 version: /memories/db.md version 1.\n"),
        "{out}"
    );
    let (ok, _, err) = run(data, &["redact", "/memories/db.md", "--version", "2"]);
    assert!(!ok && err.contains("current content"), "{err}");
    // Named by its path, not the store's internal external id.
    assert!(
        err.contains("/memories/db.md") && !err.contains("mem-tool:"),
        "{err}"
    );
    let out = run_with_input(
        embedded(data).args(["redact", "/memories", "--all-paths", "--matching", "-"]),
        format!("{SECRET}\n").as_bytes(),
    );
    let (ok, out, err) = said(out);
    assert!(ok, "{err}");
    assert!(out.contains("Redact 1 version of /memories:\n"), "{out}");
    assert!(
        out.ends_with("Redacted 1 version: /memories/notes/a.md version 1.\n"),
        "{out}"
    );
    // Gone from the database and its WAL, with `serve` still holding them open.
    assert_eq!(files_holding(data, SECRET), Vec::<String>::new());
    let (ok, out, _) = run(
        data,
        &["redact", "/memories", "--all-paths", "--matching", SECRET],
    );
    assert!(ok && out.ends_with("Nothing to redact.\n"), "{out}");

    // What the history commands say of it.
    let (ok, out, _) = run(data, &["history", "/memories/db.md"]);
    assert!(ok);
    let v1 = out.lines().find(|l| l.starts_with("1 ")).unwrap();
    assert!(v1.contains("create") && v1.contains("redacted"), "{out}");
    for args in [
        &["show", "/memories/db.md", "--version", "1"][..],
        &["diff", "/memories/db.md", "1", "2"],
        &["restore", "/memories/db.md", "--version", "1"],
        &["restore", "/memories/db.md", "--version", "1", "--dry-run"],
    ] {
        let (ok, out, err) = run(data, args);
        assert!(!ok, "{args:?}: {out}");
        assert!(
            err.contains("version 1 of /memories/db.md was redacted"),
            "{args:?}: {err}"
        );
    }
    let (ok, out, _) = run(data, &["show", "/memories/db.md", "--version", "2"]);
    assert!(ok && out.contains("(in the vault)"), "{out}");
}
