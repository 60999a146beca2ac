//! The server's own accept loop: what a connection may cost before it has sent a request.
//!
//! A plain `axum::serve` keeps every TCP connection as long as its peer likes: a client that
//! opens connections and sends nothing (or one header byte a second) holds file descriptors
//! until the process runs out and legitimate clients are locked out. Here every connection is
//! bounded three ways ([`ConnectionLimits`], documented defaults):
//!
//! - **header read timeout**: from the moment the server waits for a request (a new connection,
//!   or a kept-alive one after its last answer) the request's head must be complete within this
//!   time, or the connection is closed. It cuts slowloris and idle connections alike, so it is
//!   also how long an idle keep-alive connection is kept.
//! - **idle timeout**: a connection on which no byte moves in either direction for this long is
//!   closed, whatever it is doing (a body upload that stalls, a client that stops reading its
//!   answer).
//! - **connection cap**: at most this many connections at once; one past the cap is closed as
//!   soon as it is accepted (the client sees the connection reset and may retry), so the
//!   process never runs out of file descriptors. [`raise_fd_limit`] lifts the soft descriptor
//!   limit to the hard one at start, and [`ConnectionLimits::fit_fd_limit`] lowers the cap if the
//!   limit is still too small for it.
//!
//! The request timeout (`ServerConfig::request_timeout`) bounds the rest: reading the body and
//! computing the answer. The server speaks HTTP/1.1 (what every ContextQ client uses).

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;

/// How long and how many connections the server keeps, with documented defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time allowed to send a complete request head, counted from when the server waits for
    /// one (default 20 s). Also the longest an idle keep-alive connection is kept.
    pub header_read_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed (default 60 s).
    pub idle_timeout: Duration,
    /// Most connections open at once (default 4,096); one more is closed when accepted.
    pub max_connections: usize,
}

/// Descriptors kept free for the database, log files and the listener itself when
/// [`ConnectionLimits::fit_fd_limit`] sizes the cap.
pub const RESERVED_FDS: u64 = 64;

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
        }
    }
}

impl ConnectionLimits {
    /// The cap lowered, when needed, so that `max_connections` plus [`RESERVED_FDS`] fit under
    /// a descriptor limit of `fd_limit`. Returns the limits and whether the cap was lowered.
    pub fn fit_fd_limit(self, fd_limit: u64) -> (ConnectionLimits, bool) {
        let room = fd_limit.saturating_sub(RESERVED_FDS).max(1);
        if (self.max_connections as u64) <= room {
            return (self, false);
        }
        let max_connections = usize::try_from(room).unwrap_or(usize::MAX);
        (
            ConnectionLimits {
                max_connections,
                ..self
            },
            true,
        )
    }
}

/// Raises this process's soft limit on open file descriptors to its hard limit and returns the
/// soft limit now in force (`u64::MAX` for unlimited). On platforms without `setrlimit` it
/// returns `None` and changes nothing.
pub fn raise_fd_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let lim = getrlimit(Resource::Nofile);
        let mut current = lim.current;
        if let Some(max) = lim.maximum
            && current.is_some_and(|c| c < max)
            && setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(max),
                    maximum: Some(max),
                },
            )
            .is_ok()
        {
            current = Some(max);
        }
        // `None` is "unlimited".
        Some(current.unwrap_or(u64::MAX))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

impl ConnectionLimits {
    /// What a server process should run with: raises the descriptor limit
    /// ([`raise_fd_limit`]) and lowers the cap to fit it, with a warning naming both.
    pub fn for_this_process(self) -> ConnectionLimits {
        let Some(fd_limit) = raise_fd_limit() else {
            return self;
        };
        let (fitted, lowered) = self.fit_fd_limit(fd_limit);
        if lowered {
            tracing::warn!(
                fd_limit,
                requested = self.max_connections,
                max_connections = fitted.max_connections,
                "the file descriptor limit is too low for the connection cap; cap lowered"
            );
        }
        fitted
    }
}

/// Serves `router` on `listener` within `limits` until `shutdown` resolves; then stops
/// accepting, lets every open connection finish its request in flight, and returns.
pub async fn serve_connections(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut refused = RefusalLog::default();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .keep_alive(true)
        // Read buffers of 64 KiB (hyper: ~400 KiB): what bounds memory per connection.
        .max_buf_size(64 << 10);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors (or a connection reset before accept): wait a little
                    // rather than spin, and go on.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            refused.refuse(limits.max_connections);
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: activity.clone(),
        });
        let service = TowerToHyperService::new(router.clone());
        let conn = builder.serve_connection(io, service);
        let conn = graceful.watch(conn);
        let idle_timeout = limits.idle_timeout;
        tokio::spawn(async move {
            tokio::select! {
                result = conn => {
                    if let Err(e) = result {
                        tracing::debug!(%peer, error = %e, "connection ended");
                    }
                }
                () = activity.idle_for(idle_timeout) => {
                    tracing::debug!(%peer, "connection closed: idle");
                }
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Warns about refused connections at most once a second, with how many were refused.
#[derive(Default)]
struct RefusalLog {
    since: Option<Instant>,
    count: u64,
}

impl RefusalLog {
    fn refuse(&mut self, cap: usize) {
        self.count += 1;
        let due = self
            .since
            .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
        if due {
            tracing::warn!(
                refused = self.count,
                cap,
                "connection cap reached: closing new connections (raise --max-connections?)"
            );
            self.since = Some(Instant::now());
            self.count = 0;
        }
    }
}

/// When a connection last moved a byte, in milliseconds since it was opened.
struct Activity {
    opened: tokio::time::Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            opened: tokio::time::Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn touch(&self) {
        let ms = self.opened.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
    }

    /// Resolves once no byte has moved for `timeout`.
    async fn idle_for(&self, timeout: Duration) {
        loop {
            let last = Duration::from_millis(self.last_ms.load(Ordering::Relaxed));
            let quiet = self.opened.elapsed().saturating_sub(last);
            if quiet >= timeout {
                return;
            }
            tokio::time::sleep(timeout - quiet).await;
        }
    }
}

/// A stream that records when bytes move.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.activity.touch();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.activity.touch();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_is_lowered_to_fit_the_descriptor_limit() {
        let limits = ConnectionLimits::default();
        assert_eq!(limits.fit_fd_limit(1 << 20), (limits, false));
        let (fitted, lowered) = limits.fit_fd_limit(1024);
        assert!(lowered);
        assert_eq!(fitted.max_connections, 1024 - RESERVED_FDS as usize);
        assert_eq!(fitted.header_read_timeout, limits.header_read_timeout);
        assert_eq!(limits.fit_fd_limit(10).0.max_connections, 1);
    }

    #[test]
    fn raising_the_descriptor_limit_reports_it() {
        let raised = raise_fd_limit();
        #[cfg(unix)]
        assert!(raised.is_some_and(|n| n >= 64));
        #[cfg(not(unix))]
        assert!(raised.is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn idleness_is_counted_from_the_last_byte() {
        let activity = Activity::new();
        tokio::time::advance(Duration::from_millis(1500)).await;
        activity.touch();
        let started = tokio::time::Instant::now();
        activity.idle_for(Duration::from_secs(2)).await;
        // Paused time: idle_for slept until 2 s after the last byte, not after opening.
        assert!(started.elapsed() >= Duration::from_secs(2));
    }
}
