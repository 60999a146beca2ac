//! Test harness: a real server on 127.0.0.1:0 over a fresh database (temp-file SQLite or a new
//! PostgreSQL database, see `contextq_server::testing`), and a small HTTP client.
#![allow(dead_code)]

use contextq_server::model::{Plan, Scope};
use contextq_server::testing::TestDatabase;
use contextq_server::{AppState, Backend, Db, DbOptions, ServerConfig, admin};
use reqwest::{Method, StatusCode};
use serde_json::Value;

pub struct TestServer {
    pub url: String,
    pub db: Db,
    pub database_url: String,
    pub backend: Backend,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    handle: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    _database: TestDatabase,
}

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
        Self::start_with(backend, ServerConfig::default()).await
    }

    pub async fn start_with(backend: Backend, config: ServerConfig) -> TestServer {
        let database = TestDatabase::fresh(backend).await;
        let database_url = database.url.clone();
        let db = Db::connect(&database_url, &DbOptions::default())
            .await
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let state = AppState::new(db.clone(), config);
        let handle = tokio::spawn(contextq_server::serve(listener, state, async {
            let _ = rx.await;
        }));
        TestServer {
            url,
            db,
            database_url,
            backend,
            shutdown: Some(tx),
            handle: Some(handle),
            _database: database,
        }
    }

    /// A tenant with a key of `scopes` and a workspace `ws`.
    pub async fn tenant(&self, plan: Plan, scopes: &[Scope]) -> Tenant {
        let name = format!("t{:016x}", fastrand::u64(..));
        let tenant_id = admin::create_tenant(&self.db, &name, plan).await.unwrap();
        let key = admin::create_key(&self.db, &tenant_id, None, scopes)
            .await
            .unwrap();
        admin::create_workspace(&self.db, &tenant_id, "ws", "Workspace")
            .await
            .unwrap();
        Tenant {
            tenant_id,
            client: Api::new(&self.url, &key.api_key),
            key_id: key.key_id,
        }
    }

    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(h) = self.handle.take() {
            h.await.unwrap().unwrap();
        }
    }
}

pub struct Tenant {
    pub tenant_id: String,
    pub key_id: String,
    pub client: Api,
}

pub const ALL: &[Scope] = &[Scope::Read, Scope::Write, Scope::Admin];
pub const RW: &[Scope] = &[Scope::Read, Scope::Write];

#[derive(Clone)]
pub struct Api {
    pub base: String,
    pub key: String,
    pub http: reqwest::Client,
}

pub struct Reply {
    pub status: StatusCode,
    pub etag: Option<String>,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Reply {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }
}

impl Api {
    pub fn new(base: &str, key: &str) -> Api {
        Api {
            base: base.to_string(),
            key: key.to_string(),
            http: reqwest::Client::new(),
        }
    }

    pub fn with_key(&self, key: &str) -> Api {
        Api::new(&self.base, key)
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        if_match: Option<i64>,
    ) -> Reply {
        let mut req = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(&self.key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        if let Some(v) = if_match {
            req = req.header("If-Match", format!("\"{v}\""));
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let etag = headers.get("etag").map(|v| v.to_str().unwrap().to_string());
        let text = resp.text().await.unwrap();
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Reply {
            status,
            etag,
            headers,
            body,
        }
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(Method::GET, path, None, None).await
    }
    pub async fn post(&self, path: &str, body: Value) -> Reply {
        self.send(Method::POST, path, Some(body), None).await
    }
    pub async fn put(&self, path: &str, body: Value, if_match: Option<i64>) -> Reply {
        self.send(Method::PUT, path, Some(body), if_match).await
    }
    pub async fn delete(&self, path: &str, if_match: Option<i64>) -> Reply {
        self.send(Method::DELETE, path, None, if_match).await
    }

    /// Upserts one context; returns the reply.
    pub async fn upsert(&self, external_id: &str, content: &str, tags: &[&str]) -> Reply {
        self.post(
            "/api/contexts/bulk-upsert",
            serde_json::json!({"contexts": [{"externalId": external_id, "workspace": "ws", "type": "reference", "content": content, "tags": tags}]}),
        )
        .await
    }
}

/// `externalId` as one percent-encoded path segment.
pub fn seg(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}
