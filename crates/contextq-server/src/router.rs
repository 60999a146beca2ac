//! The whole HTTP surface in one router: the API's routes ([`crate::api`]) and the inspector's
//! ([`crate::ui`]) under the middleware every answer goes through (the error envelope, timeouts,
//! body limits, the inspector's security headers, tracing), and [`serve`], which runs it on a
//! listener. It stands above both so that neither needs the other.

use std::future::Future;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use contextq_api::ErrorCode;
use tokio::net::TcpListener;

use crate::api::{ApiError, AppState};

/// The router with every endpoint and middleware (testable without a socket).
pub fn app(state: AppState) -> Router {
    let config = state.config.clone();
    crate::api::routes()
        .merge(crate::ui::routes())
        .route_layer(axum::middleware::from_fn(crate::metrics::note_route))
        .fallback(|| async { ApiError::new(ErrorCode::NotFound, "no such endpoint") })
        .layer(axum::middleware::map_response(
            crate::api::advertise_extensions,
        ))
        .layer(axum::middleware::from_fn(crate::ui::secure_headers))
        // Bodies are read by `JsonBody`, within each route's own limit.
        .layer(axum::extract::DefaultBodyLimit::max(
            config.max_body_bytes.max(config.max_bulk_body_bytes),
        ))
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .layer(axum::middleware::from_fn(crate::api::envelope_errors))
        // Outside the contract's envelope: `/v1`'s errors are then Anthropic's.
        .layer(axum::middleware::from_fn(crate::api::anthropic_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::api::note_outage,
        ))
        .layer(axum::middleware::from_fn(
            crate::api::drain_unread_bodies,
        ))
        .layer(
            tower_http::trace::TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    tracing::info_span!("request", method = %req.method(), path = %req.uri().path())
                })
                .on_response(
                    tower_http::trace::DefaultOnResponse::new().level(tracing::Level::DEBUG),
                )
                // Every answer has its line in the request log; a 5xx is not also an ERROR
                // (a database outage would log one per refused request).
                .on_failure(
                    tower_http::trace::DefaultOnFailure::new().level(tracing::Level::DEBUG),
                ),
        )
        .layer(axum::middleware::from_fn(log_request))
        .layer(axum::middleware::from_fn_with_state(
            state.metrics.clone(),
            crate::metrics::count,
        ))
        .with_state(state)
}

/// The target of the request log: one line per answered request at `info`.
pub const REQUEST_LOG: &str = "contextq::request";

/// One line per answered request, refusals (401, 403) included: its method (one of HTTP's nine,
/// else `other`), route template, status, latency and the id of the key it used (`-` when no
/// key was found; a revoked or expired key by its id, with `refused` saying why). Never a key,
/// a path's value or a body.
async fn log_request(
    mut request: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let started = std::time::Instant::now();
    let method = crate::metrics::method_label(request.method());
    let key = crate::api::extract::KeyIdSlot::default();
    let refusal = crate::api::extract::RefusalSlot::default();
    request.extensions_mut().insert(key.clone());
    request.extensions_mut().insert(refusal.clone());
    let response = next.run(request).await;
    // A known key refused says which one, and why (revoked, expired): an operator can tell which
    // agent still uses it. `refused` is left out of other lines.
    tracing::info!(
        target: REQUEST_LOG,
        method,
        route = crate::metrics::route_of(&response),
        status = response.status().as_u16(),
        latency_ms = started.elapsed().as_secs_f64() * 1000.0,
        key_id = key.0.get().map_or("-", String::as_str),
        refused = refusal.0.get().copied(),
        "request"
    );
    response
}

/// Serves [`app`] on `listener` until `shutdown` resolves, then finishes in-flight requests.
/// Connections are bounded by [`crate::ServerConfig::connections`] ([`crate::listen`]).
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, state, Router::new(), shutdown).await
}

/// [`serve`] with `extra`'s routes beside [`app`]'s (outside its middleware).
pub async fn serve_with(
    listener: TcpListener,
    state: AppState,
    extra: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let limits = state.config.connections;
    crate::listen::serve_connections(listener, app(state).merge(extra), limits, shutdown).await
}
