//! The HTTP API of the contract (`docs/contextq-api.md`): its routes, handlers and errors;
//! [`crate::app`] builds the whole router from them (testable without a socket), and
//! [`crate::serve`] runs it on a bound listener until a shutdown future resolves.
//!
//! Handlers are thin: they take the [`Caller`] (authenticated by key), check the scope, parse,
//! and call [`crate::store`]; data-layer errors become [`ApiError`]s in one place
//! ([`error`]). Every answer carries `ContextQ-Extensions` (the contract's extensions this
//! server implements). Conditional requests: reads answer `ETag: "<version>"`; `PUT` and
//! `DELETE` honour `If-Match`. Request bodies are capped ([`ServerConfig::max_body_bytes`], 413
//! above) and held within a budget of bodies in flight ([`ServerConfig::body_budget_bytes`]); every
//! request has a timeout ([`ServerConfig::request_timeout`], 408 after). The key
//! and its scope are checked from the request's head ([`extract::Writer`], [`extract::Admin`])
//! before any of its body is read. The
//! request log records method, path, status and latency, never headers, so keys never reach it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use contextq_api::bodies::{
    BulkUpsert, BulkUpsertResults, ContextPage, CreateWorkspace, DeletePrefix, EditContext,
    EditedContext, EditedSummary, MAX_SNIPPET_LINES, PrefixChanges, RenameContext, RenamePrefix,
    RenamedContext, Tree, UpdateContext, WorkspaceList,
};
use contextq_api::{Context, ErrorCode, Extensions, Scope};

use crate::auth::KeyCache;
use crate::db::Db;
use crate::listen::ConnectionLimits;
use crate::store::{self, contexts, prefix, workspaces};

mod drain;
pub(crate) use drain::drain_unread_bodies;
pub mod error;
pub mod extract;
mod history;
mod keyed;

pub use error::ApiError;
pub use extract::BodyBudget;
pub use extract::Caller;
use extract::{Admin, JsonBody, Writer, if_match};
use keyed::{KeyedRequest, answer_as};

/// Server settings, with documented defaults; built from `Default` with its setters.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Largest body of a one-context request (`PUT /api/contexts/:id`, a text edit, a workspace
    /// create), in bytes; 413 above. Default [`DEFAULT_MAX_BODY_BYTES`]: 2 MiB + 64 KiB, room for
    /// 1 MiB of content whose JSON escapes at most double it (quotes, newlines, tabs) and every
    /// other field at its limit.
    pub max_body_bytes: usize,
    /// Largest body of `POST /api/contexts/bulk-upsert`, in bytes; 413 above (send fewer items
    /// per request). Default [`DEFAULT_MAX_BULK_BODY_BYTES`]: 8 MiB.
    pub max_bulk_body_bytes: usize,
    /// Request bodies in flight at once, in bytes, over all connections (default
    /// [`DEFAULT_BODY_BUDGET_BYTES`]: 64 MiB). A body reserves its declared length (or its
    /// route's limit when it declares none) before it is read and holds it until its request is
    /// answered; one that does not fit waits, within the request timeout. This is what bounds
    /// the server's memory under a burst of large writes.
    pub body_budget_bytes: usize,
    /// Each tenant's share of the budget, in bytes (default [`DEFAULT_BODY_SHARE_BYTES`]:
    /// 16 MiB; at most the budget): one tenant's bodies in flight never hold more, so a tenant
    /// that floods or trickles large bodies makes only itself wait.
    pub body_share_bytes: usize,
    /// Slowest a request body may arrive, in bytes a second on average after its first
    /// [`extract::BODY_GRACE`] (5 s); a slower one is cut with 408 (default
    /// [`DEFAULT_MIN_BODY_RATE`]: 4 KiB/s; 0: no minimum).
    pub min_body_rate: u64,
    /// Longest a request may take, reading its body included (default 30 s; then 408).
    pub request_timeout: Duration,
    /// Header read and idle timeouts and the connection cap ([`ConnectionLimits`]).
    pub connections: ConnectionLimits,
    /// Serve read-only (default false): every request that needs the `write` or `admin` scope
    /// is refused with 403 in the envelope, whatever its key, and nothing is changed.
    pub read_only: bool,
}

/// Default [`ServerConfig::max_body_bytes`]: 2 MiB + 64 KiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = (2 << 20) + (64 << 10);
/// Default [`ServerConfig::max_bulk_body_bytes`]: 8 MiB.
pub const DEFAULT_MAX_BULK_BODY_BYTES: usize = 8 << 20;
/// Default [`ServerConfig::body_budget_bytes`]: 64 MiB.
pub const DEFAULT_BODY_BUDGET_BYTES: usize = 64 << 20;
/// Default [`ServerConfig::body_share_bytes`]: 16 MiB (two of the largest bulk bodies).
pub const DEFAULT_BODY_SHARE_BYTES: usize = 16 << 20;
/// Default [`ServerConfig::min_body_rate`]: 4 KiB a second.
pub const DEFAULT_MIN_BODY_RATE: u64 = 4 << 10;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_bulk_body_bytes: DEFAULT_MAX_BULK_BODY_BYTES,
            body_budget_bytes: DEFAULT_BODY_BUDGET_BYTES,
            body_share_bytes: DEFAULT_BODY_SHARE_BYTES,
            min_body_rate: DEFAULT_MIN_BODY_RATE,
            request_timeout: Duration::from_secs(30),
            connections: ConnectionLimits::default(),
            read_only: false,
        }
    }
}

contextq_api::setters!(ServerConfig {
    max_body_bytes: usize,
    max_bulk_body_bytes: usize,
    body_budget_bytes: usize,
    body_share_bytes: usize,
    min_body_rate: u64,
    request_timeout: Duration,
    connections: ConnectionLimits,
    read_only: bool,
});

/// Shared state of the handlers.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// Recent key lookups.
    pub key_cache: Arc<KeyCache>,
    /// Settings.
    pub config: Arc<ServerConfig>,
    /// Room for request bodies in flight ([`ServerConfig::body_budget_bytes`]).
    pub body_budget: Arc<BodyBudget>,
    /// One-time sign-in tokens of the inspector ([`crate::ui`]).
    pub sign_in: Arc<crate::auth::SignInTokens>,
    /// What `/metrics` reports ([`crate::metrics`]).
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl AppState {
    /// State over `db` with `config`. On PostgreSQL this starts listening for key revocations
    /// ([`crate::auth::watch_revocations`]; call it inside a Tokio runtime), so that a cached
    /// key lookup is never used after its key was revoked.
    pub fn new(db: Db, config: ServerConfig) -> Self {
        let key_cache = Arc::new(KeyCache::for_db(&db));
        crate::auth::watch_revocations(&db, &key_cache);
        AppState {
            db,
            key_cache,
            body_budget: Arc::new(BodyBudget::new(
                config.body_budget_bytes,
                config.body_share_bytes,
            )),
            config: Arc::new(config),
            sign_in: Arc::default(),
            metrics: Arc::default(),
        }
    }
}

/// The API's routes (the contract's endpoints and their extensions); [`crate::app`] adds the
/// inspector's and the middleware every answer goes through.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .route(
            "/api/workspaces",
            get(list_workspaces).post(create_workspace),
        )
        .route("/api/workspaces/{slug}/archive", post(archive_workspace))
        .route(
            "/api/workspaces/{slug}",
            axum::routing::delete(delete_workspace),
        )
        .route("/api/contexts", get(list_contexts))
        .route("/api/contexts/tree", get(tree))
        .route("/api/contexts/search", get(search))
        .route("/api/contexts/by-prefix/delete", post(delete_prefix))
        .route("/api/contexts/by-prefix/rename", post(rename_prefix))
        .route("/api/contexts/bulk-upsert", post(bulk_upsert))
        .route(
            "/api/contexts/by-external/{external_id}",
            get(get_by_external).delete(delete_by_external),
        )
        .route(
            "/api/contexts/by-external/{external_id}/edit",
            post(edit_context),
        )
        .route(
            "/api/contexts/by-external/{external_id}/rename",
            post(rename_context),
        )
        .route(
            "/api/contexts/{id}",
            get(get_context).put(update_context).delete(delete_context),
        )
        .route(
            "/api/contexts/by-external/{external_id}/versions",
            get(history::by_external),
        )
        .route(
            "/api/contexts/by-external/{external_id}/versions/{version}",
            get(history::one_by_external),
        )
        .route(
            "/api/contexts/by-external/{external_id}/diff",
            get(history::diff),
        )
        .route("/api/contexts/{id}/versions", get(history::by_id))
        .route(
            "/api/contexts/{id}/versions/{version}",
            get(history::one_by_id),
        )
        .route("/api/history", get(history::at))
        .route("/api/audit", get(history::audit))
        .route("/api/redactions", post(history::redact))
}

/// Logs the database's outages once each ([`crate::db::outage::Outage`]): an answer refused
/// because the database is unavailable starts or continues one; an API answer that is not a
/// server failure (it reached the database) ends it.
pub(crate) async fn note_outage(
    State(state): State<AppState>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let api = req.uri().path().starts_with("/api/");
    let response = next.run(req).await;
    if let Some(why) = response.extensions().get::<error::Unavailable>() {
        state.db.outage().refused(&why.0);
    } else if api && response.status().as_u16() < 500 {
        state.db.outage().answered();
    }
    response
}

/// Every error answer is the contract's JSON envelope, also those no handler wrote: the
/// framework's rejections of a path or query (plain text), 405 (an empty body), a timeout (408)
/// and a body over the limit (413). Their text, when they have one, becomes the message.
pub(crate) async fn envelope_errors(req: Request, next: axum::middleware::Next) -> Response {
    let method = req.method().clone();
    let response = next.run(req).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if status.as_u16() < 400 || is_json {
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 64 * 1024)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
        .unwrap_or_default();
    let code = match status.as_u16() {
        401 => ErrorCode::Unauthorized,
        402 => ErrorCode::QuotaExceeded,
        403 => ErrorCode::Forbidden,
        404 => ErrorCode::NotFound,
        405 => ErrorCode::MethodNotAllowed,
        408 => ErrorCode::RequestTimeout,
        409 => ErrorCode::Conflict,
        412 => ErrorCode::PreconditionFailed,
        413 => ErrorCode::PayloadTooLarge,
        422 => ErrorCode::ValidationFailed,
        429 => ErrorCode::RateLimited,
        503 => ErrorCode::Unavailable,
        s if s >= 500 => ErrorCode::Internal,
        _ => ErrorCode::BadRequest,
    };
    let message = match code {
        // The router adds `Allow` after this layer has run.
        ErrorCode::MethodNotAllowed => {
            format!("this endpoint does not accept {method}; the Allow header lists what it does")
        }
        ErrorCode::RequestTimeout => "the request took too long".to_string(),
        ErrorCode::Internal => "the server failed; the detail is in its log".to_string(),
        _ if !text.is_empty() => text,
        _ => status
            .canonical_reason()
            .unwrap_or("bad request")
            .to_string(),
    };
    let mut answer = ApiError::new(code, message).into_response();
    // Keep what the framework said besides the body (Allow on 405, Retry-After).
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    *answer.status_mut() = status;
    answer
}

/// Every answer names the contract's extensions this server implements, so that a client knows
/// them from its first request.
pub(crate) async fn advertise_extensions(mut response: Response) -> Response {
    if let Ok(v) = HeaderValue::from_str(&Extensions::ALL.header_value()) {
        response
            .headers_mut()
            .insert(contextq_api::EXTENSIONS_HEADER, v);
    }
    response
}

fn with_etag(context: Context) -> Response {
    let version = context.version;
    tagged(Json(context).into_response(), version)
}

/// `response` with `ETag: "<version>"`.
fn tagged(mut response: Response, version: i64) -> Response {
    if let Ok(v) = HeaderValue::from_str(&format!("\"{version}\"")) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

/// `GET /health`: liveness only. It never touches the database, so that a liveness probe does
/// not restart every replica during a database outage (`/ready` says whether it can serve).
async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /metrics`: Prometheus text ([`crate::metrics`]). No key: it names no tenant, key or
/// path.
async fn metrics(State(state): State<AppState>) -> Response {
    let pool = state.db.pool();
    crate::metrics::answer(&state.metrics, pool.size(), pool.num_idle())
}

/// `GET /ready`: 200 only when this server can serve: the database answers, its migrations are
/// this server's, and its audit log's key is the one loaded. 503 with the reasons otherwise (a
/// load balancer takes the replica out; `/health` is liveness only).
async fn ready(State(state): State<AppState>) -> Response {
    let mut reasons = Vec::new();
    let latest = crate::db::latest_schema_version();
    match state.db.schema_version().await {
        Ok(v) if v == latest => {}
        Ok(v) => reasons.push(format!(
            "the database is at schema version {v}, this server at {latest}"
        )),
        Err(e) => {
            tracing::warn!(error = %e, "readiness: the database does not answer");
            reasons.push("the database does not answer".to_string());
        }
    }
    if reasons.is_empty() {
        match crate::audit::key_matches(&state.db).await {
            Ok(true) => {}
            Ok(false) => reasons.push(
                "the audit log's key is not the one this server loaded (see docs/schema.md)"
                    .to_string(),
            ),
            Err(e) => {
                tracing::warn!(error = %e, "readiness: cannot read the audit keying");
                reasons.push("cannot read the audit log's keying".to_string());
            }
        }
    }
    // The database in use, its password masked: a replica started against the wrong one (an
    // empty SQLite file in its working directory) is told apart at a glance.
    let database = crate::db::redact_url(state.db.url());
    if reasons.is_empty() {
        Json(serde_json::json!({"status": "ready", "schemaVersion": latest, "database": database}))
            .into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(serde_json::json!({"status": "not ready", "reasons": reasons, "database": database})),
        )
            .into_response()
    }
}

async fn list_workspaces(
    State(s): State<AppState>,
    caller: Caller,
) -> Result<Json<WorkspaceList>, ApiError> {
    caller.require(Scope::Read)?;
    let mut list = workspaces::list(&s.db, &caller.tenant_id).await?;
    list.retain(|w| caller.reaches(&w.slug));
    Ok(Json(WorkspaceList { workspaces: list }))
}

async fn create_workspace(
    State(s): State<AppState>,
    Admin(caller): Admin,
    JsonBody(body, _room): JsonBody<CreateWorkspace>,
) -> Result<Response, ApiError> {
    caller.write_in(&body.slug)?;
    let ws = workspaces::create(&s.db, caller.actor(), &body.slug, &body.name).await?;
    Ok((StatusCode::CREATED, Json(ws)).into_response())
}

async fn archive_workspace(
    State(s): State<AppState>,
    Admin(caller): Admin,
    Path(slug): Path<String>,
) -> Result<Response, ApiError> {
    caller.write_in(&slug)?;
    Ok(Json(workspaces::archive(&s.db, caller.actor(), &slug).await?).into_response())
}

async fn delete_workspace(
    State(s): State<AppState>,
    Admin(caller): Admin,
    Path(slug): Path<String>,
) -> Result<Response, ApiError> {
    caller.write_in(&slug)?;
    workspaces::delete(&s.db, caller.actor(), &slug).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// A query parameter that takes one of `choices` (name, value); the first is the default.
fn choice<T: Copy>(
    params: &HashMap<String, String>,
    name: &str,
    choices: &[(&str, T)],
) -> Result<T, ApiError> {
    let Some(given) = params.get(name) else {
        return Ok(choices[0].1);
    };
    choices
        .iter()
        .find(|(text, _)| text == given)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(text, _)| *text).collect();
            ApiError::new(
                ErrorCode::BadRequest,
                format!("{name} is {}, not {given:?}", names.join(" or ")),
            )
        })
}

/// A query parameter, `None` when absent or empty.
fn nonempty(params: &HashMap<String, String>, k: &str) -> Option<String> {
    params.get(k).filter(|v| !v.is_empty()).cloned()
}

fn encode_cursor(external_id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(external_id)
}

fn decode_cursor(cursor: &str) -> Result<String, ApiError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::BadRequest,
                "invalid cursor: pass nextCursor back unchanged",
            )
        })
}

async fn list_contexts(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<ContextPage>, ApiError> {
    caller.require(Scope::Read)?;
    let nonempty = |k: &str| nonempty(&params, k);
    let workspace = nonempty("workspace");
    if let Some(ws) = &workspace {
        caller.read_in(ws)?;
    }
    let query = contexts::ListQuery {
        within: caller.workspaces.clone(),
        workspace,
        tag: nonempty("tag"),
        external_id_prefix: nonempty("externalIdPrefix"),
        limit: contexts::page_limit(params.get("limit").map(String::as_str))?,
        after: match (nonempty("cursor"), nonempty("startAfter")) {
            (Some(_), Some(_)) => {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    "cursor and startAfter both name where a page starts: send one",
                ));
            }
            (Some(c), None) => Some(decode_cursor(&c)?),
            (None, after) => after,
        },
    };
    let (page, next) = contexts::list(&s.db, &caller.tenant_id, &query).await?;
    Ok(Json(ContextPage {
        contexts: page,
        next_cursor: next.map(|n| encode_cursor(&n)),
    }))
}

/// `GET /api/contexts/search` (extension `search`): ranked full-text search within the
/// listing's scopes and the key's workspaces.
async fn search(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<contextq_api::search::SearchPage>, ApiError> {
    use contextq_api::search::{DEFAULT_LIMIT, MAX_LIMIT, MAX_OFFSET, parse_cursor};
    caller.require(Scope::Read)?;
    let nonempty = |k: &str| nonempty(&params, k);
    let q = params.get("q").map(String::as_str).unwrap_or_default();
    let query = contextq_api::search::Query::parse(q)
        .map_err(|e| ApiError::new(ErrorCode::BadRequest, format!("q: {e}")))?;
    let workspace = nonempty("workspace");
    if let Some(ws) = &workspace {
        caller.read_in(ws)?;
    }
    let limit = match nonempty("limit") {
        None => DEFAULT_LIMIT,
        Some(l) => match l.parse::<u32>() {
            Ok(n) if (1..=MAX_LIMIT).contains(&n) => n,
            _ => {
                return Err(ApiError::new(
                    ErrorCode::BadRequest,
                    format!("limit must be an integer from 1 to {MAX_LIMIT}, got {l:?}"),
                ));
            }
        },
    };
    let offset = match nonempty("cursor") {
        None => 0,
        Some(c) => parse_cursor(&c).ok_or_else(|| {
            ApiError::new(
                ErrorCode::BadRequest,
                format!(
                    "cursor {c:?} is not one this server gave (a search pages through its first {MAX_OFFSET} hits)"
                ),
            )
        })?,
    };
    let page = store::search::search(
        &s.db,
        &caller.tenant_id,
        &store::search::SearchQuery {
            query,
            workspace,
            within: caller.workspaces.clone(),
            tag: nonempty("tag"),
            prefix: nonempty("prefix"),
            limit,
            offset,
        },
    )
    .await?;
    Ok(Json(page))
}

async fn tree(
    State(s): State<AppState>,
    caller: Caller,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<Tree>, ApiError> {
    caller.require(Scope::Read)?;
    let nonempty = |k: &str| nonempty(&params, k);
    let (tag, workspace) = (nonempty("requireTag"), nonempty("workspace"));
    if let Some(ws) = &workspace {
        caller.read_in(ws)?;
    }
    let scope = contexts::Scope {
        tag: tag.as_deref(),
        workspace: workspace.as_deref(),
    };
    let prefix = params.get("prefix").map(String::as_str).unwrap_or_default();
    let workspace_first = choice(
        &params,
        "workspaceFirst",
        &[("false", false), ("true", true)],
    )?;
    let depth = choice(&params, "depth", &[("2", 2), ("1", 1)])?;
    // Extension `tree-file`: the context at `file`, within the same scope, instead of the tree
    // when it is there (a `view` of a path that may be a file or a directory, in one request:
    // the file wins, so the tree is not read).
    if let Some(external_id) = nonempty("file") {
        let file = contexts::get_by_external(&s.db, &caller.tenant_id, &external_id)
            .await?
            .filter(|c| {
                caller.reaches(&c.workspace)
                    && scope.tag.is_none_or(|t| c.tags.iter().any(|x| x == t))
                    && scope.workspace.is_none_or(|w| c.workspace == w)
            });
        if file.is_some() {
            return Ok(Json(Tree {
                file,
                ..Tree::default()
            }));
        }
    }
    Ok(Json(
        prefix::tree(
            &s.db,
            &caller.tenant_id,
            prefix,
            scope,
            prefix::TreeOptions {
                workspace_first,
                depth,
                within: caller.workspaces.as_deref(),
            },
        )
        .await?,
    ))
}

async fn get_by_external(
    State(s): State<AppState>,
    caller: Caller,
    Path(external_id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(Scope::Read)?;
    let found = contexts::get_by_external(&s.db, &caller.tenant_id, &external_id)
        .await?
        .filter(|c| caller.reaches(&c.workspace));
    found_or(found, || {
        format!("no context with externalId {external_id:?}")
    })
}

/// The context with its `ETag`, or 404 with `missing`'s message.
fn found_or(
    found: Option<Context>,
    missing: impl FnOnce() -> String,
) -> Result<Response, ApiError> {
    found
        .map(with_etag)
        .ok_or_else(|| ApiError::new(ErrorCode::NotFound, missing()))
}

async fn get_context(
    State(s): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    caller.require(Scope::Read)?;
    let found = contexts::get(&s.db, &caller.tenant_id, &id)
        .await?
        .filter(|c| caller.reaches(&c.workspace));
    found_or(found, || format!("context {id:?} does not exist"))
}

async fn bulk_upsert(
    State(s): State<AppState>,
    Writer(caller): Writer,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body, _room): JsonBody<BulkUpsert>,
) -> Result<Json<BulkUpsertResults>, ApiError> {
    for item in &body.contexts {
        caller.write_in(&item.workspace)?;
    }
    let request = KeyedRequest::of(&headers, &method, &uri, &body)?;
    let answer = answer_as(|results: &Vec<contextq_api::UpsertResult>| {
        keyed::ok(&serde_json::json!({ "results": results }))
    });
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let results =
        contexts::bulk_upsert(&s.db, caller.actor_keyed(keyed.as_ref()), &body.contexts).await?;
    Ok(Json(BulkUpsertResults { results }))
}

/// What a keyed write records of a context it answers: the context without its content, with
/// its `ETag` (a replay puts the content back).
fn context_recorded(context: &Context) -> store::outcome::Recorded {
    let mut body = serde_json::to_value(context.summary()).unwrap_or_default();
    if let Some(o) = body.as_object_mut() {
        o.remove("sizeBytes");
    }
    store::outcome::Recorded {
        etag: Some(context.version),
        ..keyed::ok(&body)
    }
}

/// A replayed context answer with `content` put back where [`context_recorded`] left it out.
fn with_content(mut e: ApiError, content: impl FnOnce() -> Option<String>) -> ApiError {
    if let Some(recorded) = e.replay.as_mut()
        && recorded.status == 200
        && let Some(o) = recorded.body.as_object_mut()
    {
        match content() {
            Some(c) => {
                o.insert("content".into(), serde_json::Value::String(c));
            }
            None => return gone_content(),
        }
    }
    e
}

/// A replay whose content is no longer kept (its version pruned or redacted).
fn gone_content() -> ApiError {
    ApiError::new(
        ErrorCode::Conflict,
        "this Idempotency-Key's request was applied, but the content it wrote is no longer kept \
         (pruned or redacted), so its answer cannot be repeated: read the context",
    )
}

async fn update_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body, _room): JsonBody<UpdateContext>,
) -> Result<Response, ApiError> {
    let expected = if_match(&headers)?;
    write_to_row(&s, &caller, &id).await?;
    let request = KeyedRequest::of(&headers, &method, &uri, &body)?;
    let answer = answer_as(context_recorded);
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let content = body.content.clone();
    let context = contexts::update(
        &s.db,
        caller.actor_keyed(keyed.as_ref()),
        &id,
        &body.content,
        body.title,
        body.tags,
        expected,
    )
    .await
    // A repeat wrote this same content (the digest says so).
    .map_err(|e| with_content(e.into(), || Some(content)))?;
    Ok(with_etag(context))
}

async fn edit_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(external_id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body, _room): JsonBody<EditContext>,
) -> Result<Response, ApiError> {
    let expected = if_match(&headers)?;
    let request = KeyedRequest::of(&headers, &method, &uri, &body)?;
    limited_write(&caller, body.workspace.as_deref())?;
    if body.snippet_lines.is_some_and(|n| n > MAX_SNIPPET_LINES) {
        return Err(ApiError::new(
            ErrorCode::BadRequest,
            format!("snippetLines is at most {MAX_SNIPPET_LINES}; nothing was changed"),
        ));
    }
    // Recorded without content (nor the snippet, which is content): a replay rebuilds both
    // from the version the edit wrote.
    let answer = answer_as(|e: &EditedContext| {
        let mut recorded = context_recorded(&e.context);
        recorded.body =
            serde_json::json!({"context": recorded.body, "changedLine": e.changed_line});
        recorded
    });
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let edited = contexts::edit(
        &s.db,
        caller.actor_keyed(keyed.as_ref()),
        &external_id,
        &body.edit,
        contexts::Scope {
            tag: body.require_tag.as_deref(),
            workspace: body.workspace.as_deref(),
        },
        expected,
    )
    .await;
    let edited = match edited {
        Ok(edited) => edited,
        Err(e) => {
            let e = ApiError::from(e);
            return match &e.replay {
                Some(recorded) if recorded.status == 200 => {
                    replayed_edit(&s, &caller, recorded, body.snippet_lines).await
                }
                _ => Err(e),
            };
        }
    };
    let version = edited.context.version;
    let response = match body.snippet_lines {
        Some(n) => Json::<EditedSummary>(edited.summary(n)).into_response(),
        None => Json::<EditedContext>(edited).into_response(),
    };
    Ok(tagged(response, version))
}

/// The answer to a repeat of a keyed text edit: the edit as it was applied, its content read
/// from the version it wrote, marked `replayed`.
async fn replayed_edit(
    s: &AppState,
    caller: &Caller,
    recorded: &store::outcome::Recorded,
    snippet_lines: Option<usize>,
) -> Result<Response, ApiError> {
    let corrupt = |m: String| ApiError::from(store::Error::Corrupt(m));
    let mut context = recorded.body["context"].clone();
    let changed_line = recorded.body["changedLine"].as_u64().map(|n| n as usize);
    let (id, version) = (
        context["id"].as_str().unwrap_or_default().to_string(),
        context["version"].as_i64().unwrap_or_default(),
    );
    let content = store::history::content_of(&s.db, &caller.tenant_id, &id, version).await?;
    let response = match (content, snippet_lines) {
        (Some(content), n) => {
            context["content"] = serde_json::Value::String(content);
            let context: Context = serde_json::from_value(context)
                .map_err(|e| corrupt(format!("a recorded edit: {e}")))?;
            let edited = EditedContext {
                context,
                changed_line,
                replayed: true,
            };
            match n {
                Some(n) => Json::<EditedSummary>(edited.summary(n)).into_response(),
                None => Json::<EditedContext>(edited).into_response(),
            }
        }
        // The snippet is gone with the content; the summary still says what was applied.
        (None, Some(_)) => Json(serde_json::json!({
            "context": context,
            "changedLine": changed_line,
            "replayed": true,
        }))
        .into_response(),
        (None, None) => return Err(gone_content()),
    };
    let mut response = tagged(response, version);
    response
        .headers_mut()
        .insert(error::REPLAYED_HEADER, HeaderValue::from_static("true"));
    Ok(response)
}

async fn rename_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(external_id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body, _room): JsonBody<RenameContext>,
) -> Result<Response, ApiError> {
    let request = KeyedRequest::of(&headers, &method, &uri, &body)?;
    limited_write(&caller, body.workspace.as_deref())?;
    let rename = contexts::Rename {
        from: &external_id,
        to: &body.to,
        title: body.title.as_deref(),
    };
    let scope = contexts::Scope {
        tag: body.require_tag.as_deref(),
        workspace: body.workspace.as_deref(),
    };
    let answer = answer_as(|c: &Context| store::outcome::Recorded {
        etag: Some(c.version),
        ..keyed::ok(&RenamedContext {
            context: c.summary(),
        })
    });
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let c = contexts::rename(&s.db, caller.actor_keyed(keyed.as_ref()), rename, scope).await?;
    let version = c.version;
    let context = c.summary();
    Ok(tagged(
        Json(RenamedContext { context }).into_response(),
        version,
    ))
}

async fn delete_prefix(
    State(s): State<AppState>,
    Writer(caller): Writer,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body, _room): JsonBody<DeletePrefix>,
) -> Result<Json<PrefixChanges>, ApiError> {
    let request = KeyedRequest::of(&headers, &method, &uri, &body)?;
    limited_write(&caller, body.workspace.as_deref())?;
    let scope = contexts::Scope {
        tag: body.require_tag.as_deref(),
        workspace: body.workspace.as_deref(),
    };
    let answer = answer_as(|c: &PrefixChanges| keyed::ok(c));
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let actor = caller.actor_keyed(keyed.as_ref());
    let changes = prefix::delete_prefix(&s.db, actor, &body.prefix, scope).await?;
    Ok(Json(changes))
}

async fn rename_prefix(
    State(s): State<AppState>,
    Writer(caller): Writer,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    JsonBody(body, _room): JsonBody<RenamePrefix>,
) -> Result<Json<PrefixChanges>, ApiError> {
    let request = KeyedRequest::of(&headers, &method, &uri, &body)?;
    limited_write(&caller, body.workspace.as_deref())?;
    let retitle = match (body.title_from.as_deref(), body.title_to.as_deref()) {
        (Some(from), Some(to)) => Some(prefix::Retitle { from, to }),
        (None, None) => None,
        _ => {
            return Err(ApiError::new(
                ErrorCode::BadRequest,
                "titleFrom and titleTo go together: send both or neither; nothing was changed",
            ));
        }
    };
    let scope = contexts::Scope {
        tag: body.require_tag.as_deref(),
        workspace: body.workspace.as_deref(),
    };
    let answer = answer_as(|c: &PrefixChanges| keyed::ok(c));
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let changes = prefix::rename_prefix(
        &s.db,
        caller.actor_keyed(keyed.as_ref()),
        prefix::Move {
            from: &body.from,
            to: &body.to,
            retitle,
        },
        scope,
    )
    .await?;
    Ok(Json(changes))
}

/// A write to the row `id` by a key limited to workspaces: 403 when the row lives in another
/// (a row never changes workspace, so the check holds for the write). Absent: the write says so.
async fn write_to_row(s: &AppState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    if caller.workspaces.is_some()
        && let Some(c) = contexts::get(&s.db, &caller.tenant_id, id).await?
    {
        caller.write_in(&c.workspace)?;
    }
    Ok(())
}

/// A write by external id (text edit, rename, a directory) by a key limited to workspaces: it
/// must name its workspace (the write then touches no row of another) and reach it.
fn limited_write(caller: &Caller, workspace: Option<&str>) -> Result<(), ApiError> {
    match (&caller.workspaces, workspace) {
        (None, _) => Ok(()),
        (Some(_), Some(ws)) => caller.write_in(ws),
        (Some(w), None) => Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "this API key is limited to the workspaces {}: name the workspace of the write (\"workspace\"); nothing was changed",
                w.join(", ")
            ),
        )),
    }
}

/// Extension `delete-by-external`: `?requireTag=&workspace=` scope the delete as an edit's
/// body does (outside them the context is "not found"); `If-Match` as on `DELETE /:id`.
async fn delete_by_external(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(external_id): Path<String>,
    Query(params): Query<HashMap<String, String>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let expected = if_match(&headers)?;
    let request = KeyedRequest::of(&headers, &method, &uri, &())?;
    let (tag, workspace) = (
        nonempty(&params, "requireTag"),
        nonempty(&params, "workspace"),
    );
    limited_write(&caller, workspace.as_deref())?;
    let scope = contexts::Scope {
        tag: tag.as_deref(),
        workspace: workspace.as_deref(),
    };
    let answer = answer_as(|_: &()| keyed::no_content());
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    let actor = caller.actor_keyed(keyed.as_ref());
    contexts::delete_by_external(&s.db, actor, &external_id, scope, expected).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

async fn delete_context(
    State(s): State<AppState>,
    Writer(caller): Writer,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let expected = if_match(&headers)?;
    let request = KeyedRequest::of(&headers, &method, &uri, &())?;
    write_to_row(&s, &caller, &id).await?;
    let answer = answer_as(|_: &()| keyed::no_content());
    let keyed = request.as_ref().map(|r| r.keyed(&answer));
    contexts::delete(&s.db, caller.actor_keyed(keyed.as_ref()), &id, expected).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
