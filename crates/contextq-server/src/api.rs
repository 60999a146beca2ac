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
//!
//! # Files (one per resource, beside `store/`'s)
//! - `state`: [`ServerConfig`] and [`AppState`].
//! - `workspaces`, `contexts`, `history` (versions, diff, history, audit, redactions): handlers.
//! - `memory_stores`: Anthropic's Memory Stores API (`/v1`), its errors and page tokens.
//! - [`extract`] (the caller, bodies, `If-Match`), [`error`] ([`ApiError`]), `keyed`
//!   (`Idempotency-Key`), `drain` (unread bodies).
//! - Here: the routes, the middleware every answer goes through, `/health`, `/ready`, `/metrics`.

use axum::extract::{Request, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use contextq_api::{ErrorCode, Extensions};

mod contexts;
mod drain;
pub(crate) use drain::drain_unread_bodies;
pub mod error;
pub mod extract;
mod history;
mod keyed;
mod memory_stores;
pub(crate) use memory_stores::anthropic_errors;
pub mod ready;
mod state;
mod workspaces;

use contexts::*;
pub use error::ApiError;
pub use extract::BodyBudget;
pub use extract::Caller;
pub use state::{
    AppState, DEFAULT_BODY_BUDGET_BYTES, DEFAULT_BODY_SHARE_BYTES, DEFAULT_MAX_BODY_BYTES,
    DEFAULT_MAX_BULK_BODY_BYTES, DEFAULT_MIN_BODY_RATE, ServerConfig,
};
use workspaces::*;

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
        .merge(memory_stores_routes())
}

/// The Memory Stores door (extension `memory-stores`, docs/memory-stores.md).
fn memory_stores_routes() -> Router<AppState> {
    use axum::routing::delete;
    use memory_stores as m;
    Router::new()
        .route(
            "/v1/memory_stores",
            get(m::list_stores).post(m::create_store),
        )
        .route(
            "/v1/memory_stores/{store_id}",
            get(m::get_store)
                .post(m::update_store)
                .delete(m::delete_store),
        )
        .route(
            "/v1/memory_stores/{store_id}/archive",
            post(m::archive_store),
        )
        .route(
            "/v1/memory_stores/{store_id}/memories",
            get(m::list_memories).post(m::create_memory),
        )
        .route(
            "/v1/memory_stores/{store_id}/memories/{memory_id}",
            get(m::get_memory)
                .post(m::update_memory)
                .merge(delete(m::delete_memory)),
        )
        .route(
            "/v1/memory_stores/{store_id}/memory_versions",
            get(m::list_versions),
        )
        .route(
            "/v1/memory_stores/{store_id}/memory_versions/{version_id}",
            get(m::get_version),
        )
        .route(
            "/v1/memory_stores/{store_id}/memory_versions/{version_id}/redact",
            post(m::redact_version),
        )
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
        state.metrics.database_unavailable();
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

/// `GET /health`: liveness only. It never touches the database, so that a liveness probe does
/// not restart every replica during a database outage (`/ready` says whether it can serve).
async fn health() -> Json<serde_json::Value> {
    Json(serde_json::json!({"status": "ok", "version": env!("CARGO_PKG_VERSION")}))
}

/// `GET /metrics`: Prometheus text ([`crate::metrics`]). No key: it names no tenant, key or
/// path.
async fn metrics(State(state): State<AppState>) -> Response {
    let (open, idle) = state.db.connections();
    let up = !state.db.outage().is_on() && state.readiness.database_answered();
    crate::metrics::answer(&state.metrics, open, idle, up)
}

async fn ready(State(state): State<AppState>) -> Response {
    ready::ready(state).await
}
