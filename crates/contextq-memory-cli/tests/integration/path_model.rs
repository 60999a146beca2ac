//! The key decides the MCP path model, with one rule on every transport (stdio `mcp`,
//! `mcp --http`, `serve`'s `/mcp`): a key of one workspace sees it as `/memories`; a key of
//! several sees the process's pinned workspace if it reaches it, else one folder per workspace;
//! the tenant's key sees the pinned workspace, else one folder per workspace. The keys are made
//! with `contextq-memory keys`, which refuses the data directory's own key and keys it does not
//! hold; a revoked key is refused at `/mcp`.
#![cfg(feature = "mcp")]

use crate::common;
use common::Killed;

use rmcp::ServiceExt;
use rmcp::transport::TokioChildProcess;
use serde_json::{Value, json};

use contextq_server::testing::spawn_serving;

fn keys(data: &std::path::Path, args: &[&str]) -> std::process::Output {
    common::embedded(data)
        .arg("keys")
        .args(args)
        .output()
        .unwrap()
}

fn new_key(data: &std::path::Path, args: &[&str]) -> (String, String) {
    let out = keys(data, &[&["create"][..], args].concat());
    assert!(out.status.success(), "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    (
        v["keyId"].as_str().unwrap().to_string(),
        v["apiKey"].as_str().unwrap().to_string(),
    )
}

/// The resources a key lists over MCP at `url` (streamable HTTP, raw JSON-RPC).
async fn listed_http(url: &str, key: &str) -> Vec<String> {
    let post = |body: Value, session: Option<String>| {
        let mut req = reqwest::Client::new()
            .post(url)
            .bearer_auth(key)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .json(&body);
        if let Some(s) = session {
            req = req.header("mcp-session-id", s);
        }
        req.send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(init, None).await.unwrap();
    assert_eq!(r.status(), 200, "{url}");
    let session = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = r.text().await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let _ = post(note, Some(session.clone()))
        .await
        .unwrap()
        .text()
        .await;
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "resources/list", "params": {}});
    let text = post(list, Some(session))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let data = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .find(|l| !l.trim().is_empty())
        .unwrap_or(&text);
    let v: Value = serde_json::from_str(data.trim()).unwrap_or_else(|e| panic!("{e}: {text}"));
    uris(&v["result"]["resources"])
}

fn uris(resources: &Value) -> Vec<String> {
    let mut uris: Vec<String> = resources
        .as_array()
        .unwrap_or_else(|| panic!("{resources}"))
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_string())
        .collect();
    uris.sort();
    uris
}

/// The resources a key lists over stdio `mcp` against the ContextQ at `url`.
async fn listed_stdio(url: &str, key: &str) -> Vec<String> {
    let mut cmd = tokio::process::Command::new(common::BIN);
    cmd.arg("mcp")
        .env("CONTEXT_API_URL", url)
        .env("CONTEXT_API_KEY", key)
        .stderr(std::process::Stdio::null());
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let resources = client.list_all_resources().await.unwrap();
    let _ = client.cancel().await;
    let mut uris: Vec<String> = resources.into_iter().map(|r| r.uri).collect();
    uris.sort();
    uris
}

fn memories(paths: &[&str]) -> Vec<String> {
    paths
        .iter()
        .map(|p| format!("memory:///memories/{p}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_key_decides_the_path_model_on_every_transport() {
    let data = tempfile::tempdir().unwrap();
    // One file in each of three workspaces, written by the data directory's own commands.
    for (ws, file) in [("acme", "a.md"), ("billing", "b.md"), ("default", "d.md")] {
        let input = format!(
            r#"{{"command": "create", "path": "/memories/{file}", "file_text": "in {ws}"}}"#
        );
        let out = common::run_with_input(
            common::embedded(data.path()).args(["--workspace", ws, "exec"]),
            input.as_bytes(),
        );
        assert!(out.status.success(), "{out:?}");
    }
    let (_, one) = new_key(
        data.path(),
        &["--name", "agent-acme", "--workspaces", "acme"],
    );
    let (two_id, two) = new_key(
        data.path(),
        &["--name", "agent-two", "--workspaces", "acme,billing"],
    );
    let (_, pinned_two) = new_key(data.path(), &["--workspaces", "acme,default"]);
    let embedded: Value =
        serde_json::from_slice(&std::fs::read(data.path().join("embedded.json")).unwrap()).unwrap();
    let tenant = embedded["apiKey"].as_str().unwrap().to_string();

    // `serve`'s /mcp and `mcp --http` over the embedded store: the process pins `default`.
    let pinned_default = [
        (&one, memories(&["a.md"])),
        (&two, memories(&["acme/a.md", "billing/b.md"])),
        (&pinned_two, memories(&["d.md"])),
        (&tenant, memories(&["d.md"])),
    ];
    let (child, url) =
        spawn_serving(common::embedded(data.path()).args(["serve", "--listen", "127.0.0.1:0"]));
    let _serve = Killed(child);
    for (key, want) in &pinned_default {
        assert_eq!(
            &listed_http(&format!("{url}/mcp"), key).await,
            want,
            "serve"
        );
    }
    let (child, mcp_url) =
        spawn_serving(common::embedded(data.path()).args(["mcp", "--http", "127.0.0.1:0"]));
    let mcp_embedded = Killed(child);
    for (key, want) in &pinned_default {
        assert_eq!(
            &listed_http(&mcp_url, key).await,
            want,
            "mcp --http (embedded)"
        );
    }
    drop(mcp_embedded);

    // In front of a separate ContextQ (serve's URL), nothing pinned: stdio and `mcp --http`.
    let unpinned = [
        (&one, memories(&["a.md"])),
        (&two, memories(&["acme/a.md", "billing/b.md"])),
        (&pinned_two, memories(&["acme/a.md", "default/d.md"])),
        (
            &tenant,
            memories(&["acme/a.md", "billing/b.md", "default/d.md"]),
        ),
    ];
    let (child, remote) = spawn_serving(
        std::process::Command::new(common::BIN)
            .args(["mcp", "--http", "127.0.0.1:0"])
            .env("CONTEXT_API_URL", &url)
            .env_remove("CONTEXT_API_KEY"),
    );
    let _remote = Killed(child);
    for (key, want) in &unpinned {
        assert_eq!(
            &listed_http(&remote, key).await,
            want,
            "mcp --http (remote)"
        );
        assert_eq!(&listed_stdio(&url, key).await, want, "stdio mcp");
    }

    // A write through the pinned key lands in its workspace, seen per-workspace by the tenant.
    let out = common::run_with_input(
        std::process::Command::new(common::BIN)
            .arg("exec")
            .env("CONTEXT_API_URL", &url)
            .env("CONTEXT_API_KEY", &one)
            .args(["--workspace", "acme"]),
        br#"{"command": "create", "path": "/memories/new.md", "file_text": "x"}"#,
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        listed_stdio(&url, &tenant).await,
        memories(&["acme/a.md", "acme/new.md", "billing/b.md", "default/d.md"])
    );

    // `keys`: the list names the keys, the local key is never revoked here, an unknown id is
    // refused, and a revoked key is refused at /mcp at once.
    let out = keys(data.path(), &["list"]);
    let listing = String::from_utf8_lossy(&out.stdout);
    assert!(
        listing.contains("agent-acme") && listing.contains("acme,billing"),
        "{listing}"
    );
    assert!(
        !listing.contains(&one) && !listing.contains(&tenant),
        "{listing}"
    );
    let out = keys(data.path(), &["revoke", &tenant]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("data directory's own key"),
        "{err}"
    );
    assert!(
        !err.contains(&tenant[8..]),
        "the key is never echoed: {err}"
    );
    let out = keys(data.path(), &["revoke", "key_not_here"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("keys list"));
    let out = keys(data.path(), &["revoke", &two_id]);
    assert!(out.status.success(), "{out:?}");
    let r = reqwest::Client::new()
        .post(format!("{url}/mcp"))
        .bearer_auth(&two)
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let out = keys(data.path(), &["expire", &one, "--in", "0s"]);
    assert!(out.status.success(), "{out:?}");
    let out = keys(data.path(), &["create", "--workspaces", ","]);
    assert!(!out.status.success());

    // Another tenant's key in the same database (put there with the operator's library): the
    // data directory's `keys` never revokes it, by key or by id, and it keeps working.
    let db = contextq_server::Db::connect(
        &format!("sqlite:{}", data.path().join("contextq.db").display()),
        &contextq_server::DbOptions::default().audit_key(Some(
            contextq_server::audit::AuditKey::load(&data.path().join("audit.key")).unwrap(),
        )),
    )
    .await
    .unwrap();
    let other = contextq_server::admin::bootstrap(
        &db,
        "someone-else",
        contextq_server::Plan::Free,
        "theirs",
        &[contextq_server::Scope::Read, contextq_server::Scope::Write],
    )
    .await
    .unwrap();
    db.close().await;
    for target in [other.key.api_key.as_str(), other.key.key_id.as_str()] {
        let out = keys(data.path(), &["revoke", target]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("no active key"),
            "{err}"
        );
        assert!(
            !err.contains(&other.key.api_key[8..]),
            "never echoed: {err}"
        );
    }
    let listing = String::from_utf8_lossy(&keys(data.path(), &["list"]).stdout).to_string();
    assert!(!listing.contains(&other.key.key_id), "{listing}");
    let r = reqwest::Client::new()
        .get(format!("{url}/api/workspaces"))
        .bearer_auth(&other.key.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "the other tenant's key still works");
}
