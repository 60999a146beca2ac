//! A typed client for every endpoint of the ContextQ contract (`docs/contextq-api.md`), with
//! the contract's own types (`contextq-api`).
//!
//! Requests carry `Authorization: Bearer <key>`; failures keep the contract's error code, the
//! status, the message and `Retry-After` ([`ContextQError::Api`]), or say why no answer came
//! ([`ContextQError::Transport`]). This is the one place that reads HTTP statuses; everything
//! above it matches [`ErrorCode`]s. Every request states whether repeating it is safe and goes through
//! the crate's retry engine ([`crate::retry`], configured by [`RetryConfig`]).
//! The key never appears in a URL, a log line, an error or `Debug` output ([`ApiKey`]).

mod probe;
mod read;
mod request;
mod write;

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

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The key (masked in `Debug`).
    pub fn key(&self) -> &ApiKey {
        &self.key
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
