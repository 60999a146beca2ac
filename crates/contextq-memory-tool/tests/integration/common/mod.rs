//! Test harness: contextq-server in-process on 127.0.0.1:0 over a fresh database (temp-file
//! SQLite or a new PostgreSQL database, see `contextq_server::testing`), tenants, and a loopback
//! proxy that counts requests, injects faults or hides the contract's extensions.
#![allow(dead_code)]

use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, RetryConfig};
use contextq_server::testing;
use contextq_server::{Backend, Plan, Scope};
use std::time::Duration;

/// The shared test server (`contextq_server::testing`).
pub struct Server {
    pub url: String,
    pub db: contextq_server::Db,
    pub backend: Backend,
    inner: testing::TestServer,
}

impl Server {
    pub async fn start(backend: Backend) -> Server {
        Self::start_with_options(backend, contextq_server::DbOptions::default()).await
    }

    /// A server over a database opened with `options`.
    pub async fn start_with_options(
        backend: Backend,
        options: contextq_server::DbOptions,
    ) -> Server {
        let inner = testing::TestServer::start_with_options(
            backend,
            contextq_server::ServerConfig::default(),
            options,
        )
        .await;
        Server {
            url: inner.url().to_string(),
            db: inner.db.clone(),
            backend,
            inner,
        }
    }

    /// A tenant with a key of `scopes` and workspace `ws`; returns (tenant id, key).
    pub async fn tenant(&self, plan: Plan, scopes: &[Scope], ws: &str) -> (String, String) {
        let t = self.inner.tenant(plan, scopes, ws).await;
        (t.tenant_id, t.api_key)
    }

    pub async fn workspace(&self, tenant: &str, ws: &str) {
        self.inner.workspace(tenant, ws).await;
    }

    /// The content of the row at `external_id`, read with `key` past the tool.
    pub async fn stored(&self, key: &str, external_id: &str) -> Option<String> {
        content(&self.url, key, external_id).await
    }

    /// The memory tool with `key`, pinned to workspace `ws`.
    pub fn tool(&self, key: &str) -> contextq_memory_tool::ContextQMemoryTool {
        contextq_memory_tool::contextq_memory_tool(options(&self.url, key).workspace("ws")).unwrap()
    }
}

pub const ALL: &[Scope] = &[Scope::Read, Scope::Write, Scope::Admin];

/// Options for `url` with `key`, fast retries for tests.
pub fn options(url: &str, key: &str) -> ContextQMemoryToolOptions {
    ContextQMemoryToolOptions::new(key).base_url(url).retry(
        RetryConfig::default()
            .initial_backoff(Duration::from_millis(10))
            .max_backoff(Duration::from_millis(100))
            .retry_timeout(Duration::from_secs(10)),
    )
}

pub fn ws_name() -> String {
    format!("w{:012x}", fastrand::u64(..) & 0xffff_ffff_ffff)
}

/// Runs one tool input and keeps the typed error (with its effects).
pub async fn handle<H: contextq_memory_tool::MemoryToolHandlers>(
    tool: &H,
    input: serde_json::Value,
) -> Result<String, contextq_memory_tool::ToolError> {
    let command = contextq_memory_tool::Command::from_value(&input).expect("a valid command");
    tool.handle(command).await
}

/// `GET {url}{path}` with `key`.
async fn get(url: &str, key: &str, path: &str) -> reqwest::Response {
    reqwest::Client::new()
        .get(format!("{url}{path}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
}

/// The JSON answer to `GET {url}{path}`, which must be 200.
pub async fn get_json(url: &str, key: &str, path: &str) -> serde_json::Value {
    let r = get(url, key, path).await;
    assert_eq!(r.status(), 200, "GET {path}");
    r.json().await.unwrap()
}

/// The row at `external_id`, read from the server directly (bypassing any proxy), if any.
pub async fn row(url: &str, key: &str, external_id: &str) -> Option<serde_json::Value> {
    let encoded: String =
        percent_encoding::utf8_percent_encode(external_id, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    let r = get(url, key, &format!("/api/contexts/by-external/{encoded}")).await;
    match r.status().as_u16() {
        200 => Some(r.json().await.unwrap()),
        404 => None,
        s => panic!("GET {external_id}: {s}"),
    }
}

/// The content of the row at `external_id`, read directly, if any.
pub async fn content(url: &str, key: &str, external_id: &str) -> Option<String> {
    row(url, key, external_id)
        .await
        .map(|v| v["content"].as_str().unwrap().to_string())
}

/// Writes `rows` (ContextInput JSON) to the server directly, 100 per bulk upsert.
pub async fn seed_rows(url: &str, key: &str, rows: &[serde_json::Value]) {
    let http = reqwest::Client::new();
    for chunk in rows.chunks(100) {
        let r = http
            .post(format!("{url}/api/contexts/bulk-upsert"))
            .bearer_auth(key)
            .json(&serde_json::json!({ "contexts": chunk }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{:?}", r.text().await);
    }
}

/// Runs `input` through `tool` and returns its text; fails the test on an error result.
pub async fn ok<H: contextq_memory_tool::MemoryToolHandlers>(
    tool: &H,
    input: serde_json::Value,
) -> String {
    let r = tool.execute(input.clone()).await;
    assert!(!r.is_error, "{input}: {}", r.content);
    r.content
}

/// Creates `path` with `text` through `tool`; panics unless it succeeded.
pub async fn create<H: contextq_memory_tool::MemoryToolHandlers>(tool: &H, path: &str, text: &str) {
    let input = serde_json::json!({"command": "create", "path": path, "file_text": text});
    ok(tool, input).await;
}

/// A moment between two changes (the server's times have milliseconds), as RFC 3339.
pub async fn moment() -> chrono::DateTime<chrono::Utc> {
    tokio::time::sleep(Duration::from_millis(15)).await;
    let t = chrono::Utc::now();
    tokio::time::sleep(Duration::from_millis(15)).await;
    t
}
