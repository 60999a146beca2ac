//! `contextq-memory search`: the memory_search tool from a terminal or a script. Text is
//! Claude's own answer (each file's path and its matching lines numbered as `view` numbers
//! them); `--json` is one object per file per line. A query or path the rules refuse, and a
//! store that cannot search, exit 1 with the reason; no match is not an error.

use std::process::ExitCode;

use anyhow::Result;
use contextq_memory_tool::search::{self, Query};
use contextq_memory_tool::{Error, MemoryPath};

use crate::out::outln;
use crate::stores::Opened;

/// Runs one search on `opened`'s store.
pub async fn command(
    opened: &Opened,
    query: &str,
    path: &str,
    limit: usize,
    json: bool,
) -> Result<ExitCode> {
    let refuse = |message: String| {
        eprintln!("contextq-memory search: {message}");
        Ok(ExitCode::FAILURE)
    };
    let parsed = match Query::parse(query) {
        Ok(q) => q,
        Err(e) => return refuse(search::refused_query(&e)),
    };
    let dir = match MemoryPath::parse(path) {
        Ok(dir) => dir,
        Err(e) => return refuse(format!("--path: {}", e.message())),
    };
    let found = match opened.store.search(&parsed, &dir, limit).await {
        Ok(found) => found,
        Err(Error::NotSupported { .. }) => return refuse(search::not_available()),
        Err(e) => return Err(e.into()),
    };
    if json {
        for f in &found.found {
            let lines: Vec<serde_json::Value> = f
                .lines
                .iter()
                .map(|l| serde_json::json!({"line": l.line, "text": l.text, "marks": l.marks, "cut": l.cut}))
                .collect();
            outln!(
                "{}",
                serde_json::json!({"path": f.path.raw(), "score": f.score, "lines": lines})
            );
        }
    } else {
        outln!("{}", search::answer(query, &dir, limit, &found, usize::MAX));
    }
    Ok(ExitCode::SUCCESS)
}
