//! `contextq-memory mcp --http`: MCP over streamable HTTP in front of a ContextQ, each client
//! with its own key. Without a key, or with one ContextQ refuses: 401 before any MCP. A browser
//! Origin not allowed: refused. The official Python (`mcp`) and TypeScript
//! (`@modelcontextprotocol/sdk`) clients, with keys of two tenants (and of different scopes),
//! each limited to workspaces `team` and `shared`, run the six commands, list and read the resources, see
//! only their own tenant's files and are refused in another workspace (the server's
//! enforcement); a read-only key of the first tenant sees its files and cannot write.
//!
//! The clients come as for `mcp_official_clients.rs` (`CONTEXTQ_MCP_PYTHON`,
//! `CONTEXTQ_MCP_TS_SDK`, required in CI by `CONTEXTQ_MCP_CLIENT_TESTS=required`).
#![cfg(feature = "mcp")]

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{BIN, Killed};
use contextq_server::testing::{TestServer, spawn_serving};
use contextq_server::{Backend, Plan, Scope, admin};
use serde_json::{Value, json};

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
    // Two tenants, each with workspaces `team`, `shared` and `private`; each agent a key of its
    // own tenant limited to `team` and `shared` (so one folder per workspace; the second with
    // the admin scope too), and a read-only key of the first tenant. A server that used one
    // client's key for another fails every check.
    let reach = ["team".to_string(), "shared".to_string()];
    let mut keys = Vec::new();
    let mut tenants = Vec::new();
    for scopes in [
        &[Scope::Read, Scope::Write][..],
        &[Scope::Read, Scope::Write, Scope::Admin][..],
    ] {
        let tenant = server.tenant(Plan::Free, scopes, "team").await;
        server.workspace(&tenant.tenant_id, "private").await;
        server.workspace(&tenant.tenant_id, "shared").await;
        let key =
            admin::create_key_limited(&server.db, &tenant.tenant_id, scopes, None, Some(&reach))
                .await
                .unwrap();
        keys.push(key.api_key);
        tenants.push(tenant.tenant_id);
    }
    let read_only =
        admin::create_key_limited(&server.db, &tenants[0], &[Scope::Read], None, Some(&reach))
            .await
            .unwrap()
            .api_key;
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
    // The second agent, another tenant's: its own file only, never the first one's.
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
        &["memory:///memories/team/ts-kept.md"],
    );
    // The first tenant's read-only key: the first agent's file, and no write.
    let session = open_session(&url, &read_only).await;
    let view =
        json!({"name": "memory", "arguments": {"command": "view", "path": "/memories/team"}});
    let (status, answer) = rpc(&url, &read_only, &session, "tools/call", view).await;
    assert_eq!(status, 200, "{answer}");
    let listing = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    assert!(listing.contains("py-kept.md"), "{answer}");
    assert!(!listing.contains("ts-kept.md"), "{answer}");
    let create = json!({"name": "memory", "arguments": {"command": "create", "path": "/memories/team/ro.md", "file_text": "x"}});
    let (status, answer) = rpc(&url, &read_only, &session, "tools/call", create).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(answer.to_string().contains("read-only"), "{answer}");
    // Each tenant holds its own agent's files, in `team` only.
    for (tenant, want) in tenants.iter().zip(["py-", "ts-"]) {
        for (workspace, n) in [("team", 1), ("private", 0)] {
            let listed = contextq_server::store::contexts::list(
                &server.db,
                tenant,
                &contextq_server::store::contexts::ListQuery {
                    workspace: Some(workspace.into()),
                    within: None,
                    tag: None,
                    external_id_prefix: None,
                    limit: 10,
                    after: None,
                },
            )
            .await
            .unwrap();
            assert_eq!(listed.0.len(), n, "{workspace}: {listed:?}");
            assert!(
                listed.0.iter().all(|c| c.external_id.contains(want)),
                "{listed:?}"
            );
        }
    }
}

/// `contextq-memory serve` answers MCP at `/mcp` on its own listener, with the local key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_answers_mcp_at_slash_mcp() {
    let data = tempfile::tempdir().unwrap();
    let (child, url) = spawn_serving(
        Command::new(BIN)
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--mcp-sessions-per-key",
                "1",
            ])
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
    // The same gate as `mcp --http`: one session for this key, so a second closes the first.
    let first = open_session(&mcp, key).await;
    assert!(alive(&mcp, key, &first).await);
    let second = open_session(&mcp, key).await;
    assert!(!alive(&mcp, key, &first).await);
    assert!(alive(&mcp, key, &second).await);
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

/// One raw MCP request: `method` on `url` with `key` as the bearer, `session` as
/// `Mcp-Session-Id`, `body` as JSON and `headers`.
async fn mcp_request(
    url: &str,
    method: reqwest::Method,
    key: &str,
    session: Option<&str>,
    body: Option<Value>,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .request(method, url)
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-06-18");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap()
}

/// A JSON-RPC request `method` with `params` on `session`: the status and the JSON-RPC answer
/// (from the event stream), if any.
async fn rpc(url: &str, key: &str, session: &str, method: &str, params: Value) -> (u16, Value) {
    let body =
        json!({"jsonrpc": "2.0", "id": fastrand::u32(..), "method": method, "params": params});
    let r = mcp_request(
        url,
        reqwest::Method::POST,
        key,
        Some(session),
        Some(body),
        &[],
    )
    .await;
    let status = r.status().as_u16();
    let text = r.text().await.unwrap();
    let answer = text
        .lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
        .unwrap_or_else(|| json!({"raw": text}));
    (status, answer)
}

/// An initialised session of `key`: its id.
async fn open_session(url: &str, key: &str) -> String {
    let r = initialize(url, Some(key), None).await.unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let id = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let _ = r.text().await;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = mcp_request(url, reqwest::Method::POST, key, Some(&id), Some(note), &[]).await;
    assert_eq!(r.status(), 202);
    id
}

/// Waits until a request of `key` on `session` is refused with 401 (at most `within`): the
/// status of the last try.
async fn refused_within(url: &str, key: &str, session: &str, within: std::time::Duration) -> u16 {
    let started = std::time::Instant::now();
    loop {
        let (status, _) = rpc(url, key, session, "tools/list", json!({})).await;
        if status == 401 || started.elapsed() >= within {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A session belongs to the key that opened it: another tenant's valid key holding its id is
/// answered as for an unknown session on POST, GET (resume) and DELETE, and the session lives
/// on; its own key, once revoked or expired, is 401 on it at once. Ids are 256 random bits of
/// the gate's own, never rmcp's, and never in the log (even with rmcp's message dumps on).
async fn a_session_belongs_to_the_key_that_opened_it(b: contextq_server::Backend) {
    let server = TestServer::start(b).await;
    let a = server
        .tenant(Plan::Free, &[Scope::Read, Scope::Write], "a")
        .await;
    let other = server
        .tenant(Plan::Free, &[Scope::Read, Scope::Write], "b")
        .await;
    let log = tempfile::NamedTempFile::new().unwrap();
    let (child, url) = contextq_server::testing::spawn_serving_logged(
        Command::new(BIN)
            .args(["mcp", "--http", "127.0.0.1:0"])
            .env("CONTEXT_API_URL", server.url())
            // rmcp named: its dumps of every message on (logs::init keeps them off otherwise).
            .env("RUST_LOG", "trace,rmcp=trace")
            .env_remove("CONTEXT_API_KEY"),
        log.reopen().unwrap().into(),
    );
    let _child = Killed(child);
    let session = open_session(&url, &a.api_key).await;
    let create = json!({"name": "memory", "arguments": {"command": "create", "path": "/memories/a/secret.md", "file_text": "the staging password is hunter2\n"}});
    let (status, answer) = rpc(&url, &a.api_key, &session, "tools/call", create).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"]["isError"], false, "{answer}");

    // Another tenant's key with A's session id: exactly what an unknown id gets.
    let unknown = "0".repeat(64);
    let mut answers = Vec::new();
    for id in [session.as_str(), unknown.as_str()] {
        let view = json!({"name": "memory", "arguments": {"command": "view", "path": "/memories/a/secret.md"}});
        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": view});
        let mut seen = Vec::new();
        for (method, body, headers) in [
            (reqwest::Method::POST, Some(call), &[][..]),
            (reqwest::Method::GET, None, &[("last-event-id", "0/0")][..]),
            (reqwest::Method::DELETE, None, &[][..]),
        ] {
            let r = mcp_request(&url, method, &other.api_key, Some(id), body, headers).await;
            let status = r.status().as_u16();
            let text = r.text().await.unwrap();
            assert!(!text.contains("hunter2"), "{text}");
            seen.push((status, text));
        }
        answers.push(seen);
    }
    assert_eq!(
        answers[0], answers[1],
        "A's session answers B as an unknown one does"
    );
    assert!(answers[0].iter().all(|(s, _)| *s == 404), "{answers:?}");
    // A's session lives on, and still reads A's file.
    let view = json!({"name": "memory", "arguments": {"command": "view", "path": "/memories/a/secret.md"}});
    let (status, answer) = rpc(&url, &a.api_key, &session, "tools/call", view).await;
    assert_eq!(status, 200);
    assert!(answer.to_string().contains("hunter2"), "{answer}");
    // memory_search answers each key from its own tenant only.
    let search = json!({"name": "memory_search", "arguments": {"query": "staging password"}});
    let (status, answer) = rpc(&url, &a.api_key, &session, "tools/call", search.clone()).await;
    assert_eq!(status, 200);
    assert!(
        answer.to_string().contains("/memories/a/secret.md"),
        "{answer}"
    );
    let b_session = open_session(&url, &other.api_key).await;
    let (status, answer) = rpc(&url, &other.api_key, &b_session, "tools/call", search).await;
    assert_eq!(status, 200);
    assert!(!answer.to_string().contains("hunter2"), "{answer}");
    assert!(
        answer.to_string().contains("No files in /memories match"),
        "{answer}"
    );

    // Revoked: refused on its own session from the next request (PostgreSQL: once the server
    // hears the notification, milliseconds).
    admin::revoke_key(&server.db, &a.api_key).await.unwrap();
    let within = match b {
        contextq_server::Backend::Sqlite => std::time::Duration::ZERO,
        contextq_server::Backend::Postgres => std::time::Duration::from_secs(2),
    };
    assert_eq!(
        refused_within(&url, &a.api_key, &session, within).await,
        401
    );

    // Expired: refused from its expiry on, though it was accepted a moment before.
    let soon = admin::create_key_limited(
        &server.db,
        &other.tenant_id,
        &[Scope::Read],
        Some(std::time::Duration::from_millis(1500)),
        None,
    )
    .await
    .unwrap();
    let short = open_session(&url, &soon.api_key).await;
    assert_eq!(
        rpc(&url, &soon.api_key, &short, "tools/list", json!({}))
            .await
            .0,
        200
    );
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    let r = mcp_request(
        &url,
        reqwest::Method::POST,
        &soon.api_key,
        Some(&short),
        Some(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})),
        &[],
    )
    .await;
    assert_eq!(r.status(), 401);
    let text = r.text().await.unwrap();
    assert!(
        text.contains("expired"),
        "ContextQ's reason is passed on: {text}"
    );

    // 256 bits of the gate's own (rmcp's are UUIDs).
    assert_eq!(session.len(), 64, "{session}");
    assert!(session.chars().all(|c| c.is_ascii_hexdigit()), "{session}");
    drop(_child);
    let log = std::fs::read_to_string(log.path()).unwrap();
    assert!(
        log.contains("streamable_http_session"),
        "rmcp logged at trace level: {}",
        log.len()
    );
    for secret in [&session, &short, &a.api_key, &soon.api_key] {
        assert!(!log.contains(secret.as_str()), "the log holds {secret}");
    }
}

contextq_server::database_tests!(a_session_belongs_to_the_key_that_opened_it);

/// `mcp --http` in front of `server` with `flags`: the child and the MCP URL.
fn mcp_http(server: &TestServer, flags: &[&str]) -> (Killed, String) {
    let (child, url) = spawn_serving(
        Command::new(BIN)
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(flags)
            .env("CONTEXT_API_URL", server.url())
            .env_remove("CONTEXT_API_KEY"),
    );
    (Killed(child), url)
}

/// Whether `session` of `key` still answers.
async fn alive(url: &str, key: &str, session: &str) -> bool {
    match rpc(url, key, session, "tools/list", json!({})).await.0 {
        200 => true,
        404 => false,
        other => panic!("tools/list answered {other}"),
    }
}

/// An `initialize` of `key` refused for want of room: 429 with `Retry-After`; its message.
async fn refused_session(url: &str, key: &str) -> String {
    let r = initialize(url, Some(key), None).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "5");
    r.text().await.unwrap()
}

/// Sessions are capped per key and in all: past its cap a key closes its own longest idle
/// session (never another key's) or, all of them in use, is refused with 429; when every place
/// is taken, a key below its fair share still gets in, one at or above it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_are_capped_per_key_and_in_all() {
    let server = TestServer::start(contextq_server::Backend::Sqlite).await;
    let scopes = [Scope::Read, Scope::Write];
    let (a, b, c) = (
        server.tenant(Plan::Free, &scopes, "a").await.api_key,
        server.tenant(Plan::Free, &scopes, "b").await.api_key,
        server.tenant(Plan::Free, &scopes, "c").await.api_key,
    );

    // Per key: 2.
    let (child, url) = mcp_http(&server, &["--mcp-sessions-per-key", "2"]);
    let b1 = open_session(&url, &b).await;
    let a1 = open_session(&url, &a).await;
    let a2 = open_session(&url, &a).await;
    let a3 = open_session(&url, &a).await;
    assert!(
        !alive(&url, &a, &a1).await,
        "a key's third session closes its longest idle"
    );
    assert!(alive(&url, &b, &b1).await, "and never another key's");
    // Both of A's in use (a stream open on each): the next is refused.
    let mut streams = Vec::new();
    for s in [&a2, &a3] {
        let r = mcp_request(&url, reqwest::Method::GET, &a, Some(s), None, &[]).await;
        assert_eq!(r.status(), 200);
        streams.push(r);
    }
    let message = refused_session(&url, &a).await;
    assert!(message.contains("holds 2 MCP sessions"), "{message}");
    assert!(alive(&url, &b, &b1).await);
    assert!(alive(&url, &a, &a2).await && alive(&url, &a, &a3).await);
    // A stream closed: that session is idle again, and gives its place.
    drop(streams);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let _a4 = open_session(&url, &a).await;
    drop(child);

    // In all: 4.
    let (_child, url) = mcp_http(&server, &["--mcp-sessions", "4"]);
    let b1 = open_session(&url, &b).await;
    let mut mine = Vec::new();
    for _ in 0..3 {
        mine.push(open_session(&url, &a).await);
    }
    // Full. C holds none (fair share 4 / 3 keys = 1): it takes the place of A's longest idle.
    let c1 = open_session(&url, &c).await;
    assert!(!alive(&url, &a, &mine[0]).await);
    assert!(alive(&url, &b, &b1).await && alive(&url, &c, &c1).await);
    // A holds 2, past its share: refused; so is C at its share.
    refused_session(&url, &a).await;
    refused_session(&url, &c).await;
    // A ends one of its own: room again.
    let r = mcp_request(&url, reqwest::Method::DELETE, &a, Some(&mine[1]), None, &[]).await;
    assert_eq!(
        r.status(),
        204,
        "a session's end is 204, which clients take as clean"
    );
    assert!(!alive(&url, &a, &mine[1]).await);
    let _again = open_session(&url, &a).await;
    assert!(alive(&url, &b, &b1).await && alive(&url, &c, &c1).await);
}

/// A session that never confirms its `initialize`, and one idle with no stream open, end after
/// their timeouts; one holding a stream open does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unconfirmed_and_idle_sessions_end() {
    let server = TestServer::start(contextq_server::Backend::Sqlite).await;
    let a = server.tenant(Plan::Free, &[Scope::Read], "a").await.api_key;
    let (_child, url) = mcp_http(
        &server,
        &[
            "--mcp-session-confirm-secs",
            "1",
            "--mcp-session-idle-secs",
            "2",
        ],
    );
    let r = initialize(&url, Some(&a), None).await.unwrap();
    let unconfirmed = r.headers()["mcp-session-id"].to_str().unwrap().to_string();
    let idle = open_session(&url, &a).await;
    let streaming = open_session(&url, &a).await;
    let stream = mcp_request(&url, reqwest::Method::GET, &a, Some(&streaming), None, &[]).await;
    assert_eq!(stream.status(), 200);
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    assert!(
        !alive(&url, &a, &unconfirmed).await,
        "unconfirmed after 1 s"
    );
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    assert!(!alive(&url, &a, &idle).await, "idle after 2 s");
    assert!(alive(&url, &a, &streaming).await, "a stream open keeps it");
    drop(stream);
}

/// Whether `stream` ends (the server closed it) within `within`.
async fn ends_within(stream: &mut reqwest::Response, within: std::time::Duration) -> bool {
    tokio::time::timeout(within, async {
        while let Ok(Some(_)) = stream.chunk().await {}
    })
    .await
    .is_ok()
}

/// A key revoked while its client makes no request, only holding a stream open: the sweep asks
/// about the key again (every `--mcp-key-recheck-secs`), ends its session and the stream with
/// it; the sessions of a key still valid, asked about as often, go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_key_s_quiet_sessions_end_without_a_request() {
    let server = TestServer::start(contextq_server::Backend::Sqlite).await;
    let a = server.tenant(Plan::Free, &[Scope::Read], "a").await.api_key;
    let b = server.tenant(Plan::Free, &[Scope::Read], "b").await.api_key;
    let (_child, url) = mcp_http(&server, &["--mcp-key-recheck-secs", "1"]);
    let (sa, sb) = (open_session(&url, &a).await, open_session(&url, &b).await);
    let get = reqwest::Method::GET;
    let mut stream_a = mcp_request(&url, get.clone(), &a, Some(&sa), None, &[]).await;
    let mut stream_b = mcp_request(&url, get, &b, Some(&sb), None, &[]).await;
    assert_eq!(
        (stream_a.status().as_u16(), stream_b.status().as_u16()),
        (200, 200)
    );
    // Rechecked more than once while valid: open still.
    let second = std::time::Duration::from_secs(1);
    assert!(!ends_within(&mut stream_a, 3 * second).await);
    admin::revoke_key(&server.db, &a).await.unwrap();
    assert!(
        ends_within(&mut stream_a, 10 * second).await,
        "A's stream still open 10 s after its key was revoked"
    );
    assert!(!ends_within(&mut stream_b, 3 * second).await);
    assert!(alive(&url, &b, &sb).await);
    assert_eq!(
        refused_within(&url, &a, &sa, std::time::Duration::ZERO).await,
        401
    );
}

/// A quiet key is asked about once per `--mcp-key-recheck-secs`, not on every sweep (four a
/// second here): counted at a proxy in front of ContextQ while its session holds a stream open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_key_is_rechecked_once_per_interval() {
    let server = TestServer::start(contextq_server::Backend::Sqlite).await;
    let a = server.tenant(Plan::Free, &[Scope::Read], "a").await.api_key;
    let proxy = contextq_memory_tool::testing::proxy::Proxy::start(server.url()).await;
    let (child, url) = spawn_serving(
        Command::new(BIN)
            .args([
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--mcp-key-recheck-secs",
                "2",
            ])
            .env("CONTEXT_API_URL", &proxy.url)
            .env_remove("CONTEXT_API_KEY"),
    );
    let _child = Killed(child);
    let session = open_session(&url, &a).await;
    let stream = mcp_request(&url, reqwest::Method::GET, &a, Some(&session), None, &[]).await;
    assert_eq!(stream.status(), 200);
    proxy.take_log();
    tokio::time::sleep(std::time::Duration::from_millis(5_000)).await;
    let checks = proxy
        .take_log()
        .iter()
        .filter(|r| r.starts_with("GET /api/workspaces"))
        .count();
    assert!(
        (1..=3).contains(&checks),
        "{checks} checks of a quiet key in 5 s, rechecked every 2 s"
    );
    drop(stream);
}

/// Only a POST without a session id opens one: a GET or DELETE without one never takes a
/// place, so it cannot close the key's idle session to make room (a key at its cap of 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_a_post_without_a_session_opens_one() {
    let server = TestServer::start(contextq_server::Backend::Sqlite).await;
    let a = server.tenant(Plan::Free, &[Scope::Read], "a").await.api_key;
    let (_child, url) = mcp_http(&server, &["--mcp-sessions-per-key", "1"]);
    let session = open_session(&url, &a).await;
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = mcp_request(&url, method.clone(), &a, None, None, &[]).await;
        assert!(
            r.status().is_client_error(),
            "{method} without a session: {}",
            r.status()
        );
        assert!(r.headers().get("mcp-session-id").is_none());
        assert!(
            alive(&url, &a, &session).await,
            "{method} without a session closed one"
        );
    }
}

/// Resident memory of process `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Opens a session of `key`, confirms it and lists the resources: how long that took. Then
/// ends the session, as a client done with it does.
async fn open_and_list(url: &str, key: &str) -> std::time::Duration {
    let started = std::time::Instant::now();
    let session = open_session(url, key).await;
    let (status, answer) = rpc(url, key, &session, "resources/list", json!({})).await;
    assert_eq!(status, 200, "{answer}");
    assert!(answer["result"]["resources"].is_array(), "{answer}");
    let took = started.elapsed();
    let r = mcp_request(url, reqwest::Method::DELETE, key, Some(&session), None, &[]).await;
    assert_eq!(r.status(), 204);
    took
}

/// Ten thousand `initialize` requests of one key, none ever closed: the process's resident
/// memory stays within [`FLOOD_RSS_BOUND_MIB`] of where it started, and another key opens a
/// session and lists its resources within 2 s during the flood and after it, its first
/// session untouched (docs/reliability.md has the figures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_sessions_from_one_key_stays_bounded() {
    const FLOOD_RSS_BOUND_MIB: u64 = 16;
    let server = TestServer::start(contextq_server::Backend::Sqlite).await;
    let flooder = server.tenant(Plan::Free, &[Scope::Read], "a").await.api_key;
    let other = server
        .tenant(Plan::Free, &[Scope::Read, Scope::Write], "b")
        .await
        .api_key;
    let (child, url) = mcp_http(&server, &[]);
    let pid = child.0.id();
    let first = open_session(&url, &other).await;
    for _ in 0..20 {
        open_and_list(&url, &other).await;
    }
    let start_kib = rss_kib(pid);

    let sent = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut flood = Vec::new();
    for _ in 0..8 {
        let (url, key, sent) = (url.clone(), flooder.clone(), sent.clone());
        flood.push(tokio::spawn(async move {
            let http = reqwest::Client::new();
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "flood", "version": "1"}}});
            while sent.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 10_000 {
                let r = http
                    .post(&url)
                    .bearer_auth(&key)
                    .header("accept", "application/json, text/event-stream")
                    .json(&body)
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                let _ = r.bytes().await;
            }
        }));
    }
    let mut during = Vec::new();
    let mut peak_kib = start_kib;
    while sent.load(std::sync::atomic::Ordering::SeqCst) < 10_000 {
        during.push(open_and_list(&url, &other).await);
        peak_kib = peak_kib.max(rss_kib(pid));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    for task in flood {
        task.await.unwrap();
    }
    let after = open_and_list(&url, &other).await;
    let end_kib = rss_kib(pid);
    peak_kib = peak_kib.max(end_kib);
    let slowest = during.iter().max().copied().unwrap_or_default();
    eprintln!(
        "flood of 10,000 initialize: RSS {start_kib} KiB -> peak {peak_kib} KiB, end {end_kib} KiB; \
         another key's open + list during it: {} tries, slowest {slowest:?}; after: {after:?}",
        during.len()
    );
    assert!(!during.is_empty());
    assert!(slowest < std::time::Duration::from_secs(2), "{slowest:?}");
    assert!(after < std::time::Duration::from_secs(2), "{after:?}");
    assert!(
        peak_kib.saturating_sub(start_kib) < FLOOD_RSS_BOUND_MIB * 1024,
        "RSS grew from {start_kib} KiB to {peak_kib} KiB"
    );
    assert!(
        alive(&url, &other, &first).await,
        "another key's session was evicted"
    );
}

/// One store, one path model, whatever the transport: a file written through `exec` (the
/// embedded store, pinned to its workspace) is `/memories/user.md` over `mcp --http` and over
/// `serve`'s `/mcp` too; `mcp --http` answers `/health` and `/ready` without a key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_transport_shows_the_same_paths() {
    let data = tempfile::tempdir().unwrap();
    let out = common::run_with_input(
        common::embedded(data.path()).arg("exec"),
        br#"{"command": "create", "path": "/memories/user.md", "file_text": "likes tea"}"#,
    );
    assert!(out.status.success(), "{out:?}");
    let embedded: Value =
        serde_json::from_slice(&std::fs::read(data.path().join("embedded.json")).unwrap()).unwrap();
    let key = embedded["apiKey"].as_str().unwrap().to_string();
    let listed = |url: String| {
        let key = key.clone();
        async move {
            let session = open_session(&url, &key).await;
            let (_, answer) = rpc(&url, &key, &session, "resources/list", json!({})).await;
            answer["result"]["resources"]
                .as_array()
                .unwrap()
                .iter()
                .map(|r| r["uri"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    let (child, url) =
        spawn_serving(common::embedded(data.path()).args(["mcp", "--http", "127.0.0.1:0"]));
    let child = Killed(child);
    assert_eq!(listed(url.clone()).await, ["memory:///memories/user.md"]);
    let base = url.trim_end_matches("/mcp");
    for probe in ["health", "ready"] {
        let r = reqwest::get(format!("{base}/{probe}")).await.unwrap();
        assert_eq!(r.status(), 200, "/{probe}");
    }
    drop(child);
    let (child, url) =
        spawn_serving(common::embedded(data.path()).args(["serve", "--listen", "127.0.0.1:0"]));
    let _child = Killed(child);
    assert_eq!(
        listed(format!("{url}/mcp")).await,
        ["memory:///memories/user.md"]
    );
}

/// `mcp --http`'s `/ready` is its upstream's: 200 while the ContextQ behind it is ready, 503
/// with a reason within a second once it stops answering (not a timeout, not 200).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_http_ready_reports_its_upstream() {
    let server = TestServer::start(Backend::Sqlite).await;
    // A port that answers nothing: a listener that never accepts (held, never read).
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_url = format!("http://{}", silent.local_addr().unwrap());
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(1500))
        .build()
        .unwrap();
    for (upstream, want) in [(server.url().to_string(), 200), (silent_url, 503)] {
        let (child, url) = spawn_serving(
            Command::new(BIN)
                .args(["mcp", "--http", "127.0.0.1:0"])
                .env("CONTEXT_API_URL", &upstream)
                .env_remove("CONTEXT_API_KEY"),
        );
        let _child = Killed(child);
        let ready = format!("{}/ready", url.trim_end_matches("/mcp"));
        let r = client
            .get(&ready)
            .send()
            .await
            .expect("answered within 1.5 s");
        assert_eq!(r.status(), want, "{upstream}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["upstream"], upstream.as_str(), "{body}");
        if want == 503 {
            assert!(
                body["reasons"][0].as_str().unwrap().contains("within"),
                "{body}"
            );
        }
    }
    drop(silent);
}
