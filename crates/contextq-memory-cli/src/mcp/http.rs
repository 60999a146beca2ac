//! `contextq-memory mcp --http ADDR`: MCP over streamable HTTP (rmcp's server and
//! protocol-version handling), at `/mcp`, in front of a ContextQ. Every request's
//! `Authorization: Bearer <ContextQ key>` is the key its ContextQ calls use, so tenants and the
//! workspaces a key reaches are the server's to enforce.
//!
//! Before any MCP is spoken, each request is checked here, in this order:
//! 1. the key: none, or one ContextQ refuses now (revoked, expired, unknown), is 401; ContextQ is
//!    asked on every request, so a refused key never gets through on an earlier answer;
//! 2. the session ([`super::sessions`]): a session belongs to the key that opened it; a request naming
//!    a session its key did not open is answered as an unknown session (404); a new session
//!    past the caps is 429 with `Retry-After`;
//! 3. `Host` against the allowed hosts and a present `Origin` against the allowed origins (DNS
//!    rebinding: a browser page cannot reach it), by rmcp.
//!
//! The key's first answer also decides its path model ([`fn@path_model`]): a key of one workspace
//! sees it as `/memories`, whatever this process pins.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use anyhow::Result;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use contextq_memory_tool::contextq::local::LocalService;
use contextq_memory_tool::contextq::{
    Client, ContextQMemoryToolOptions, ErrorCode, KeyReach, PathModel, path_model,
};
use contextq_memory_tool::{MemoryTool, Store};
use futures::StreamExt;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::Digest;

use super::sessions::{Gate, InUse, Owner, RETRY_AFTER_SECS, SessionLimits};
use super::{Memory, MemoryMcp};
use crate::stores::Settings;

/// The header that names an MCP session.
const SESSION_HEADER: HeaderName = HeaderName::from_static("mcp-session-id");

/// Most keys whose clients are kept built at once (a client per key, not a secret: the key is
/// checked with ContextQ on every request anyway).
const KEYS_KEPT: usize = 4096;

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
    /// How many sessions may live, and for how long idle.
    pub sessions: SessionLimits,
}

/// A key's memory and the client that asks ContextQ about the key.
struct Known {
    memory: Memory,
    client: Client,
    used: Instant,
    checked: Instant,
}

/// The memories of the keys seen lately, by the SHA-256 of the key (never the key itself).
struct Keys {
    url: String,
    settings: Settings,
    /// The ContextQ in this process (`serve`'s own), called without a socket.
    local: Option<Arc<dyn LocalService>>,
    seen: Mutex<HashMap<Owner, Known>>,
    /// How often a key holding sessions is asked about again ([`SessionLimits::key_recheck`]).
    recheck: Duration,
}

/// Room for `owner` among at most `cap` kept keys: a key not kept yet takes the place of the
/// least recently `used`, which is built again on its next request; a kept one takes nothing.
fn make_room<V>(
    seen: &mut HashMap<Owner, V>,
    owner: &Owner,
    cap: usize,
    used: impl Fn(&V) -> Instant,
) {
    if !seen.contains_key(owner)
        && seen.len() >= cap
        && let Some(oldest) = seen.iter().min_by_key(|(_, v)| used(v)).map(|(o, _)| *o)
    {
        seen.remove(&oldest);
    }
}

/// Why a key gets no memory.
enum Refusal {
    /// No key, a malformed one, or one ContextQ refuses (401).
    Unauthorized(String),
    /// ContextQ did not answer (502).
    Unreachable(String),
}

fn refused_config(e: contextq_memory_tool::Error) -> Refusal {
    Refusal::Unauthorized(e.tool_message())
}

fn owner_of(key: &str) -> Owner {
    sha2::Sha256::digest(key.as_bytes()).into()
}

/// Whether ContextQ accepts the key `client` carries now, and what it reaches: one request
/// with it.
async fn check(client: &Client) -> Result<KeyReach, Refusal> {
    match client.key_reach().await {
        Ok(reach) => Ok(reach),
        Err(e) => Err(match e.contextq_code() {
            Some(ErrorCode::Unauthorized) => {
                // ContextQ's reason (expired, revoked, unknown) says what to change.
                Refusal::Unauthorized(format!("ContextQ refused this key ({e})"))
            }
            _ => Refusal::Unreachable(e.tool_message()),
        }),
    }
}

impl Keys {
    /// The memory of `key`, once ContextQ has accepted the key for this request.
    async fn memory(&self, key: &str) -> Result<(Owner, Memory), Refusal> {
        let owner = owner_of(key);
        let known = self
            .seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&owner)
            .map(|k| (k.memory.clone(), k.client.clone()));
        let (memory, client) = match known {
            Some((memory, client)) => {
                if let Err(refusal) = check(&client).await {
                    self.forget(&owner);
                    return Err(refusal);
                }
                (memory, client)
            }
            None => {
                // The key's answer decides its path model (built once: a key's workspaces
                // never change).
                let client = self.options(key, None).client().map_err(refused_config)?;
                let reach = check(&client).await?;
                let model = path_model(&reach, self.settings.workspace.as_deref());
                self.build(key, &model)?
            }
        };
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        make_room(&mut seen, &owner, KEYS_KEPT, |k| k.used);
        seen.insert(
            owner,
            Known {
                memory: memory.clone(),
                client,
                used: now,
                checked: now,
            },
        );
        Ok((owner, memory))
    }

    fn forget(&self, owner: &Owner) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(owner);
    }

    /// The options of `key`'s memory, pinned to `workspace` when given.
    fn options(&self, key: &str, workspace: Option<&str>) -> ContextQMemoryToolOptions {
        let options = ContextQMemoryToolOptions::new(key)
            .base_url(&self.url)
            .read_only(self.settings.read_only)
            .secret_guard(self.settings.secret_guard)
            .answer_budget(self.settings.answer_budget);
        let options = match workspace {
            Some(ws) => options.workspace(ws),
            None => options,
        };
        match &self.local {
            Some(local) => options.local_service(local.clone()),
            None => options,
        }
    }

    fn build(&self, key: &str, model: &PathModel) -> Result<(Memory, Client), Refusal> {
        let options = self.options(key, model.pinned());
        let store = options.store().map_err(refused_config)?;
        let client = store.client().clone();
        let store: Arc<dyn Store> = Arc::new(store);
        let tool = MemoryTool::new(store.clone())
            .read_only(options.read_only)
            .secret_guard(options.secret_guard)
            .answer_budget(options.answer_budget);
        let memory = Memory {
            tool: Arc::new(tool),
            store,
        };
        Ok((memory, client))
    }

    /// Asks ContextQ again about the keys among `owners` not checked for
    /// [`SessionLimits::key_recheck`]; the owners it refuses now (or no longer known here).
    async fn refused_among(&self, owners: Vec<Owner>) -> Vec<Owner> {
        let mut refused = Vec::new();
        for owner in owners {
            let client = {
                let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
                match seen.get(&owner) {
                    None => {
                        refused.push(owner);
                        continue;
                    }
                    Some(k) if k.checked.elapsed() < self.recheck => continue,
                    Some(k) => k.client.clone(),
                }
            };
            match check(&client).await {
                Ok(_) => {
                    if let Some(k) = self
                        .seen
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .get_mut(&owner)
                    {
                        k.checked = Instant::now();
                    }
                }
                Err(Refusal::Unauthorized(_)) => {
                    self.seen
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .remove(&owner);
                    refused.push(owner);
                }
                // ContextQ unreachable: the sessions wait for its next answer.
                Err(Refusal::Unreachable(_)) => {}
            }
        }
        refused
    }
}

/// What the checks in front of MCP share.
struct Front {
    keys: Keys,
    gate: Gate,
    sweeping: AtomicBool,
}

impl Front {
    /// Starts, once, the task that ends expired sessions and those of keys refused since.
    fn sweep(self: &Arc<Self>) {
        if self.sweeping.swap(true, Ordering::SeqCst) {
            return;
        }
        let weak: Weak<Front> = Arc::downgrade(self);
        let every = self.gate.sweep_interval();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(front) = weak.upgrade() else { return };
                front.gate.close(front.gate.expired()).await;
                for owner in front.keys.refused_among(front.gate.owners()).await {
                    front.gate.close(front.gate.end_all_of(&owner)).await;
                }
            }
        });
    }
}

fn error_response(status: StatusCode, message: String) -> Response {
    (
        status,
        axum::Json(serde_json::json!({"error": {"code": status.as_u16(), "message": message}})),
    )
        .into_response()
}

/// A session that is not there for this key: the answer rmcp gives an unknown session, so
/// another key's session cannot be told from one that never existed.
fn unknown_session() -> Response {
    (StatusCode::NOT_FOUND, "Not Found: Session not found").into_response()
}

/// The answer's body, holding its session in use until the body ends (a stream: until it is
/// closed).
fn holding(response: Response, in_use: InUse) -> Response {
    let (parts, body) = response.into_parts();
    let stream = body.into_data_stream().map(move |chunk| {
        let _ = &in_use;
        chunk
    });
    Response::from_parts(parts, Body::from_stream(stream))
}

/// Before MCP: the key, then the session (module docs).
async fn guard(State(front): State<Arc<Front>>, mut request: Request, next: Next) -> Response {
    front.sweep();
    let key = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|k| contextq_api::valid_key_format(k));
    let Some(key) = key else {
        return unauthorized(
            "send Authorization: Bearer <ContextQ key> (sk_live_ followed by 40 hex)".into(),
        );
    };
    let owner = match front.keys.memory(key).await {
        Ok((owner, memory)) => {
            request.extensions_mut().insert(memory);
            owner
        }
        Err(Refusal::Unauthorized(message)) => {
            // The key's sessions end with it.
            let owner = owner_of(key);
            front.gate.close(front.gate.end_all_of(&owner)).await;
            return unauthorized(message);
        }
        Err(Refusal::Unreachable(message)) => {
            return error_response(StatusCode::BAD_GATEWAY, message);
        }
    };
    let session = request
        .headers()
        .get(&SESSION_HEADER)
        .map(|v| v.to_str().map(str::to_string));
    match session {
        Some(Ok(external)) => {
            let Some((internal, in_use)) = front.gate.enter(&external, &owner) else {
                return unknown_session();
            };
            let Ok(internal_value) = HeaderValue::from_str(&internal) else {
                return unknown_session();
            };
            request.headers_mut().insert(SESSION_HEADER, internal_value);
            let deleting = request.method() == Method::DELETE;
            let mut response = next.run(request).await;
            if deleting && response.status().is_success() {
                if let Some(id) = front.gate.end(&external, &owner) {
                    front.gate.close(vec![id]).await;
                }
                // The session is gone: 204, which clients take as a clean end (rmcp answers
                // 202, which the official Python client logs as a failed termination).
                return StatusCode::NO_CONTENT.into_response();
            }
            // rmcp's id never leaves this process.
            if response.headers().contains_key(&SESSION_HEADER)
                && let Ok(v) = HeaderValue::from_str(&external)
            {
                response.headers_mut().insert(SESSION_HEADER, v);
            }
            holding(response, in_use)
        }
        Some(Err(_)) => unknown_session(),
        None if request.method() == Method::POST => {
            let (opening, evicted) = match front.gate.open(&owner) {
                Ok(place) => place,
                Err(refused) => {
                    let limits = front.gate.limits();
                    let mut response =
                        error_response(StatusCode::TOO_MANY_REQUESTS, refused.message(&limits));
                    response
                        .headers_mut()
                        .insert(header::RETRY_AFTER, HeaderValue::from(RETRY_AFTER_SECS));
                    return response;
                }
            };
            front.gate.close(evicted).await;
            let mut response = next.run(request).await;
            let opened = response
                .headers()
                .get(&SESSION_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(|internal| opening.opened(internal.to_string().into()));
            if let Some(external) = opened
                && let Ok(v) = HeaderValue::from_str(&external)
            {
                response.headers_mut().insert(SESSION_HEADER, v);
            }
            response
        }
        None => next.run(request).await,
    }
}

fn unauthorized(message: String) -> Response {
    let mut response = error_response(StatusCode::UNAUTHORIZED, message);
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// The `/mcp` endpoint in front of the ContextQ at `contextq_url` (or `local`, the same server
/// in this process), for a server whose address is `addr` (a loopback `Host` and `addr` are
/// always allowed, with `options.allowed_hosts`).
pub fn router(
    contextq_url: &str,
    local: Option<Arc<dyn LocalService>>,
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
    let gate = Gate::new(options.sessions);
    let service = StreamableHttpService::new(
        move || Ok(MemoryMcp::per_request(describe.clone())),
        gate.manager(),
        config,
    );
    let front = Arc::new(Front {
        keys: Keys {
            url: contextq_url.to_string(),
            settings,
            local,
            seen: Mutex::new(HashMap::new()),
            recheck: options.sessions.key_recheck,
        },
        gate,
        sweeping: AtomicBool::new(false),
    });
    axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(front, guard))
}

/// `/health` (liveness: this process answers) and `/ready` (the ContextQ behind it is ready:
/// its own `/ready`, relayed with its reasons, within a second), without a key, as
/// contextq-server's own: what a load balancer or Kubernetes probes. A ContextQ without
/// `/ready` (the seed's) is ready when it answers `/health`.
fn probes(contextq_url: &str) -> axum::Router {
    let base = contextq_url.trim_end_matches('/').to_string();
    let http = reqwest::Client::builder()
        .timeout(UPSTREAM_PROBE)
        .build()
        .unwrap_or_default();
    axum::Router::new()
        .route(
            "/health",
            axum::routing::get(|| async { axum::Json(serde_json::json!({"status": "ok"})) }),
        )
        .route(
            "/ready",
            axum::routing::get(move || {
                let (http, base) = (http.clone(), base.clone());
                async move { upstream_ready(&http, &base).await }
            }),
        )
}

/// Longest `/ready` waits for the ContextQ behind it.
const UPSTREAM_PROBE: Duration = Duration::from_millis(900);

async fn upstream_ready(http: &reqwest::Client, base: &str) -> Response {
    let not_ready = |reasons: Vec<String>| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            axum::Json(
                serde_json::json!({"status": "not ready", "upstream": base, "reasons": reasons}),
            ),
        )
            .into_response()
    };
    let answer = match http.get(format!("{base}/ready")).send().await {
        Ok(a) => a,
        Err(e) => {
            let why = if e.is_timeout() {
                format!(
                    "the ContextQ behind this server did not answer /ready within {} ms",
                    UPSTREAM_PROBE.as_millis()
                )
            } else {
                "the ContextQ behind this server does not answer".to_string()
            };
            return not_ready(vec![why]);
        }
    };
    let status = answer.status();
    if status.is_success() {
        return (
            StatusCode::OK,
            axum::Json(serde_json::json!({"status": "ready", "upstream": base})),
        )
            .into_response();
    }
    if status == StatusCode::NOT_FOUND {
        // The seed's ContextQ has no /ready: its /health answering is what can be known.
        return match http.get(format!("{base}/health")).send().await {
            Ok(h) if h.status().is_success() => (
                StatusCode::OK,
                axum::Json(serde_json::json!({"status": "ready", "upstream": base})),
            )
                .into_response(),
            _ => not_ready(vec![
                "the ContextQ behind this server is not healthy".into(),
            ]),
        };
    }
    let body: serde_json::Value = answer.json().await.unwrap_or_default();
    let mut reasons: Vec<String> = body["reasons"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|x| x.as_str())
                .map(|x| format!("the ContextQ behind this server: {x}"))
                .collect()
        })
        .unwrap_or_default();
    if reasons.is_empty() {
        reasons.push(format!(
            "the ContextQ behind this server answered /ready {}",
            status.as_u16()
        ));
    }
    not_ready(reasons)
}

/// Serves MCP at `/mcp` until SIGTERM or Ctrl-C, within the server's connection limits, in
/// front of `options.contextq_url` (or `local`, that server in this process); prints
/// `http://ADDR/mcp` on stdout once listening.
pub async fn run(
    options: HttpOptions,
    local: Option<Arc<dyn LocalService>>,
    settings: Settings,
) -> Result<()> {
    let listener = tokio::net::TcpListener::bind(&options.listen).await?;
    let addr = listener.local_addr()?;
    let app = router(&options.contextq_url, local, addr, &options, settings)
        .merge(probes(&options.contextq_url));
    println!("http://{addr}/mcp");
    use std::io::Write;
    std::io::stdout().flush()?;
    contextq_server::logs::notice(&format!(
        "contextq-memory mcp: MCP over HTTP at http://{addr}/mcp, in front of {}",
        options.contextq_url
    ));
    contextq_server::listen::serve_connections(
        listener,
        app,
        contextq_server::ConnectionLimits::default().for_this_process(),
        contextq_server::listen::stop_signal(),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys kept stay within their cap however many keys come (a new one takes the place
    /// of the least recently used); a key already kept takes nobody's.
    #[test]
    fn the_keys_kept_stay_within_their_cap() {
        let start = Instant::now();
        let at = |n: u64| start + Duration::from_millis(n);
        let owner = |n: u32| {
            let mut o = [0u8; 32];
            o[..4].copy_from_slice(&n.to_be_bytes());
            o
        };
        let mut seen: HashMap<Owner, Instant> = HashMap::new();
        for n in 0..10_000u32 {
            make_room(&mut seen, &owner(n), 3, |t| *t);
            seen.insert(owner(n), at(u64::from(n)));
            assert!(seen.len() <= 3, "{} keys kept after {n}", seen.len());
        }
        let kept = |seen: &HashMap<Owner, Instant>| {
            let mut k: Vec<u32> = seen
                .keys()
                .map(|o| u32::from_be_bytes(o[..4].try_into().unwrap()))
                .collect();
            k.sort();
            k
        };
        assert_eq!(kept(&seen), [9_997, 9_998, 9_999]);
        // Kept already: nobody goes, though the cap is reached.
        make_room(&mut seen, &owner(9_997), 3, |t| *t);
        assert_eq!(kept(&seen), [9_997, 9_998, 9_999]);
        // The least recently used goes, not the oldest inserted.
        seen.insert(owner(9_997), at(20_000));
        make_room(&mut seen, &owner(1), 3, |t| *t);
        assert_eq!(kept(&seen), [9_997, 9_999]);
    }
}
