//! A ContextQ server in this process, reached without a socket: [`LocalService`], which the
//! [`Client`](super::Client) calls instead of sending its requests over HTTP
//! ([`ContextQMemoryToolOptions::local_service`](super::ContextQMemoryToolOptions::local_service)).
//!
//! The requests and answers are the same HTTP messages as on the network (method, path and
//! query, headers, JSON body), so everything above the transport is unchanged: the retry
//! engine, extension detection, error envelopes. What goes is the loopback connection, the
//! HTTP encoding and the socket wake-ups on both sides. With the `axum` feature,
//! [`RouterService`] makes any axum `Router` one, such as contextq-server's `app`: the CLI's
//! embedded default calls its server so (docs/benchmarks.md has what that saves per command).
//!
//! ```
//! use std::sync::Arc;
//! use contextq_memory_tool::contextq::local::{LocalAnswer, LocalService};
//!
//! /// Answers every request with an empty listing (a real one calls a server's router).
//! #[derive(Debug)]
//! struct Empty;
//!
//! impl LocalService for Empty {
//!     fn call(&self, _request: http::Request<Vec<u8>>) -> LocalAnswer {
//!         Box::pin(async {
//!             Ok(http::Response::new(br#"{"contexts":[]}"#.to_vec()))
//!         })
//!     }
//! }
//!
//! let options = contextq_memory_tool::contextq::ContextQMemoryToolOptions::new(
//!     "sk_live_0123456789abcdef0123456789abcdef01234567",
//! )
//! .local_service(Arc::new(Empty));
//! # let _ = options;
//! ```

use std::future::Future;
use std::pin::Pin;

/// Why a local call gave no answer (the server's task failed, or its body could not be read):
/// to the retry engine it is an answer lost after the request was sent.
pub type LocalFailure = Box<dyn std::error::Error + Send + Sync>;

/// What [`LocalService::call`] returns: the server's whole answer, or why there is none.
pub type LocalAnswer =
    Pin<Box<dyn Future<Output = Result<http::Response<Vec<u8>>, LocalFailure>> + Send>>;

/// A ContextQ server the client calls in this process.
///
/// Contract: `request` is what the client would send over HTTP. Its URI is the path and
/// query only (`/api/contexts/by-external/x?workspace=w`); its headers are `Host`
/// (the configured base URL's), `Authorization: Bearer <key>`, and, as the request needs them,
/// `Content-Type: application/json`, `If-Match` and `Idempotency-Key`. The answer is the
/// server's, whole: status, headers (the `ETag` and `ContextQ-Extensions` the client learns
/// from), body. A request the server refuses is an answer (4xx, 5xx), not a failure. The
/// client bounds each call by its timeout and treats a call that does not finish in time, or
/// ends in [`LocalFailure`], as sent with its outcome unknown, exactly as a lost answer on the
/// network. A service should keep running a request whose caller went away (as a server does
/// when a connection drops), so that a write is either applied whole or not at all.
pub trait LocalService: Send + Sync + std::fmt::Debug {
    /// Answers one request.
    fn call(&self, request: http::Request<Vec<u8>>) -> LocalAnswer;
}

/// An axum `Router` as a [`LocalService`] (feature `axum`), e.g. contextq-server's
/// `app(state)` over the same database as a server listening for other processes.
///
/// Each request runs in a task of its own, as on a connection of a server: a request whose
/// caller stopped waiting (the client's timeout) still runs to its end, so a write is applied
/// whole or not at all, and a handler that panics is a lost answer ([`LocalFailure`]).
#[cfg(feature = "axum")]
#[derive(Clone)]
pub struct RouterService(axum::Router);

#[cfg(feature = "axum")]
impl RouterService {
    /// `router`, called in this process.
    pub fn new(router: axum::Router) -> RouterService {
        RouterService(router)
    }
}

#[cfg(feature = "axum")]
impl std::fmt::Debug for RouterService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RouterService")
    }
}

#[cfg(feature = "axum")]
impl LocalService for RouterService {
    fn call(&self, request: http::Request<Vec<u8>>) -> LocalAnswer {
        let mut router = self.0.clone();
        let task = tokio::spawn(async move {
            let Ok(response) =
                tower::Service::call(&mut router, request.map(axum::body::Body::from)).await;
            let (parts, body) = response.into_parts();
            let body = axum::body::to_bytes(body, usize::MAX).await?;
            Ok::<_, axum::Error>(http::Response::from_parts(parts, body.to_vec()))
        });
        Box::pin(async move {
            match task.await {
                Ok(Ok(response)) => Ok(response),
                Ok(Err(e)) => Err(e.into()),
                Err(e) => Err(e.into()),
            }
        })
    }
}
