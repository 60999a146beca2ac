//! `contextq-memory exec`: tool inputs as JSON lines on stdin, results as JSON lines on stdout.
//!
//! Each non-empty input line is one tool input (`{"command": "view", "path": "/memories"}`);
//! each produces exactly one output line `{"content": "...", "is_error": bool}`, in order. A line
//! that is not JSON produces an error result and the next line is still run. Scripts depend on
//! this interface: it stays stable.

use anyhow::Result;
use contextq_memory_tool::{MemoryToolHandlers, ToolResult};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Runs stdin to EOF through `tool`; with `timing`, reports the loop's duration on stderr.
pub async fn run(tool: &dyn MemoryToolHandlers, timing: bool) -> Result<()> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::BufWriter::new(tokio::io::stdout());
    let started = std::time::Instant::now();
    let mut commands = 0usize;
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        commands += 1;
        let result = match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(input) => tool.execute(input).await,
            Err(e) => ToolResult::error(format!("The input line is not JSON: {e}")),
        };
        let mut text = serde_json::to_string(&result)?;
        text.push('\n');
        out.write_all(text.as_bytes()).await?;
        // Flush per line only for a reader waiting on each answer; a file or pipe gets it at the end.
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            out.flush().await?;
        }
    }
    out.flush().await?;
    if timing {
        eprintln!(
            "{}",
            serde_json::json!({"commands": commands, "seconds": started.elapsed().as_secs_f64()})
        );
    }
    Ok(())
}
