//! What an operator watches (`GET /metrics`, Prometheus text 0.0.4): requests by route template,
//! method and status, their durations, the database pool, and writes refused by reason. Labels
//! come from closed sets, whatever a client sends: a route is its template
//! (`/api/contexts/{id}`; [`UNMATCHED`] for any other path), a method one of HTTP's nine (else
//! `other`), a status one the server answered, and nothing is labelled by tenant or key. One registry per server ([`Metrics`] in the app state), so that
//! servers in one process (tests, the embedded store) never mix their figures.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    route: String,
    method: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    route: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PoolLabels {
    state: &'static str,
}

/// The server's metrics and the registry that encodes them.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Counter>,
    durations: Family<RouteLabels, Histogram>,
    refused: Family<ReasonLabels, Counter>,
    pool: Family<PoolLabels, Gauge>,
    db_up: Gauge,
    unavailable: Counter,
    unauthorized: Family<ReasonLabels, Counter>,
}

/// The route of a request that matched none (its path is never a label).
pub const UNMATCHED: &str = "unmatched";

impl Default for Metrics {
    fn default() -> Self {
        let requests = Family::<RequestLabels, Counter>::default();
        // 1 ms to about 16 s, doubling.
        let durations = Family::<RouteLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.001, 2.0, 15))
        });
        let refused = Family::<ReasonLabels, Counter>::default();
        let pool = Family::<PoolLabels, Gauge>::default();
        let mut registry = Registry::default();
        registry.register(
            "contextq_http_requests",
            "HTTP requests answered, by route template, method and status",
            requests.clone(),
        );
        registry.register(
            "contextq_http_request_duration_seconds",
            "Time from a request's head to its answer, by route template and method",
            durations.clone(),
        );
        registry.register(
            "contextq_writes_refused",
            "Writes (any method but GET and HEAD) answered with an error, by the error's code",
            refused.clone(),
        );
        registry.register(
            "contextq_db_pool_connections",
            "Database connections (the pool and, on PostgreSQL, the write connections), by state (in_use, idle)",
            pool.clone(),
        );
        let db_up = Gauge::default();
        registry.register(
            "contextq_db_up",
            "1 while the database answers; 0 during an outage (a request refused 503 since the last one answered) or when /ready's last probe found no answer",
            db_up.clone(),
        );
        let unavailable = Counter::default();
        registry.register(
            "contextq_db_unavailable_requests",
            "Requests answered 503 because the database could not be reached",
            unavailable.clone(),
        );
        let unauthorized = Family::<ReasonLabels, Counter>::default();
        registry.register(
            "contextq_auth_refused",
            "Requests answered 401, by reason (missing, malformed, unknown, revoked, expired, session_revoked)",
            unauthorized.clone(),
        );
        Metrics {
            registry,
            requests,
            durations,
            refused,
            pool,
            db_up,
            unavailable,
            unauthorized,
        }
    }
}

/// A method as a label: one of HTTP's nine, else `other` (a client may send any token as its
/// method, and each label value is kept for the life of the process).
pub(crate) fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        Method::CONNECT => "CONNECT",
        Method::TRACE => "TRACE",
        _ => "other",
    }
}

impl Metrics {
    fn record(&self, route: &str, method: &Method, status: StatusCode, seconds: f64) {
        let method = method_label(method).to_string();
        self.requests
            .get_or_create(&RequestLabels {
                route: route.to_string(),
                method: method.clone(),
                status: status.as_u16(),
            })
            .inc();
        self.durations
            .get_or_create(&RouteLabels {
                route: route.to_string(),
                method: method.clone(),
            })
            .observe(seconds);
        if method != "GET"
            && method != "HEAD"
            && (status.is_client_error() || status.is_server_error())
        {
            let reason = contextq_api::ErrorCode::of_answer(status.as_u16(), None).map_or_else(
                || format!("status_{}", status.as_u16()),
                |c| c.as_str().to_string(),
            );
            self.refused.get_or_create(&ReasonLabels { reason }).inc();
        }
    }

    /// A request answered 503 because the database could not be reached.
    pub fn database_unavailable(&self) {
        self.unavailable.inc();
    }

    /// A request answered 401, for `reason` (one of a closed set: `missing`, `malformed`, `unknown`, `revoked`, `expired`, `session_revoked`).
    pub fn unauthorized(&self, reason: &'static str) {
        self.unauthorized
            .get_or_create(&ReasonLabels {
                reason: reason.to_string(),
            })
            .inc();
    }

    /// The text a scrape gets, with the pool's state as of now and whether the database is up.
    pub fn render(&self, pool_size: u32, pool_idle: usize, db_up: bool) -> String {
        self.db_up.set(i64::from(db_up));
        let idle = i64::try_from(pool_idle).unwrap_or(i64::MAX);
        self.pool
            .get_or_create(&PoolLabels { state: "idle" })
            .set(idle);
        self.pool
            .get_or_create(&PoolLabels { state: "in_use" })
            .set(i64::from(pool_size) - idle);
        let mut text = String::new();
        if prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry).is_err()
        {
            tracing::error!("cannot encode the metrics");
        }
        text
    }
}

/// The template of the route that matched, carried on the answer for [`count`] (which runs
/// outside routing, where the template is not known yet).
#[derive(Clone, Debug)]
struct RouteTemplate(Arc<str>);

/// Inside routing: notes the matched route's template on its answer.
pub(crate) async fn note_route(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|m| RouteTemplate(Arc::from(m.as_str())));
    let mut response = next.run(request).await;
    if let Some(route) = route {
        response.extensions_mut().insert(route);
    }
    response
}

/// Outermost: counts every answer and its time, by the template [`note_route`] noted.
pub(crate) async fn count(
    State(metrics): State<Arc<Metrics>>,
    request: Request,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = request.method().clone();
    let response = next.run(request).await;
    let route = response
        .extensions()
        .get::<RouteTemplate>()
        .map_or(UNMATCHED, |r| &r.0);
    metrics.record(
        route,
        &method,
        response.status(),
        started.elapsed().as_secs_f64(),
    );
    response
}

/// The route template [`note_route`] noted on `response` ([`UNMATCHED`] when none matched).
pub(crate) fn route_of(response: &Response) -> &str {
    response
        .extensions()
        .get::<RouteTemplate>()
        .map_or(UNMATCHED, |r| &r.0)
}

/// The answer to `GET /metrics` ([`crate::api`]'s route): Prometheus text, the pool as of now.
pub(crate) fn answer(metrics: &Metrics, pool_size: u32, pool_idle: usize, db_up: bool) -> Response {
    let text = metrics.render(pool_size, pool_idle, db_up);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn methods_outside_http_share_one_label() {
        assert_eq!(method_label(&Method::PATCH), "PATCH");
        for m in ["FOO1", "get", "PROPFIND", &"X".repeat(16_384)] {
            let m = Method::from_bytes(m.as_bytes()).unwrap();
            assert_eq!(method_label(&m), "other");
        }
    }
}
