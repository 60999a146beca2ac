//! Claude in the loop (feature `runner`): a small typed Messages API client, the tool runner,
//! and context management that protects the memory tool.
//!
//! There is no official Anthropic Rust SDK; this is the part of one the memory tool needs.
//!
//! ```no_run
//! use contextq_memory_tool::anthropic::{AnthropicConfig, ClearToolUses, MessageParam, MessageRequest, MessagesClient, ToolRunner, memory_tool};
//! use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, contextq_memory_tool};
//!
//! # async fn run() -> contextq_memory_tool::Result<()> {
//! let client = MessagesClient::new(AnthropicConfig::from_env()?)?;   // ANTHROPIC_API_KEY
//! let memory = contextq_memory_tool(ContextQMemoryToolOptions::from_env())?; // CONTEXT_API_KEY
//! let mut request = MessageRequest::new("claude-opus-5", 16_000);
//! request.messages.push(MessageParam::user("Remember that I prefer Rust, under /memories/acme/."));
//! let request = ClearToolUses::default().apply(request); // "memory" is never cleared
//! let mut runner = ToolRunner::new(client, request).tool(memory_tool(memory));
//! while let Some(message) = runner.next_message().await {
//!     println!("{}", message?.text());
//! }
//! # Ok(()) }
//! ```

mod context;
pub(crate) mod error;
mod messages;
mod runner;

pub use context::{CONTEXT_MANAGEMENT_BETA, ClearToolUses};
pub use error::AnthropicError;
pub use messages::{
    API_VERSION, AnthropicConfig, ContentBlock, DEFAULT_BASE_URL, Message, MessageParam,
    MessageRequest, MessagesClient, Role, StopReason, Usage,
};
pub use runner::{
    DEFAULT_MAX_ITERATIONS, MemoryRunnableTool, MemorySearchTool, RunnableTool, ToolCall,
    ToolRunner, memory_search_tool, memory_tool,
};
