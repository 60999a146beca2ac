//! `contextq-server serve`: the API on a listener until SIGTERM or Ctrl-C.

use std::process::ExitCode;

use anyhow::Result;
use contextq_server::{AppState, Db, ServerConfig};

#[derive(clap::Args)]
pub(crate) struct ServeArgs {
    /// sqlite:PATH (created and migrated) or postgres://USER:PASSWORD@HOST/DB. Required
    /// when --listen is beyond loopback; on loopback the default is sqlite:contextq.db in
    /// the working directory.
    #[arg(long, env = "CONTEXTQ_DATABASE_URL")]
    database_url: Option<String>,
    /// Address to listen on (port 0 picks a free port).
    /// (38200 is the TypeScript package's default port, kept so that its default URL works; it lies in
    /// Linux's ephemeral range 32768-60999, so pick another with --listen if it is taken.)
    #[arg(long, env = "CONTEXTQ_LISTEN", default_value = "127.0.0.1:38200")]
    listen: String,
    /// The audit key file (outside the database): every audit row and chain head gets a
    /// MAC. Create it with `admin init-audit-key`. Without it the log is hash-chained only.
    #[arg(long, env = "CONTEXTQ_AUDIT_KEY_FILE")]
    audit_key_file: Option<std::path::PathBuf>,
    /// Largest body of a one-context request (PUT, text edit, workspace create), in bytes.
    #[arg(long, default_value_t = contextq_server::api::DEFAULT_MAX_BODY_BYTES)]
    max_body_bytes: usize,
    /// Largest body of a bulk upsert, in bytes.
    #[arg(long, default_value_t = contextq_server::api::DEFAULT_MAX_BULK_BODY_BYTES)]
    max_bulk_body_bytes: usize,
    /// Request bodies in flight at once over all connections, in bytes (bounds memory).
    #[arg(long, default_value_t = contextq_server::api::DEFAULT_BODY_BUDGET_BYTES)]
    body_budget_bytes: usize,
    /// Each tenant's share of the body budget, in bytes (one tenant's bodies in flight
    /// never hold more).
    #[arg(long, default_value_t = contextq_server::api::DEFAULT_BODY_SHARE_BYTES)]
    body_share_bytes: usize,
    /// Slowest a request body may arrive after its first 5 s, in bytes a second (slower:
    /// 408); 0 for no minimum.
    #[arg(long, default_value_t = contextq_server::api::DEFAULT_MIN_BODY_RATE)]
    min_body_rate: u64,
    /// Serve read-only: every request that needs the write or admin scope is refused with
    /// 403, whatever its key.
    #[arg(long)]
    read_only: bool,
    /// Request timeout in seconds (reading the body and answering).
    #[arg(long, default_value_t = 30)]
    request_timeout_secs: u64,
    /// Seconds a client has to send a complete request head, counted from when the server
    /// waits for one (also how long an idle keep-alive connection is kept).
    #[arg(long, default_value_t = 20)]
    header_read_timeout_secs: u64,
    /// Seconds without a byte moving on a connection before it is closed.
    #[arg(long, default_value_t = 60)]
    idle_timeout_secs: u64,
    /// Most connections at once (lowered to fit the file descriptor limit).
    #[arg(long, default_value_t = 4096)]
    max_connections: usize,
    /// On SIGTERM or Ctrl-C: seconds requests in flight may take to finish before their
    /// connections are closed anyway (no new connection is accepted meanwhile).
    #[arg(long, default_value_t = 30)]
    shutdown_grace_secs: u64,
    /// Versions kept of each external id (extension `history`; at least 1). A tenant keeps
    /// at most its plan's context cap times this many in all.
    #[arg(long, default_value_t = contextq_server::db::DEFAULT_VERSIONS_KEPT)]
    versions_kept: u32,
    /// Milliseconds one search may run before it is stopped and answered 400 "too broad"
    /// (extension `search`).
    #[arg(long, default_value_t = 2000)]
    search_budget_ms: u64,
    /// Database connections only searches use (reads and writes never wait for them).
    #[arg(long, default_value_t = 4)]
    search_connections: u32,
    /// Searches one tenant may have in flight; the next is answered 429 (at most
    /// --search-connections).
    #[arg(long, default_value_t = 2)]
    searches_per_tenant: u32,
}

pub(crate) async fn run(args: ServeArgs) -> Result<ExitCode> {
    let ServeArgs {
        database_url,
        listen,
        max_body_bytes,
        max_bulk_body_bytes,
        body_budget_bytes,
        body_share_bytes,
        min_body_rate,
        read_only,
        request_timeout_secs,
        header_read_timeout_secs,
        idle_timeout_secs,
        max_connections,
        shutdown_grace_secs,
        audit_key_file,
        versions_kept,
        search_budget_ms,
        search_connections,
        searches_per_tenant,
    } = args;
    let secs = std::time::Duration::from_secs;
    let connections = contextq_server::ConnectionLimits::default()
        .header_read_timeout(secs(header_read_timeout_secs))
        .idle_timeout(secs(idle_timeout_secs))
        .max_connections(max_connections)
        .shutdown_grace(secs(shutdown_grace_secs))
        .for_this_process();
    let database_url = contextq_server::db::database_url_for(database_url, &listen)?;
    let options = crate::db_options(audit_key_file.as_deref())?
        .versions_kept(versions_kept)
        .search(contextq_server::db::search::SearchLimits {
            connections: search_connections,
            per_tenant: searches_per_tenant,
            budget: std::time::Duration::from_millis(search_budget_ms),
        });
    let db = Db::connect(&database_url, &options).await?;
    if db.audit_key().is_none() {
        tracing::warn!(
            "the audit log is hash-chained but not keyed: anyone who can write the database can rewrite it undetected; see --audit-key-file"
        );
    }
    let listener = tokio::net::TcpListener::bind(&listen)
        .await
        .map_err(|e| contextq_server::listen::bind_error(&listen, e))?;
    let addr = listener.local_addr()?;
    // A URL, as clients (CONTEXT_API_URL) and browsers take it.
    println!("http://{addr}");
    tracing::info!(%addr, database = %contextq_server::db::redact_url(&database_url), "listening");
    let config = ServerConfig::default()
        .max_body_bytes(max_body_bytes)
        .max_bulk_body_bytes(max_bulk_body_bytes)
        .body_budget_bytes(body_budget_bytes)
        .body_share_bytes(body_share_bytes)
        .min_body_rate(min_body_rate)
        .request_timeout(secs(request_timeout_secs))
        .connections(connections)
        .read_only(read_only);
    contextq_server::serve(
        listener,
        AppState::new(db.clone(), config),
        shutdown_signal(),
    )
    .await?;
    db.close().await;
    tracing::info!("stopped");
    Ok(ExitCode::SUCCESS)
}

async fn shutdown_signal() {
    contextq_server::listen::stop_signal().await;
    tracing::info!("shutting down: finishing in-flight requests");
}
