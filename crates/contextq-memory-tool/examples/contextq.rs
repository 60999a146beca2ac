//! The memory tool on ContextQ, as a tool loop would use it.
//!
//! CONTEXT_API_URL=http://127.0.0.1:38200 CONTEXT_API_KEY=sk_live_... \
//!   cargo run -p contextq-memory-tool --example contextq -- acme
//!
//! (`contextq-memory serve` runs a local ContextQ and tells you its URL and key.)

use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, contextq_memory_tool};
use contextq_memory_tool::{MemoryToolHandlers, ToolDefinition};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> contextq_memory_tool::Result<()> {
    let workspace = std::env::args().nth(1).unwrap_or_else(|| "default".into());
    let tool = contextq_memory_tool(ContextQMemoryToolOptions::from_env().workspace(workspace))?;
    println!("tools entry: {}", ToolDefinition::new().to_json());
    let result = tool
        .execute(json!({"command": "view", "path": "/memories"}))
        .await;
    println!("{}", result.content);
    Ok(())
}
