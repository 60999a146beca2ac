//! A loopback proxy of the test's own: forwards to the real server, counts requests, and
//! injects faults (statuses, Retry-After, delays, dropped connections, lost responses, requests
//! held until the test releases them), or plays a plain ContextQ (the contract without extensions), without any
//! extension of the contract: no `ContextQ-Extensions`, no `ETag`, `If-Match` and `ifAbsent`
//! ignored, no `externalIdPrefix`, no `cursor`/`nextCursor` (one page of at most 500), no
//! `sizeBytes`, and 404 for every endpoint it does not have (versions, history, edit, rename,
//! `by-prefix`, `tree`, search, delete by external id). Tests of the adapter use it for fault injection; the bench binary counts HTTP
//! requests per command with it.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;
use contextq_api::ErrorCode;

/// What the proxy does to a request instead of forwarding it plainly.
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer this status without forwarding (with Retry-After seconds when given).
    Status(u16, Option<u64>),
    /// Wait, then forward.
    Delay(Duration),
    /// Drop the connection before forwarding (never processed).
    Drop,
    /// Forward (processed), then drop the connection instead of answering.
    ForwardThenDrop,
    /// Hold the request until the gate is opened, then forward it.
    Hold(Gate),
    /// Drop the connection at once (the client sees a lost answer), and forward the request
    /// later, when the test releases it: a write that commits after the client gave up.
    LostThenLate(Late),
}

/// A request parked by [`Fault::LostThenLate`]: a [`Gate`] the test opens, whose `arrived`
/// signal here says the server has answered the parked request.
#[derive(Debug, Clone, Default)]
pub struct Late(Gate);

impl Late {
    /// Forwards the parked request and waits until the server has answered it.
    pub async fn commit(&self) {
        let done = self.0.arrived.notified();
        self.0.open();
        done.await;
    }
}

/// A request held by [`Fault::Hold`]: the test waits for it to arrive, then lets it go.
#[derive(Debug, Clone, Default)]
pub struct Gate {
    arrived: Arc<tokio::sync::Notify>,
    open: Arc<tokio::sync::Notify>,
}

impl Gate {
    /// Waits until a request is held at this gate.
    pub async fn arrived(&self) {
        self.arrived.notified().await;
    }
    /// Lets the held request go on.
    pub fn open(&self) {
        self.open.notify_one();
    }
}

#[derive(Debug, Clone)]
struct Rule {
    method: Method,
    path_contains: String,
    fault: Fault,
    remaining: usize,
}

#[derive(Debug, Clone, Default)]
struct Shared {
    upstream: String,
    http: reqwest::Client,
    rules: Arc<Mutex<Vec<Rule>>>,
    log: Arc<Mutex<Vec<String>>>,
    requests: Arc<std::sync::atomic::AtomicUsize>,
    plain: bool,
    /// Extension tokens removed from `ContextQ-Extensions` (the server still has them).
    hidden: Vec<String>,
    /// Percent (0..=100) of requests that get a random fault, and how many were injected.
    chaos: Arc<Mutex<(u32, Vec<&'static str>)>>,
}

/// The proxy, listening on a loopback port until the process ends.
#[derive(Debug)]
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    shared: Shared,
}

impl Proxy {
    /// A proxy that forwards everything as it is (until told to inject faults).
    pub async fn start(upstream: &str) -> Proxy {
        Self::start_with(upstream, false, &[]).await
    }

    /// A proxy that hides every extension of the contract: a plain ContextQ (the contract without extensions).
    pub async fn plain(upstream: &str) -> Proxy {
        Self::start_with(upstream, true, &[]).await
    }

    /// A proxy that does not advertise the extensions `hidden` (tokens, e.g. `text-edit`), so
    /// that a client falls back to what it does without them.
    pub async fn hiding(upstream: &str, hidden: &[&str]) -> Proxy {
        Self::start_with(upstream, false, hidden).await
    }

    async fn start_with(upstream: &str, plain: bool, hidden: &[&str]) -> Proxy {
        let shared = Shared {
            upstream: upstream.to_string(),
            http: reqwest::Client::new(),
            plain,
            hidden: hidden.iter().map(|h| h.to_string()).collect(),
            ..Default::default()
        };
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        Proxy { url, shared }
    }

    /// The next `times` requests of `method` whose path contains `path_contains` get `fault`.
    pub fn fault(&self, method: Method, path_contains: &str, fault: Fault, times: usize) {
        self.shared.rules.lock().unwrap().push(Rule {
            method,
            path_contains: path_contains.to_string(),
            fault,
            remaining: times,
        });
    }

    /// From now on, `percent` of requests get a random fault (5xx, 429, delay, drop before or
    /// after forwarding), in equal shares.
    pub fn chaos(&self, percent: u32) {
        self.shared.chaos.lock().unwrap().0 = percent;
    }

    /// Faults injected by chaos so far, by kind.
    pub fn chaos_counts(&self) -> std::collections::BTreeMap<&'static str, usize> {
        let mut m = std::collections::BTreeMap::new();
        for k in &self.shared.chaos.lock().unwrap().1 {
            *m.entry(*k).or_insert(0) += 1;
        }
        m
    }

    /// Forgets every fault rule not used up yet.
    pub fn clear_faults(&self) {
        self.shared.rules.lock().unwrap().clear();
    }

    /// Requests seen ("METHOD /path"), and clears the log.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.shared.log.lock().unwrap())
    }

    /// Requests received since the proxy started (the log aside).
    pub fn requests(&self) -> usize {
        self.shared
            .requests
            .load(std::sync::atomic::Ordering::Relaxed)
    }
}

fn dropped() -> Response {
    // Headers go out, then the body fails: the client sees the connection break.
    let stream = futures::stream::once(async {
        Err::<Bytes, std::io::Error>(std::io::Error::other(
            "connection dropped by the fault proxy",
        ))
    });
    Response::builder()
        .status(200)
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn handle(State(s): State<Shared>, req: Request) -> Response {
    let method = req.method().clone();
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.to_string())
        .unwrap_or_default();
    let headers = req.headers().clone();
    let body = axum::body::to_bytes(req.into_body(), 64 << 20)
        .await
        .unwrap_or_default();
    s.requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    s.log
        .lock()
        .unwrap()
        .push(format!("{method} {}", path.split('?').next().unwrap_or("")));

    let fault = {
        let mut rules = s.rules.lock().unwrap();
        let hit = rules
            .iter_mut()
            .find(|r| r.remaining > 0 && r.method == method && path.contains(&r.path_contains));
        hit.map(|r| {
            r.remaining -= 1;
            r.fault.clone()
        })
    };
    let fault = fault.or_else(|| {
        let mut chaos = s.chaos.lock().unwrap();
        if chaos.0 == 0 || fastrand::u32(0..100) >= chaos.0 {
            return None;
        }
        let (kind, f) = match fastrand::u32(0..5) {
            0 => (
                "5xx",
                Fault::Status([500, 502, 503][fastrand::usize(0..3)], None),
            ),
            1 => ("429", Fault::Status(429, Some(0))),
            2 => (
                "delay",
                Fault::Delay(Duration::from_millis(fastrand::u64(1..40))),
            ),
            3 => ("drop", Fault::Drop),
            _ => ("lost answer", Fault::ForwardThenDrop),
        };
        chaos.1.push(kind);
        Some(f)
    });
    match &fault {
        Some(Fault::Status(code, retry_after)) => {
            let mut b = Response::builder()
                .status(*code)
                .header("content-type", "application/json");
            if let Some(s) = retry_after {
                b = b.header("retry-after", s.to_string());
            }
            let code_name =
                ErrorCode::of_answer(*code, None).map_or("bad_request", ErrorCode::as_str);
            return b
                .body(Body::from(format!(
                    r#"{{"error":{{"code":"{code_name}","message":"injected {code}"}}}}"#
                )))
                .unwrap();
        }
        Some(Fault::Delay(d)) => tokio::time::sleep(*d).await,
        Some(Fault::Hold(gate)) => {
            let opened = gate.open.notified();
            gate.arrived.notify_one();
            opened.await;
        }
        Some(Fault::Drop) => return dropped(),
        Some(Fault::LostThenLate(late)) => {
            let (s, late) = (s.clone(), late.clone());
            tokio::spawn(async move {
                late.0.open.notified().await;
                forward(&s, method, &path, &headers, body).await;
                late.0.arrived.notify_one();
            });
            return dropped();
        }
        _ => {}
    }
    let resp = forward(&s, method, &path, &headers, body).await;
    if matches!(fault, Some(Fault::ForwardThenDrop)) {
        return dropped();
    }
    resp
}

async fn forward(
    s: &Shared,
    method: Method,
    path: &str,
    headers: &HeaderMap,
    body: Bytes,
) -> Response {
    if s.plain && !plain_endpoint(&method, path) {
        // A plain ContextQ has no such endpoint: an adapter that calls one fails in every test.
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .header("content-type", "application/json")
            .body(Body::from(
                r#"{"error":{"code":"not_found","message":"no such endpoint"}}"#,
            ))
            .unwrap();
    }
    let path = if s.plain {
        strip_query(path, &["externalIdPrefix", "cursor"])
    } else {
        path.to_string()
    };
    let mut req = s.http.request(method, format!("{}{}", s.upstream, path));
    for name in [
        "authorization",
        "content-type",
        "if-match",
        "idempotency-key",
    ] {
        if matches!(name, "if-match" | "idempotency-key") && s.plain {
            continue;
        }
        if let Some(v) = headers.get(name) {
            req = req.header(name, v);
        }
    }
    let body = if s.plain && !body.is_empty() {
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(mut v) => {
                if let Some(items) = v.get_mut("contexts").and_then(|c| c.as_array_mut()) {
                    for item in items {
                        if let Some(o) = item.as_object_mut() {
                            o.remove("ifAbsent");
                        }
                    }
                }
                Bytes::from(serde_json::to_vec(&v).unwrap())
            }
            Err(_) => body,
        }
    } else {
        body
    };
    let upstream = match req.body(body).send().await {
        Ok(r) => r,
        Err(_) => {
            return Response::builder()
                .status(StatusCode::BAD_GATEWAY)
                .body(Body::empty())
                .unwrap();
        }
    };
    let mut out = Response::builder().status(upstream.status().as_u16());
    for name in ["content-type", "etag", "retry-after", "contextq-extensions"] {
        if s.plain && matches!(name, "etag" | "contextq-extensions") {
            continue;
        }
        if let Some(v) = upstream.headers().get(name) {
            if name == "contextq-extensions" && !s.hidden.is_empty() {
                let kept: Vec<&str> = v
                    .to_str()
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|t| !s.hidden.iter().any(|h| h == t))
                    .collect();
                out = out.header(name, kept.join(", "));
                continue;
            }
            out = out.header(name, v.as_bytes());
        }
    }
    let bytes = upstream.bytes().await.unwrap_or_default();
    let bytes = if s.plain {
        strip_list_extensions(bytes)
    } else {
        bytes
    };
    out.body(Body::from(bytes)).unwrap()
}

/// Whether a plain ContextQ has `method path`: the contract's table, without its extensions.
fn plain_endpoint(method: &Method, path: &str) -> bool {
    contextq_api::endpoints::find(method.as_str(), path).is_some_and(|e| e.extension.is_none())
}

/// `path?query` without the named query parameters.
fn strip_query(path: &str, names: &[&str]) -> String {
    let Some((p, q)) = path.split_once('?') else {
        return path.to_string();
    };
    let kept: Vec<&str> = q
        .split('&')
        .filter(|kv| !names.contains(&kv.split('=').next().unwrap_or("")))
        .collect();
    if kept.is_empty() {
        p.to_string()
    } else {
        format!("{p}?{}", kept.join("&"))
    }
}

/// A listing answer without `nextCursor` and `sizeBytes`; a workspace list without
/// `limitedTo` (extension `workspace-keys`: the seed's keys all reach their whole tenant).
fn strip_list_extensions(bytes: Bytes) -> Bytes {
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return bytes;
    };
    let Some(o) = v.as_object_mut() else {
        return bytes;
    };
    if o.contains_key("workspaces") && o.remove("limitedTo").is_some() {
        return Bytes::from(serde_json::to_vec(&v).unwrap());
    }
    if !o.contains_key("contexts") {
        return bytes;
    }
    o.remove("nextCursor");
    if let Some(items) = o.get_mut("contexts").and_then(|c| c.as_array_mut()) {
        for item in items {
            if let Some(i) = item.as_object_mut() {
                i.remove("sizeBytes");
            }
        }
    }
    Bytes::from(serde_json::to_vec(&v).unwrap())
}
