//! Test harness: the shared test server (`contextq_server::testing`: a real server on
//! 127.0.0.1:0 over a fresh temp-file SQLite or PostgreSQL database), and a small HTTP client.
#![allow(dead_code)]

use contextq_api::ErrorCode;
use contextq_server::testing;
use contextq_server::{Backend, Db, Plan, Scope, ServerConfig};
use reqwest::{Method, StatusCode};
use serde_json::Value;

/// The shared test server (`contextq_server::testing`) with this suite's HTTP client.
pub struct TestServer {
    pub url: String,
    pub db: Db,
    pub database_url: String,
    pub backend: Backend,
    inner: testing::TestServer,
}

impl TestServer {
    pub async fn start(backend: Backend) -> TestServer {
        Self::start_with(backend, ServerConfig::default()).await
    }

    pub async fn start_with(backend: Backend, config: ServerConfig) -> TestServer {
        Self::start_with_options(backend, config, contextq_server::DbOptions::default()).await
    }

    pub async fn start_with_options(
        backend: Backend,
        config: ServerConfig,
        options: contextq_server::DbOptions,
    ) -> TestServer {
        let inner = testing::TestServer::start_with_options(backend, config, options).await;
        TestServer {
            url: inner.url().to_string(),
            db: inner.db.clone(),
            database_url: inner.database.url.clone(),
            backend,
            inner,
        }
    }

    /// A tenant with a key of `scopes` and a workspace `ws`.
    pub async fn tenant(&self, plan: Plan, scopes: &[Scope]) -> Tenant {
        let t = self.inner.tenant(plan, scopes, "ws").await;
        Tenant {
            tenant_id: t.tenant_id,
            client: Api::new(&self.url, &t.api_key),
            key_id: t.key_id,
        }
    }

    /// A new key of a tenant with `scopes`, limited to `workspaces` (extension
    /// `workspace-keys`): its secret.
    pub async fn limited_key(
        &self,
        tenant_id: &str,
        scopes: &[Scope],
        workspaces: &[&str],
    ) -> contextq_server::admin::NewKey {
        let workspaces: Vec<String> = workspaces.iter().map(|w| w.to_string()).collect();
        contextq_server::admin::create_key_limited(
            &self.db,
            tenant_id,
            scopes,
            None,
            Some(&workspaces),
        )
        .await
        .expect("a limited key")
    }

    /// A new workspace `slug` of a tenant.
    pub async fn workspace(&self, tenant_id: &str, slug: &str) {
        self.inner.workspace(tenant_id, slug).await;
    }

    /// The running server's one-time sign-in tokens.
    pub fn sign_in(&self) -> &contextq_server::ui::SignInTokens {
        self.inner.sign_in()
    }

    pub async fn stop(self) {
        self.inner.stop().await;
    }

    /// Checks that the database is [`consistent`], then stops.
    pub async fn stop_consistent(self) {
        consistent(&self.db).await;
        self.stop().await;
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

    /// Asserts that the answer is the error `code`: its status and its code in the envelope.
    #[track_caller]
    pub fn assert_error(&self, code: ErrorCode) {
        let got = (self.status.as_u16(), self.code());
        assert_eq!(got, (code.status(), code.as_str()), "{:?}", self.body);
    }
}

/// One keyed write, as a value: a repeat is the same request sent again ([`Api::once`]).
#[derive(Clone, Debug)]
pub struct Keyed {
    method: Method,
    path: String,
    body: Option<Value>,
    if_match: Option<i64>,
    key: String,
}

impl Keyed {
    /// `POST path` with `body` under `Idempotency-Key: key`.
    pub fn post(path: &str, body: Value, key: &str) -> Keyed {
        Keyed {
            method: Method::POST,
            path: path.to_string(),
            body: Some(body),
            if_match: None,
            key: key.to_string(),
        }
    }

    /// `PUT path` with `body` under `Idempotency-Key: key`.
    pub fn put(path: &str, body: Value, key: &str) -> Keyed {
        Keyed {
            method: Method::PUT,
            ..Keyed::post(path, body, key)
        }
    }

    /// `DELETE path` under `Idempotency-Key: key`.
    pub fn delete(path: &str, key: &str) -> Keyed {
        Keyed {
            method: Method::DELETE,
            body: None,
            ..Keyed::post(path, Value::Null, key)
        }
    }

    /// Its path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The request with `If-Match: "v"`.
    pub fn if_match(self, v: i64) -> Keyed {
        Keyed {
            if_match: Some(v),
            ..self
        }
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
        self.keyed(method, path, body, if_match, None).await
    }

    /// Sends `k`.
    pub async fn once(&self, k: &Keyed) -> Reply {
        let (method, body) = (k.method.clone(), k.body.clone());
        self.keyed(method, &k.path, body, k.if_match, Some(&k.key))
            .await
    }

    /// [`Api::send`] with an `Idempotency-Key` when given.
    pub async fn keyed(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        if_match: Option<i64>,
        key: Option<&str>,
    ) -> Reply {
        let mut req = self
            .http
            .request(method, format!("{}{}", self.base, path))
            .bearer_auth(&self.key);
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
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
    /// `PUT /api/contexts/:id` of `content` alone.
    pub async fn put_content(&self, id: &str, content: &str, if_match: Option<i64>) -> Reply {
        let path = format!("/api/contexts/{id}");
        self.put(&path, serde_json::json!({ "content": content }), if_match)
            .await
    }
    pub async fn delete(&self, path: &str, if_match: Option<i64>) -> Reply {
        self.send(Method::DELETE, path, None, if_match).await
    }

    /// `POST /api/contexts/by-external/:ext/edit` with `If-Match` and `Idempotency-Key` when
    /// given.
    pub async fn edit(
        &self,
        external_id: &str,
        body: Value,
        if_match: Option<i64>,
        idempotency_key: Option<&str>,
    ) -> Reply {
        let mut req = self
            .http
            .post(format!(
                "{}/api/contexts/by-external/{}/edit",
                self.base,
                seg(external_id)
            ))
            .bearer_auth(&self.key)
            .json(&body);
        if let Some(v) = if_match {
            req = req.header("If-Match", format!("\"{v}\""));
        }
        if let Some(k) = idempotency_key {
            req = req.header("Idempotency-Key", k);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let etag = headers.get("etag").map(|v| v.to_str().unwrap().to_string());
        let body = resp.json().await.unwrap_or(Value::Null);
        Reply {
            status,
            etag,
            headers,
            body,
        }
    }

    /// Upserts one context; returns the reply.
    /// The id of the context at `external_id` (which must be there).
    pub async fn id_of(&self, external_id: &str) -> String {
        let r = self
            .get(&format!("/api/contexts/by-external/{}", seg(external_id)))
            .await;
        assert_eq!(
            r.status,
            reqwest::StatusCode::OK,
            "{external_id}: {:?}",
            r.body
        );
        r.body["id"].as_str().expect("an id").to_string()
    }

    pub async fn upsert(&self, external_id: &str, content: &str, tags: &[&str]) -> Reply {
        self.post(
            "/api/contexts/bulk-upsert",
            serde_json::json!({"contexts": [{"externalId": external_id, "workspace": "ws", "type": "reference", "content": content, "tags": tags}]}),
        )
        .await
    }
}

/// The one integer `sql` selects.
pub async fn scalar(db: &Db, sql: &str) -> i64 {
    let row = sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(&mut *db.reader().await.unwrap())
        .await
        .unwrap();
    sqlx::Row::try_get::<i64, _>(&row, 0).unwrap()
}

/// `externalId` as one percent-encoded path segment.
pub fn seg(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

/// Appends to `tenant`'s chain, after its head (`seq`, `last`), a `workspace.create` row for
/// `entity_id` that is correctly hash-chained but carries `mac` (a forgery, or what a server
/// without the audit key wrote), and moves the head to it (its MAC cleared when
/// `clear_head_mac`). Returns the row's hash.
pub async fn append_chained_row(
    db: &Db,
    tenant: &str,
    (seq, last): (i64, Option<String>),
    entity_id: &str,
    mac: Option<String>,
    clear_head_mac: bool,
) -> String {
    let (detail, created_at) = (r#"{"slug":"forged"}"#, "2026-12-03T00:00:00.000Z");
    let hash = contextq_server::audit::Hashed {
        prev_hash: last.as_deref(),
        seq: seq + 1,
        tenant_id: tenant,
        api_key_id: None,
        action: "workspace.create",
        entity_type: "workspace",
        entity_id,
        detail,
        created_at,
    }
    .chain_hash();
    let sql = match db.backend() {
        Backend::Sqlite => {
            "INSERT INTO activity_logs (seq, tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
             VALUES ((SELECT MAX(seq) + 1 FROM activity_logs), $1, $2, NULL, 'workspace.create', 'workspace', $3, $4, $5, $6, $7, $8)"
        }
        Backend::Postgres => {
            "INSERT INTO activity_logs (tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
             VALUES ($1, $2, NULL, 'workspace.create', 'workspace', $3, $4, $5, $6, $7, $8)"
        }
    };
    sqlx::query(sql)
        .bind(tenant.to_string())
        .bind(seq + 1)
        .bind(entity_id.to_string())
        .bind(detail)
        .bind(created_at)
        .bind(last)
        .bind(hash.clone())
        .bind(mac)
        .execute(db.pool())
        .await
        .unwrap();
    let head = if clear_head_mac {
        "UPDATE audit_heads SET seq = $1, last_hash = $2, mac = NULL WHERE tenant_id = $3"
    } else {
        "UPDATE audit_heads SET seq = $1, last_hash = $2 WHERE tenant_id = $3"
    };
    sqlx::query(head)
        .bind(seq + 1)
        .bind(hash.clone())
        .bind(tenant.to_string())
        .execute(db.pool())
        .await
        .unwrap();
    hash
}

/// Runs one SQL statement with text parameters `$1, $2, ...` straight on the database (what
/// someone who can write the database does); returns the rows it changed.
pub async fn sql(db: &Db, statement: &str, binds: &[&str]) -> u64 {
    let mut q = sqlx::query(sqlx::AssertSqlSafe(statement.to_string()));
    for b in binds {
        q = q.bind(b.to_string());
    }
    q.execute(db.pool()).await.unwrap().rows_affected()
}

/// The files of the SQLite database (itself, `-wal`, `-shm`, `-journal`) whose bytes hold `text`.
pub fn sqlite_files_holding(database_url: &str, text: &str) -> Vec<String> {
    let path = database_url
        .strip_prefix("sqlite://")
        .or_else(|| database_url.strip_prefix("sqlite:"))
        .unwrap()
        .split('?')
        .next()
        .unwrap()
        .to_string();
    let mut found = Vec::new();
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let file = format!("{path}{suffix}");
        if let Ok(bytes) = std::fs::read(&file)
            && bytes.windows(text.len()).any(|w| w == text.as_bytes())
        {
            found.push(file);
        }
    }
    found
}

/// The first column of each row a query with text parameters returns, as text.
pub async fn texts(db: &Db, query: &str, binds: &[&str]) -> Vec<String> {
    let mut q = sqlx::query(sqlx::AssertSqlSafe(query.to_string()));
    for b in binds {
        q = q.bind(b.to_string());
    }
    let rows = q.fetch_all(db.pool()).await.unwrap();
    rows.iter().map(|r| sqlx::Row::get(r, 0)).collect()
}

/// The string `field` of each object in the JSON array `list` (`r.body["workspaces"]`, ...).
pub fn strings(list: &Value, field: &str) -> Vec<String> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|x| x[field].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Whether the answer advertises the extension `token` in `ContextQ-Extensions`.
pub fn has_extension(reply: &Reply, token: &str) -> bool {
    reply.headers["contextq-extensions"]
        .to_str()
        .unwrap()
        .split(',')
        .any(|t| t.trim() == token)
}

/// What every write test ends with: the tenants' kept counts are their rows', and the audit
/// chains verify.
pub async fn consistent(db: &contextq_server::Db) {
    assert_eq!(contextq_server::admin::recount(db).await.unwrap(), vec![]);
    let v = contextq_server::admin::verify_audit(db, None)
        .await
        .unwrap();
    assert!(v.ok(), "{v:?}");
    // The search index holds exactly the live contexts.
    let (index, rows) = match db.backend() {
        Backend::Sqlite => ("search_docs", "(SELECT COUNT(*) FROM context_fts)"),
        Backend::Postgres => ("context_search", "(SELECT COUNT(*) FROM context_search)"),
    };
    let counts = format!(
        "SELECT (SELECT COUNT(*) FROM contexts) * 1000000 + {rows} * 1000 +          (SELECT COUNT(*) FROM contexts c JOIN {index} s ON s.context_id = c.id)"
    );
    let n = scalar(db, &counts).await;
    let contexts = n / 1_000_000;
    assert_eq!(
        n,
        contexts * 1_000_000 + contexts * 1000 + contexts,
        "the search index does not hold exactly the live contexts"
    );
}

/// The key `admin bootstrap` printed (`out`: its finished process, which must have succeeded).
pub fn bootstrapped_key(out: &std::process::Output) -> String {
    assert!(out.status.success(), "{out:?}");
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    printed["apiKey"].as_str().unwrap().to_string()
}
