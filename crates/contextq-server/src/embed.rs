//! Running the server inside another program: every in-process use (the CLI's embedded default
//! and its e2e, the test suites, the benchmarks) goes through [`RunningServer`].
//!
//! ```no_run
//! # async fn run() -> contextq_server::Result<()> {
//! use contextq_server::{AppState, Db, DbOptions, RunningServer, ServerConfig};
//! let db = Db::connect("sqlite:/tmp/contextq.db", &DbOptions::default()).await?;
//! let server = RunningServer::bind("127.0.0.1:0", AppState::new(db, ServerConfig::default())).await?;
//! println!("ContextQ at {}", server.url()); // http://127.0.0.1:PORT
//! server.stop().await?; // finishes in-flight requests first
//! # Ok(()) }
//! ```

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::api::AppState;
use crate::router::serve_with;

/// A server running in a task of this process. Dropping it stops the server too (without
/// waiting); [`RunningServer::stop`] waits until in-flight requests are done.
#[derive(Debug)]
pub struct RunningServer {
    addr: SocketAddr,
    url: String,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

impl RunningServer {
    /// Serves `state` on a bound `listener`.
    pub fn spawn(listener: TcpListener, state: AppState) -> std::io::Result<RunningServer> {
        Self::spawn_with(listener, state, axum::Router::new())
    }

    /// Serves `state` on a bound `listener`, and `extra`'s routes beside the API's (outside its
    /// middleware: they bring their own), e.g. the CLI's MCP endpoint at `/mcp`.
    pub fn spawn_with(
        listener: TcpListener,
        state: AppState,
        extra: axum::Router,
    ) -> std::io::Result<RunningServer> {
        let addr = listener.local_addr()?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_with(listener, state, extra, async {
            let _ = stopped.await;
        }));
        Ok(RunningServer {
            addr,
            url: format!("http://{addr}"),
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// Binds `addr` (`127.0.0.1:0` picks a free port) and serves `state` there.
    pub async fn bind(addr: &str, state: AppState) -> std::io::Result<RunningServer> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| crate::listen::bind_error(addr, e))?;
        Self::spawn(listener, state)
    }

    /// `http://ADDR:PORT`, the base URL for clients.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting connections, finishes in-flight requests, and returns when done.
    pub async fn stop(mut self) -> std::io::Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.join().await
    }

    /// Waits until the server stops by itself (it runs until [`RunningServer::stop`] or a
    /// failure), e.g. under a `select!` with a shutdown signal.
    pub async fn wait(&mut self) -> std::io::Result<()> {
        self.join().await
    }

    async fn join(&mut self) -> std::io::Result<()> {
        match self.task.take() {
            Some(task) => task.await.map_err(std::io::Error::other)?,
            None => Ok(()),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
