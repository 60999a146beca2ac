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
                ),
        )
        .layer(axum::middleware::from_fn_with_state(
            state.metrics.clone(),
            crate::metrics::count,
        ))
        .with_state(state)
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
