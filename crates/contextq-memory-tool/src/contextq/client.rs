//! A typed client for every endpoint of `shared/spec/contextq-api.md`.
//!
//! Requests carry `Authorization: Bearer <key>`; failures keep the status, the contract's error
//! code and message, and `Retry-After` ([`Error::Api`]), or say why no answer came
//! ([`Error::Transport`]). Retries follow [`RetryConfig`] and are logged (`tracing` at `warn`).
//! The key never appears in a URL, a log line, an error or `Debug` output ([`ApiKey`]).

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::retry::{Failure, Idempotency, RetryConfig};
use crate::error::{Error, Result};

/// A ContextQ API key: `sk_live_` + 40 lowercase hex. `Debug` and `Display` show `sk_live_…abcd`.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Validates the format; the error says what a key looks like (never echoing it).
    pub fn new(key: impl Into<String>) -> Result<ApiKey> {
        let key = key.into();
        let key = key.trim().to_string();
        let valid = key.strip_prefix("sk_live_").is_some_and(|h| {
            h.len() == 40
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if !valid {
            return Err(Error::Config {
                message: format!(
                    "the ContextQ API key ({}) is not sk_live_ followed by 40 lowercase hex characters: set api_key or CONTEXT_API_KEY to a key from `contextq-server admin create-key`",
                    mask(&key)
                ),
            });
        }
        Ok(ApiKey(key))
    }

    /// The key itself, for the `Authorization` header only.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// `sk_live_…abcd`.
    pub fn masked(&self) -> String {
        mask(&self.0)
    }
}

fn mask(key: &str) -> String {
    let chars: Vec<char> = key.chars().collect();
    if chars.len() <= 8 {
        return "…".to_string();
    }
    let tail: String = chars[chars.len() - 4..].iter().collect();
    format!("sk_live_…{tail}")
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ApiKey({})", self.masked())
    }
}

impl std::fmt::Display for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.masked())
    }
}

/// A workspace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Workspace {
    /// Id.
    pub id: String,
    /// Slug.
    pub slug: String,
    /// Name.
    #[serde(default)]
    pub name: String,
    /// Archived (read-only).
    #[serde(default)]
    pub archived: bool,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: String,
}

/// A context, whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    /// Id.
    pub id: String,
    /// External id (unique per tenant).
    pub external_id: String,
    /// Workspace slug.
    pub workspace: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Content.
    pub content: String,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Version.
    pub version: i64,
    /// RFC 3339.
    #[serde(default)]
    pub created_at: String,
    /// RFC 3339.
    #[serde(default)]
    pub updated_at: String,
}

/// A context without content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextSummary {
    /// Id.
    pub id: String,
    /// External id.
    pub external_id: String,
    /// Workspace slug.
    pub workspace: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Title.
    #[serde(default)]
    pub title: Option<String>,
    /// Tags.
    #[serde(default)]
    pub tags: Vec<String>,
    /// Version.
    pub version: i64,
    /// Extension: UTF-8 length of the content.
    #[serde(default)]
    pub size_bytes: Option<u64>,
    /// RFC 3339.
    #[serde(default)]
    pub updated_at: String,
}

/// One item of a bulk upsert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextInput {
    /// External id.
    pub external_id: String,
    /// Workspace slug.
    pub workspace: String,
    /// Type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Content.
    pub content: String,
    /// Tags.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    /// Extension: create only (409 if the external id exists).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub if_absent: bool,
}

/// One result of a bulk upsert.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpsertResult {
    /// Id.
    pub id: String,
    /// External id.
    pub external_id: String,
    /// `created` or `updated`.
    pub status: String,
    /// Version.
    pub version: i64,
}

/// Filters of `GET /api/contexts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// Workspace slug.
    pub workspace: Option<String>,
    /// Tag.
    pub tag: Option<String>,
    /// Extension: external id prefix.
    pub external_id_prefix: Option<String>,
    /// Page size (server max 500).
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// One page of summaries.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page {
    /// The summaries.
    pub contexts: Vec<ContextSummary>,
    /// Cursor of the next page, if any.
    #[serde(default)]
    pub next_cursor: Option<String>,
}

/// A context with the version its `ETag` showed (`None`: the server has no conditional requests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The context.
    pub context: Context,
    /// The `ETag` version.
    pub etag: Option<i64>,
}

/// The response header in which a server lists the extensions of the contract it implements
/// (comma-separated tokens, see [`Extensions`]). A ContextQ without it has none of them.
pub const EXTENSIONS_HEADER: &str = "contextq-extensions";

/// The extensions of the ContextQ contract a server implements (`docs/contextq-api.md`).
///
/// The client learns them from the [`EXTENSIONS_HEADER`] of the first successful answer it
/// gets (or of a one-request probe, [`Client::extensions`]); as the contract says, an `ETag` on
/// a read also shows conditional requests. Anything not shown is assumed absent, and the
/// adapter then falls back to the seed's documented (weaker) behaviour.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Extensions {
    /// `ETag` on reads, `If-Match` on `PUT`/`DELETE`, `ifAbsent` on bulk-upsert items
    /// (token `conditional-requests`).
    pub conditional_requests: bool,
    /// `externalIdPrefix=` on `GET /api/contexts` (token `external-id-prefix`).
    pub external_id_prefix: bool,
    /// `cursor=` / `nextCursor` paging of `GET /api/contexts` (token `cursor`).
    pub cursor: bool,
    /// `sizeBytes` in summaries (token `size-bytes`).
    pub size_bytes: bool,
}

impl Extensions {
    /// Every extension this crate knows.
    pub const ALL: Extensions = Extensions {
        conditional_requests: true,
        external_id_prefix: true,
        cursor: true,
        size_bytes: true,
    };

    /// Parses the header's value; unknown tokens are ignored.
    pub fn parse(header: &str) -> Extensions {
        let mut e = Extensions::default();
        for token in header.split(',').map(str::trim) {
            match token {
                "conditional-requests" => e.conditional_requests = true,
                "external-id-prefix" => e.external_id_prefix = true,
                "cursor" => e.cursor = true,
                "size-bytes" => e.size_bytes = true,
                _ => {}
            }
        }
        e
    }

    /// The header's value for these extensions.
    pub fn header_value(&self) -> String {
        let tokens = [
            (self.conditional_requests, "conditional-requests"),
            (self.external_id_prefix, "external-id-prefix"),
            (self.cursor, "cursor"),
            (self.size_bytes, "size-bytes"),
        ];
        tokens
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, t)| *t)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// What the client has learnt of the server, shared by its clones.
#[derive(Debug, Default)]
struct Learnt {
    /// From the first successful answer.
    advertised: std::sync::OnceLock<Extensions>,
    /// An `ETag` was seen on a read (the contract's own signal for conditional requests).
    etag_seen: std::sync::atomic::AtomicBool,
}

/// The typed ContextQ client.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    base_url: String,
    key: ApiKey,
    retry: RetryConfig,
    timeout: Duration,
    learnt: std::sync::Arc<Learnt>,
}

struct Answer {
    status: StatusCode,
    etag: Option<i64>,
    body: Vec<u8>,
}

/// Every row of a listing, and whether the server showed there is nothing more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllPages {
    /// The summaries of every page read.
    pub contexts: Vec<ContextSummary>,
    /// `false` when a server without the `cursor` extension answered a full page and no
    /// cursor: there may be rows it never showed (the seed's one-page cap).
    pub complete: bool,
}

fn etag_version(headers: &reqwest::header::HeaderMap) -> Option<i64> {
    headers
        .get(reqwest::header::ETAG)?
        .to_str()
        .ok()?
        .trim_start_matches("W/")
        .trim_matches('"')
        .parse()
        .ok()
}

fn api_error(status: StatusCode, body: &[u8], retry_after: Option<u64>) -> Error {
    #[derive(Deserialize)]
    struct Envelope {
        error: Inner,
    }
    #[derive(Deserialize)]
    struct Inner {
        code: String,
        message: String,
    }
    let (code, message) = match serde_json::from_slice::<Envelope>(body) {
        Ok(e) => (e.error.code, e.error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(body);
            let text: String = text.chars().take(300).collect();
            (format!("http_{}", status.as_u16()), text)
        }
    };
    Error::Api {
        status: status.as_u16(),
        code,
        message,
        retry_after,
    }
}

/// Everything but RFC 3986's unreserved characters is escaped.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// Percent-encodes `s` as one path segment (or query value): `/` becomes `%2F`.
pub fn segment(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, SEGMENT).to_string()
}

impl Client {
    /// A client for `base_url` (e.g. `http://localhost:38200`) with `key`.
    pub fn new(
        base_url: &str,
        key: ApiKey,
        retry: RetryConfig,
        timeout: Duration,
        http: Option<reqwest::Client>,
    ) -> Result<Client> {
        let base_url = base_url.trim_end_matches('/').to_string();
        let parsed = reqwest::Url::parse(&base_url).map_err(|e| Error::Config {
            message: format!(
                "the ContextQ base URL {base_url:?} is not a URL ({e}): set base_url or CONTEXT_API_URL to e.g. http://localhost:38200"
            ),
        })?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(Error::Config {
                message: format!(
                    "the ContextQ base URL {base_url:?} must start with http:// or https://: set base_url or CONTEXT_API_URL to e.g. http://localhost:38200"
                ),
            });
        }
        let http = match http {
            Some(h) => h,
            None => reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(60))
                .tcp_nodelay(true)
                .build()
                .map_err(|e| Error::Config {
                    message: format!("cannot build the HTTP client: {e}"),
                })?,
        };
        Ok(Client {
            http,
            base_url,
            key,
            retry,
            timeout,
            learnt: Default::default(),
        })
    }

    /// The extensions learnt so far, without a request (`None` before the first answer).
    pub fn known_extensions(&self) -> Option<Extensions> {
        let mut e = *self.learnt.advertised.get()?;
        e.conditional_requests |= self
            .learnt
            .etag_seen
            .load(std::sync::atomic::Ordering::Relaxed);
        Some(e)
    }

    /// The extensions of the server: learnt from earlier answers, else from one probe
    /// (`GET /api/contexts?limit=1`, which every ContextQ answers for a key with `read`).
    /// Cached for the life of the client and its clones.
    pub async fn extensions(&self) -> Result<Extensions> {
        if let Some(e) = self.known_extensions() {
            return Ok(e);
        }
        self.request(
            Method::GET,
            "/api/contexts?limit=1",
            None,
            None,
            Idempotency::Safe,
        )
        .await?;
        Ok(self.known_extensions().unwrap_or_default())
    }

    fn learn(&self, headers: &reqwest::header::HeaderMap, etag: Option<i64>) {
        if self.learnt.advertised.get().is_none() {
            let advertised = headers
                .get(EXTENSIONS_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(Extensions::parse)
                .unwrap_or_default();
            let _ = self.learnt.advertised.set(advertised);
        }
        if etag.is_some() {
            self.learnt
                .etag_seen
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The key (masked in `Debug`).
    pub fn key(&self) -> &ApiKey {
        &self.key
    }

    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        kind: Idempotency,
    ) -> Result<Answer> {
        let url = format!("{}{}", self.base_url, path);
        let started = Instant::now();
        let mut retry = 0u32;
        loop {
            let mut req = self
                .http
                .request(method.clone(), &url)
                .bearer_auth(self.key.expose())
                .timeout(self.timeout);
            if let Some(b) = body {
                req = req.json(b);
            }
            if let Some(v) = if_match {
                req = req.header(reqwest::header::IF_MATCH, format!("\"{v}\""));
            }
            let outcome: std::result::Result<
                std::convert::Infallible,
                (Failure, Error, Option<u64>),
            > = match req.send().await {
                Ok(resp) => {
                    let status = resp.status();
                    let etag = etag_version(resp.headers());
                    let retry_after = resp
                        .headers()
                        .get(reqwest::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok());
                    if status.is_success() {
                        self.learn(resp.headers(), etag);
                    }
                    match resp.bytes().await {
                        Ok(bytes) if status.is_success() => {
                            return Ok(Answer {
                                status,
                                etag,
                                body: bytes.to_vec(),
                            });
                        }
                        Ok(bytes) => Err((
                            Failure::Status(status.as_u16()),
                            api_error(status, &bytes, retry_after),
                            retry_after,
                        )),
                        Err(e) => Err((Failure::Lost, self.transport(&url, &e, true), None)),
                    }
                }
                Err(e) => {
                    let failure = if e.is_connect() {
                        Failure::Connect
                    } else {
                        Failure::Lost
                    };
                    let sent = failure == Failure::Lost;
                    Err((failure, self.transport(&url, &e, sent), None))
                }
            };
            let Err((failure, error, retry_after)) = outcome;
            if retry >= self.retry.max_retries || !RetryConfig::retryable(kind, failure) {
                return Err(error);
            }
            let mut delay = self.retry.backoff(retry);
            if let Some(secs) = retry_after {
                delay = delay.max(Duration::from_secs(secs));
            }
            if started.elapsed() + delay > self.retry.retry_timeout {
                return Err(error);
            }
            retry += 1;
            tracing::warn!(
                method = %method,
                path = %path,
                retry,
                delay_ms = delay.as_millis() as u64,
                error = %error,
                "retrying ContextQ request"
            );
            tokio::time::sleep(delay).await;
        }
    }

    fn transport(&self, url: &str, e: &reqwest::Error, sent: bool) -> Error {
        use std::error::Error as _;
        let mut message = e.to_string();
        let mut source = e.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        Error::Transport {
            url: url.to_string(),
            message: message.replace(self.key.expose(), &self.key.masked()),
            timeout: e.is_timeout(),
            sent,
        }
    }

    fn decode<T: DeserializeOwned>(&self, path: &str, body: &[u8]) -> Result<T> {
        serde_json::from_slice(body).map_err(|e| Error::Protocol {
            url: format!("{}{}", self.base_url, path),
            message: format!("invalid JSON: {e}"),
        })
    }

    /// `GET /api/workspaces`
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>> {
        #[derive(Deserialize)]
        struct W {
            workspaces: Vec<Workspace>,
        }
        let path = "/api/workspaces";
        let a = self
            .request(Method::GET, path, None, None, Idempotency::Safe)
            .await?;
        Ok(self.decode::<W>(path, &a.body)?.workspaces)
    }

    /// `POST /api/workspaces`
    pub async fn create_workspace(&self, slug: &str, name: &str) -> Result<Workspace> {
        let path = "/api/workspaces";
        let body = serde_json::json!({"slug": slug, "name": name});
        let a = self
            .request(Method::POST, path, Some(&body), None, Idempotency::Unsafe)
            .await?;
        self.decode(path, &a.body)
    }

    /// `POST /api/workspaces/:slug/archive`
    pub async fn archive_workspace(&self, slug: &str) -> Result<Workspace> {
        let path = format!("/api/workspaces/{}/archive", segment(slug));
        let a = self
            .request(
                Method::POST,
                &path,
                Some(&serde_json::json!({})),
                None,
                Idempotency::Safe,
            )
            .await?;
        self.decode(&path, &a.body)
    }

    /// `DELETE /api/workspaces/:slug`
    pub async fn delete_workspace(&self, slug: &str) -> Result<()> {
        let path = format!("/api/workspaces/{}", segment(slug));
        self.request(Method::DELETE, &path, None, None, Idempotency::Unsafe)
            .await?;
        Ok(())
    }

    /// `GET /api/contexts` (one page).
    pub async fn list_contexts(&self, params: &ListParams) -> Result<Page> {
        let mut query = Vec::new();
        let mut add = |k: &str, v: &str| query.push(format!("{k}={}", segment(v)));
        if let Some(v) = &params.workspace {
            add("workspace", v);
        }
        if let Some(v) = &params.tag {
            add("tag", v);
        }
        if let Some(v) = &params.external_id_prefix {
            add("externalIdPrefix", v);
        }
        if let Some(v) = params.limit {
            add("limit", &v.to_string());
        }
        if let Some(v) = &params.cursor {
            add("cursor", v);
        }
        let path = if query.is_empty() {
            "/api/contexts".to_string()
        } else {
            format!("/api/contexts?{}", query.join("&"))
        };
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Safe)
            .await?;
        self.decode(&path, &a.body)
    }

    /// Every page of `GET /api/contexts`, following `nextCursor` (bounded at 10,000 pages).
    /// [`AllPages::complete`] is `false` when a server without the `cursor` extension filled a
    /// page and gave no cursor.
    pub async fn list_all(&self, params: &ListParams) -> Result<AllPages> {
        let mut params = params.clone();
        let limit = params.limit.unwrap_or(500) as usize;
        let mut all = Vec::new();
        for _ in 0..10_000 {
            let page = self.list_contexts(&params).await?;
            let full = page.contexts.len() >= limit;
            all.extend(page.contexts);
            match page.next_cursor {
                Some(c) if params.cursor.as_ref() != Some(&c) => params.cursor = Some(c),
                _ => {
                    let cursor = self.known_extensions().is_some_and(|e| e.cursor);
                    return Ok(AllPages {
                        contexts: all,
                        complete: cursor || !full,
                    });
                }
            }
        }
        Err(Error::Protocol {
            url: format!("{}/api/contexts", self.base_url),
            message: "more than 10,000 pages: the cursor never ends".into(),
        })
    }

    /// `GET /api/contexts/by-external/:externalId`; `None` on 404.
    pub async fn get_by_external(&self, external_id: &str) -> Result<Option<Fetched>> {
        let path = format!("/api/contexts/by-external/{}", segment(external_id));
        self.fetch(&path).await
    }

    /// `GET /api/contexts/:id`; `None` on 404.
    pub async fn get(&self, id: &str) -> Result<Option<Fetched>> {
        let path = format!("/api/contexts/{}", segment(id));
        self.fetch(&path).await
    }

    async fn fetch(&self, path: &str) -> Result<Option<Fetched>> {
        match self
            .request(Method::GET, path, None, None, Idempotency::Safe)
            .await
        {
            Ok(a) => Ok(Some(Fetched {
                context: self.decode(path, &a.body)?,
                etag: a.etag,
            })),
            Err(Error::Api { status: 404, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `POST /api/contexts/bulk-upsert` (all or nothing). Retried on an unknown outcome only
    /// when no item is create-only.
    pub async fn bulk_upsert(&self, items: &[ContextInput]) -> Result<Vec<UpsertResult>> {
        #[derive(Deserialize)]
        struct R {
            results: Vec<UpsertResult>,
        }
        let path = "/api/contexts/bulk-upsert";
        let body = serde_json::json!({ "contexts": items });
        let kind = if items.iter().any(|i| i.if_absent) {
            Idempotency::Unsafe
        } else {
            Idempotency::Safe
        };
        let a = self
            .request(Method::POST, path, Some(&body), None, kind)
            .await?;
        Ok(self.decode::<R>(path, &a.body)?.results)
    }

    /// `PUT /api/contexts/:id`, with `If-Match` when `if_match` is given.
    pub async fn update(
        &self,
        id: &str,
        content: &str,
        title: Option<&str>,
        tags: Option<&[String]>,
        if_match: Option<i64>,
    ) -> Result<Fetched> {
        let path = format!("/api/contexts/{}", segment(id));
        let mut body = serde_json::json!({ "content": content });
        if let Some(t) = title {
            body["title"] = Value::String(t.to_string());
        }
        if let Some(t) = tags {
            body["tags"] = serde_json::json!(t);
        }
        let kind = if if_match.is_some() {
            Idempotency::Unsafe
        } else {
            Idempotency::Safe
        };
        let a = self
            .request(Method::PUT, &path, Some(&body), if_match, kind)
            .await?;
        Ok(Fetched {
            context: self.decode(&path, &a.body)?,
            etag: a.etag,
        })
    }

    /// `DELETE /api/contexts/:id`, with `If-Match` when given.
    pub async fn delete(&self, id: &str, if_match: Option<i64>) -> Result<()> {
        let path = format!("/api/contexts/{}", segment(id));
        let a = self
            .request(Method::DELETE, &path, None, if_match, Idempotency::Unsafe)
            .await?;
        debug_assert!(a.status.is_success());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_validated_and_masked() {
        let k = ApiKey::new("sk_live_0123456789abcdef0123456789abcdef0123abcd").unwrap();
        assert_eq!(format!("{k:?}"), "ApiKey(sk_live_…abcd)");
        assert_eq!(k.to_string(), "sk_live_…abcd");
        let err = ApiKey::new("sk_live_0123456789ABCDEF0123456789abcdef0123abcd")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("CONTEXT_API_KEY") && err.contains("sk_live_…abcd"),
            "{err}"
        );
        assert!(!err.contains("0123456789ABCDEF"), "{err}");
        assert!(ApiKey::new("").is_err());
    }

    #[test]
    fn bad_base_urls_name_the_setting() {
        let key = ApiKey::new("sk_live_0123456789abcdef0123456789abcdef0123abcd").unwrap();
        let err = Client::new(
            "localhost:38200",
            key.clone(),
            RetryConfig::default(),
            Duration::from_secs(1),
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("CONTEXT_API_URL"), "{err}");
        assert!(
            Client::new(
                "ftp://x",
                key,
                RetryConfig::default(),
                Duration::from_secs(1),
                None
            )
            .is_err()
        );
    }
}
