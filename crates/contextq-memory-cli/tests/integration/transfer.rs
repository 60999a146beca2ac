//! Export and import: a sample tree round-trips byte for byte, a second run changes nothing,
//! `--overwrite` replaces what differs (checked in the store), and an import into a store over
//! its quota stops with a clear error and a correct summary; against contextq-server on SQLite
//! and PostgreSQL, and on the embedded default.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{BIN, Served};
use contextq_server::Backend;
use contextq_server::Plan;

/// Runs the CLI with its data directory in `data`, against `served` (with `--workspace ws`)
/// or, without it, on the embedded default.
async fn run(data: &Path, served: Option<&Served>, args: &[&str]) -> Output {
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.env("CONTEXTQ_MEMORY_DATA_DIR", data)
        .env_remove("CONTEXT_API_URL")
        .env_remove("CONTEXT_API_KEY");
    if let Some(s) = served {
        cmd.env("CONTEXT_API_URL", &s.url)
            .env("CONTEXT_API_KEY", &s.key)
            .args(["--workspace", "ws"]);
    }
    cmd.args(args).output().await.unwrap()
}

/// `contextq-memory [--workspace W] exec` on the embedded store in `data`, with `input` as its
/// stdin: what it printed.
async fn exec_in(data: &Path, workspace: Option<&str>, input: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.env("CONTEXTQ_MEMORY_DATA_DIR", data)
        .env_remove("CONTEXT_API_URL")
        .env_remove("CONTEXT_API_KEY");
    if let Some(w) = workspace {
        cmd.args(["--workspace", w]);
    }
    cmd.arg("exec")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    String::from_utf8_lossy(&out.stdout).to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn sample(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let files: Vec<(String, Vec<u8>)> = vec![
        ("notes.md".into(), b"top level\n".to_vec()),
        ("projects/alpha/plan.md".into(), b"nested\ntwice\n".to_vec()),
        (
            "people/z\u{fc}rich \u{65e5}\u{672c}.md".into(),
            "unicode: h\u{e9}llo \u{2192} \u{4e16}\u{754c}\n"
                .as_bytes()
                .to_vec(),
        ),
        ("empty.md".into(), Vec::new()),
        ("big/one-mebibyte.txt".into(), vec![b'm'; 1 << 20]),
    ];
    for (rel, bytes) in &files {
        let p = dir.join("memories").join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, bytes).unwrap();
    }
    files
}

/// A server with a Pro tenant, a data directory and a source directory.
async fn setup(b: Backend) -> (Served, tempfile::TempDir, tempfile::TempDir) {
    let served = Served::start(b, Plan::Pro).await;
    let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    (served, dirs.0, dirs.1)
}

/// Every file of `files` is under `dir/memories`, byte for byte.
fn same_files(dir: &Path, files: &[(String, Vec<u8>)]) {
    for (rel, bytes) in files {
        assert_eq!(
            &std::fs::read(dir.join("memories").join(rel)).unwrap(),
            bytes,
            "{rel}"
        );
    }
}

async fn round_trip_is_byte_identical_and_idempotent(b: Backend) {
    let (served, data, src) = setup(b).await;
    let s = Some(&served);
    let out = tempfile::tempdir().unwrap();
    let files = sample(src.path());
    let src_arg = src.path().to_str().unwrap();
    let out_arg = out.path().to_str().unwrap();

    let o = run(data.path(), s, &["import", src_arg]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o), "imported 5 files (1.0M), skipped 0, failed 0");
    let o = run(data.path(), s, &["import", src_arg]).await;
    assert_eq!(
        stdout(&o),
        "imported 0 files (0B), skipped 5, failed 0",
        "a second import changes nothing"
    );

    let o = run(data.path(), s, &["export", "--out", out_arg]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        stdout(&o),
        "exported 5 files (1.0M), skipped 0, failed 0; workspace ws; files only: versions, keys and the audit log are not in an export (`contextq-server admin backup` keeps everything)"
    );
    same_files(out.path(), &files);
    let o = run(data.path(), s, &["export", "--out", out_arg]).await;
    assert_eq!(
        stdout(&o),
        "exported 0 files (0B), skipped 5, failed 0; workspace ws; files only: versions, keys and the audit log are not in an export (`contextq-server admin backup` keeps everything)"
    );

    // A changed source file is left alone without --overwrite, replaced with it.
    std::fs::write(src.path().join("memories/notes.md"), b"changed\n").unwrap();
    let o = run(data.path(), s, &["import", src_arg]).await;
    assert_eq!(stdout(&o), "imported 0 files (0B), skipped 5, failed 0");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/memories/notes.md exists with other content")
    );
    assert_eq!(
        served.content("mem-tool:ws/notes.md").await.as_deref(),
        Some("top level\n")
    );
    let o = run(data.path(), s, &["import", src_arg, "--overwrite"]).await;
    assert_eq!(stdout(&o), "imported 1 file (8B), skipped 4, failed 0");
    assert_eq!(
        served.content("mem-tool:ws/notes.md").await.as_deref(),
        Some("changed\n"),
        "the store holds the new content"
    );
    assert_eq!(
        served
            .content("mem-tool:ws/projects/alpha/plan.md")
            .await
            .as_deref(),
        Some("nested\ntwice\n"),
        "identical files were left alone"
    );

    // The same commands move memories between stores: ContextQ to a local directory.
    let local = tempfile::tempdir().unwrap();
    let o = run(
        data.path(),
        s,
        &[
            "import",
            out_arg,
            "--store",
            &format!("local:{}", local.path().display()),
        ],
    )
    .await;
    assert_eq!(stdout(&o), "imported 5 files (1.0M), skipped 0, failed 0");
    assert_eq!(
        std::fs::read(local.path().join("memories/empty.md")).unwrap(),
        b""
    );
}

#[tokio::test]
async fn the_embedded_default_round_trips() {
    let data = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let files = sample(src.path());
    let o = run(data.path(), None, &["import", src.path().to_str().unwrap()]).await;
    assert_eq!(stdout(&o), "imported 5 files (1.0M), skipped 0, failed 0");
    let o = run(
        data.path(),
        None,
        &["export", "--out", out.path().to_str().unwrap()],
    )
    .await;
    assert_eq!(
        stdout(&o),
        "exported 5 files (1.0M), skipped 0, failed 0; workspace default; files only: versions, keys and the audit log are not in an export (`contextq-server admin backup` keeps everything)"
    );
    same_files(out.path(), &files);
}

/// An import's windows of 4,000 files overlap (the next is walked, listed and started while
/// this one's files are written), and what it prints keeps the files' order: the first
/// window's file held with other content (settled at that window's end) is named before the
/// second window's refused file, and that before the third's.
#[tokio::test]
async fn outcomes_keep_their_order_across_windows() {
    let data = tempfile::tempdir().unwrap();
    let held = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    let dir = |root: &Path| {
        let d = root.join("memories").join("d");
        std::fs::create_dir_all(&d).unwrap();
        d
    };
    std::fs::write(
        dir(held.path()).join("f00010.md"),
        "held with other content\n",
    )
    .unwrap();
    let o = run(
        data.path(),
        None,
        &["import", held.path().to_str().unwrap()],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    const FILES: usize = 8_100;
    const SECRET: &str = "key:\nsk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789\n";
    let d = dir(src.path());
    for i in 0..FILES {
        let text = match i {
            5_000 | 8_050 => SECRET.to_string(),
            _ => format!("note {i}\n"),
        };
        std::fs::write(d.join(format!("f{i:05}.md")), text).unwrap();
    }
    let o = run(data.path(), None, &["import", src.path().to_str().unwrap()]).await;
    assert!(!o.status.success(), "two files failed");
    let line = stdout(&o);
    assert!(line.starts_with("imported 8097 files ("), "{line}");
    assert!(line.ends_with("skipped 1, failed 2"), "{line}");
    let err = String::from_utf8_lossy(&o.stderr);
    let at = |name: &str| {
        err.find(name)
            .unwrap_or_else(|| panic!("{name} is not named: {err}"))
    };
    assert!(
        at("f00010.md exists with other content") < at("f05000.md"),
        "{err}"
    );
    assert!(at("f05000.md") < at("f08050.md"), "{err}");
    // The last window's files are there, and the held file is as it was.
    let shown = exec_in(
        data.path(),
        None,
        r#"{"command": "view", "path": "/memories/d/f08099.md"}
{"command": "view", "path": "/memories/d/f00010.md"}"#,
    )
    .await;
    assert!(shown.contains("note 8099"), "{shown}");
    assert!(shown.contains("held with other content"), "{shown}");
}

/// Against a ContextQ at CONTEXT_API_URL with no `--workspace` (the per-workspace model), an
/// export writes every workspace in its folder and says so: never "only" one, never a blank
/// name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_export_without_a_workspace_names_every_one() {
    let data = tempfile::tempdir().unwrap();
    exec_in(
        data.path(),
        Some("work"),
        r#"{"command": "create", "path": "/memories/a.md", "file_text": "in work"}"#,
    )
    .await;
    exec_in(
        data.path(),
        None,
        r#"{"command": "create", "path": "/memories/b.md", "file_text": "in default"}"#,
    )
    .await;
    let (child, url) =
        contextq_server::testing::spawn_serving(common::embedded(data.path()).args([
            "serve",
            "--listen",
            "127.0.0.1:0",
        ]));
    let _child = common::Killed(child);
    let embedded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.path().join("embedded.json")).unwrap()).unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = tokio::process::Command::new(BIN)
        .env("CONTEXT_API_URL", &url)
        .env("CONTEXT_API_KEY", embedded["apiKey"].as_str().unwrap())
        .args(["export", "--out", out.path().to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let said = stdout(&o);
    assert!(
        said.starts_with("exported 2 files (17B), skipped 0, failed 0; workspaces default, work (each in its own folder"),
        "{said}"
    );
    assert!(
        !said.contains("only: not exported") && !said.contains("workspace  "),
        "{said}"
    );
    assert!(out.path().join("memories/work/a.md").exists());
    assert!(out.path().join("memories/default/b.md").exists());
}

/// An export never leaves a workspace out without saying so: a pinned export names the ones
/// it did not take; `--all-workspaces` takes every one, each in its own folder, and `import
/// --all-workspaces` of that tree restores each workspace. What `view` hides (`.git/`,
/// `node_modules/`, hidden files) is left out of an import, counted, unless `--include-hidden`.
#[tokio::test]
async fn every_workspace_is_exported_or_named() {
    let data = tempfile::tempdir().unwrap();
    let exec = async |workspace, input| exec_in(data.path(), workspace, input).await;
    exec(
        Some("work"),
        r#"{"command": "create", "path": "/memories/a.md", "file_text": "in work"}"#,
    )
    .await;
    exec(
        None,
        r#"{"command": "create", "path": "/memories/b.md", "file_text": "in default"}"#,
    )
    .await;

    let pinned = tempfile::tempdir().unwrap();
    let o = run(
        data.path(),
        None,
        &["export", "--out", pinned.path().to_str().unwrap()],
    )
    .await;
    assert_eq!(
        stdout(&o),
        "exported 1 file (10B), skipped 0, failed 0; workspace default only: not exported work (--all-workspaces takes every one); files only: versions, keys and the audit log are not in an export (`contextq-server admin backup` keeps everything)"
    );
    let all = tempfile::tempdir().unwrap();
    let o = run(
        data.path(),
        None,
        &[
            "export",
            "--all-workspaces",
            "--out",
            all.path().to_str().unwrap(),
        ],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        stdout(&o),
        "exported 2 files (17B), skipped 0, failed 0; workspaces default, work (each in its own folder; one without files has none); files only: versions, keys and the audit log are not in an export (`contextq-server admin backup` keeps everything)"
    );
    assert_eq!(
        std::fs::read_to_string(all.path().join("memories/work/a.md")).unwrap(),
        "in work"
    );
    assert_eq!(
        std::fs::read_to_string(all.path().join("memories/default/b.md")).unwrap(),
        "in default"
    );

    // Restored into a fresh data directory, each workspace as it was; hidden things skipped.
    std::fs::create_dir_all(all.path().join("memories/work/.git")).unwrap();
    std::fs::write(all.path().join("memories/work/.git/HEAD"), "ref").unwrap();
    std::fs::create_dir_all(all.path().join("memories/default/node_modules/m")).unwrap();
    std::fs::write(all.path().join("memories/default/node_modules/m/i.js"), "x").unwrap();
    std::fs::write(all.path().join("memories/default/.env"), "SECRET=1").unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let o = run(
        fresh.path(),
        None,
        &["import", "--all-workspaces", all.path().to_str().unwrap()],
    )
    .await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        stdout(&o),
        "imported 2 files (17B), skipped 0, failed 0; left out 3 hidden (names starting with '.', node_modules: view hides them; --include-hidden imports them)"
    );
    let view = async |workspace, path: &str| {
        let line = format!(r#"{{"command": "view", "path": "{path}"}}"#);
        exec_in(fresh.path(), Some(workspace), &line).await
    };
    assert!(view("work", "/memories/a.md").await.contains("in work"));
    assert!(
        view("default", "/memories/b.md")
            .await
            .contains("in default")
    );
    assert!(
        view("default", "/memories/.env")
            .await
            .contains("does not exist")
    );
    // With --include-hidden they come in too.
    let again = tempfile::tempdir().unwrap();
    let o = run(
        again.path(),
        None,
        &[
            "import",
            "--all-workspaces",
            "--include-hidden",
            all.path().to_str().unwrap(),
        ],
    )
    .await;
    assert_eq!(stdout(&o), "imported 5 files (29B), skipped 0, failed 0");
}

async fn import_over_quota_stops_with_a_clear_error(b: Backend) {
    let served = Served::start(b, Plan::Free).await;
    let items: Vec<_> = (0..98)
        .map(|i| serde_json::json!({"externalId": format!("x{i}"), "workspace": "ws", "type": "note", "content": ""}))
        .collect();
    let r = reqwest::Client::new()
        .post(format!("{}/api/contexts/bulk-upsert", served.url))
        .bearer_auth(&served.key)
        .json(&serde_json::json!({"contexts": items}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);

    let src = tempfile::tempdir().unwrap();
    sample(src.path());
    let data = tempfile::tempdir().unwrap();
    let o = run(
        data.path(),
        Some(&served),
        &["import", src.path().to_str().unwrap()],
    )
    .await;
    assert!(!o.status.success());
    let line = stdout(&o);
    assert!(line.starts_with("imported 2 files"), "{line}");
    assert!(
        line.contains("skipped 0, failed 1; stopped early: The memory store is full"),
        "{line}"
    );
    assert!(line.contains("plan free allows 100"), "{line}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("failed: ") && err.contains("memories"),
        "{err}"
    );
}

async fn import_obeys_read_only_and_the_secret_guard(b: Backend) {
    let (served, data, src) = setup(b).await;
    let s = Some(&served);
    let memories = src.path().join("memories");
    std::fs::create_dir_all(&memories).unwrap();
    std::fs::write(memories.join("clean.md"), b"fine\n").unwrap();
    std::fs::write(
        memories.join("key.md"),
        b"key:\nsk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789\n",
    )
    .unwrap();
    let src_arg = src.path().to_str().unwrap();

    // Read-only: refused before anything is read, exit 1, nothing stored.
    let o = run(data.path(), s, &["import", src_arg, "--read-only"]).await;
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("read-only here: import is not allowed"),
        "{err}"
    );
    assert_eq!(served.content("mem-tool:ws/clean.md").await, None);

    // The secret guard: that file fails (named), the others are imported, exit 1.
    let o = run(data.path(), s, &["import", src_arg]).await;
    assert!(!o.status.success());
    assert_eq!(stdout(&o), "imported 1 file (5B), skipped 0, failed 1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("key.md") && err.contains("Anthropic API key"),
        "{err}"
    );
    assert_eq!(served.content("mem-tool:ws/key.md").await, None);
    assert_eq!(
        served.content("mem-tool:ws/clean.md").await.as_deref(),
        Some("fine\n")
    );
    // --allow-secrets turns it off.
    let o = run(data.path(), s, &["import", src_arg, "--allow-secrets"]).await;
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(stdout(&o), "imported 1 file (55B), skipped 1, failed 0");
}

async fn import_reports_case_collisions_per_file(b: Backend) {
    let served = Served::start(b, Plan::Pro).await;
    let data = tempfile::tempdir().unwrap();
    let src = tempfile::tempdir().unwrap();
    for (dir, text) in [("Acme", "upper\n"), ("acme", "lower\n")] {
        let d = src.path().join("memories").join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("x.md"), text).unwrap();
    }
    let r = reqwest::Client::new()
        .post(format!("{}/api/workspaces", served.url))
        .bearer_auth(&served.key)
        .json(&serde_json::json!({"slug": "acme", "name": "acme"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    // Per-workspace mode (no --workspace): the first folder is the workspace, its slug
    // lowercased, so both files are the row mem-tool:acme/x.md.
    for overwrite in [false, true] {
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env("CONTEXT_API_URL", &served.url)
            .env("CONTEXT_API_KEY", &served.key)
            .args(["import", src.path().to_str().unwrap()]);
        if overwrite {
            cmd.arg("--overwrite");
        }
        let o = cmd.output().await.unwrap();
        assert!(!o.status.success(), "overwrite {overwrite}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("/memories/acme/x.md and /memories/Acme/x.md are one file"),
            "{err}"
        );
        let expected = if overwrite {
            "imported 0 files (0B), skipped 1, failed 1"
        } else {
            "imported 1 file (6B), skipped 0, failed 1"
        };
        assert_eq!(stdout(&o), expected, "overwrite {overwrite}: {err}");
        assert_eq!(
            served.content("mem-tool:acme/x.md").await.as_deref(),
            Some("upper\n"),
            "the first file is kept, the second never overwrote it"
        );
    }
}

/// A refused key stops an import at its first file (every later write would be refused too),
/// with a hint naming the variable to fix; an unreachable ContextQ names CONTEXT_API_URL.
async fn import_stops_at_a_refused_key_and_says_what_to_fix(b: Backend) {
    let served = Served::start(b, Plan::Pro).await;
    let src = tempfile::tempdir().unwrap();
    sample(src.path());
    let data = tempfile::tempdir().unwrap();
    let o = tokio::process::Command::new(BIN)
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env("CONTEXT_API_URL", &served.url)
        .env("CONTEXT_API_KEY", format!("sk_live_{}", "0".repeat(40)))
        .args(["--workspace", "ws", "import", src.path().to_str().unwrap()])
        .output()
        .await
        .unwrap();
    assert!(!o.status.success());
    let line = stdout(&o);
    assert!(
        line.starts_with("imported 0 files") && line.contains("failed 1; stopped early"),
        "{line}"
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("hint: check CONTEXT_API_KEY"), "{err}");
    let o = tokio::process::Command::new(BIN)
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env("CONTEXT_API_URL", "http://127.0.0.1:9")
        .env("CONTEXT_API_KEY", format!("sk_live_{}", "0".repeat(40)))
        .args(["--workspace", "ws", "history", "/memories/notes.md"])
        .output()
        .await
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("hint: check CONTEXT_API_URL"), "{err}");
}

/// A folder larger than an import's window (4,000 files) is imported a window at a time: each
/// window asks the store what it holds in its own range of paths (one page of an empty store;
/// a re-import pages through what it holds, never the whole store per window) and creates
/// what is absent in bulk; a ContextQ without the listing extensions is listed once. Nothing is
/// lost or written twice either way.
async fn a_large_folder_is_imported_a_window_at_a_time(b: Backend) {
    use contextq_memory_tool::testing::proxy::Proxy;
    let served = Served::start(b, Plan::Unlimited).await;
    let src = tempfile::tempdir().unwrap();
    const FILES: usize = 4_100;
    for i in 0..FILES {
        let d = src.path().join("memories").join(format!("d{}", i % 2));
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join(format!("f{i:05}.md")), format!("note {i}\n")).unwrap();
    }
    let data = tempfile::tempdir().unwrap();
    let import = async |url: &str| {
        let o = tokio::process::Command::new(BIN)
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env("CONTEXT_API_URL", url)
            .env("CONTEXT_API_KEY", &served.key)
            .args(["--workspace", "ws", "import", src.path().to_str().unwrap()])
            .output()
            .await
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        stdout(&o)
    };
    let count = |log: &[String], what: &str| log.iter().filter(|l| *l == what).count();
    let proxy = Proxy::start(&served.url).await;
    assert!(
        import(&proxy.url)
            .await
            .starts_with("imported 4100 files (")
    );
    let log = proxy.take_log();
    // 4,000 then 100 files: 1,000 per bulk request (extension `large-bulk`). On PostgreSQL a
    // request that waited past the server's 5 s for a write connection (4 in flight on a busy
    // machine) is answered 503 and repeated with its key: more requests, never more files.
    let bulk = count(&log, "POST /api/contexts/bulk-upsert");
    match b {
        Backend::Sqlite => assert_eq!(bulk, 5, "{log:?}"),
        Backend::Postgres => assert!((5..=8).contains(&bulk), "{log:?}"),
    }
    // The extension probe (`GET /api/contexts?limit=1`, read for its header), then one
    // listing per window: the store holds nothing in either range.
    assert_eq!(count(&log, "GET /api/contexts"), 1 + 2, "{log:?}");

    assert_eq!(
        import(&proxy.url).await,
        "imported 0 files (0B), skipped 4100, failed 0"
    );
    let log = proxy.take_log();
    assert_eq!(count(&log, "POST /api/contexts/bulk-upsert"), 0, "{log:?}");
    // The probe, then pages of 500 through the 4,100 rows, once: 9 for the first window (the
    // ninth reaches past its range), 1 for the second.
    assert_eq!(count(&log, "GET /api/contexts"), 1 + 10, "{log:?}");

    // A ContextQ without cursors: listed once, and still nothing written twice.
    let seed = Proxy::hiding(&served.url, &["start-after", "cursor"]).await;
    assert_eq!(
        import(&seed.url).await,
        "imported 0 files (0B), skipped 4100, failed 0"
    );
    assert_eq!(
        served.content("mem-tool:ws/f04099.md").await,
        None,
        "paths keep their folders"
    );
    assert_eq!(
        served.content("mem-tool:ws/d1/f04099.md").await.as_deref(),
        Some("note 4099\n")
    );
}

/// Against a ContextQ with the seed's contract only (every extension hidden: no conditional
/// requests, no large bulk, no cursors): an import checks each file and writes the absent ones
/// in bulk requests of the contract's 100, a second import writes nothing, an existing file
/// with other content is left alone without --overwrite and replaced with it, and the export
/// gives the folder back byte for byte.
async fn import_and_export_through_a_plain_contextq(b: Backend) {
    use contextq_memory_tool::testing::proxy::Proxy;
    let served = Served::start(b, Plan::Unlimited).await;
    let plain = Proxy::plain(&served.url).await;
    let (data, src, out) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let mut files = sample(src.path());
    for i in 0..150 {
        let rel = format!("many/n{i:03}.md");
        let bytes = format!("note {i}\r\nno final newline").into_bytes();
        std::fs::create_dir_all(src.path().join("memories/many")).unwrap();
        std::fs::write(src.path().join("memories").join(&rel), &bytes).unwrap();
        files.push((rel, bytes));
    }
    let run = async |args: &[&str]| {
        let o = tokio::process::Command::new(BIN)
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env("CONTEXT_API_URL", &plain.url)
            .env("CONTEXT_API_KEY", &served.key)
            .args(["--workspace", "ws"])
            .args(args)
            .output()
            .await
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        (stdout(&o), String::from_utf8_lossy(&o.stderr).to_string())
    };
    let bulk = |log: &[String]| {
        log.iter()
            .filter(|l| *l == "POST /api/contexts/bulk-upsert")
            .count()
    };
    let src_arg = src.path().to_str().unwrap();
    assert_eq!(
        run(&["import", src_arg]).await.0,
        "imported 155 files (1.0M), skipped 0, failed 0"
    );
    assert_eq!(
        bulk(&plain.take_log()),
        2,
        "155 files, 100 at the most per request"
    );
    assert_eq!(
        run(&["import", src_arg]).await.0,
        "imported 0 files (0B), skipped 155, failed 0"
    );
    assert_eq!(bulk(&plain.take_log()), 0, "a second import writes nothing");

    std::fs::write(src.path().join("memories/notes.md"), b"changed\n").unwrap();
    let (line, said) = run(&["import", src_arg]).await;
    assert_eq!(line, "imported 0 files (0B), skipped 155, failed 0");
    assert!(
        said.contains("/memories/notes.md exists with other content"),
        "{said}"
    );
    assert_eq!(
        served.content("mem-tool:ws/notes.md").await.as_deref(),
        Some("top level\n")
    );
    assert_eq!(
        run(&["import", src_arg, "--overwrite"]).await.0,
        "imported 1 file (8B), skipped 154, failed 0"
    );
    files[0].1 = b"changed\n".to_vec();

    let (line, _) = run(&["export", "--out", out.path().to_str().unwrap()]).await;
    assert!(
        line.starts_with("exported 155 files (1.0M), skipped 0, failed 0"),
        "{line}"
    );
    same_files(out.path(), &files);
}

/// A window lists the store from just before its own first file, not from the start of its
/// directory: importing one file after 1,500 the store holds beneath the same directory lists one
/// page, not the 1,500 first.
async fn a_window_lists_from_its_own_first_file(b: Backend) {
    use contextq_memory_tool::testing::proxy::Proxy;
    let served = Served::start(b, Plan::Unlimited).await;
    let (data, held, one) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    std::fs::create_dir_all(held.path().join("memories/a")).unwrap();
    for i in 0..1_500 {
        let file = held.path().join(format!("memories/a/n{i:04}.md"));
        std::fs::write(file, format!("{i}\n")).unwrap();
    }
    std::fs::create_dir_all(one.path().join("memories")).unwrap();
    std::fs::write(one.path().join("memories/z.md"), "last\n").unwrap();
    let proxy = Proxy::start(&served.url).await;
    let import = async |dir: &Path| {
        let o = tokio::process::Command::new(BIN)
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env("CONTEXT_API_URL", &proxy.url)
            .env("CONTEXT_API_KEY", &served.key)
            .args(["--workspace", "ws", "import", dir.to_str().unwrap()])
            .output()
            .await
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        stdout(&o)
    };
    assert!(import(held.path()).await.starts_with("imported 1500 files"));
    proxy.take_log();
    assert!(import(one.path()).await.starts_with("imported 1 file"));
    let log = proxy.take_log();
    let listings = log.iter().filter(|l| *l == "GET /api/contexts").count();
    // The extension probe, then one page that starts after `/memories/z.m`.
    assert_eq!(listings, 1 + 1, "{log:?}");
    assert_eq!(
        served.content("mem-tool:ws/z.md").await.as_deref(),
        Some("last\n")
    );
}

contextq_server::database_tests!(
    a_window_lists_from_its_own_first_file,
    import_and_export_through_a_plain_contextq,
    a_large_folder_is_imported_a_window_at_a_time,
    import_stops_at_a_refused_key_and_says_what_to_fix,
    import_reports_case_collisions_per_file,
    round_trip_is_byte_identical_and_idempotent,
    import_over_quota_stops_with_a_clear_error,
    import_obeys_read_only_and_the_secret_guard,
);
