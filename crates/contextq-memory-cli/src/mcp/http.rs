//! `contextq-memory mcp --http ADDR`: MCP over streamable HTTP (rmcp's server, sessions and
//! protocol-version handling), at `/mcp`, in front of a ContextQ. Every request's
//! `Authorization: Bearer <ContextQ key>` is the key its ContextQ calls use, so tenants and the
//! workspaces a key reaches are the server's to enforce; no key, or one ContextQ refuses, is 401
//! before any MCP is spoken. `Host` is checked against the allowed hosts and a present `Origin`
//! against the allowed origins (DNS rebinding: a browser page cannot reach it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, ErrorCode};
use contextq_memory_tool::{MemoryTool, Store};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::Digest;

use super::{Memory, MemoryMcp};
use crate::stores::Settings;

/// How long a key ContextQ accepted is used without asking again (a revoked key is refused by
/// ContextQ on its next call anyway; this only spares the check).
const CHECKED_FOR: Duration = Duration::from_secs(60);

/// Where to serve and for whom.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Address to listen on (`127.0.0.1:0` picks a port).
    pub listen: String,
    /// The ContextQ every key is for.
    pub contextq_url: String,
    /// `Host` values accepted besides loopback (the names clients use to reach this server).
    pub allowed_hosts: Vec<String>,
    /// Browser origins accepted in `Origin` (none: any request carrying `Origin` is refused).
    pub allowed_origins: Vec<String>,
}

/// The memories of the keys seen lately, by the SHA-256 of the key (never the key itself).
struct Keys {
    url: String,
    settings: Settings,
    seen: Mutex<HashMap<String, (Instant, Memory)>>,
}

/// Why a key gets no memory.
enum Refusal {
    /// No key, a malformed one, or one ContextQ refuses (401).
    Unauthorized(String),
    /// ContextQ did not answer (502).
    Unreachable(String),
}

impl Keys {
    async fn memory(&self, key: &str) -> Result<Memory, Refusal> {
        let hash = hex::encode(sha2::Sha256::digest(key.as_bytes()));
        if let Some((at, memory)) = self.seen.lock().expect("not poisoned").get(&hash)
            && at.elapsed() < CHECKED_FOR
        {
            return Ok(memory.clone());
        }
        let options = ContextQMemoryToolOptions::new(key)
            .base_url(&self.url)
            .read_only(self.settings.read_only)
            .secret_guard(self.settings.secret_guard)
            .answer_budget(self.settings.answer_budget);
        let options = match &self.settings.workspace {
            Some(ws) => options.workspace(ws),
            None => options,
        };
        let store = options
            .store()
            .map_err(|e| Refusal::Unauthorized(e.tool_message()))?;
        // One call with the key: ContextQ says whether it stands.
        if let Err(e) = store.client().list_workspaces().await {
            return Err(match e.contextq_code() {
                Some(ErrorCode::Unauthorized) => {
                    Refusal::Unauthorized("ContextQ refused this key".into())
                }
                _ => Refusal::Unreachable(e.tool_message()),
            });
        }
        let store: Arc<dyn Store> = Arc::new(store);
        let tool = MemoryTool::new(store.clone())
            .edit_budget(options.edit_budget)
            .read_only(options.read_only)
            .secret_guard(options.secret_guard)
            .answer_budget(options.answer_budget);
        let memory = Memory {
            tool: Arc::new(tool),
            store,
        };
        self.seen
            .lock()
            .expect("not poisoned")
            .insert(hash, (Instant::now(), memory.clone()));
        Ok(memory)
    }
}

/// Before MCP: the request's key, its memory put in the request for the handler.
async fn authorize(State(keys): State<Arc<Keys>>, mut request: Request, next: Next) -> Response {
    let key = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| contextq_api::valid_key_format(k));
    let refusal = match key {
        None => Refusal::Unauthorized(
            "send Authorization: Bearer <ContextQ key> (sk_live_ followed by 40 hex)".into(),
        ),
        Some(key) => match keys.memory(key).await {
            Ok(memory) => {
                request.extensions_mut().insert(memory);
                return next.run(request).await;
            }
            Err(refusal) => refusal,
        },
    };
    let (status, message) = match refusal {
        Refusal::Unauthorized(m) => (StatusCode::UNAUTHORIZED, m),
        Refusal::Unreachable(m) => (StatusCode::BAD_GATEWAY, m),
    };
    let mut response = (
        status,
        axum::Json(serde_json::json!({"error": {"code": status.as_u16(), "message": message}})),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// The `/mcp` endpoint in front of the ContextQ at `contextq_url`, for a server whose address is
/// `addr` (a loopback `Host` and `addr` are always allowed, with `options.allowed_hosts`).
pub fn router(
    contextq_url: &str,
    addr: std::net::SocketAddr,
    options: &HttpOptions,
    settings: Settings,
) -> axum::Router {
    let mut hosts: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        addr.to_string(),
    ];
    hosts.extend(options.allowed_hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(options.allowed_origins.clone())
        .enforce_origin_validation();
    let describe = format!("ContextQ: {contextq_url} (each client's own key)");
    let service = StreamableHttpService::new(
        move || Ok(MemoryMcp::per_request(describe.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let keys = Arc::new(Keys {
        url: contextq_url.to_string(),
        settings,
        seen: Mutex::new(HashMap::new()),
    });
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(keys, authorize))
}

/// Serves MCP at `/mcp` until SIGTERM or Ctrl-C; prints `http://ADDR/mcp` on stdout once
/// listening.
pub async fn run(options: HttpOptions, settings: Settings) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(&options.listen).await?;
    let addr = listener.local_addr()?;
    let app = router(&options.contextq_url, addr, &options, settings);
    println!("http://{addr}/mcp");
    use std::io::Write;
    std::io::stdout().flush()?;
    eprintln!(
        "contextq-memory mcp: MCP over HTTP at http://{addr}/mcp, in front of {}",
        options.contextq_url
    );
    axum::serve(listener, app)
        .with_graceful_shutdown(contextq_server::listen::stop_signal())
        .await?;
    Ok(())
}
