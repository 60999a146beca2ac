//! Test support (feature `test-util`): a scripted stand-in for the Claude Messages API, on
//! loopback, a deterministic command trace ([`trace`]), the commands of the cost tables
//! ([`costs`]), and a fault-injecting ContextQ proxy
//! ([`proxy`]).
//!
//! The stand-in checks every request the way the real API would and refuses bad ones with a 400
//! `invalid_request_error` (and records the violation):
//! - `POST /v1/messages` with `x-api-key` and `anthropic-version: 2023-06-01`;
//! - a non-empty `model`, `max_tokens` > 0, messages alternating from `user`;
//! - the memory tool exactly `{"type": "memory_20250818", "name": "memory"}` (plus pass-through
//!   keys), with the `context-management-2025-06-27` beta; a client tool with an object
//!   `input_schema`;
//! - `context_management` of the documented shape (and the beta);
//! - every `tool_use` answered in the next user message by exactly one `tool_result` with the
//!   same id, results first;
//! - every assistant message sent back exactly as the stand-in produced it (each response carries
//!   an unknown block type, which must survive the round trip).
//!
//! It plays Claude's side of a memory conversation:
//! - a user text with `FACT: <fact>` and a `/memories/<dir>/` path: `create <dir>/fact.md`;
//! - a user text with a `/memories/<dir>/` path and no fact: `view <dir>/fact.md`;
//! - `PARALLEL`: three memory calls in one turn (two creates on different files, then a view of
//!   the first);
//! - `SEARCH` (with a `memory_search` tool offered): a create, then a `memory_search` for what
//!   it wrote, in one turn;
//! - `RATE_LIMITED_ONCE` / `OVERLOADED_ONCE`: a 429 (`retry-after: 0`) / 529 first;
//! - after tool results: a final text (`Saved it.`, `You told me: <fact>`, or the error).

pub mod costs;
pub mod proxy;
pub mod trace;

/// Cases of a property test: `PROPTEST_CASES` when set (the long runs of docs/reliability.md),
/// else `default`.
pub fn proptest_cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A request as received.
#[derive(Debug, Clone)]
pub struct Recorded {
    /// Lower-case header names and values (the API key masked).
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct Inner {
    requests: Vec<Recorded>,
    violations: Vec<String>,
    produced: Vec<Value>,
    counter: u64,
    faults_done: Vec<String>,
}

/// The running stand-in.
#[derive(Clone)]
pub struct ScriptedClaude {
    /// `http://127.0.0.1:PORT` (use as `ANTHROPIC_BASE_URL`).
    pub url: String,
    inner: Arc<Mutex<Inner>>,
}

impl std::fmt::Debug for ScriptedClaude {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedClaude")
            .field("url", &self.url)
            .finish()
    }
}

impl ScriptedClaude {
    /// Starts on 127.0.0.1:0.
    pub async fn start() -> std::io::Result<ScriptedClaude> {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let app = axum::Router::new()
            .route("/v1/messages", axum::routing::post(messages))
            .with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move { axum::serve(listener, app).await });
        Ok(ScriptedClaude { url, inner })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every request so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.lock().requests.clone()
    }

    /// Every refused request's reason so far.
    pub fn violations(&self) -> Vec<String> {
        self.lock().violations.clone()
    }
}

fn error(status: u16, kind: &str, message: &str) -> Response {
    let mut r = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_REQUEST),
        Json(json!({"type": "error", "error": {"type": kind, "message": message}})),
    )
        .into_response();
    r.headers_mut()
        .insert("request-id", "req_standin".parse().expect("valid header"));
    r
}

fn validate(headers: &HeaderMap, body: &Value, produced: &[Value]) -> Result<(), String> {
    let h = |n: &str| headers.get(n).and_then(|v| v.to_str().ok()).unwrap_or("");
    if h("x-api-key").is_empty() {
        return Err("x-api-key header is required".into());
    }
    if h("anthropic-version") != "2023-06-01" {
        return Err(format!(
            "anthropic-version must be 2023-06-01, got {:?}",
            h("anthropic-version")
        ));
    }
    let betas: Vec<&str> = h("anthropic-beta")
        .split(',')
        .map(str::trim)
        .filter(|b| !b.is_empty())
        .collect();
    match body["model"].as_str() {
        None => return Err("model: field required".into()),
        Some("") => return Err("model: String should have at least 1 character".into()),
        Some(_) => {}
    }
    if body["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        return Err("max_tokens: must be a positive integer".into());
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("messages: at least one message is required".into());
    };
    let mut has_memory = false;
    for tool in body["tools"].as_array().into_iter().flatten() {
        if tool["type"] == "memory_20250818" {
            has_memory = true;
            if tool["name"] != "memory" {
                return Err("tools: memory_20250818 must be named \"memory\"".into());
            }
            let allowed = [
                "type",
                "name",
                "cache_control",
                "allowed_callers",
                "defer_loading",
                "strict",
                "input_examples",
            ];
            if let Some(k) = tool
                .as_object()
                .and_then(|o| o.keys().find(|k| !allowed.contains(&k.as_str())))
            {
                return Err(format!("tools.memory: unexpected field {k:?}"));
            }
        } else if tool["name"].as_str().is_none_or(str::is_empty) {
            return Err("tools: every tool needs a name".into());
        } else if tool.get("type").is_none() && tool["input_schema"]["type"] != "object" {
            // A client tool (no type): the API requires an object input schema.
            return Err(format!(
                "tools.{}: a client tool needs input_schema of type object",
                tool["name"]
            ));
        }
    }
    let cm_beta = betas.contains(&"context-management-2025-06-27");
    if has_memory && !cm_beta {
        return Err("the memory tool requires the context-management-2025-06-27 beta".into());
    }
    if let Some(cm) = body.get("context_management") {
        if !cm_beta {
            return Err(
                "context_management requires the context-management-2025-06-27 beta".into(),
            );
        }
        let Some(edits) = cm["edits"].as_array() else {
            return Err("context_management.edits must be an array".into());
        };
        for e in edits {
            if e["type"] != "clear_tool_uses_20250919" {
                return Err(format!(
                    "context_management: unknown edit type {}",
                    e["type"]
                ));
            }
            if e["trigger"]["type"] != "input_tokens" || !e["trigger"]["value"].is_u64() {
                return Err(
                    "context_management: trigger must be {type: input_tokens, value: int}".into(),
                );
            }
            if !e["exclude_tools"]
                .as_array()
                .is_some_and(|a| a.iter().all(Value::is_string))
            {
                return Err("context_management: exclude_tools must be an array of names".into());
            }
        }
    }
    for (i, m) in messages.iter().enumerate() {
        let want = if i % 2 == 0 { "user" } else { "assistant" };
        if m["role"] != want {
            return Err(format!(
                "messages.{i}.role must be {want} (roles alternate, starting with user)"
            ));
        }
        if m["role"] == "assistant" && !produced.contains(&m["content"]) {
            return Err(format!(
                "messages.{i}: the assistant message was not sent back verbatim"
            ));
        }
        let uses: Vec<&str> = m["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["type"] == "tool_use")
            .filter_map(|b| b["id"].as_str())
            .collect();
        if uses.is_empty() || i + 1 >= messages.len() {
            continue;
        }
        let next = messages[i + 1]["content"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let results: Vec<&Value> = next
            .iter()
            .take_while(|b| b["type"] == "tool_result")
            .collect();
        if next
            .iter()
            .skip(results.len())
            .any(|b| b["type"] == "tool_result")
        {
            return Err(format!(
                "messages.{}: tool_result blocks must come first",
                i + 1
            ));
        }
        let ids: Vec<&str> = results
            .iter()
            .filter_map(|b| b["tool_use_id"].as_str())
            .collect();
        if ids != uses {
            return Err(format!(
                "messages.{}: each tool_use needs exactly one tool_result with its id, in order: expected {uses:?}, got {ids:?}",
                i + 1
            ));
        }
        for r in results {
            if !(r["content"].is_string() || r["content"].is_array()) {
                return Err("tool_result.content must be a string or blocks".into());
            }
            if r.get("is_error").is_some_and(|e| !e.is_boolean()) {
                return Err("tool_result.is_error must be a boolean".into());
            }
        }
    }
    Ok(())
}

fn memories_dir(text: &str) -> Option<String> {
    let start = text.find("/memories/")?;
    let rest = &text[start..];
    let end = rest
        .find(|c: char| c.is_whitespace() || c == '`' || c == '"' || c == '\'')
        .unwrap_or(rest.len());
    let mut dir = rest[..end]
        .trim_end_matches(['.', ',', ')', '?'])
        .to_string();
    if !dir.ends_with('/') {
        dir.push('/');
    }
    Some(dir)
}

fn tool_use(id: String, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": "memory", "input": input})
}

fn search_use(id: String, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": "memory_search", "input": input})
}

async fn messages(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    let mut st = inner.lock().unwrap_or_else(|p| p.into_inner());
    st.requests.push(Recorded {
        headers: headers
            .iter()
            .map(|(k, v)| {
                let v = v.to_str().unwrap_or("");
                let v = if k == "x-api-key" {
                    contextq_api::mask_secret(v)
                } else {
                    v.to_string()
                };
                (k.to_string(), v)
            })
            .collect(),
        body: body.clone(),
    });
    if let Err(v) = validate(&headers, &body, &st.produced) {
        st.violations.push(v.clone());
        return error(400, "invalid_request_error", &v);
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let last_text: String = last["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    for (marker, status, kind) in [
        ("RATE_LIMITED_ONCE", 429, "rate_limit_error"),
        ("OVERLOADED_ONCE", 529, "overloaded_error"),
    ] {
        if last_text.contains(marker) && !st.faults_done.iter().any(|f| f == marker) {
            st.faults_done.push(marker.to_string());
            let mut r = error(status, kind, "try again");
            r.headers_mut()
                .insert("retry-after", "0".parse().expect("valid header"));
            return r;
        }
    }
    st.counter += 1;
    let n = st.counter;
    let id = |k: u64| format!("toolu_standin_{n}_{k}");
    let results: Vec<Value> = last["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "tool_result")
        .cloned()
        .collect();
    let (mut content, stop) = if !results.is_empty() {
        let text = results
            .iter()
            .map(|r| {
                let c = r["content"].as_str().unwrap_or("");
                if r["is_error"] == true {
                    format!("The memory tool failed: {c}")
                } else if let Some(line) = c.lines().find(|l| l.contains("FACT: ")) {
                    format!(
                        "You told me: {}",
                        line.split("FACT: ").nth(1).unwrap_or("").trim()
                    )
                } else {
                    "Saved it.".to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ");
        (vec![json!({"type": "text", "text": text})], "end_turn")
    } else if last_text.contains("PARALLEL") {
        (
            vec![
                json!({"type": "text", "text": "Saving three things."}),
                tool_use(
                    id(1),
                    json!({"command": "create", "path": "/memories/p/a.md", "file_text": "FACT: a\n"}),
                ),
                tool_use(
                    id(2),
                    json!({"command": "create", "path": "/memories/p/b.md", "file_text": "b\n"}),
                ),
                tool_use(
                    id(3),
                    json!({"command": "view", "path": "/memories/p/a.md"}),
                ),
            ],
            "tool_use",
        )
    } else if last_text.contains("SEARCH")
        && body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == "memory_search"))
    {
        (
            vec![
                json!({"type": "text", "text": "Saving it, then finding it."}),
                tool_use(
                    id(1),
                    json!({"command": "create", "path": "/memories/s/key.md", "file_text": "intro\nFACT: the deploy key is OPS-4471\n"}),
                ),
                search_use(id(2), json!({"query": "OPS-4471"})),
            ],
            "tool_use",
        )
    } else if let Some(dir) = memories_dir(&last_text) {
        match last_text.split("FACT: ").nth(1) {
            Some(fact) => {
                let fact = fact.lines().next().unwrap_or("").trim();
                (
                    vec![
                        json!({"type": "text", "text": "I'll save that to memory."}),
                        tool_use(
                            id(1),
                            json!({"command": "create", "path": format!("{dir}fact.md"), "file_text": format!("FACT: {fact}\n")}),
                        ),
                    ],
                    "tool_use",
                )
            }
            None => (
                vec![
                    json!({"type": "text", "text": "Let me check my memory."}),
                    tool_use(
                        id(1),
                        json!({"command": "view", "path": format!("{dir}fact.md")}),
                    ),
                ],
                "tool_use",
            ),
        }
    } else {
        (
            vec![json!({"type": "text", "text": "Hello from the stand-in."})],
            "end_turn",
        )
    };
    // A block type this client has never heard of: it must come back verbatim.
    content.push(json!({"type": "x_standin_marker", "seq": n, "nested": {"keep": [1, 2, 3]}}));
    let content = Value::Array(content);
    st.produced.push(content.clone());
    let mut reply = json!({
        "id": format!("msg_standin_{n}"),
        "type": "message",
        "role": "assistant",
        "model": body["model"],
        "content": content,
        "stop_reason": stop,
        "stop_sequence": null,
        "usage": {"input_tokens": 100 + n, "output_tokens": 20},
    });
    if body.get("context_management").is_some() {
        reply["context_management"] = json!({"applied_edits": []});
    }
    Json(reply).into_response()
}
