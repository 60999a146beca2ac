//! `contextq-memory mcp --http`: MCP over streamable HTTP in front of a ContextQ, each client
//! with its own key. Without a key, or with one ContextQ refuses: 401 before any MCP. A browser
//! Origin not allowed: refused. The official Python (`mcp`) and TypeScript
//! (`@modelcontextprotocol/sdk`) clients, each with a key of its own limited to one shared
//! workspace, run the six commands, see each other's files there, list and read the resources,
//! and are refused in another workspace (the server's enforcement).
//!
//! The clients come as for `mcp_official_clients.rs` (`CONTEXTQ_MCP_PYTHON`,
//! `CONTEXTQ_MCP_TS_SDK`, required in CI by `CONTEXTQ_MCP_CLIENT_TESTS=required`).
#![cfg(feature = "mcp")]

mod common;

use std::path::Path;
use std::process::Command;

use common::BIN;
use contextq_server::testing::{TestServer, spawn_serving};
use contextq_server::{Backend, Plan, Scope, admin};
use serde_json::{Value, json};

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An MCP `initialize` to `url` with `key` as the bearer and `origin` as `Origin`, when given.
async fn initialize(
    url: &str,
    key: Option<&str>,
    origin: Option<&str>,
) -> reqwest::Result<reqwest::Response> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let mut req = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body);
    if let Some(k) = key {
        req = req.bearer_auth(k);
    }
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    req.send().await
}

/// What a client script printed, checked: every command of its workspace worked, the write
/// outside the key's workspaces was refused by the server, and the resources are `resources`
/// (the files of the key's workspaces, no other).
fn check(client: &str, out: std::process::Output, ws: &str, p: &str, resources: &[&str]) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{client}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.lines().last().unwrap_or_default();
    let r: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{client}: {e}: {stdout}"));
    let results = r["results"].as_array().unwrap();
    assert_eq!(results.len(), 9, "{r}");
    for (i, step) in results[..8].iter().enumerate() {
        assert_eq!(step["is_error"], false, "{client} step {i}: {step}");
    }
    assert_eq!(
        results[0]["text"],
        format!("File created successfully at: /memories/{ws}/{p}notes.md")
    );
    assert_eq!(
        results[4]["text"],
        format!("Successfully renamed /memories/{ws}/{p}notes.md to /memories/{ws}/{p}kept.md")
    );
    assert_eq!(
        results[6]["text"],
        format!("Successfully deleted /memories/{ws}/{p}gone.md")
    );
    let refused = &results[8];
    let text = refused["text"].as_str().unwrap_or_default();
    assert_eq!(refused["is_error"], true, "{client}: {refused}");
    assert!(
        text.contains("limited to the workspaces"),
        "{client}: {text}"
    );
    assert_eq!(
        r["resources"],
        json!(resources),
        "{client}: only its workspaces' files"
    );
    assert_eq!(r["read"], "# Notes\nPrefers Rust and tests\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_mcp_with_each_clients_key() {
    let server = TestServer::start(Backend::Sqlite).await;
    let tenant = server
        .tenant(Plan::Free, &[Scope::Read, Scope::Write], "team")
        .await;
    server.workspace(&tenant.tenant_id, "private").await;
    // Two agents, each with a key of its own limited to the team's workspace.
    let mut keys = Vec::new();
    for _ in 0..2 {
        let key = admin::create_key_limited(
            &server.db,
            &tenant.tenant_id,
            &[Scope::Read, Scope::Write],
            None,
            Some(&["team".to_string()]),
        )
        .await
        .unwrap();
        keys.push(key.api_key);
    }
    let (child, url) = spawn_serving(
        Command::new(BIN)
            .args(["mcp", "--http", "127.0.0.1:0"])
            .env("CONTEXT_API_URL", server.url())
            .env_remove("CONTEXT_API_KEY"),
    );
    let _child = Killed(child);
    assert!(url.ends_with("/mcp"), "{url}");

    // No key, a key ContextQ does not know: 401 before any MCP; a browser origin: refused.
    let r = initialize(&url, None, None).await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let unknown = format!("sk_live_{}", "0".repeat(40));
    assert_eq!(
        initialize(&url, Some(&unknown), None)
            .await
            .unwrap()
            .status(),
        401
    );
    let r = initialize(&url, Some(&keys[0]), Some("http://evil.example"))
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "a foreign Origin is refused");
    assert_eq!(
        initialize(&url, Some(&keys[0]), None)
            .await
            .unwrap()
            .status(),
        200
    );

    let (Ok(python), Ok(sdk)) = (
        std::env::var("CONTEXTQ_MCP_PYTHON"),
        std::env::var("CONTEXTQ_MCP_TS_SDK"),
    ) else {
        let required = std::env::var("CONTEXTQ_MCP_CLIENT_TESTS").as_deref() == Ok("required");
        assert!(
            !required,
            "CONTEXTQ_MCP_CLIENT_TESTS=required: set CONTEXTQ_MCP_PYTHON and CONTEXTQ_MCP_TS_SDK"
        );
        eprintln!("skipped the official clients: set CONTEXTQ_MCP_PYTHON and CONTEXTQ_MCP_TS_SDK");
        return;
    };
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_clients");
    let py = Command::new(python)
        .arg(scripts.join("remote.py"))
        .args([&url, &keys[0], "team", "private", "py-"])
        .output()
        .unwrap();
    check(
        "python",
        py,
        "team",
        "py-",
        &["memory:///memories/team/py-kept.md"],
    );
    // The second agent, on its own key, shares the first one's workspace: it sees its file.
    let ts = Command::new("node")
        .arg(scripts.join("remote.mjs"))
        .args([sdk.as_str(), &url, &keys[1], "team", "private", "ts-"])
        .output()
        .unwrap();
    check(
        "typescript",
        ts,
        "team",
        "ts-",
        &[
            "memory:///memories/team/py-kept.md",
            "memory:///memories/team/ts-kept.md",
        ],
    );
    // Nothing was written in the workspace the key does not reach.
    let listed = contextq_server::store::contexts::list(
        &server.db,
        &tenant.tenant_id,
        &contextq_server::store::contexts::ListQuery {
            workspace: Some("private".into()),
            within: None,
            tag: None,
            external_id_prefix: None,
            limit: 10,
            after: None,
        },
    )
    .await
    .unwrap();
    assert!(listed.0.is_empty(), "{listed:?}");
}

/// `contextq-memory serve` answers MCP at `/mcp` on its own listener, with the local key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_mcp_at_slash_mcp() {
    let data = tempfile::tempdir().unwrap();
    let (child, url) = spawn_serving(
        Command::new(BIN)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .env("CONTEXTQ_MEMORY_DATA_DIR", data.path())
            .env_remove("CONTEXT_API_URL")
            .env_remove("CONTEXT_API_KEY"),
    );
    let _child = Killed(child);
    let mcp = format!("{url}/mcp");
    let embedded: Value =
        serde_json::from_slice(&std::fs::read(data.path().join("embedded.json")).unwrap()).unwrap();
    let key = embedded["apiKey"].as_str().unwrap();
    assert_eq!(initialize(&mcp, None, None).await.unwrap().status(), 401);
    let r = initialize(&mcp, Some(key), None).await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.headers().contains_key("mcp-session-id"));
    let body = r.text().await.unwrap();
    assert!(body.contains("contextq-memory"), "{body}");
    // The API is still there beside it.
    assert_eq!(
        reqwest::Client::new()
            .get(format!("{url}/health"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}
