//! A small typed client for the Claude Messages API (`POST /v1/messages`).
//!
//! Typed `text`, `tool_use` and `tool_result` blocks; every other block (thinking, server tool
//! blocks, anything newer) is kept verbatim as [`ContentBlock::Other`] so it can be sent back
//! unchanged, and unknown keys of known blocks survive too. Errors keep status, `error.type`,
//! message and `request-id` ([`AnthropicError::Api`]). Requests go through the crate's retry
//! engine ([`crate::retry`]): a Messages API call is safe to repeat (it changes nothing), so
//! 429, 529, 500/502/503/504, lost answers and connection failures are retried with
//! exponential backoff, honouring `retry-after`.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::AnthropicError;
use crate::error::{Error, Result};
use crate::retry::{self, Attempt, Failure, Idempotency, RetryConfig};

/// The public API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
/// The `anthropic-version` header sent with every request.
pub const API_VERSION: &str = "2023-06-01";

/// How to reach the Messages API. `Debug` masks the key. Built with [`AnthropicConfig::new`] or
/// [`AnthropicConfig::from_env`] and its setters.
#[derive(Clone)]
#[non_exhaustive]
pub struct AnthropicConfig {
    /// `x-api-key`.
    pub api_key: String,
    /// Base URL; default [`DEFAULT_BASE_URL`].
    pub base_url: String,
    /// `anthropic-beta` values sent with every request (default none; requests add what they
    /// need, e.g. the context-management beta).
    pub betas: Vec<String>,
    /// Retries on 429/529/5xx; default 3, 500 ms doubling to 30 s, 2 min in all.
    pub retry: RetryConfig,
    /// Timeout of one request; default 10 min (long generations).
    pub timeout: Duration,
    /// A caller's own HTTP client.
    pub http_client: Option<reqwest::Client>,
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("api_key", &contextq_api::mask_secret(&self.api_key))
            .field("base_url", &self.base_url)
            .field("betas", &self.betas)
            .field("retry", &self.retry)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl AnthropicConfig {
    /// A config with `api_key` and defaults.
    pub fn new(api_key: impl Into<String>) -> Self {
        AnthropicConfig {
            api_key: api_key.into(),
            base_url: DEFAULT_BASE_URL.into(),
            betas: Vec::new(),
            retry: RetryConfig::default()
                .initial_backoff(Duration::from_millis(500))
                .max_backoff(Duration::from_secs(30))
                .retry_timeout(Duration::from_secs(120)),
            timeout: Duration::from_secs(600),
            http_client: None,
        }
    }

    /// Sets [`AnthropicConfig::http_client`].
    #[must_use]
    pub fn http_client(mut self, client: reqwest::Client) -> Self {
        self.http_client = Some(client);
        self
    }

    /// `ANTHROPIC_API_KEY` (required) and `ANTHROPIC_BASE_URL` (optional).
    pub fn from_env() -> Result<Self> {
        let key = std::env::var("ANTHROPIC_API_KEY")
            .ok()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| Error::Config {
                message: "ANTHROPIC_API_KEY is not set: set it to a key for the Claude API".into(),
            })?;
        let mut config = AnthropicConfig::new(key);
        if let Some(url) = std::env::var("ANTHROPIC_BASE_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
        {
            config.base_url = url;
        }
        Ok(config)
    }
}

contextq_api::setters!(AnthropicConfig {
    base_url: String,
    betas: Vec<String>,
    retry: RetryConfig,
    timeout: Duration,
});

/// A content block.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentBlock {
    /// `{"type": "text", "text"}`.
    Text {
        /// The text.
        text: String,
        /// Other keys (citations, ...), kept.
        extra: Map<String, Value>,
    },
    /// `{"type": "tool_use", "id", "name", "input"}`.
    ToolUse {
        /// Its id; the result must carry it.
        id: String,
        /// The tool name.
        name: String,
        /// The input.
        input: Value,
        /// Other keys (`caller`, ...), kept.
        extra: Map<String, Value>,
    },
    /// `{"type": "tool_result", "tool_use_id", "content", "is_error"}`.
    ToolResult {
        /// The tool_use id answered.
        tool_use_id: String,
        /// The text (or blocks) of the result.
        content: Value,
        /// Whether the call failed.
        is_error: bool,
        /// Other keys (`cache_control`, ...), kept.
        extra: Map<String, Value>,
    },
    /// Any other block, verbatim.
    Other(Value),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text {
            text: text.into(),
            extra: Map::new(),
        }
    }

    /// A tool result block.
    pub fn tool_result(
        tool_use_id: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Self {
        ContentBlock::ToolResult {
            tool_use_id: tool_use_id.into(),
            content: Value::String(content.into()),
            is_error,
            extra: Map::new(),
        }
    }

    fn from_value(v: Value) -> ContentBlock {
        let Value::Object(mut obj) = v else {
            return ContentBlock::Other(v);
        };
        let kind = obj
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let take_str = |obj: &mut Map<String, Value>, k: &str| match obj.remove(k) {
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                obj.insert(k.to_string(), other);
                None
            }
            None => None,
        };
        match kind.as_str() {
            "text" if obj.get("text").is_some_and(Value::is_string) => {
                obj.remove("type");
                let text = take_str(&mut obj, "text").unwrap_or_default();
                ContentBlock::Text { text, extra: obj }
            }
            "tool_use"
                if obj.get("id").is_some_and(Value::is_string)
                    && obj.get("name").is_some_and(Value::is_string) =>
            {
                obj.remove("type");
                let id = take_str(&mut obj, "id").unwrap_or_default();
                let name = take_str(&mut obj, "name").unwrap_or_default();
                let input = obj.remove("input").unwrap_or(Value::Object(Map::new()));
                ContentBlock::ToolUse {
                    id,
                    name,
                    input,
                    extra: obj,
                }
            }
            "tool_result" if obj.get("tool_use_id").is_some_and(Value::is_string) => {
                obj.remove("type");
                let tool_use_id = take_str(&mut obj, "tool_use_id").unwrap_or_default();
                let content = obj
                    .remove("content")
                    .unwrap_or(Value::String(String::new()));
                let is_error = obj
                    .remove("is_error")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false);
                ContentBlock::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                    extra: obj,
                }
            }
            _ => ContentBlock::Other(Value::Object(obj)),
        }
    }

    fn to_value(&self) -> Value {
        // `type`, the block's own keys, then the keys kept from the API.
        let object = |kind: &str, keys: Vec<(&str, Value)>, extra: &Map<String, Value>| {
            let mut o = Map::new();
            o.insert("type".into(), kind.into());
            for (k, v) in keys {
                o.insert(k.into(), v);
            }
            o.extend(extra.clone());
            Value::Object(o)
        };
        match self {
            ContentBlock::Text { text, extra } => {
                object("text", vec![("text", text.clone().into())], extra)
            }
            ContentBlock::ToolUse {
                id,
                name,
                input,
                extra,
            } => object(
                "tool_use",
                vec![
                    ("id", id.clone().into()),
                    ("name", name.clone().into()),
                    ("input", input.clone()),
                ],
                extra,
            ),
            ContentBlock::ToolResult {
                tool_use_id,
                content,
                is_error,
                extra,
            } => {
                let mut keys = vec![
                    ("tool_use_id", tool_use_id.clone().into()),
                    ("content", content.clone()),
                ];
                if *is_error {
                    keys.push(("is_error", true.into()));
                }
                object("tool_result", keys, extra)
            }
            ContentBlock::Other(v) => v.clone(),
        }
    }
}

impl Serialize for ContentBlock {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_value().serialize(s)
    }
}

impl<'de> Deserialize<'de> for ContentBlock {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(ContentBlock::from_value(Value::deserialize(d)?))
    }
}

/// `user` or `assistant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The person or program talking to Claude; tool results are sent in its messages.
    User,
    /// Claude's own turns, sent back verbatim.
    Assistant,
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageParam {
    /// Whose turn it is.
    pub role: Role,
    /// What (a plain string is accepted on input and read as one text block).
    #[serde(deserialize_with = "content_blocks")]
    pub content: Vec<ContentBlock>,
}

fn content_blocks<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<ContentBlock>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => vec![ContentBlock::text(s)],
        Value::Array(items) => items.into_iter().map(ContentBlock::from_value).collect(),
        other => vec![ContentBlock::Other(other)],
    })
}

impl MessageParam {
    /// A user message with one text block.
    pub fn user(text: impl Into<String>) -> Self {
        MessageParam {
            role: Role::User,
            content: vec![ContentBlock::text(text)],
        }
    }
}

/// Why Claude stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// Claude finished its turn; the runner stops here.
    EndTurn,
    /// Hit `max_tokens`.
    MaxTokens,
    /// Hit a stop sequence.
    StopSequence,
    /// Wants tool results.
    ToolUse,
    /// A long server-side turn paused; send the conversation again to continue.
    PauseTurn,
    /// Claude declined to continue.
    Refusal,
    /// Anything newer.
    Other(String),
}

impl StopReason {
    fn parse(s: &str) -> Self {
        match s {
            "end_turn" => StopReason::EndTurn,
            "max_tokens" => StopReason::MaxTokens,
            "stop_sequence" => StopReason::StopSequence,
            "tool_use" => StopReason::ToolUse,
            "pause_turn" => StopReason::PauseTurn,
            "refusal" => StopReason::Refusal,
            other => StopReason::Other(other.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for StopReason {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        Ok(StopReason::parse(&String::deserialize(d)?))
    }
}

/// Token usage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Usage {
    /// Input tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Output tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Tokens written to the prompt cache.
    #[serde(default)]
    pub cache_creation_input_tokens: Option<u64>,
    /// Tokens read from the prompt cache.
    #[serde(default)]
    pub cache_read_input_tokens: Option<u64>,
}

/// A response message.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Message {
    /// The API's id of the message (`msg_...`).
    pub id: String,
    /// Model that answered.
    #[serde(default)]
    pub model: String,
    /// Always assistant.
    pub role: Role,
    /// What Claude said and which tools it called, block by block, unknown kinds kept.
    #[serde(deserialize_with = "content_blocks")]
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    #[serde(default)]
    pub stop_reason: Option<StopReason>,
    /// Tokens this call consumed.
    #[serde(default)]
    pub usage: Usage,
    /// What context management did, when enabled.
    #[serde(default)]
    pub context_management: Option<Value>,
}

impl Message {
    /// All text blocks, joined.
    pub fn text(&self) -> String {
        self.content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("")
    }

    /// The message as a conversation entry (every block verbatim).
    pub fn to_param(&self) -> MessageParam {
        MessageParam {
            role: Role::Assistant,
            content: self.content.clone(),
        }
    }
}

/// A `POST /v1/messages` request.
#[derive(Debug, Clone, PartialEq)]
pub struct MessageRequest {
    /// Model id.
    pub model: String,
    /// Output cap.
    pub max_tokens: u32,
    /// The conversation.
    pub messages: Vec<MessageParam>,
    /// System prompt.
    pub system: Option<String>,
    /// Tool definitions (JSON, sent as is).
    pub tools: Vec<Value>,
    /// `context_management` (see [`super::ClearToolUses`]).
    pub context_management: Option<Value>,
    /// `anthropic-beta` values this request needs (added to the client's).
    pub betas: Vec<String>,
    /// Any other top-level field (temperature, metadata, tool_choice, ...).
    pub extra: Map<String, Value>,
}

impl MessageRequest {
    /// A request for `model` with `max_tokens` and no messages yet.
    pub fn new(model: impl Into<String>, max_tokens: u32) -> Self {
        MessageRequest {
            model: model.into(),
            max_tokens,
            messages: Vec::new(),
            system: None,
            tools: Vec::new(),
            context_management: None,
            betas: Vec::new(),
            extra: Map::new(),
        }
    }

    /// Adds a beta value once.
    pub fn beta(mut self, beta: impl Into<String>) -> Self {
        let beta = beta.into();
        if !self.betas.contains(&beta) {
            self.betas.push(beta);
        }
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut o = Map::new();
        o.insert("model".into(), self.model.clone().into());
        o.insert("max_tokens".into(), self.max_tokens.into());
        o.insert(
            "messages".into(),
            serde_json::to_value(&self.messages).unwrap_or_default(),
        );
        if let Some(s) = &self.system {
            o.insert("system".into(), s.clone().into());
        }
        if !self.tools.is_empty() {
            o.insert("tools".into(), Value::Array(self.tools.clone()));
        }
        if let Some(cm) = &self.context_management {
            o.insert("context_management".into(), cm.clone());
        }
        for (k, v) in &self.extra {
            o.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Value::Object(o)
    }
}

/// The Messages API client.
#[derive(Debug, Clone)]
pub struct MessagesClient {
    config: AnthropicConfig,
    http: reqwest::Client,
}

impl MessagesClient {
    /// A client for `config`.
    pub fn new(config: AnthropicConfig) -> Result<Self> {
        let http = match &config.http_client {
            Some(h) => h.clone(),
            None => reqwest::Client::builder()
                .build()
                .map_err(|e| Error::Config {
                    message: format!("cannot build the HTTP client: {e}"),
                })?,
        };
        Ok(MessagesClient { config, http })
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.config.base_url
    }

    /// `POST /v1/messages`.
    pub async fn create(&self, request: &MessageRequest) -> Result<Message> {
        let url = format!("{}/v1/messages", self.config.base_url.trim_end_matches('/'));
        let mut betas = self.config.betas.clone();
        for b in &request.betas {
            if !betas.contains(b) {
                betas.push(b.clone());
            }
        }
        let body = request.body();
        retry::run(
            &self.config.retry,
            "Messages API",
            "POST /v1/messages",
            Idempotency::Read,
            None,
            || async {
                let mut req = self
                    .http
                    .post(&url)
                    .timeout(self.config.timeout)
                    .header("x-api-key", &self.config.api_key)
                    .header("anthropic-version", API_VERSION)
                    .json(&body);
                if !betas.is_empty() {
                    req = req.header("anthropic-beta", betas.join(","));
                }
                let answer = retry::exchange(req, &url, &self.config.api_key, |t| {
                    AnthropicError::Transport(t).into()
                })
                .await?;
                if (200..300).contains(&answer.status) {
                    // A complete answer that is not a message: not the API's, repeating it is
                    // pointless.
                    return serde_json::from_slice(&answer.body).map_err(|e| Attempt {
                        failure: Failure::Status(answer.status),
                        error: AnthropicError::Protocol {
                            url: url.clone(),
                            message: format!("invalid message JSON: {e}"),
                        }
                        .into(),
                        retry_after: None,
                    });
                }
                Err(Attempt {
                    failure: Failure::Status(answer.status),
                    error: anthropic_error(&answer),
                    retry_after: answer.retry_after(),
                })
            },
        )
        .await
    }
}

/// The error of a refused request: `error.type`, `error.message` and `request-id`.
fn anthropic_error(answer: &retry::Answer) -> Error {
    let parsed: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    AnthropicError::Api {
        status: answer.status,
        error_type: parsed["error"]["type"]
            .as_str()
            .unwrap_or("http_error")
            .to_string(),
        message: parsed["error"]["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| {
                String::from_utf8_lossy(&answer.body)
                    .chars()
                    .take(300)
                    .collect()
            }),
        request_id: answer
            .headers
            .get("request-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    }
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn blocks_round_trip_losslessly() {
        let blocks = json!([
            {"type": "text", "text": "hi", "citations": [{"x": 1}]},
            {"type": "tool_use", "id": "toolu_1", "name": "memory", "input": {"command": "view", "path": "/memories"}, "caller": {"type": "direct"}},
            {"type": "thinking", "thinking": "hmm", "signature": "abc"},
            {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "ok", "is_error": true}
        ]);
        let parsed: Vec<ContentBlock> = serde_json::from_value(blocks.clone()).unwrap();
        assert!(matches!(parsed[0], ContentBlock::Text { .. }));
        assert!(matches!(parsed[1], ContentBlock::ToolUse { .. }));
        assert!(matches!(parsed[2], ContentBlock::Other(_)));
        assert!(matches!(
            parsed[4],
            ContentBlock::ToolResult { is_error: true, .. }
        ));
        assert_eq!(serde_json::to_value(&parsed).unwrap(), blocks);
    }

    #[test]
    fn request_body_and_string_content() {
        let mut r = MessageRequest::new("claude-x", 100);
        r.messages.push(MessageParam::user("hello"));
        r.extra.insert("temperature".into(), json!(0.2));
        r.extra
            .insert("model".into(), json!("ignored: explicit fields win"));
        let body = r.body();
        assert_eq!(body["model"], "claude-x");
        assert_eq!(
            body["messages"][0],
            json!({"role": "user", "content": [{"type": "text", "text": "hello"}]})
        );
        assert_eq!(body["temperature"], 0.2);
        assert!(body.get("tools").is_none() && body.get("system").is_none());
        let m: MessageParam =
            serde_json::from_value(json!({"role": "user", "content": "plain"})).unwrap();
        assert_eq!(m, MessageParam::user("plain"));
    }

    #[test]
    fn keys_are_masked() {
        let c = AnthropicConfig::new("sk-ant-api03-SECRETSECRETSECRET-abcd");
        let dbg = format!("{c:?}");
        assert!(
            dbg.contains("sk-ant-…abcd") && !dbg.contains("SECRET"),
            "{dbg}"
        );
    }
}
