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
//! - **connection cap**: at most this many connections at once, so the process never runs out
//!   of file descriptors. [`raise_fd_limit`] lifts the soft descriptor limit to the hard one at
//!   start, and [`ConnectionLimits::fit_fd_limit`] lowers the cap if the limit is still too
//!   small for it.
//!
//! **A full table makes room instead of locking clients out.** When a connection arrives and
//! every slot is taken, the server closes one connection that is not being served (it has not
//! sent a complete request head, or it sits idle between requests) and serves the new one in
//! its place. Which one, in this order of preference:
//!
//! 1. a connection that has never sent a complete request head, the oldest first (what a flood
//!    of idle or slowloris connections is made of);
//! 2. a kept-alive connection idle between requests, the one idle the longest first (a real
//!    client's pooled connection, which reconnects when it needs to).
//!
//! A connection whose request is being served (from its complete head until the last byte of
//! its answer is written) is never closed to make room. Only when every slot serves a request
//! is the new connection closed at once (the client sees the connection reset and may retry).
//! So an attacker who holds the table with idle connections only pushes out its own oldest
//! ones, and a client that sends its request at once is served.
//!
//! The request timeout (`ServerConfig::request_timeout`) bounds the rest: reading the body and
//! computing the answer. The server speaks HTTP/1.1 (what every ContextQ client uses).

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, Semaphore};
use tower::ServiceExt;

/// How long and how many connections the server keeps, with documented defaults; built from
/// `Default` with its setters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionLimits {
    /// Time allowed to send a complete request head, counted from when the server waits for
    /// one (default 20 s). Also the longest an idle keep-alive connection is kept.
    pub header_read_timeout: Duration,
    /// A connection with no byte moving either way for this long is closed (default 60 s).
    pub idle_timeout: Duration,
    /// Most connections open at once (default 4,096). One more takes the place of a connection
    /// that is not being served, or is closed when accepted if every slot serves a request.
    pub max_connections: usize,
    /// On a graceful stop (SIGTERM, Ctrl-C), how long requests in flight may take to finish
    /// before their connections are closed anyway (default 30 s, the default request timeout).
    pub shutdown_grace: Duration,
}

/// Descriptors kept free for the database, log files and the listener itself when
/// [`ConnectionLimits::fit_fd_limit`] sizes the cap.
pub const RESERVED_FDS: u64 = 64;

contextq_api::setters!(ConnectionLimits {
    header_read_timeout: Duration,
    idle_timeout: Duration,
    max_connections: usize,
    shutdown_grace: Duration,
});

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(20),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            shutdown_grace: Duration::from_secs(30),
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
/// accepting, lets every open connection finish its request in flight (within
/// [`ConnectionLimits::shutdown_grace`]), and returns.
pub async fn serve_connections(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let table = Arc::new(Table::default());
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
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => match make_room(&table, &slots).await {
                Some(slot) => slot,
                None => {
                    refused.refuse(limits.max_connections);
                    drop(stream);
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let activity = Arc::new(Activity::new());
        let io = TokioIo::new(Watched {
            inner: stream,
            activity: activity.clone(),
        });
        let conn_state = table.open();
        let router = router.clone();
        let served_by = conn_state.clone();
        let service = hyper::service::service_fn(move |request| {
            let serving = Serving::begin(&served_by);
            let router = router.clone();
            async move {
                let response = router.oneshot(request.map(Body::new)).await?;
                // The connection counts as being served until its answer's last byte is written.
                Ok::<_, std::convert::Infallible>(
                    response.map(|body| crate::body::Watched::body(body, move |_| drop(serving))),
                )
            }
        });
        let conn = builder.serve_connection(io, service);
        let conn = graceful.watch(conn);
        let idle_timeout = limits.idle_timeout;
        let table = table.clone();
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
                () = conn_state.evicted.notified() => {
                    tracing::debug!(%peer, "connection closed: its slot was given to a new connection");
                }
            }
            table.close(conn_state.id);
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace = ?limits.shutdown_grace,
            "stopping: requests still in flight after the grace period are cut"
        );
    }
    Ok(())
}

/// Closes the connection [`Table::evict`] picks and waits for its slot (it is given back as
/// soon as the connection's task sees the notice); `None` when every slot serves a request.
async fn make_room(
    table: &Table,
    slots: &Arc<Semaphore>,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    table.evict()?;
    tokio::time::timeout(Duration::from_secs(1), slots.clone().acquire_owned())
        .await
        .ok()?
        .ok()
}

/// Marker in [`ConnState::serving`]: the connection was chosen to make room, so no request
/// may start on it.
const EVICTED: usize = usize::MAX;

/// The open connections and what each is doing, so that a full table can make room.
struct Table {
    next_id: AtomicU64,
    epoch: Instant,
    open: Mutex<HashMap<u64, Arc<ConnState>>>,
}

impl Default for Table {
    fn default() -> Self {
        Table {
            next_id: AtomicU64::new(0),
            epoch: Instant::now(),
            open: Mutex::default(),
        }
    }
}

/// One connection's state, shared by its task, its requests and the table.
struct ConnState {
    id: u64,
    /// The table's epoch, which `waiting_since` counts from.
    epoch: Instant,
    /// Requests being served (head complete, answer not yet fully written), or [`EVICTED`].
    serving: AtomicUsize,
    /// Requests begun on this connection.
    requests: AtomicU64,
    /// When the connection last started to wait for a request head (ms since the epoch).
    waiting_since: AtomicU64,
    evicted: Notify,
}

impl ConnState {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}

impl Table {
    fn open(&self) -> Arc<ConnState> {
        let state = Arc::new(ConnState {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            epoch: self.epoch,
            serving: AtomicUsize::new(0),
            requests: AtomicU64::new(0),
            waiting_since: AtomicU64::new(self.epoch.elapsed().as_millis() as u64),
            evicted: Notify::new(),
        });
        self.open
            .lock()
            .expect("connection table poisoned")
            .insert(state.id, state.clone());
        state
    }

    fn close(&self, id: u64) {
        self.open
            .lock()
            .expect("connection table poisoned")
            .remove(&id);
    }

    /// Picks the connection to close (module docs: never served first, oldest first; then the
    /// longest idle), marks it so that no request starts on it, and tells its task to close it.
    /// `None` when every connection is serving a request.
    fn evict(&self) -> Option<()> {
        let open = self.open.lock().expect("connection table poisoned");
        // A linear pass over the table, only when it is full (at most the cap's entries). A
        // request may begin between the pass and the exchange: then the exchange fails and the
        // next pass skips that connection.
        loop {
            let victim = open
                .values()
                .filter(|c| c.serving.load(Ordering::Acquire) == 0)
                .min_by_key(|c| {
                    (
                        c.requests.load(Ordering::Relaxed) > 0,
                        c.waiting_since.load(Ordering::Relaxed),
                        c.id,
                    )
                })?;
            if victim
                .serving
                .compare_exchange(0, EVICTED, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                victim.evicted.notify_one();
                return Some(());
            }
        }
    }
}

/// Held while one request is served: from its complete head to its answer's last byte.
struct Serving(Arc<ConnState>);

impl Serving {
    /// Counts a request as being served; on a connection already chosen to make room the count
    /// stays [`EVICTED`] (the connection is closing and the request is not answered).
    fn begin(conn: &Arc<ConnState>) -> Serving {
        let _ = conn
            .serving
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n != EVICTED).then_some(n + 1)
            });
        conn.requests.fetch_add(1, Ordering::Relaxed);
        Serving(conn.clone())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        let conn = &self.0;
        conn.waiting_since.store(conn.now(), Ordering::Relaxed);
        let _ = conn
            .serving
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n != EVICTED && n > 0).then(|| n - 1)
            });
    }
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

/// The error of a listener that could not bind `addr`, saying what to change: an address in use
/// suggests `--listen` with another port (the default 38200, kept for the TypeScript package's default URL,
/// lies in Linux's ephemeral port range 32768-60999, so an outgoing connection can hold it
/// with nothing listening).
pub fn bind_error(addr: &str, e: std::io::Error) -> std::io::Error {
    let hint = if e.kind() == io::ErrorKind::AddrInUse {
        " (something holds that port: another server, or an outgoing connection, since ports \
         32768-60999 are Linux's ephemeral range, 38200 included); pass --listen \
         127.0.0.1:PORT with a free port"
    } else {
        ""
    };
    io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}{hint}"))
}

/// Resolves on SIGTERM (what a service manager or an orchestrator sends to stop a process) or
/// Ctrl-C: the binaries' graceful stop.
pub async fn stop_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
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
