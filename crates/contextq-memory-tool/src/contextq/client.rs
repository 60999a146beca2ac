//! A typed client for every endpoint of the ContextQ contract (`docs/contextq-api.md`), with
//! the contract's own types (`contextq-api`).
//!
//! Requests carry `Authorization: Bearer <key>`; failures keep the contract's error code, the
//! status, the message and `Retry-After` ([`ContextQError::Api`]), or say why no answer came
//! ([`ContextQError::Transport`]). This is the one place that reads HTTP statuses; everything
//! above it matches [`ErrorCode`]s. Every request states whether repeating it is safe and goes through
//! the crate's retry engine ([`crate::retry`], configured by [`RetryConfig`]).
//! The key never appears in a URL, a log line, an error or `Debug` output ([`ApiKey`]).

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;

use contextq_api::bodies::{
    BulkUpsert, BulkUpsertResults, ContextPage, IDEMPOTENCY_KEY_HEADER, UpdateContext,
    WorkspaceList,
};
pub use contextq_api::bodies::{
    DeletePrefix, EditContext, EditedContext, EditedSummary, PrefixChange, PrefixChanges,
    RenameContext, RenamePrefix, RenamedContext, Tree, TreeEntry,
};
pub use contextq_api::{
    ApiKey, Context, ContextInput, ContextSummary, EXTENSIONS_HEADER, Extensions, UpsertResult,
    Workspace,
};

pub use contextq_api::history::{
    Action, HistoryPage, PastState, PathAt, RedactRequest, RedactedVersion, Redaction,
    Version as HistoryVersion, VersionPage, VersionSummary,
};

use super::error::{ContextQError, ErrorCode};
use super::local::LocalService;
use crate::error::{Error, Result};
use crate::retry::{self, Attempt, Failure, Idempotency, RetryConfig};
use contextq_api::ErrorEnvelope;

/// Filters of `GET /api/contexts`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// Only this workspace (slug).
    pub workspace: Option<String>,
    /// Only contexts carrying this tag.
    pub tag: Option<String>,
    /// Extension (`external-id-prefix`): only external ids starting with this. Send it only to a
    /// server that shows the extension.
    pub external_id_prefix: Option<String>,
    /// Page size (server max 500).
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
    /// Extension (`start-after`): the page starts after this external id. Send it only to a
    /// server that shows the extension, and never with `cursor`.
    pub start_after: Option<String>,
}

/// A search of `GET /api/contexts/search` (extension `search`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SearchParams {
    /// The query, as written (the server checks it: `contextq_api::search::Query`).
    pub query: String,
    /// Only this workspace (slug).
    pub workspace: Option<String>,
    /// Only contexts carrying this tag.
    pub tag: Option<String>,
    /// Only external ids starting with this.
    pub prefix: Option<String>,
    /// Hits of the page (server max 100).
    pub limit: Option<u32>,
    /// `nextCursor` of the previous page.
    pub cursor: Option<String>,
}

/// A context with the version its `ETag` showed (`None`: the server has no conditional requests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The context as the server holds it.
    pub context: Context,
    /// The version its `ETag` header named, if the server sent one.
    pub etag: Option<i64>,
}

/// What the client has learnt of the server, shared by its clones.
#[derive(Debug, Default)]
struct Learnt {
    /// From the first successful answer.
    advertised: std::sync::OnceLock<Extensions>,
    /// An `ETag` was seen on a read (the contract's own signal for conditional requests).
    etag_seen: std::sync::atomic::AtomicBool,
    /// The server has answered this client (any status): a refused connection after that is
    /// an outage to ride out, not a wrong URL to report at once ([`retry::run`]).
    reached: std::sync::atomic::AtomicBool,
}

/// Whether a failed request may still have been applied by the server.
fn may_have_applied(e: &Error) -> bool {
    e.contextq().is_some_and(ContextQError::may_have_applied)
}

tokio::task_local! {
    static RESTORING: u64;
}

/// Runs `f` with its writes marked as the restore of `version` (`ContextQ-Restored-From`), on
/// a server with the `restore-marks` extension: the version they write shows as `restore` of
/// it in the history, and the audit row as `context.restore`.
pub async fn restoring<F: std::future::Future>(version: u64, f: F) -> F::Output {
    RESTORING.scope(version, f).await
}

/// The typed ContextQ client.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    /// A server in this process, called instead of `http` ([`Client::with_local_service`]).
    local: Option<std::sync::Arc<dyn LocalService>>,
    base_url: String,
    key: ApiKey,
    retry: RetryConfig,
    timeout: Duration,
    learnt: std::sync::Arc<Learnt>,
}

/// A successful answer: its body and the version its `ETag` showed.
struct Reply {
    etag: Option<i64>,
    body: Vec<u8>,
}

/// Every row of a listing, and whether the server showed there is nothing more.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllPages {
    /// The summaries of every page read.
    pub contexts: Vec<ContextSummary>,
    /// `false` when a server without the `cursor` extension answered a full page and no
    /// cursor: there may be rows it never showed (the contract's one-page cap).
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

/// The error of a refused request: the contract's envelope, or the start of whatever body came.
/// A text edit that cannot apply (`edit_failed` with its reason) is [`Error::EditRefused`] on
/// `path` (the request path: the store names the memory path instead).
fn api_error(answer: &retry::Answer, path: &str) -> Error {
    let (code_text, message) = match serde_json::from_slice::<ErrorEnvelope>(&answer.body) {
        Ok(e) if e.error.edit.is_some() && answer.status == 409 => {
            return Error::EditRefused {
                path: path.to_string(),
                failure: e.error.edit.expect("checked"),
            };
        }
        Ok(e) => (e.error.code, e.error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(&answer.body);
            let text: String = text.chars().take(300).collect();
            (format!("http_{}", answer.status), text)
        }
    };
    Error::from(ContextQError::Api {
        code: ErrorCode::of_answer(answer.status, Some(&code_text)),
        code_text,
        status: answer.status,
        message,
        retry_after: answer.retry_after().map(|d| d.as_secs()),
    })
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

/// `path` with a query of the parameters that are given, in order, each value percent-encoded
/// ([`segment`]); `path` alone when none is.
fn with_query(path: &str, params: &[(&str, Option<String>)]) -> String {
    let query: Vec<String> = params
        .iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| format!("{k}={}", segment(v))))
        .collect();
    if query.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", query.join("&"))
    }
}

#[cfg(test)]
mod query_tests {
    #[test]
    fn only_given_parameters_go_in_the_query_encoded() {
        assert_eq!(super::with_query("/p", &[("a", None)]), "/p");
        assert_eq!(
            super::with_query(
                "/p",
                &[
                    ("a", Some("x/y z".into())),
                    ("b", None),
                    ("c", Some("1".into()))
                ]
            ),
            "/p?a=x%2Fy%20z&c=1"
        );
    }
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
        // Every request adds `/api/...` itself: a base URL ending in `/api` would ask for
        // `/api/api/...` and read every answer as "no such file".
        if parsed.path().trim_end_matches('/').ends_with("/api") {
            let fixed = base_url.trim_end_matches("/api");
            return Err(Error::Config {
                message: format!(
                    "the ContextQ base URL {base_url:?} ends with /api: set base_url or CONTEXT_API_URL to the server's base URL, {fixed:?} (each request adds /api/... itself)"
                ),
            });
        }
        let http = match http {
            Some(h) => h,
            // An idle connection is dropped here (15 s) before servers commonly close it (our
            // server after 20 s: its header read timeout), so a request is rarely sent on a
            // connection the server is closing at that moment.
            None => reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(15))
                .tcp_nodelay(true)
                .build()
                .map_err(|e| Error::Config {
                    message: format!("cannot build the HTTP client: {e}"),
                })?,
        };
        Ok(Client {
            http,
            local: None,
            base_url,
            key,
            retry,
            timeout,
            learnt: Default::default(),
        })
    }

    /// This client calling `service` in this process instead of sending its requests over
    /// HTTP to the base URL, which then only names the server (the `Host` header, error
    /// messages). Retries, timeouts and extension detection are unchanged.
    pub fn with_local_service(mut self, service: std::sync::Arc<dyn LocalService>) -> Client {
        self.local = Some(service);
        self
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
            Idempotency::Read,
        )
        .await?;
        Ok(self.known_extensions().unwrap_or_default())
    }

    /// A fresh `Idempotency-Key` for one write, when the server records outcomes (extension
    /// `idempotency`), and how the retry engine may repeat the write: with the key, `Keyed` (a
    /// repeat is answered with what the first applied attempt did); without, `otherwise`.
    async fn write_key(&self, otherwise: Idempotency) -> Result<(Option<String>, Idempotency)> {
        Ok(if self.extensions().await?.idempotency {
            (
                Some(format!("mt-{:032x}", fastrand::u128(..))),
                Idempotency::Keyed,
            )
        } else {
            (None, otherwise)
        })
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

    /// One request through the retry engine; a success (2xx) is read whole and teaches the
    /// client the server's extensions.
    async fn request(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        kind: Idempotency,
    ) -> Result<Reply> {
        self.request_with(method, path, body, if_match, None, kind)
            .await
    }

    /// [`Client::request`] with an `Idempotency-Key`, the same on every attempt.
    async fn request_with(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        idempotency_key: Option<&str>,
        kind: Idempotency,
    ) -> Result<Reply> {
        let url = format!("{}{}", self.base_url, path);
        let what = format!("{method} {path}");
        let attempt = || async {
            let answer = match &self.local {
                Some(service) => {
                    let request =
                        self.local_request(&method, path, body, if_match, idempotency_key);
                    self.call_local(service.as_ref(), request, &url).await?
                }
                None => {
                    self.send(&method, &url, body, if_match, idempotency_key)
                        .await?
                }
            };
            if (200..300).contains(&answer.status) {
                let etag = etag_version(&answer.headers);
                self.learn(&answer.headers, etag);
                return Ok(Reply {
                    etag,
                    body: answer.body,
                });
            }
            Err(Attempt {
                failure: Failure::Status(answer.status),
                error: api_error(&answer, path),
                retry_after: answer.retry_after(),
            })
        };
        let done = retry::run(
            &self.retry,
            "ContextQ",
            &what,
            kind,
            Some(&self.learnt.reached),
            attempt,
        )
        .await;
        match done {
            // A keyed write whose outcome is unknown (its answers lost, or no retry left): asked
            // once more with its key, whatever the retry budget, as a read-back would be: the
            // server answers with what the write did. An answer (other than "busy") settles it;
            // none leaves it unknown.
            Err(e) if kind == Idempotency::Keyed && may_have_applied(&e) => match attempt().await {
                Ok(reply) => Ok(reply),
                Err(a) if matches!(a.failure, Failure::Status(s) if s < 500 && s != 429) => {
                    Err(a.error)
                }
                Err(_) => Err(e),
            },
            other => other,
        }
    }

    /// One attempt over HTTP.
    async fn send(
        &self,
        method: &Method,
        url: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        idempotency_key: Option<&str>,
    ) -> std::result::Result<retry::Answer, Attempt> {
        let mut req = self
            .http
            .request(method.clone(), url)
            .bearer_auth(self.key.expose())
            .timeout(self.timeout);
        if let Some(b) = body {
            req = req.json(b);
        }
        if let Some(v) = if_match {
            req = req.header(reqwest::header::IF_MATCH, format!("\"{v}\""));
        }
        if let Some(k) = idempotency_key {
            req = req.header(IDEMPOTENCY_KEY_HEADER, k);
        }
        if let Some(n) = self.restored_from(method) {
            req = req.header(contextq_api::RESTORED_FROM_HEADER, n.to_string());
        }
        retry::exchange(req, url, self.key.expose(), |t| {
            Error::from(ContextQError::Transport(t))
        })
        .await
    }

    /// The request [`Client::send`] would send, for a [`LocalService`] (its contract: the
    /// path and query as URI, the same headers and body).
    fn local_request(
        &self,
        method: &Method,
        path: &str,
        body: Option<&Value>,
        if_match: Option<i64>,
        idempotency_key: Option<&str>,
    ) -> http::Request<Vec<u8>> {
        use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HOST, HeaderValue, IF_MATCH};
        let mut request = http::Request::new(
            body.map(|b| serde_json::to_vec(b).expect("a JSON value serialises"))
                .unwrap_or_default(),
        );
        *request.method_mut() = method.clone();
        // A path the client built itself (segments percent-encoded); "/" if it were not a URI.
        *request.uri_mut() = path.parse().unwrap_or_else(|_| http::Uri::from_static("/"));
        let headers = request.headers_mut();
        let host = self
            .base_url
            .split_once("://")
            .map_or(self.base_url.as_str(), |(_, rest)| rest);
        if let Ok(v) = HeaderValue::from_str(host) {
            headers.insert(HOST, v);
        }
        if let Ok(mut v) = HeaderValue::from_str(&format!("Bearer {}", self.key.expose())) {
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        if body.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        if let Some(v) = if_match.and_then(|v| HeaderValue::from_str(&format!("\"{v}\"")).ok()) {
            headers.insert(IF_MATCH, v);
        }
        if let Some(v) = idempotency_key.and_then(|k| HeaderValue::from_str(k).ok()) {
            headers.insert(IDEMPOTENCY_KEY_HEADER, v);
        }
        if let Some(n) = self.restored_from(method) {
            headers.insert(contextq_api::RESTORED_FROM_HEADER, HeaderValue::from(n));
        }
        request
    }

    /// The version a write within [`restoring`] restores, when the server marks restores
    /// (extension `restore-marks`; a server without it gets a plain write).
    fn restored_from(&self, method: &Method) -> Option<u64> {
        if *method != Method::PUT && *method != Method::POST {
            return None;
        }
        let n = RESTORING.try_with(|n| *n).ok()?;
        self.known_extensions()
            .is_some_and(|e| e.restore_marks)
            .then_some(n)
    }

    /// One attempt through a [`LocalService`], bounded by the client's timeout; no answer in
    /// time, or a failed call, is an answer lost after sending.
    async fn call_local(
        &self,
        service: &dyn LocalService,
        request: http::Request<Vec<u8>>,
        url: &str,
    ) -> std::result::Result<retry::Answer, Attempt> {
        let lost = |message: String, timeout: bool| Attempt {
            failure: Failure::Lost,
            error: Error::from(ContextQError::Transport(crate::transport::TransportError {
                url: url.to_string(),
                message: message.replace(
                    self.key.expose(),
                    &contextq_api::mask_secret(self.key.expose()),
                ),
                timeout,
                sent: true,
            })),
            retry_after: None,
        };
        match tokio::time::timeout(self.timeout, service.call(request)).await {
            Ok(Ok(response)) => {
                let (parts, body) = response.into_parts();
                Ok(retry::Answer {
                    status: parts.status.as_u16(),
                    headers: parts.headers,
                    body,
                })
            }
            Ok(Err(e)) => Err(lost(
                format!("the server in this process failed: {e}"),
                false,
            )),
            Err(_) => Err(lost(
                format!(
                    "the server in this process did not answer within {:?}",
                    self.timeout
                ),
                true,
            )),
        }
    }

    fn decode<T: DeserializeOwned>(&self, path: &str, body: &[u8]) -> Result<T> {
        serde_json::from_slice(body).map_err(|e| {
            Error::from(ContextQError::Protocol {
                url: format!("{}{}", self.base_url, path),
                message: format!("invalid JSON: {e}"),
            })
        })
    }

    /// `GET /api/workspaces`
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>> {
        let path = "/api/workspaces";
        let a = self
            .request(Method::GET, path, None, None, Idempotency::Read)
            .await?;
        Ok(self.decode::<WorkspaceList>(path, &a.body)?.workspaces)
    }

    /// `GET /api/workspaces`, for what it says of the key: the workspaces it is limited to
    /// (extension `workspace-keys`), or the whole tenant (every key of a ContextQ without the
    /// extension). One request, which also checks that ContextQ accepts the key now.
    pub async fn key_reach(&self) -> Result<super::path_model::KeyReach> {
        let path = "/api/workspaces";
        let a = self
            .request(Method::GET, path, None, None, Idempotency::Read)
            .await?;
        let list = self.decode::<WorkspaceList>(path, &a.body)?;
        Ok(match list.limited_to {
            Some(slugs) => super::path_model::KeyReach::Workspaces(slugs),
            None => super::path_model::KeyReach::Tenant,
        })
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
    pub async fn list_contexts(&self, params: &ListParams) -> Result<ContextPage> {
        let path = with_query(
            "/api/contexts",
            &[
                ("workspace", params.workspace.clone()),
                ("tag", params.tag.clone()),
                ("externalIdPrefix", params.external_id_prefix.clone()),
                ("limit", params.limit.map(|l| l.to_string())),
                ("cursor", params.cursor.clone()),
                ("startAfter", params.start_after.clone()),
            ],
        );
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Read)
            .await?;
        self.decode(&path, &a.body)
    }

    /// `GET /api/contexts/search` (extension `search`: send it only to a server that shows it):
    /// the best hits of `query` (its text, checked by the server), with `tag`, in `workspace`,
    /// under the external-id `prefix`, at most `limit`, from `cursor`.
    pub async fn search(&self, params: &SearchParams) -> Result<contextq_api::search::SearchPage> {
        let path = with_query(
            "/api/contexts/search",
            &[
                ("q", Some(params.query.clone())),
                ("workspace", params.workspace.clone()),
                ("tag", params.tag.clone()),
                ("prefix", params.prefix.clone()),
                ("limit", params.limit.map(|l| l.to_string())),
                ("cursor", params.cursor.clone()),
            ],
        );
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Read)
            .await?;
        self.decode(&path, &a.body)
    }

    /// `GET /api/contexts/tree?prefix=` (extension `tree`: send it only to a server that shows
    /// it): the contexts under `prefix` with `tag`, in `workspace`, two levels deep with sizes
    /// added up by the server; with `workspace_first`, only those whose first segment after
    /// the prefix is their own workspace's slug; with `file` (extension `tree-file`), the
    /// context at that external id beside it ([`Tree::file`]).
    pub async fn tree(
        &self,
        prefix: &str,
        tag: Option<&str>,
        workspace: Option<&str>,
        workspace_first: bool,
        file: Option<&str>,
    ) -> Result<Tree> {
        let path = with_query(
            "/api/contexts/tree",
            &[
                ("prefix", Some(prefix.to_string())),
                (
                    "workspaceFirst",
                    workspace_first.then(|| "true".to_string()),
                ),
                ("file", file.map(str::to_string)),
                ("requireTag", tag.map(str::to_string)),
                ("workspace", workspace.map(str::to_string)),
            ],
        );
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Read)
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
                Some(c) if params.cursor.as_ref() != Some(&c) => {
                    params.cursor = Some(c);
                    params.start_after = None;
                }
                _ => {
                    let cursor = self.known_extensions().is_some_and(|e| e.cursor);
                    return Ok(AllPages {
                        contexts: all,
                        complete: cursor || !full,
                    });
                }
            }
        }
        Err(Error::from(ContextQError::Protocol {
            url: format!("{}/api/contexts", self.base_url),
            message: "more than 10,000 pages: the cursor never ends".into(),
        }))
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
        let Some(a) = self.read_optional(path).await? else {
            return Ok(None);
        };
        Ok(Some(Fetched {
            context: self.decode(path, &a.body)?,
            etag: a.etag,
        }))
    }

    /// A `GET` of `path`; `None` on 404.
    async fn read_optional(&self, path: &str) -> Result<Option<Reply>> {
        match self
            .request(Method::GET, path, None, None, Idempotency::Read)
            .await
        {
            Ok(a) => Ok(Some(a)),
            Err(e) if e.contextq_code() == Some(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET path` decoded, or `None` on 404.
    async fn get_optional<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>> {
        self.read_optional(path)
            .await?
            .map(|a| self.decode(path, &a.body))
            .transpose()
    }

    /// `POST /api/contexts/bulk-upsert` (all or nothing). Retried on an unknown outcome when
    /// keyed (extension `idempotency`), else only when no item is create-only.
    pub async fn bulk_upsert(&self, items: &[ContextInput]) -> Result<Vec<UpsertResult>> {
        let path = "/api/contexts/bulk-upsert";
        let body = self.encode(
            path,
            &BulkUpsert {
                contexts: items.to_vec(),
            },
        )?;
        let kind = if items.iter().any(|i| i.if_absent) {
            Idempotency::Unsafe
        } else {
            Idempotency::Safe
        };
        let (key, kind) = self.write_key(kind).await?;
        let a = self
            .request_with(Method::POST, path, Some(&body), None, key.as_deref(), kind)
            .await?;
        Ok(self.decode::<BulkUpsertResults>(path, &a.body)?.results)
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
        let body = self.encode(
            &path,
            &UpdateContext {
                content: content.to_string(),
                title: title.map(|t| Some(t.to_string())),
                tags: tags.map(<[String]>::to_vec),
            },
        )?;
        let kind = if if_match.is_some() {
            Idempotency::Unsafe
        } else {
            Idempotency::Safe
        };
        let (key, kind) = self.write_key(kind).await?;
        let a = self
            .request_with(
                Method::PUT,
                &path,
                Some(&body),
                if_match,
                key.as_deref(),
                kind,
            )
            .await?;
        Ok(Fetched {
            context: self.decode(&path, &a.body)?,
            etag: a.etag,
        })
    }

    /// `POST /api/contexts/by-external/:externalId/edit` (extension `text-edit`: send it only to
    /// a server that shows it), with `If-Match` when given. `idempotency_key` (1 to 128 visible
    /// ASCII characters, unique per edit) makes it safe to repeat, so the retry engine repeats
    /// it after a lost answer and the server applies it at most once. An edit that cannot apply
    /// is [`Error::EditRefused`].
    pub async fn edit(
        &self,
        external_id: &str,
        body: &EditContext,
        if_match: Option<i64>,
        idempotency_key: &str,
    ) -> Result<EditedContext> {
        self.post_edit(external_id, body, if_match, idempotency_key)
            .await
    }

    /// [`Client::edit`] with `snippetLines` set in `body` (extension `edit-snippet`: send it
    /// only to a server that shows it): the answer carries the lines around the change, not
    /// the whole new content.
    pub async fn edit_summary(
        &self,
        external_id: &str,
        body: &EditContext,
        if_match: Option<i64>,
        idempotency_key: &str,
    ) -> Result<EditedSummary> {
        self.post_edit(external_id, body, if_match, idempotency_key)
            .await
    }

    async fn post_edit<T: serde::de::DeserializeOwned>(
        &self,
        external_id: &str,
        body: &EditContext,
        if_match: Option<i64>,
        idempotency_key: &str,
    ) -> Result<T> {
        let path = format!("/api/contexts/by-external/{}/edit", segment(external_id));
        let body = self.encode(&path, &body)?;
        // Recorded outcomes make a repeat's answer the edit's outcome; the text edit's own keys
        // (before `idempotency`) only make it safe to repeat.
        let kind = if self.extensions().await?.idempotency {
            Idempotency::Keyed
        } else {
            Idempotency::Safe
        };
        let a = self
            .request_with(
                Method::POST,
                &path,
                Some(&body),
                if_match,
                Some(idempotency_key),
                kind,
            )
            .await?;
        self.decode(&path, &a.body)
    }

    /// `body` as JSON for the request to `path`.
    fn encode<B: serde::Serialize>(&self, path: &str, body: &B) -> Result<serde_json::Value> {
        serde_json::to_value(body).map_err(|e| {
            Error::from(ContextQError::Protocol {
                url: format!("{}{path}", self.base_url),
                message: format!("cannot encode the request: {e}"),
            })
        })
    }

    /// `POST /api/contexts/by-external/:externalId/rename` (extension `rename`: send it only to
    /// a server that shows it). Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn rename(&self, external_id: &str, body: &RenameContext) -> Result<RenamedContext> {
        let path = format!("/api/contexts/by-external/{}/rename", segment(external_id));
        self.post_unsafe(&path, body).await
    }

    /// `POST /api/contexts/by-prefix/delete` (extension `by-prefix`): a directory deleted in
    /// one transaction. Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn delete_prefix(&self, body: &DeletePrefix) -> Result<PrefixChanges> {
        self.post_unsafe("/api/contexts/by-prefix/delete", body)
            .await
    }

    /// `POST /api/contexts/by-prefix/rename` (extension `by-prefix`): a directory moved in one
    /// transaction. Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn rename_prefix(&self, body: &RenamePrefix) -> Result<PrefixChanges> {
        self.post_unsafe("/api/contexts/by-prefix/rename", body)
            .await
    }

    async fn post_unsafe<B: serde::Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        let body = self.encode(path, body)?;
        let (key, kind) = self.write_key(Idempotency::Unsafe).await?;
        let a = self
            .request_with(Method::POST, path, Some(&body), None, key.as_deref(), kind)
            .await?;
        self.decode(path, &a.body)
    }

    /// `DELETE /api/contexts/:id`, with `If-Match` when given.
    pub async fn delete(&self, id: &str, if_match: Option<i64>) -> Result<()> {
        let path = format!("/api/contexts/{}", segment(id));
        let (key, kind) = self.write_key(Idempotency::Unsafe).await?;
        self.request_with(Method::DELETE, &path, None, if_match, key.as_deref(), kind)
            .await?;
        Ok(())
    }

    /// `DELETE /api/contexts/by-external/:externalId?requireTag=&workspace=` (extension
    /// `delete-by-external`): the context there deleted in one request, if it carries `tag` and
    /// lives in `workspace` (else 404, nothing changed), and, with `if_match`, is at that
    /// version (else 412). Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn delete_by_external(
        &self,
        external_id: &str,
        tag: Option<&str>,
        workspace: Option<&str>,
        if_match: Option<i64>,
    ) -> Result<()> {
        let mut path = format!("/api/contexts/by-external/{}", segment(external_id));
        let mut sep = '?';
        for (name, value) in [("requireTag", tag), ("workspace", workspace)] {
            if let Some(v) = value {
                path.push_str(&format!("{sep}{name}={}", segment(v)));
                sep = '&';
            }
        }
        let (key, kind) = self.write_key(Idempotency::Unsafe).await?;
        self.request_with(Method::DELETE, &path, None, if_match, key.as_deref(), kind)
            .await?;
        Ok(())
    }

    /// `POST /api/redactions` (extension `redaction`, admin scope): one request's worth of
    /// versions redacted (or, `dryRun`, listed). Repeated after a lost answer: a redaction
    /// applied twice is the same redaction (an already redacted version is reported as such).
    /// [`ContextQError::RedactionUnavailable`] on a server without the extension.
    pub async fn redact(&self, body: &RedactRequest) -> Result<Redaction> {
        if !self.extensions().await?.redaction {
            return Err(Error::from(ContextQError::RedactionUnavailable {
                url: self.base_url.clone(),
            }));
        }
        let path = "/api/redactions";
        let body = self.encode(path, body)?;
        let (key, kind) = self.write_key(Idempotency::Safe).await?;
        let a = self
            .request_with(Method::POST, path, Some(&body), None, key.as_deref(), kind)
            .await?;
        self.decode(path, &a.body)
    }

    /// [`ContextQError::HistoryUnavailable`] unless the server has the `history` extension.
    async fn require_history(&self) -> Result<()> {
        if self.extensions().await?.history {
            Ok(())
        } else {
            Err(Error::from(ContextQError::HistoryUnavailable {
                url: self.base_url.clone(),
            }))
        }
    }

    /// `GET /api/contexts/by-external/:externalId/versions` (extension `history`): one page,
    /// newest first, of the versions written in `workspace` when given; `None` on 404 (no
    /// version kept).
    pub async fn versions(
        &self,
        external_id: &str,
        workspace: Option<&str>,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<Option<VersionPage>> {
        self.require_history().await?;
        let path = with_query(
            &format!(
                "/api/contexts/by-external/{}/versions",
                segment(external_id)
            ),
            &[
                ("workspace", workspace.map(str::to_string)),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor.map(str::to_string)),
            ],
        );
        self.get_optional(&path).await
    }

    /// `GET /api/contexts/by-external/:externalId/versions/:n` (extension `history`): the
    /// version with its content; `None` on 404.
    pub async fn version(
        &self,
        external_id: &str,
        version: i64,
        workspace: Option<&str>,
    ) -> Result<Option<HistoryVersion>> {
        self.require_history().await?;
        let mut path = format!(
            "/api/contexts/by-external/{}/versions/{version}",
            segment(external_id)
        );
        if let Some(w) = workspace {
            path = format!("{path}?workspace={}", segment(w));
        }
        self.get_optional(&path).await
    }

    /// Every page of `GET /api/history` (extension `history`): each external id under
    /// `prefix` with a kept version written in `workspace`, what it was at `at` (RFC 3339) and
    /// its newest version; with the point in time as the server read it.
    pub async fn history_at(
        &self,
        at: &str,
        prefix: &str,
        workspace: Option<&str>,
    ) -> Result<(String, Vec<PathAt>)> {
        self.require_history().await?;
        let mut paths = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let mut path = format!(
                "/api/history?at={}&externalIdPrefix={}&limit=500",
                segment(at),
                segment(prefix)
            );
            if let Some(w) = workspace {
                path.push_str(&format!("&workspace={}", segment(w)));
            }
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={}", segment(c)));
            }
            let a = self
                .request(Method::GET, &path, None, None, Idempotency::Read)
                .await?;
            let page: HistoryPage = self.decode(&path, &a.body)?;
            paths.extend(page.paths);
            match page.next_cursor {
                Some(c) if cursor.as_ref() != Some(&c) => cursor = Some(c),
                _ => return Ok((page.at, paths)),
            }
        }
        Err(Error::from(ContextQError::Protocol {
            url: format!("{}/api/history", self.base_url),
            message: "more than 10,000 pages: the cursor never ends".into(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
