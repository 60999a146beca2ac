//! Answers that come before a request's body was read (401/403 from the head, 413 on a declared
//! length) must reach the client. HTTP/1.1 servers that close the connection while the client
//! is still sending make it see a broken pipe instead of the answer; so a body left unread when
//! its request is done is read to its end and thrown away in the background, up to
//! [`DRAIN_LIMIT_BYTES`] and [`DRAIN_TIME`], after which the connection is closed. Nothing of it
//! is kept: draining costs bandwidth, not memory.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::Request;
use axum::response::Response;

/// Most bytes of an unread body read and thrown away so that its client gets the answer.
pub const DRAIN_LIMIT_BYTES: u64 = 16 << 20;

/// Longest time spent draining one unread body.
pub const DRAIN_TIME: Duration = Duration::from_secs(10);

/// Middleware: the request's body drains itself if it is dropped before its end.
pub async fn drain_unread_bodies(req: Request, next: axum::middleware::Next) -> Response {
    let (parts, body) = req.into_parts();
    let body = Body::new(DrainOnDrop {
        inner: Some(body),
        ended: false,
    });
    next.run(Request::from_parts(parts, body)).await
}

struct DrainOnDrop {
    inner: Option<Body>,
    ended: bool,
}

impl HttpBody for DrainOnDrop {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        let Some(inner) = self.inner.as_mut() else {
            return Poll::Ready(None);
        };
        let polled = Pin::new(inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.ended = true;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.ended || self.inner.as_ref().is_none_or(HttpBody::is_end_stream)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| http_body::SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl Drop for DrainOnDrop {
    fn drop(&mut self) {
        let Some(body) = self.inner.take() else {
            return;
        };
        if self.ended || body.is_end_stream() {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = tokio::time::timeout(DRAIN_TIME, drain(body)).await;
            });
        }
    }
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
