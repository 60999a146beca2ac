//! [`MemoryStoresStore`]: the memory tool's files in a store of Anthropic's Memory Stores API
//! (beta `agent-memory-2026-07-22`): contextq-server's `/v1` (docs/memory-stores.md), or any
//! service with that API, given its base URL, a key and a store's id (feature `memory-stores`).
//!
//! `/memories/a/b.md` is the memory at `/a/b.md` of the store. A [`Version`] is the memory's id
//! with its `content_sha256`, so a conditional write is the API's own precondition on the
//! content's hash, and a version never matches another memory created later at the same path.
//! The API finds a memory by id, not by path: the store keeps the ids it has seen (a path's id
//! is checked against the answer on every use) and finds an unknown path by listing its
//! directory one level deep, page by page, up to the path (path order).
//!
//! Requests are retried as the crate's other clients retry them ([`crate::retry`]); a write
//! whose answer was lost is [`Error::OutcomeUnknown`]. The key never appears in `Debug`, logs
//! or errors.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use async_trait::async_trait;
use contextq_api::memory_stores::{self as ms, Memory, MemoryListItem, Page as ApiPage};
use serde_json::{Value, json};

use crate::error::{BackendError, Error, Result};
use crate::path::MemoryPath;
use crate::retry::{Attempt, Failure, Idempotency, RetryConfig, TransportError};
use crate::store::{Entry, FileMeta, Listing, PutMode, Store, Version};

/// Default timeout of one request.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A failure of the Memory Stores service, as the store reports it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MemoryStoresError {
    /// The service answered an error: its status, Anthropic's error type and message.
    #[error("the Memory Stores service answered {status} {kind}: {message}")]
    Api {
        /// The HTTP status.
        status: u16,
        /// `invalid_request_error`, `not_found_error`, ... (empty when the body had none).
        kind: String,
        /// The service's message.
        message: String,
    },
    /// The service could not be reached, or its answer was lost.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// An answer outside the API (not the JSON it documents).
    #[error("the Memory Stores service answered something outside its API: {0}")]
    Protocol(String),
}

impl BackendError for MemoryStoresError {
    fn tool_message(&self) -> String {
        match self {
            MemoryStoresError::Api {
                status: 400 | 413,
                message,
                ..
            } => format!("The memory store refused this (nothing was changed): {message}"),
            other => format!("The memory store failed (nothing is known to have changed): {other}"),
        }
    }

    fn is_failure(&self) -> bool {
        !matches!(
            self,
            MemoryStoresError::Api {
                status: 400 | 404 | 409 | 413,
                ..
            }
        )
    }
}

/// How to reach a store of a Memory Stores service.
#[derive(Clone)]
pub struct MemoryStoresOptions {
    /// The service's base URL (`https://api.anthropic.com`, or contextq-server's).
    pub base_url: String,
    /// The key, sent as `x-api-key` as the official SDKs send it (never shown: `Debug` masks
    /// it).
    pub api_key: String,
    /// The store's id (`memstore_...`).
    pub store_id: String,
    /// Timeout of one request. Default [`DEFAULT_TIMEOUT`].
    pub timeout: Duration,
    /// How requests are retried.
    pub retry: RetryConfig,
}

impl std::fmt::Debug for MemoryStoresOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStoresOptions")
            .field("base_url", &self.base_url)
            .field("api_key", &contextq_api::mask_secret(&self.api_key))
            .field("store_id", &self.store_id)
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .finish()
    }
}

impl MemoryStoresOptions {
    /// The store `store_id` of the service at `base_url`, reached with `api_key`.
    pub fn new(base_url: &str, api_key: &str, store_id: &str) -> Self {
        MemoryStoresOptions {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key: api_key.to_string(),
            store_id: store_id.to_string(),
            timeout: DEFAULT_TIMEOUT,
            retry: RetryConfig::default(),
        }
    }
}

contextq_api::setters!(MemoryStoresOptions {
    timeout: Duration,
    retry: RetryConfig,
});

/// A [`Store`] over a store of the Memory Stores API. See the module documentation.
pub struct MemoryStoresStore {
    options: MemoryStoresOptions,
    /// The key as the `x-api-key` header the official SDKs send (Anthropic's service and
    /// contextq-server both take it).
    key: reqwest::header::HeaderValue,
    http: reqwest::Client,
    /// Memory ids by API path, as last seen.
    ids: Mutex<HashMap<String, String>>,
    reached: AtomicBool,
}

impl std::fmt::Debug for MemoryStoresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStoresStore")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The API's path of a memory-tool path: `/memories/a/b.md` is `/a/b.md`; the root is `/`.
fn api_path(path: &MemoryPath) -> String {
    let n = path.normalized();
    match n.strip_prefix("/memories") {
        Some("") | None => "/".to_string(),
        Some(rest) => rest.to_string(),
    }
}

/// The memory-tool path of an API path.
fn tool_path(api: &str) -> Result<MemoryPath> {
    MemoryPath::parse(&format!("/memories{api}")).map_err(Error::from)
}

/// The version of a memory: its id and content hash.
fn version_of(m: &Memory) -> Version {
    let number = u64::from_str_radix(m.content_sha256.get(..15).unwrap_or("0"), 16).unwrap_or(0);
    Version::of_row(&format!("{} {}", m.id, m.content_sha256), number)
}

/// The id and hash a [`Version`] of this store names.
fn parse_version(v: &Version) -> Option<(&str, &str)> {
    v.row()?.split_once(' ')
}

/// Query-string encoding of a value (the few characters a path or token may hold that a query
/// cannot).
fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

impl MemoryStoresStore {
    /// A store over `options`' store. Checks the options, not the service (the first call
    /// does).
    pub fn new(options: MemoryStoresOptions) -> Result<Self> {
        if !options.store_id.starts_with(ms::STORE_ID_PREFIX) {
            return Err(Error::Config {
                message: format!(
                    "store_id: a memory store's id starts with {}, got {:?}",
                    ms::STORE_ID_PREFIX,
                    options.store_id
                ),
            });
        }
        if !(options.base_url.starts_with("http://") || options.base_url.starts_with("https://")) {
            return Err(Error::Config {
                message: format!(
                    "base_url: an http:// or https:// URL, got {:?}",
                    options.base_url
                ),
            });
        }
        let http = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| Error::Config {
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        let mut key = reqwest::header::HeaderValue::from_str(&options.api_key).map_err(|_| {
            Error::Config {
                message: format!(
                    "api_key: visible ASCII characters only, got {}",
                    contextq_api::mask_secret(&options.api_key)
                ),
            }
        })?;
        // Kept out of reqwest's own `Debug` of the request.
        key.set_sensitive(true);
        Ok(MemoryStoresStore {
            options,
            key,
            http,
            ids: Mutex::new(HashMap::new()),
            reached: AtomicBool::new(false),
        })
    }

    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, String>> {
        self.ids.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One request (`rel` after the store's URL), retried as `kind` allows; the answer's JSON,
    /// or the service's error.
    async fn call(
        &self,
        method: reqwest::Method,
        rel: &str,
        body: Option<&Value>,
        kind: Idempotency,
    ) -> Result<Value> {
        let url = format!(
            "{}/v1/memory_stores/{}{rel}",
            self.options.base_url, self.options.store_id
        );
        let what = format!("{method} {rel}");
        let wrap = |e: TransportError| Error::Backend(Box::new(MemoryStoresError::Transport(e)));
        crate::retry::run(
            &self.options.retry,
            "the Memory Stores service",
            &what,
            kind,
            Some(&self.reached),
            || async {
                let mut request = self
                    .http
                    .request(method.clone(), &url)
                    .header("x-api-key", self.key.clone())
                    .header("anthropic-version", "2023-06-01")
                    .header("anthropic-beta", ms::BETA);
                if let Some(b) = body {
                    request = request.json(b);
                }
                let answer =
                    crate::retry::exchange(request, &url, &self.options.api_key, wrap).await?;
                if (200..300).contains(&answer.status) {
                    return serde_json::from_slice(&answer.body).map_err(|e| Attempt {
                        failure: Failure::Status(answer.status),
                        error: Error::Backend(Box::new(MemoryStoresError::Protocol(format!(
                            "{what}: {e}"
                        )))),
                        retry_after: None,
                    });
                }
                let parsed: Option<ms::ErrorResponse> = serde_json::from_slice(&answer.body).ok();
                let (kind, message) = match parsed {
                    Some(r) => (r.error.kind, r.error.message),
                    None => (
                        String::new(),
                        String::from_utf8_lossy(&answer.body)
                            .chars()
                            .take(300)
                            .collect(),
                    ),
                };
                Err(Attempt {
                    failure: Failure::Status(answer.status),
                    retry_after: answer.retry_after(),
                    error: Error::Backend(Box::new(MemoryStoresError::Api {
                        status: answer.status,
                        kind,
                        message,
                    })),
                })
            },
        )
        .await
    }

    /// The API's error of `e`, when the service answered one: its status and type.
    fn api_error(e: &Error) -> Option<(u16, &str)> {
        match e.backend_error::<MemoryStoresError>()? {
            MemoryStoresError::Api { status, kind, .. } => Some((*status, kind.as_str())),
            _ => None,
        }
    }

    /// A write's error as the [`Store`] contract names it.
    fn write_error(e: Error, path: &MemoryPath, operation: &'static str) -> Error {
        let p = || path.normalized();
        match Self::api_error(&e) {
            Some((404, _)) => Error::NotFound { path: p() },
            Some((409, "memory_path_conflict_error")) => Error::AlreadyExists { path: p() },
            Some((409, "memory_precondition_failed_error")) => Error::Precondition { path: p() },
            Some(_) => e,
            None => {
                let lost = match e.backend_error::<MemoryStoresError>() {
                    Some(MemoryStoresError::Transport(t)) => t.sent,
                    Some(MemoryStoresError::Protocol(_)) => true,
                    _ => false,
                };
                if lost {
                    Error::OutcomeUnknown {
                        path: p(),
                        operation,
                        cause: Box::new(e),
                    }
                } else {
                    e
                }
            }
        }
    }

    fn memory(value: Value) -> Result<Memory> {
        serde_json::from_value(value).map_err(|e| {
            Error::Backend(Box::new(MemoryStoresError::Protocol(format!(
                "a memory: {e}"
            ))))
        })
    }

    /// One page of a memory listing with `query`, from the token `page`.
    async fn page(&self, query: &str, page: Option<&str>) -> Result<ApiPage<MemoryListItem>> {
        let mut rel = format!("/memories?{query}");
        if let Some(t) = page {
            rel.push_str(&format!("&page={}", enc(t)));
        }
        let value = self
            .call(reqwest::Method::GET, &rel, None, Idempotency::Read)
            .await?;
        serde_json::from_value(value).map_err(|e| {
            Error::Backend(Box::new(MemoryStoresError::Protocol(format!(
                "a listing: {e}"
            ))))
        })
    }

    /// The memory `id` with its content, if it is still at `api`.
    async fn by_id(&self, id: &str, api: &str) -> Result<Option<Memory>> {
        match self
            .call(
                reqwest::Method::GET,
                &format!("/memories/{id}?view=full"),
                None,
                Idempotency::Read,
            )
            .await
        {
            Ok(v) => {
                let m = Self::memory(v)?;
                Ok((m.path == api).then_some(m))
            }
            Err(e) if Self::api_error(&e).is_some_and(|(s, _)| s == 404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The memory at `api` (without its content), found by listing its directory one level
    /// deep up to it.
    async fn lookup(&self, api: &str) -> Result<Option<Memory>> {
        let dir = match api.rfind('/') {
            Some(i) => &api[..=i],
            None => "/",
        };
        let mut page: Option<String> = None;
        loop {
            let query = format!("path_prefix={}&depth=1&limit=100", enc(dir));
            let listed = self.page(&query, page.as_deref()).await?;
            for item in listed.data {
                if let MemoryListItem::Memory(m) = item {
                    self.ids().insert(m.path.clone(), m.id.clone());
                    if m.path == api {
                        return Ok(Some(m));
                    }
                    // Path order: past it, it is not there.
                    if m.path.as_str() > api {
                        return Ok(None);
                    }
                }
            }
            match listed.next_page {
                Some(t) => page = Some(t),
                None => return Ok(None),
            }
        }
    }

    /// The memory at `path` with its content, if any.
    async fn find(&self, path: &MemoryPath) -> Result<Option<Memory>> {
        let api = api_path(path);
        if api == "/" {
            return Ok(None);
        }
        let known = self.ids().get(&api).cloned();
        if let Some(id) = known {
            if let Some(m) = self.by_id(&id, &api).await? {
                return Ok(Some(m));
            }
            self.ids().remove(&api);
        }
        match self.lookup(&api).await? {
            Some(m) => self.by_id(&m.id, &api).await,
            None => Ok(None),
        }
    }

    async fn create(&self, path: &MemoryPath, text: &str) -> Result<Memory> {
        let api = api_path(path);
        let body = json!({"path": api, "content": text});
        let v = self
            .call(
                reqwest::Method::POST,
                "/memories",
                Some(&body),
                Idempotency::Unsafe,
            )
            .await
            .map_err(|e| Self::write_error(e, path, "create"))?;
        let m = Self::memory(v)?;
        self.ids().insert(api, m.id.clone());
        Ok(m)
    }

    async fn update(
        &self,
        path: &MemoryPath,
        id: &str,
        text: &str,
        expect: Option<&str>,
    ) -> Result<Memory> {
        let mut body = json!({"content": text});
        if let Some(h) = expect {
            body["precondition"] = json!({"type": "content_sha256", "content_sha256": h});
        }
        let v = self
            .call(
                reqwest::Method::POST,
                &format!("/memories/{id}"),
                Some(&body),
                if expect.is_some() {
                    Idempotency::Unsafe
                } else {
                    Idempotency::Safe
                },
            )
            .await
            .map_err(|e| Self::write_error(e, path, "update"))?;
        let m = Self::memory(v)?;
        if m.path != api_path(path) {
            // Renamed by another writer since its id was read: the file at `path` is gone.
            self.ids().remove(&api_path(path));
        }
        Ok(m)
    }
}

#[async_trait]
impl Store for MemoryStoresStore {
    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        Ok(self.find(path).await?.map(|m| Entry {
            version: Some(version_of(&m)),
            id: Some(m.id.clone()),
            content: m.content.unwrap_or_default(),
        }))
    }

    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        let api = api_path(dir);
        let prefix = if api == "/" { api } else { format!("{api}/") };
        let mut files = Vec::new();
        let mut page: Option<String> = None;
        loop {
            let query = format!("path_prefix={}&limit=100", enc(&prefix));
            let listed = self.page(&query, page.as_deref()).await?;
            for item in listed.data {
                if let MemoryListItem::Memory(m) = item {
                    // A memory the tool cannot name (a path the service allows and a
                    // `/memories` path does not) is left out rather than failing the listing.
                    let Ok(path) = tool_path(&m.path) else {
                        continue;
                    };
                    self.ids().insert(m.path.clone(), m.id.clone());
                    files.push(FileMeta {
                        path,
                        size: Some(m.content_size_bytes),
                        version: Some(version_of(&m)),
                        modified: Some(m.updated_at.clone()),
                    });
                }
            }
            match listed.next_page {
                Some(t) => page = Some(t),
                None => break,
            }
        }
        if files.is_empty() && !dir.is_root() {
            return Ok(None);
        }
        Ok(Some(Listing {
            files,
            ..Listing::default()
        }))
    }

    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        match mode {
            PutMode::Create => Ok(Some(version_of(&self.create(path, text).await?))),
            PutMode::Update(v) => {
                let Some((id, sha)) = parse_version(&v) else {
                    return Err(Error::Precondition {
                        path: path.normalized(),
                    });
                };
                let m = self.update(path, id, text, Some(sha)).await?;
                Ok(Some(version_of(&m)))
            }
            PutMode::Overwrite => {
                // Whatever is there: an update of the memory found, else a create; a race with
                // another writer (a create in between, a delete in between) is decided again.
                for _ in 0..5 {
                    let result = match self.find(path).await? {
                        Some(m) => self.update(path, &m.id, text, None).await,
                        None => self.create(path, text).await,
                    };
                    match result {
                        Ok(m) => return Ok(Some(version_of(&m))),
                        Err(Error::NotFound { .. }) => continue,
                        Err(Error::AlreadyExists { .. }) if self.find(path).await?.is_some() => {
                            continue;
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(Error::Precondition {
                    path: path.normalized(),
                })
            }
        }
    }

    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        let (id, expect) = match &expected {
            Some(v) => match parse_version(v) {
                Some((id, sha)) => (id.to_string(), Some(sha.to_string())),
                None => {
                    return Err(Error::Precondition {
                        path: path.normalized(),
                    });
                }
            },
            None => match self.find(path).await? {
                Some(m) => (m.id, None),
                None => {
                    return Err(Error::NotFound {
                        path: path.normalized(),
                    });
                }
            },
        };
        let rel = match &expect {
            Some(h) => format!("/memories/{id}?expected_content_sha256={h}"),
            None => format!("/memories/{id}"),
        };
        self.call(reqwest::Method::DELETE, &rel, None, Idempotency::Unsafe)
            .await
            .map_err(|e| Self::write_error(e, path, "delete"))?;
        self.ids().remove(&api_path(path));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_both_ways() {
        let p = MemoryPath::parse("/memories/a/b.md").unwrap();
        assert_eq!(api_path(&p), "/a/b.md");
        assert_eq!(api_path(&MemoryPath::root()), "/");
        assert_eq!(tool_path("/a/b.md").unwrap(), p);
    }

    #[test]
    fn versions_name_the_memory_and_its_hash() {
        let m = Memory {
            id: "mem_1".into(),
            kind: "memory".into(),
            memory_store_id: "memstore_1".into(),
            memory_version_id: "memver_1".into(),
            path: "/a".into(),
            content: None,
            content_sha256: "ab".repeat(32),
            content_size_bytes: 0,
            created_at: String::new(),
            updated_at: String::new(),
        };
        let v = version_of(&m);
        assert_eq!(parse_version(&v), Some(("mem_1", "ab".repeat(32).as_str())));
    }

    #[test]
    fn the_key_is_masked() {
        let o = MemoryStoresOptions::new(
            "http://127.0.0.1:1",
            "sk_live_0123456789abcdef0123456789abcdef01234567",
            "memstore_x",
        );
        let shown = format!("{o:?}");
        assert!(!shown.contains("0123456789abcdef0123"), "{shown}");
        assert!(MemoryStoresStore::new(MemoryStoresOptions::new("x", "k", "memstore_x")).is_err());
        assert!(MemoryStoresStore::new(MemoryStoresOptions::new("http://h", "k", "ws")).is_err());
    }
}
