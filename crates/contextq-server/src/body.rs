//! A body passed through as it is, watched: when it is dropped, a closure gets what is left of
//! it (nothing once it ended). Answers keep their connection counted as served until their last
//! byte (module `listen`); requests whose body was left unread drain it (`api::drain`).

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use http_body::{Body as HttpBody, Frame, SizeHint};

/// `inner` as it is; `on_drop` called with its rest when dropped.
pub(crate) struct Watched<F: FnOnce(Option<Body>) + Send + Unpin + 'static> {
    inner: Option<Body>,
    /// It gave its last frame, or an error.
    ended: bool,
    on_drop: Option<F>,
}

impl<F: FnOnce(Option<Body>) + Send + Unpin + 'static> Watched<F> {
    /// `inner` as an axum body, watched by `on_drop`.
    pub(crate) fn body(inner: Body, on_drop: F) -> Body {
        Body::new(Watched {
            inner: Some(inner),
            ended: false,
            on_drop: Some(on_drop),
        })
    }
}

impl<F: FnOnce(Option<Body>) + Send + Unpin + 'static> HttpBody for Watched<F> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
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

    fn size_hint(&self) -> SizeHint {
        self.inner
            .as_ref()
            .map_or_else(|| SizeHint::with_exact(0), HttpBody::size_hint)
    }
}

impl<F: FnOnce(Option<Body>) + Send + Unpin + 'static> Drop for Watched<F> {
    fn drop(&mut self) {
        let rest = self
            .inner
            .take()
            .filter(|b| !self.ended && !b.is_end_stream());
        if let Some(on_drop) = self.on_drop.take() {
            on_drop(rest);
        }
    }
}
