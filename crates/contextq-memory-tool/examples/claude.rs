//! Claude with its memory on ContextQ: the seed's quick start in Rust (feature `runner`).
//!
//! ANTHROPIC_API_KEY=... CONTEXT_API_URL=... CONTEXT_API_KEY=sk_live_... \
//!   cargo run -p contextq-memory-tool --features runner --example claude

use contextq_memory_tool::anthropic::{
    AnthropicConfig, ClearToolUses, MessageParam, MessageRequest, MessagesClient, ToolRunner,
    memory_tool,
};
use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, contextq_memory_tool};

#[tokio::main]
async fn main() -> contextq_memory_tool::Result<()> {
    let client = MessagesClient::new(AnthropicConfig::from_env()?)?;
    let memory = contextq_memory_tool(ContextQMemoryToolOptions::from_env())?;
    let mut request = MessageRequest::new("claude-opus-5", 16_000);
    request.messages.push(MessageParam::user(
        "Remember that I prefer Rust, under /memories/acme/.",
    ));
    let request = ClearToolUses::default().apply(request);
    let mut runner = ToolRunner::new(client, request).tool(memory_tool(memory));
    while let Some(message) = runner.next_message().await {
        let message = message?;
        println!("[{:?}] {}", message.stop_reason, message.text());
    }
    Ok(())
}
