//! The HTTP API of `shared/spec/contextq-api.md`: [`app`] builds the router (testable without a
//! socket), [`serve`] runs it on a bound listener until a shutdown future resolves.
//!
//! Handlers are thin: they authenticate ([`Auth`]), check the scope, parse, and call
//! [`crate::store`]. Every answer carries `ContextQ-Extensions` (the contract's extensions this
//! server implements). Conditional requests: reads answer `ETag: "<version>"`; `PUT` and `DELETE`
//! honour `If-Match`. Request bodies are capped ([`ServerConfig::max_body_bytes`], 413 above)
//! and every request has a timeout ([`ServerConfig::request_timeout`], 408 after). The request
//! log records method, path, status and latency, never headers, so keys never reach it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use tokio::net::TcpListener;

use crate::auth::{Auth, KeyCache};
use crate::db::Db;
use crate::error::ApiError;
use crate::model::{Context, ContextInput, Scope};
use crate::store::{self, Actor, ListQuery};

/// Server settings, with documented defaults.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Largest request body (default 16 MiB; a bulk upsert of 100 large contexts needs more, and
    /// is refused with 413).
    pub max_body_bytes: usize,
    /// Longest a request may take (default 30 s; then 408).
    pub request_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            max_body_bytes: 16 << 20,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Shared state of the handlers.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The database.
    pub db: Db,
    /// Recent key lookups.
    pub key_cache: Arc<KeyCache>,
    /// Settings.
    pub config: Arc<ServerConfig>,
}

impl AppState {
    /// State over `db` with `config`.
    pub fn new(db: Db, config: ServerConfig) -> Self {
        AppState {
            db,
            key_cache: Arc::new(KeyCache::default()),
            config: Arc::new(config),
        }
    }
}

/// The router with every endpoint and middleware.
pub fn app(state: AppState) -> Router {
    let config = state.config.clone();
    Router::new()
        .route("/health", get(health))
        .route("/api/workspaces", get(list_workspaces).post(create_workspace))
        .route("/api/workspaces/{slug}/archive", post(archive_workspace))
        .route("/api/workspaces/{slug}", axum::routing::delete(delete_workspace))
        .route("/api/contexts", get(list_contexts))
        .route("/api/contexts/bulk-upsert", post(bulk_upsert))
        .route("/api/contexts/by-external/{external_id}", get(get_by_external))
        .route(
            "/api/contexts/{id}",
            get(get_context).put(update_context).delete(delete_context),
        )
        .fallback(|| async { ApiError::not_found("no such endpoint") })
        .layer(axum::middleware::map_response(advertise_extensions))
        .layer(axum::extract::DefaultBodyLimit::max(config.max_body_bytes))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    tracing::info_span!("request", method = %req.method(), path = %req.uri().path())
                })
                .on_response(
                    tower_http::trace::DefaultOnResponse::new().level(tracing::Level::DEBUG),
                ),
        )
        .with_state(state)
}

/// Serves [`app`] on `listener` until `shutdown` resolves, then finishes in-flight requests.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}

/// Every answer names the contract's extensions this server implements, so that a client knows
/// them from its first request.
async fn advertise_extensions(mut response: Response) -> Response {
    response.headers_mut().insert(
        crate::model::EXTENSIONS_HEADER,
        HeaderValue::from_static(crate::model::EXTENSIONS),
    );
    response
}

/// A JSON body whose errors are the contract's (400 bad JSON, 413 too large).
struct JsonBody<T>(T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::too_large("request body too large")
            } else {
                ApiError::bad_request(e.body_text())
            }
        })?;
        serde_json::from_slice(&bytes)
            .map(JsonBody)
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
    }
}

fn with_etag(context: Context) -> Response {
    let etag = format!("\"{}\"", context.version);
    let mut response = Json(context).into_response();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        response.headers_mut().insert(header::ETAG, v);
    }
    response
}

/// `If-Match: "<version>"` (weak `W/` accepted; `*` means any).
fn if_match(headers: &HeaderMap) -> Result<Option<i64>, ApiError> {
    let Some(v) = headers.get(header::IF_MATCH) else {
        return Ok(None);
    };
    let text = v
        .to_str()
        .map_err(|_| ApiError::bad_request("If-Match is not ASCII"))?
        .trim();
    if text == "*" {
        return Ok(None);
    }
    text.trim_start_matches("W/")
        .trim_matches('"')
        .parse::<i64>()
        .map(Some)
        .map_err(|_| ApiError::bad_request(format!("If-Match must be \"<version>\", got {text:?}")))
}

fn actor(auth: &Auth) -> Actor<'_> {
    Actor {
        tenant_id: &auth.tenant_id,
        key_id: Some(&auth.key_id),
    }
}

async fn health(State(state): State<AppState>) -> Result<Json<serde_json::Value>, ApiError> {
    let version = state.db.schema_version().await?;
    Ok(Json(
        serde_json::json!({"status": "ok", "schemaVersion": version}),
    ))
}

async fn list_workspaces(State(s): State<AppState>, auth: Auth) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    let workspaces = store::list_workspaces(&s.db, &auth.tenant_id).await?;
    Ok(Json(serde_json::json!({ "workspaces": workspaces })).into_response())
}

#[derive(Deserialize)]
struct CreateWorkspace {
    slug: String,
    #[serde(default)]
    name: String,
}

async fn create_workspace(
    State(s): State<AppState>,
    auth: Auth,
    JsonBody(body): JsonBody<CreateWorkspace>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Admin)?;
    let ws = store::create_workspace(&s.db, actor(&auth), &body.slug, &body.name).await?;
    Ok((StatusCode::CREATED, Json(ws)).into_response())
}

async fn archive_workspace(
    State(s): State<AppState>,
    auth: Auth,
    Path(slug): Path<String>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Admin)?;
    Ok(Json(store::archive_workspace(&s.db, actor(&auth), &slug).await?).into_response())
}

async fn delete_workspace(
    State(s): State<AppState>,
    auth: Auth,
    Path(slug): Path<String>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Admin)?;
    store::delete_workspace(&s.db, actor(&auth), &slug).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

fn encode_cursor(external_id: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(external_id)
}

fn decode_cursor(cursor: &str) -> Result<String, ApiError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| ApiError::bad_request("invalid cursor: pass nextCursor back unchanged"))
}

async fn list_contexts(
    State(s): State<AppState>,
    auth: Auth,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    let nonempty = |k: &str| params.get(k).filter(|v| !v.is_empty()).cloned();
    let query = ListQuery {
        workspace: nonempty("workspace"),
        tag: nonempty("tag"),
        external_id_prefix: nonempty("externalIdPrefix"),
        limit: store::page_limit(params.get("limit").map(String::as_str))?,
        after: nonempty("cursor").map(|c| decode_cursor(&c)).transpose()?,
    };
    let (contexts, next) = store::list_contexts(&s.db, &auth.tenant_id, &query).await?;
    Ok(Json(serde_json::json!({
        "contexts": contexts,
        "nextCursor": next.map(|n| encode_cursor(&n)),
    }))
    .into_response())
}

async fn get_by_external(
    State(s): State<AppState>,
    auth: Auth,
    Path(external_id): Path<String>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    store::get_by_external(&s.db, &auth.tenant_id, &external_id)
        .await?
        .map(with_etag)
        .ok_or_else(|| ApiError::not_found(format!("no context with externalId {external_id:?}")))
}

async fn get_context(
    State(s): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Read)?;
    store::get_by_id(&s.db, &auth.tenant_id, &id)
        .await?
        .map(with_etag)
        .ok_or_else(|| ApiError::not_found(format!("context {id:?} does not exist")))
}

#[derive(Deserialize)]
struct BulkUpsert {
    contexts: Vec<ContextInput>,
}

async fn bulk_upsert(
    State(s): State<AppState>,
    auth: Auth,
    JsonBody(body): JsonBody<BulkUpsert>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Write)?;
    let results = store::bulk_upsert(&s.db, actor(&auth), &body.contexts).await?;
    Ok(Json(serde_json::json!({ "results": results })).into_response())
}

#[derive(Deserialize)]
struct UpdateContext {
    content: String,
    #[serde(default, deserialize_with = "present")]
    title: Option<Option<String>>,
    #[serde(default)]
    tags: Option<Vec<String>>,
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

async fn update_context(
    State(s): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
    headers: HeaderMap,
    JsonBody(body): JsonBody<UpdateContext>,
) -> Result<Response, ApiError> {
    auth.require(Scope::Write)?;
    let expected = if_match(&headers)?;
    let context = store::update(
        &s.db,
        actor(&auth),
        &id,
        &body.content,
        body.title,
        body.tags,
        expected,
    )
    .await?;
    Ok(with_etag(context))
}

async fn delete_context(
    State(s): State<AppState>,
    auth: Auth,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    auth.require(Scope::Write)?;
    let expected = if_match(&headers)?;
    store::delete(&s.db, actor(&auth), &id, expected).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
