//! `contextq-memory sync`, the binary: two machines' folders kept in step through one
//! contextq-server (SQLite and PostgreSQL), a conflict kept on both sides, `--json`, and a sync
//! killed (SIGKILL) part way through that converges on the next run with nothing lost and
//! nothing duplicated.

use crate::common;

use std::path::Path;
use std::process::Output;

use common::{BIN, Served};
use contextq_server::{Backend, Plan};

async fn sync(data: &Path, served: &Served, dir: &Path, extra: &[&str]) -> Output {
    let out = tokio::process::Command::new(BIN)
        .env("CONTEXTQ_MEMORY_DATA_DIR", data)
        .env("CONTEXT_API_URL", &served.url)
        .env("CONTEXT_API_KEY", &served.key)
        .args(["--workspace", "ws", "sync"])
        .arg(dir)
        .args(extra)
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn files(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with('.') {
                continue;
            }
            if e.file_type().unwrap().is_dir() {
                stack.push(e.path());
            } else {
                let rel = e
                    .path()
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .to_string();
                out.push((rel, std::fs::read_to_string(e.path()).unwrap()));
            }
        }
    }
    out.sort();
    out
}

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

async fn two_machines_through_one_server(b: Backend) {
    let served = Served::start(b, Plan::Unlimited).await;
    let (data, laptop, desktop) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    write(laptop.path(), "MEMORY.md", "# Memory\n- [rust](rust.md)\n");
    write(laptop.path(), "rust.md", "prefers Rust\r\n");
    sync(data.path(), &served, laptop.path(), &[]).await;
    let out = sync(data.path(), &served, desktop.path(), &[]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("pulled rust.md"));
    assert_eq!(files(laptop.path()), files(desktop.path()));

    // Both machines edit the index before syncing: a conflict, both kept on both.
    write(
        laptop.path(),
        "MEMORY.md",
        "# Memory\n- [rust](rust.md)\n- laptop note\n",
    );
    write(
        desktop.path(),
        "MEMORY.md",
        "# Memory\n- [rust](rust.md)\n- desktop note\n",
    );
    sync(data.path(), &served, desktop.path(), &[]).await;
    let out = sync(data.path(), &served, laptop.path(), &["--json"]).await;
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(report["actions"][0]["action"], "conflict", "{report}");
    sync(data.path(), &served, desktop.path(), &[]).await;
    let (l, d) = (files(laptop.path()), files(desktop.path()));
    assert_eq!(l, d);
    let all: String = l.iter().map(|(_, t)| t.as_str()).collect();
    assert!(
        all.contains("laptop note") && all.contains("desktop note"),
        "{l:?}"
    );
    assert_eq!(l.len(), 3, "{l:?}");

    // Later passes ask the server only what changed (its activity log, extension
    // `audit-log`): the store is not listed.
    let out = sync(data.path(), &served, laptop.path(), &["--json"]).await;
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert!(report["changed"].is_u64(), "{report}");
    assert_eq!(report["actions"], serde_json::json!([]), "{report}");
    write(desktop.path(), "rust.md", "prefers Rust, 2024\n");
    sync(data.path(), &served, desktop.path(), &[]).await;
    let out = sync(data.path(), &served, laptop.path(), &["--json"]).await;
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(report["changed"], 1, "{report}");
    assert_eq!(report["actions"][0]["action"], "pulled", "{report}");
    assert_eq!(files(laptop.path()), files(desktop.path()));
}

/// SIGKILL in the middle of a sync of 400 changed files (each its own conditional write), then
/// a second run: every file once in the store and the folder, each with its new content.
async fn a_killed_sync_converges(b: Backend) {
    let served = Served::start(b, Plan::Unlimited).await;
    let (data, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let name = |i: usize| format!("d{}/f{i:03}.md", i % 7);
    for i in 0..400 {
        write(dir.path(), &name(i), &format!("note {i}\n"));
    }
    sync(data.path(), &served, dir.path(), &[]).await;
    for i in 0..400 {
        write(dir.path(), &name(i), &format!("note {i}, changed\n"));
    }
    let mut child = tokio::process::Command::new(BIN)
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env("CONTEXT_API_URL", &served.url)
        .env("CONTEXT_API_KEY", &served.key)
        .args(["--workspace", "ws", "sync"])
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Killed once the first file in path order is written and before the last one is.
    let http = reqwest::Client::new();
    let content = |rel: String| {
        let (http, served) = (&http, &served);
        async move {
            let r: serde_json::Value = http
                .get(format!(
                    "{}/api/contexts/by-external/mem-tool:ws%2F{}",
                    served.url,
                    rel.replace('/', "%2F")
                ))
                .bearer_auth(&served.key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            r["content"].as_str().unwrap_or_default().to_string()
        }
    };
    let mut order: Vec<String> = (0..400).map(name).collect();
    order.sort();
    let (first, last) = (order[0].clone(), order[399].clone());
    for _ in 0..2000 {
        if content(first.clone()).await.ends_with("changed\n") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
    assert!(content(first.clone()).await.ends_with("changed\n"));
    assert!(
        !content(last.clone()).await.ends_with("changed\n"),
        "the sync finished before it was killed"
    );
    let out = sync(data.path(), &served, dir.path(), &[]).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("conflict"), "{text}");
    // A third run has nothing to do; a fresh folder gets every file once, changed.
    let out = sync(data.path(), &served, dir.path(), &[]).await;
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let fresh = tempfile::tempdir().unwrap();
    sync(data.path(), &served, fresh.path(), &[]).await;
    let got = files(fresh.path());
    assert_eq!(got, files(dir.path()));
    assert_eq!(got.len(), 400);
    assert!(got.iter().all(|(_, t)| t.ends_with("changed\n")));
}

/// `--watch`: a local change reaches the store and a change in the store reaches the folder
/// without another command (the times are printed, not held: docs/sync.md gives them); Ctrl-C
/// (SIGINT) ends it cleanly with a whole baseline.
#[cfg(unix)]
async fn watch_follows_both_sides(b: Backend) {
    use std::time::{Duration, Instant};
    let served = Served::start(b, Plan::Unlimited).await;
    let (data, dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write(dir.path(), "first.md", "1\n");
    let child = tokio::process::Command::new(BIN)
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env("CONTEXT_API_URL", &served.url)
        .env("CONTEXT_API_KEY", &served.key)
        .args(["--workspace", "ws", "sync", "--watch"])
        .arg(dir.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let in_store = |ext: &'static str| {
        let (http, served) = (&http, &served);
        async move {
            http.get(format!("{}/api/contexts/by-external/{ext}", served.url))
                .bearer_auth(&served.key)
                .send()
                .await
                .unwrap()
                .status()
                .is_success()
        }
    };
    let started = Instant::now();
    while !in_store("mem-tool:ws%2Ffirst.md").await {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the first pass"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // A draft the ignore file leaves out, written before the file it names: neither is synced
    // while the draft is out, and the draft's event alone starts no pass that sends it.
    write(dir.path(), ".contextq-syncignore", "*.draft\n");
    write(dir.path(), "note.draft", "mine\n");
    write(dir.path(), "later.md", "2\n");
    let started = Instant::now();
    while !in_store("mem-tool:ws%2Flater.md").await {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "a local change"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let local = started.elapsed();
    let r = http
        .post(format!("{}/api/contexts/bulk-upsert", served.url))
        .bearer_auth(&served.key)
        .json(&serde_json::json!({"contexts": [{"externalId": "mem-tool:ws/remote.md", "workspace": "ws", "type": "reference", "content": "3\n", "tags": ["mem-tool"]}]}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let started = Instant::now();
    while !dir.path().join("remote.md").exists() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "a change in the store"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let remote = started.elapsed();
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    assert!(out.status.success(), "{:?}", out.status);
    let said = String::from_utf8_lossy(&out.stderr);
    // Linux has inotify: the watch runs on events, not on polling.
    #[cfg(target_os = "linux")]
    assert!(said.contains("file-system events"), "{said}");
    assert!(!in_store("mem-tool:ws%2Fnote.draft").await);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("pushed later.md") && text.contains("pulled remote.md"),
        "{text}"
    );
    let baseline = std::fs::read(dir.path().join(".contextq-sync/baseline.json")).unwrap();
    let baseline: serde_json::Value = serde_json::from_slice(&baseline).unwrap();
    assert_eq!(
        baseline["files"].as_object().unwrap().len(),
        3,
        "{baseline}"
    );
    eprintln!("watch: local change in {local:?}, store change in {remote:?}");
}

/// Two machines in step through a store of the server's Memory Stores door
/// (`--store memory-stores:ID`): what one folder holds, the other pulls, the door lists, and a
/// store the key cannot reach is a clear error.
async fn two_machines_through_a_memory_store(b: Backend) {
    let served = Served::start(b, Plan::Unlimited).await;
    let http = reqwest::Client::new();
    let made: serde_json::Value = http
        .post(format!("{}/v1/memory_stores", served.url))
        .header("x-api-key", &served.key)
        .json(&serde_json::json!({"name": "Team notes"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = made["id"].as_str().unwrap().to_string();
    let choice = format!("memory-stores:{id}");
    let (data, laptop, desktop) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    write(
        laptop.path(),
        "MEMORY.md",
        "# Memory\n- [rust](topics/rust.md)\n",
    );
    write(laptop.path(), "topics/rust.md", "prefers Rust\r\n");
    sync(data.path(), &served, laptop.path(), &["--store", &choice]).await;
    let out = sync(data.path(), &served, desktop.path(), &["--store", &choice]).await;
    assert!(String::from_utf8_lossy(&out.stdout).contains("pulled topics/rust.md"));
    assert_eq!(files(laptop.path()), files(desktop.path()));
    let listed: serde_json::Value = http
        .get(format!("{}/v1/memory_stores/{id}/memories", served.url))
        .header("x-api-key", &served.key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut paths: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    paths.sort();
    assert_eq!(paths, ["/MEMORY.md", "/topics/rust.md"]);
    // An edit on the desktop reaches the laptop through the store.
    write(
        desktop.path(),
        "topics/rust.md",
        "prefers Rust, and tests\n",
    );
    sync(data.path(), &served, desktop.path(), &["--store", &choice]).await;
    sync(data.path(), &served, laptop.path(), &["--store", &choice]).await;
    assert_eq!(files(laptop.path()), files(desktop.path()));
    // A store that is not the key's: refused by name, nothing written.
    let out = tokio::process::Command::new(BIN)
        .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
        .env("CONTEXT_API_URL", &served.url)
        .env("CONTEXT_API_KEY", &served.key)
        .args(["sync", "--store", "memory-stores:memstore_nosuchstore"])
        .arg(laptop.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("404") || said.contains("not_found"), "{said}");
}

contextq_server::database_tests!(
    two_machines_through_one_server,
    a_killed_sync_converges,
    two_machines_through_a_memory_store
);
#[cfg(unix)]
mod watching {
    use super::*;
    contextq_server::database_tests!(watch_follows_both_sides);
}
