//! The `contextq-memory` binary: `exec`'s line protocol on every store, the embedded default
//! (provisioned once, shared by processes), `demo`, and errors that name what to change.

use crate::common;
use common::{BIN, embedded, run_with_input, text};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn exec(
    data_dir: &std::path::Path,
    args: &[&str],
    input: &str,
) -> (Vec<serde_json::Value>, String, bool) {
    let out = run_with_input(embedded(data_dir).arg("exec").args(args), input.as_bytes());
    let lines = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (
        lines,
        String::from_utf8_lossy(&out.stderr).to_string(),
        out.status.success(),
    )
}

const SCRIPT: &str = r#"{"command":"create","path":"/memories/notes.md","file_text":"hello\n"}
{"command":"view","path":"/memories/notes.md"}

not json
{"command":"bogus"}
{"command":"str_replace","path":"/memories/notes.md","old_str":"hello","new_str":"bye"}
{"command":"view","path":"/memories"}
"#;

fn check_script(results: &[serde_json::Value]) {
    assert_eq!(
        results.len(),
        6,
        "one result per non-empty line: {results:?}"
    );
    assert_eq!(
        results[0]["content"],
        "File created successfully at: /memories/notes.md"
    );
    assert_eq!(results[0]["is_error"], false);
    assert_eq!(
        results[1]["content"],
        "Here's the content of /memories/notes.md with line numbers:\n     1\thello\n     2\t"
    );
    assert_eq!(results[2]["is_error"], true);
    assert!(text(&results[2]).starts_with("Error: The input line is not JSON"));
    assert_eq!(results[3]["content"], "Error: Unknown command: bogus");
    assert_eq!(results[4]["is_error"], false);
    assert!(text(&results[5]).ends_with("4B\t/memories/notes.md"));
}

#[test]
fn exec_on_every_store() {
    let tmp = tempfile::tempdir().unwrap();
    for store in [
        "memory",
        &format!("local:{}", tmp.path().join("local").display()),
        "contextq",
    ] {
        let data = tempfile::tempdir().unwrap();
        let (results, stderr, ok) = exec(data.path(), &["--store", store], SCRIPT);
        assert!(ok, "{store}: {stderr}");
        check_script(&results);
    }
    assert!(
        tmp.path().join("local/memories/notes.md").exists(),
        "the SDK layout"
    );
}

#[test]
fn exec_with_the_references_durability() {
    for durability in ["ordered", "synced"] {
        let tmp = tempfile::tempdir().unwrap();
        for store in [
            &format!("local:{}", tmp.path().join("local").display()),
            "contextq",
        ] {
            let data = tempfile::tempdir().unwrap();
            let out = run_with_input(
                embedded(data.path()).args(["--durability", durability, "exec", "--store", store]),
                SCRIPT.as_bytes(),
            );
            assert!(out.status.success(), "{durability} {store}: {out:?}");
            let results: Vec<serde_json::Value> = String::from_utf8(out.stdout)
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect();
            check_script(&results);
        }
    }
    // The environment variable, and a value that names the choices.
    let data = tempfile::tempdir().unwrap();
    let out = run_with_input(
        embedded(data.path())
            .env("CONTEXTQ_MEMORY_DURABILITY", "ordered")
            .args(["exec", "--store", "contextq"]),
        SCRIPT.as_bytes(),
    );
    assert!(out.status.success(), "{out:?}");
    let out = embedded(data.path())
        .args(["--durability", "fast", "exec"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("synced") && err.contains("ordered"), "{err}");
}

#[test]
fn embedded_default_persists_and_is_shared() {
    let data = tempfile::tempdir().unwrap();
    let (r, stderr, ok) = exec(
        data.path(),
        &[],
        r#"{"command":"create","path":"/memories/a.md","file_text":"kept"}"#,
    );
    assert!(ok, "{stderr}");
    assert_eq!(r[0]["is_error"], false);
    assert!(data.path().join("contextq.db").exists());
    let creds = data.path().join("embedded.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(
            std::fs::metadata(&creds).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }
    let before = std::fs::read_to_string(&creds).unwrap();
    // A second process sees the file; two at once both work on the same database.
    let handles: Vec<_> = (0..2)
        .map(|i| {
            let dir = data.path().to_path_buf();
            std::thread::spawn(move || {
                exec(&dir, &[], &format!("{{\"command\":\"create\",\"path\":\"/memories/p{i}.md\",\"file_text\":\"x\"}}\n{{\"command\":\"view\",\"path\":\"/memories/a.md\"}}"))
            })
        })
        .collect();
    for h in handles {
        let (r, stderr, ok) = h.join().unwrap();
        assert!(ok, "{stderr}");
        assert_eq!(r[0]["is_error"], false, "{r:?}");
        assert!(r[1]["content"].as_str().unwrap().ends_with("\tkept"));
    }
    assert_eq!(
        std::fs::read_to_string(&creds).unwrap(),
        before,
        "provisioned once"
    );
    // Another workspace is created on demand and pinned.
    let (r, _, ok) = exec(
        data.path(),
        &["--workspace", "side"],
        r#"{"command":"view","path":"/memories"}"#,
    );
    assert!(ok);
    assert!(!r[0]["content"].as_str().unwrap().contains("a.md"));
}

/// `demo` runs on a fresh data directory and again, writes only beneath a directory of its own
/// (said before it writes) and deletes only that: a file the user keeps in `/memories/demo`
/// survives it.
#[test]
fn demo_runs_on_a_fresh_data_dir_and_again() {
    let data = tempfile::tempdir().unwrap();
    let mine = r#"{"command": "create", "path": "/memories/demo/mine.md", "file_text": "keep me"}"#;
    let (r, _, _) = exec(data.path(), &[], mine);
    assert_eq!(
        common::text(&r[0]),
        "File created successfully at: /memories/demo/mine.md"
    );
    for _ in 0..2 {
        let out = Command::new(BIN)
            .arg("demo")
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env_remove("CONTEXT_API_URL")
            .env_remove("ANTHROPIC_API_KEY")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let dir = stdout
            .split("It writes only beneath ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .expect("the demo says where it writes")
            .to_string();
        assert!(dir.starts_with("/memories/demo/run-"), "{dir}");
        let said = stdout.find("It writes only beneath").unwrap();
        assert!(said < stdout.find("> {").unwrap(), "said before it writes");
        assert!(stdout.contains(&format!(
            "Successfully renamed {dir}/preferences.md to {dir}/user/preferences.md"
        )));
        let run = dir.trim_start_matches("/memories/");
        assert!(
            stdout.contains(&format!("mem-tool:default/{run}/user/preferences.md")),
            "{stdout}"
        );
        assert!(!stdout.contains(&format!("mem-tool:default/{run}/scratch.md")));
        assert!(
            stdout.contains(&format!("Cleaned up: deleted {dir}")),
            "{stdout}"
        );
        assert!(stdout.contains("contextq-memory chat"));
        assert!(!stdout.contains("Error:"), "{stdout}");
    }
    let view = r#"{"command": "view", "path": "/memories/demo/mine.md"}"#;
    let (r, _, _) = exec(data.path(), &[], view);
    assert!(common::text(&r[0]).contains("keep me"), "{:?}", r[0]);
    let (listing, _, _) = exec(
        data.path(),
        &[],
        r#"{"command": "view", "path": "/memories/demo"}"#,
    );
    assert!(
        !common::text(&listing[0]).contains("run-"),
        "{:?}",
        listing[0]
    );
}

#[test]
fn configuration_errors_name_what_to_change() {
    let data = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["exec", "--store", "bogus"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("local:DIR"));
    // `exec` on nothing, with one variable set.
    let exec = |name: &str, value: &str| {
        embedded(data.path())
            .arg("exec")
            .env(name, value)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = exec("CONTEXT_API_URL", "http://127.0.0.1:9");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("CONTEXT_API_KEY"));
    // A key without a URL is the library's default URL, said on stderr, never the embedded
    // store silently.
    let out = exec("CONTEXT_API_KEY", &format!("sk_live_{}", "0".repeat(40)));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("CONTEXT_API_KEY is set without CONTEXT_API_URL")
            && err.contains("http://localhost:38200"),
        "{err}"
    );
    assert!(!data.path().join("embedded.json").exists());
    // A base URL ending in /api: said at once, with the URL to use.
    let out = Command::new(BIN)
        .arg("exec")
        .env("CONTEXT_API_URL", "http://127.0.0.1:9/api")
        .env("CONTEXT_API_KEY", format!("sk_live_{}", "0".repeat(40)))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("ends with /api")
            && err.contains("\"http://127.0.0.1:9\""),
        "{err}"
    );
    let out = Command::new(BIN)
        .arg("exec")
        .env("CONTEXT_API_URL", "http://127.0.0.1:9")
        .env("CONTEXT_API_KEY", "sk_live_SECRETSECRETSECRET")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("sk_live_") && !err.contains("SECRETSECRET"),
        "{err}"
    );
}

/// Retries are logged as "retry n of max", and logs written to a pipe carry no colour codes.
#[test]
fn retry_warnings_are_plain_text_when_piped() {
    // A port that was just free: nothing listens there, so every attempt is refused.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let out = run_with_input(
        Command::new(BIN)
            .args(["--workspace", "ws", "exec"])
            .env("CONTEXT_API_URL", format!("http://127.0.0.1:{port}"))
            .env(
                "CONTEXT_API_KEY",
                "sk_live_0123456789abcdef0123456789abcdef0123abcd",
            ),
        b"{\"command\":\"view\",\"path\":\"/memories\"}\n",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(result["is_error"], true, "{stdout}");
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: The memory store is unreachable ("),
        "{stdout}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    for n in 1..=3 {
        assert!(
            err.contains(&format!("retry {n} of 3")),
            "retry {n} is logged: {err}"
        );
    }
    assert!(!err.contains('\u{1b}'), "no escape codes: {err:?}");
    assert!(!err.contains("0123456789abcdef0123"), "no key: {err}");
}

/// A reader that stops early (`demo | head -3`, `exec | head -1`) ends the command with one
/// line on stderr and exit code 1, never a panic (exit 101).
#[test]
fn a_closed_output_stops_the_command_cleanly() {
    use std::io::{BufRead, BufReader, Write};
    let views: String = (0..5000)
        .map(|_| "{\"command\":\"view\",\"path\":\"/memories\"}\n")
        .collect();
    for (args, input) in [(&["demo"][..], None), (&["exec"][..], Some(views))] {
        let data = tempfile::tempdir().unwrap();
        let mut child = embedded(data.path())
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let feeder = std::thread::spawn(move || {
            if let Some(input) = input {
                let _ = stdin.write_all(input.as_bytes());
            }
        });
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        for _ in 0..3 {
            line.clear();
            stdout.read_line(&mut line).unwrap();
        }
        drop(stdout);
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains("the output was closed"), "{args:?}: {err}");
    }
}

/// `serve --read-only` serves a read-only store (writes 403 in the envelope); the write-policy
/// flags exist only on the commands that write.
#[test]
fn serve_read_only_refuses_writes_and_flags_exist_only_where_they_act() {
    let data = tempfile::tempdir().unwrap();
    let (mut child, url) = serve(data.path(), &["--read-only"]);
    let embedded: serde_json::Value =
        serde_json::from_slice(&std::fs::read(data.path().join("embedded.json")).unwrap()).unwrap();
    let key = embedded["apiKey"].as_str().unwrap().to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (write, read) = rt.block_on(async {
        let http = reqwest::Client::new();
        let write = http
            .post(format!("{url}/api/contexts/bulk-upsert"))
            .bearer_auth(&key)
            .json(&serde_json::json!({"contexts": [{"externalId": "mem-tool:default/a.md", "workspace": "default", "type": "memory", "content": "a"}]}))
            .send()
            .await
            .unwrap();
        let status = write.status().as_u16();
        let body: serde_json::Value = write.json().await.unwrap();
        let read = http
            .get(format!("{url}/api/workspaces"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        ((status, body), read)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(write.0, 403, "{:?}", write.1);
    assert_eq!(write.1["error"]["code"], "forbidden");
    assert_eq!(read, 200);
    // Flags only where they act.
    for args in [
        &["history", "/memories/a.md", "--read-only"][..],
        &[
            "show",
            "/memories/a.md",
            "--version",
            "1",
            "--allow-secrets",
        ][..],
        &["export", "--out", "x", "--read-only"][..],
    ] {
        let out = Command::new(BIN).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("unexpected argument"),
            "{args:?}"
        );
    }
}

/// The served address leads somewhere: `serve` prints a URL; `sign-in-link` prints a fresh
/// one-time link to a running serve's inspector (the one printed at start lasts 10 minutes),
/// which signs in; without a running serve it says so.
#[test]
fn a_new_sign_in_link_for_a_running_serve() {
    let data = tempfile::tempdir().unwrap();
    let link = |data: &std::path::Path| {
        Command::new(BIN)
            .arg("sign-in-link")
            .env("CONTEXTQ_MEMORY_DATA_DIR", data)
            .output()
            .unwrap()
    };
    let out = link(data.path());
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no `contextq-memory serve` recorded"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (mut child, url) = serve(data.path(), &[]);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let out = link(data.path());
    let printed = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.starts_with(&format!("{url}/ui/#token=")),
        "{printed}"
    );
    let token = printed.rsplit('=').next().unwrap().to_string();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (status, body) = rt.block_on(async {
        let r = reqwest::Client::new()
            .post(format!("{url}/ui/session"))
            .json(&serde_json::json!({ "token": token }))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let body: serde_json::Value = r.json().await.unwrap();
        (status, body)
    });
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(status, 200, "{body}");
    assert!(body["apiKey"].as_str().unwrap().starts_with("sk_live_"));
}

/// `contextq-memory serve --listen 127.0.0.1:0 EXTRA` on `data` (embedded store); its URL.
fn serve(data: &std::path::Path, extra: &[&str]) -> (std::process::Child, String) {
    contextq_server::testing::spawn_serving(
        embedded(data)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra),
    )
}

/// `exec` as a co-process: one command in through a pipe, its answer out through a pipe at
/// once, with stdin still open (before, a piped stdout was written only at end of input).
#[test]
fn exec_answers_each_command_at_once_through_pipes() {
    use std::io::{BufRead, BufReader, Write};
    use std::process::Stdio;
    let data = tempfile::tempdir().unwrap();
    let mut child = common::embedded(data.path())
        .arg("exec")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.unwrap()).is_err() {
                return;
            }
        }
    });
    for (command, expected) in [
        (
            r#"{"command": "create", "path": "/memories/co.md", "file_text": "x"}"#,
            "File created successfully at: /memories/co.md",
        ),
        (
            r#"{"command": "delete", "path": "/memories/co.md"}"#,
            "Successfully deleted /memories/co.md",
        ),
    ] {
        writeln!(stdin, "{command}").unwrap();
        stdin.flush().unwrap();
        let line = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer while stdin is still open");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(common::text(&v), expected);
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

/// `exec` exits 1 when a command failed because of the store (here: nothing listens at
/// CONTEXT_API_URL, and a key the server refuses), and 0 when only Claude's input was refused.
#[test]
fn exec_exits_non_zero_when_the_store_fails() {
    let data = tempfile::tempdir().unwrap();
    let (results, _, ok) = exec(
        data.path(),
        &[],
        r#"{"command": "view", "path": "/memories/none.md"}"#,
    );
    assert!(common::text(&results[0]).contains("does not exist"));
    assert!(ok, "Claude's input refused: exit 0");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = run_with_input(
        Command::new(BIN)
            .arg("exec")
            .env("CONTEXT_API_URL", format!("http://127.0.0.1:{port}"))
            .env("CONTEXT_API_KEY", format!("sk_live_{}", "1".repeat(40)))
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path()),
        br#"{"command": "view", "path": "/memories/a.md"}"#,
    );
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("because of the memory store"), "{stderr}");
    let line: serde_json::Value =
        serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
    assert_eq!(line["is_error"], true);
}

#[test]
fn search_prints_claudes_answer_or_json_and_refuses_bad_queries() {
    let data = tempfile::tempdir().unwrap();
    let (_, _, ok) = exec(
        data.path(),
        &[],
        "{\"command\":\"create\",\"path\":\"/memories/ops/incidents.md\",\"file_text\":\"intro\\nTicket OPS-4471: the staging password rotated\\n\"}\n{\"command\":\"create\",\"path\":\"/memories/people.md\",\"file_text\":\"Herr M\u{fc}ller\\n\"}\n",
    );
    assert!(ok);
    let search = |args: &[&str]| {
        let out = embedded(data.path())
            .arg("search")
            .args(args)
            .output()
            .unwrap();
        (
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
            out.status.success(),
        )
    };
    let (out, _, ok) = search(&["OPS-4471"]);
    assert!(ok);
    assert_eq!(
        out,
        "1 file in /memories match \"OPS-4471\", best first:\n\n/memories/ops/incidents.md\n     2\tTicket OPS-4471: the staging password rotated\n"
    );
    let (out, _, ok) = search(&["muller", "--json"]);
    assert!(ok);
    let hit: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(hit["path"], "/memories/people.md");
    assert_eq!(hit["lines"][0]["line"], 1);
    assert_eq!(hit["lines"][0]["text"], "Herr M\u{fc}ller");
    assert!(hit["score"].is_number());
    let (out, _, ok) = search(&["staging", "--path", "/memories/people.md"]);
    assert!(ok && out.starts_with("No files"), "{out}");
    for (args, says) in [
        (&["\"open"][..], "closing"),
        (&["*"][..], "a * must end a word"),
        (&["x", "--path", "/etc"][..], "--path"),
    ] {
        let (_, err, ok) = search(args);
        assert!(!ok, "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let (_, err, ok) = search(&["x", "--limit", "0"]);
    assert!(!ok && err.contains("--limit"), "{err}");
}

/// The flushes (fsync, fdatasync) of the database file and its write-ahead log during one
/// `exec` of `input` on the embedded default at `durability`, traced by strace (with
/// `--seccomp-bpf`, so that the untraced calls run at full speed), and how long it ran.
fn flushes(data: &std::path::Path, durability: &str, input: &str) -> (u64, Duration) {
    let inner = embedded(data);
    let trace = data.join(format!("strace-{durability}.txt"));
    let mut cmd = Command::new("strace");
    cmd.args([
        "--seccomp-bpf",
        "-f",
        "-qq",
        "-y",
        "-e",
        "trace=fsync,fdatasync",
        "-o",
    ])
    .arg(&trace)
    .arg(inner.get_program())
    .args(inner.get_args())
    .args(["--durability", durability, "exec", "--store", "contextq"]);
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let started = Instant::now();
    let out = run_with_input(&mut cmd, input.as_bytes());
    let took = started.elapsed();
    assert!(out.status.success(), "{durability}: {out:?}");
    let results: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(results.len(), input.lines().count());
    assert!(
        results.iter().all(|r| r["is_error"] == false),
        "{results:?}"
    );
    // `-y` names each call's file: `fsync(7</tmp/.../contextq.db-wal>) = 0`; the data
    // directory's own flushes (files created) are not the writes'.
    let db = data.join("contextq.db");
    let (db, wal) = (
        format!("<{}>", db.display()),
        format!("<{}-wal>", db.display()),
    );
    let flushed = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .filter(|l| l.contains("fsync(") || l.contains("fdatasync("))
        .filter(|l| l.contains(&db) || l.contains(&wal))
        .count() as u64;
    (flushed, took)
}

/// `synced` (the default) flushes every acknowledged write to the disk before answering;
/// `ordered` leaves the flushes to the background checkpoints. Counted, not assumed: the
/// flushes of 200 creates under strace. A checkpoint runs at most every 50 ms and flushes at
/// most three times (the log before copying, the database after, the log's new header at the
/// next write), so `ordered` is held to what the time it took allows, which is below one flush
/// a write (the bound is checked to be). Needs strace; without it the test says so and
/// passes, unless `CONTEXTQ_STRACE_TESTS=required` (CI).
#[test]
fn synced_writes_are_flushed_each_and_ordered_ones_are_not() {
    if !crate::common::has_strace() {
        return;
    }
    const WRITES: u64 = 200;
    const CHECKPOINT_EVERY_MS: u64 = 50;
    let input: String = (0..WRITES)
        .map(|i| {
            format!(
                "{{\"command\":\"create\",\"path\":\"/memories/f{i}.md\",\"file_text\":\"fact {i}\\n\"}}\n"
            )
        })
        .collect();
    let mut counted = Vec::new();
    for durability in ["synced", "ordered"] {
        let data = tempfile::tempdir().unwrap();
        // Provisioned first, so that only the writes' flushes are counted.
        let (_, stderr, ok) = exec(
            data.path(),
            &[],
            "{\"command\":\"view\",\"path\":\"/memories\"}\n",
        );
        assert!(ok, "{stderr}");
        counted.push((durability, flushes(data.path(), durability, &input)));
    }
    let (synced, (ordered, took)) = (counted[0].1.0, counted[1].1);
    assert!(synced >= WRITES, "synced: {counted:?}");
    // Checkpoints that could have run, with one at the start and one at the close.
    let checkpoints = took.as_millis() as u64 / CHECKPOINT_EVERY_MS + 2;
    let allowed = 3 * checkpoints;
    assert!(
        allowed < WRITES,
        "the ordered run took {took:?}, too slow to tell its flushes from one a write: {counted:?}"
    );
    assert!(
        ordered <= allowed,
        "ordered (at most {allowed}): {counted:?}"
    );
    eprintln!("flushes for {WRITES} creates: {counted:?}");
}
