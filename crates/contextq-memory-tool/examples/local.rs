//! The memory tool on a local directory: run Claude-shaped commands and print the results.
//!
//! cargo run -p contextq-memory-tool --example local -- /tmp/my-memory

use contextq_memory_tool::{LocalStore, MemoryTool, MemoryToolHandlers};
use serde_json::json;

#[tokio::main(flavor = "current_thread")]
async fn main() -> contextq_memory_tool::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "./memory".into());
    let tool = MemoryTool::new(LocalStore::new(&dir)?);
    for input in [
        json!({"command": "create", "path": "/memories/example.md", "file_text": "Written by the example.\n"}),
        json!({"command": "view", "path": "/memories"}),
        json!({"command": "delete", "path": "/memories/example.md"}),
    ] {
        let result = tool.execute(input).await;
        println!(
            "{}{}\n",
            if result.is_error { "(error) " } else { "" },
            result.content
        );
    }
    Ok(())
}
