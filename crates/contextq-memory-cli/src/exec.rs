//! `contextq-memory exec`: tool inputs as JSON lines on stdin, results as JSON lines on stdout.
//!
//! Each non-empty input line is one tool input (`{"command": "view", "path": "/memories"}`);
//! each produces exactly one output line `{"content": "...", "is_error": bool}`, in order. A line
//! that is not JSON produces an error result and the next line is still run. Each answer is
//! written as soon as no further input is waiting, so `exec` works as a co-process (one command
//! in, its answer out). Scripts depend on this interface: it stays stable.

use anyhow::Result;
use contextq_memory_tool::{MemoryToolHandlers, ToolResult};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Runs stdin to EOF through `tool`; with `timing`, reports on stderr, as one JSON line, the
/// loop's duration and, per command name, how many ran and the seconds they took
/// (`{"commands", "seconds", "by_command": {"view": {"count", "seconds"}, ...}}`). Returns how
/// many commands failed because of the store (unreachable, a refused key, a write it did not
/// confirm), not because of what was asked: the caller exits non-zero for them.
pub async fn run(tool: &dyn MemoryToolHandlers, timing: bool) -> Result<usize> {
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::BufWriter::new(tokio::io::stdout());
    let started = std::time::Instant::now();
    let mut commands = 0usize;
    let mut store_failures = 0usize;
    let mut by_command: std::collections::BTreeMap<String, (usize, f64)> = Default::default();
    while let Some(line) = lines.next_line().await? {
        if line.trim().is_empty() {
            continue;
        }
        commands += 1;
        let one = std::time::Instant::now();
        let (name, result) = match serde_json::from_str::<serde_json::Value>(&line) {
            Ok(input) => {
                let name = input["command"].as_str().unwrap_or("(none)").to_string();
                let result = match contextq_memory_tool::Command::from_value(&input) {
                    Ok(command) => match tool.handle(command).await {
                        Ok(text) => ToolResult::ok(text),
                        Err(e) => {
                            if e.store_failed() {
                                store_failures += 1;
                            }
                            ToolResult::error(e.message())
                        }
                    },
                    Err(message) => ToolResult::error(message),
                };
                (name, result)
            }
            Err(e) => (
                "(not JSON)".to_string(),
                ToolResult::error(format!("The input line is not JSON: {e}")),
            ),
        };
        if timing {
            let entry = by_command.entry(name).or_default();
            entry.0 += 1;
            entry.1 += one.elapsed().as_secs_f64();
        }
        let mut text = serde_json::to_string(&result)?;
        text.push('\n');
        out.write_all(text.as_bytes()).await?;
        // Answers go out as soon as no further input is already waiting: a program that sends
        // one command and waits for its answer gets it at once, whatever stdout is, and a batch
        // piped in is still written in large chunks.
        if lines.get_ref().buffer().is_empty() {
            out.flush().await?;
        }
    }
    out.flush().await?;
    if timing {
        let seconds = started.elapsed().as_secs_f64();
        let by_command: serde_json::Map<String, serde_json::Value> = by_command
            .into_iter()
            .map(|(name, (count, secs))| {
                (name, serde_json::json!({"count": count, "seconds": secs}))
            })
            .collect();
        eprintln!(
            "{}",
            serde_json::json!({"commands": commands, "seconds": seconds, "by_command": by_command})
        );
    }
    Ok(store_failures)
}
