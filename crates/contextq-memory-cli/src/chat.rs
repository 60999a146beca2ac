//! `contextq-memory chat`: talk to Claude with the memory tool on the configured store.
//!
//! Each line read from stdin is one user turn (piped or on a terminal; EOF ends it). Claude's
//! text goes to stdout, tool calls are shown briefly, and stderr says which Anthropic base URL
//! and which ContextQ the conversation uses. Context editing is on, with `memory` excluded.

use crate::out::outln;
use std::io::IsTerminal;

use anyhow::Result;
use contextq_memory_tool::anthropic::{
    AnthropicConfig, ClearToolUses, MemoryRunnableTool, MessageParam, MessageRequest,
    MessagesClient, ToolCall, ToolRunner, memory_search_tool,
};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::stores::Opened;

/// Options of `chat`.
pub struct ChatOptions {
    /// Model id.
    pub model: String,
    /// System prompt.
    pub system: Option<String>,
    /// Output cap per response.
    pub max_tokens: u32,
}

/// The outcome of a call in a word: "ok", or the first line of its error.
fn first_line_or_ok(call: &ToolCall) -> String {
    if call.result.is_error {
        call.result
            .content
            .lines()
            .next()
            .unwrap_or("error")
            .to_string()
    } else {
        "ok".to_string()
    }
}

/// One line describing a tool call for the terminal.
pub fn describe_call(call: &ToolCall) -> String {
    let command = match call.input["query"].as_str() {
        Some(query) if call.name == contextq_memory_tool::search::TOOL_NAME => {
            return format!("  [memory_search {query:?}] {}", first_line_or_ok(call));
        }
        _ => call.input["command"].as_str().unwrap_or("?"),
    };
    let path = call.input["path"]
        .as_str()
        .or_else(|| call.input["old_path"].as_str())
        .unwrap_or("");
    format!(
        "  [{} {command} {path}] {}",
        call.name,
        first_line_or_ok(call)
    )
}

/// Runs the conversation; without `ANTHROPIC_API_KEY` it says so and returns.
pub async fn run(opened: &Opened, options: ChatOptions) -> Result<()> {
    let config = match AnthropicConfig::from_env() {
        Ok(c) => c,
        Err(_) => {
            outln!(
                "ANTHROPIC_API_KEY is not set: chat needs a Claude API key. Set it (and ANTHROPIC_BASE_URL for a gateway) and run again."
            );
            return Ok(());
        }
    };
    eprintln!("anthropic base url: {}", config.base_url);
    eprintln!("{}", opened.describe());
    let client = MessagesClient::new(config)?;
    let interactive = std::io::stdin().is_terminal();
    let mut messages: Vec<MessageParam> = Vec::new();
    let mut failed = 0usize;
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        if interactive {
            eprint!("> ");
        }
        let Some(line) = lines.next_line().await? else {
            break;
        };
        if line.trim().is_empty() {
            continue;
        }
        messages.push(MessageParam::user(line));
        let mut request = MessageRequest::new(options.model.clone(), options.max_tokens);
        request.system = options.system.clone();
        request.messages = std::mem::take(&mut messages);
        let request = ClearToolUses::default().apply(request);
        let mut runner = ToolRunner::new(client.clone(), request)
            .tool(MemoryRunnableTool::from_arc(opened.tool.clone()))
            .tool(memory_search_tool(opened.tool.clone()))
            .on_tool_call(|call| outln!("{}", describe_call(call)));
        while let Some(message) = runner.next_message().await {
            match message {
                Ok(m) => {
                    let text = m.text();
                    if !text.trim().is_empty() {
                        outln!("{text}");
                    }
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    failed += 1;
                    break;
                }
            }
        }
        if runner.hit_iteration_limit() {
            eprintln!("(stopped after the maximum number of tool rounds)");
        }
        messages = runner.into_messages();
        // A turn that failed leaves the user message last: drop it so roles keep alternating.
        if messages
            .last()
            .is_some_and(|m| m.role == contextq_memory_tool::anthropic::Role::User)
        {
            messages.pop();
        }
    }
    if failed > 0 {
        anyhow::bail!("{failed} turn(s) failed (said above); the conversation went on after each");
    }
    Ok(())
}
