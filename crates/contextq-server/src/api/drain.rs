//! Answers that come before a request's body was read (401/403 from the head, 413 on a declared
//! length) must reach the client. HTTP/1.1 servers that close the connection while the client
//! is still sending make it see a broken pipe instead of the answer; so a body left unread when
//! its request is done is read to its end and thrown away in the background, up to
//! [`DRAIN_LIMIT_BYTES`] and [`DRAIN_TIME`], after which the connection is closed. Nothing of it
//! is kept: draining costs bandwidth, not memory.

use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, HttpBody};
use axum::extract::Request;
use axum::response::Response;

/// Most bytes of an unread body read and thrown away so that its client gets the answer.
pub const DRAIN_LIMIT_BYTES: u64 = 16 << 20;

/// Longest time spent draining one unread body.
pub const DRAIN_TIME: Duration = Duration::from_secs(10);

/// Middleware: the request's body drains itself if it is dropped before its end.
pub async fn drain_unread_bodies(req: Request, next: axum::middleware::Next) -> Response {
    let (parts, body) = req.into_parts();
    let body = crate::body::Watched::body(body, |rest| {
        if let (Some(body), Ok(runtime)) = (rest, tokio::runtime::Handle::try_current()) {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(DRAIN_TIME, drain(body)).await;
            });
        }
    });
    next.run(Request::from_parts(parts, body)).await
}

async fn drain(mut body: Body) {
    let mut seen = 0u64;
    while let Some(Ok(frame)) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
    {
        if let Some(data) = frame.data_ref() {
            seen += data.len() as u64;
            if seen > DRAIN_LIMIT_BYTES {
                return;
            }
        }
    }
}
