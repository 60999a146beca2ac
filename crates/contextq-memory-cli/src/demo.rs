//! `contextq-memory demo`: a realistic memory session through the real adapter and server,
//! printing each command and the result Claude would read, then the rows as ContextQ holds them,
//! read back independently with `GET /api/contexts`.
//!
//! It writes only beneath a directory of its own, new for each run (`/memories/demo/run-<time>`,
//! said before anything is written), and deletes that directory, and nothing else, at the end:
//! in a shared workspace it never touches another agent's files.

use crate::out::outln;
use anyhow::{Context as _, Result};
use contextq_memory_tool::MemoryToolHandlers;
use serde_json::{Value, json};

use crate::stores::Opened;

/// The session, beneath `dir`.
fn session(dir: &str) -> Vec<Value> {
    vec![
        json!({"command": "create", "path": format!("{dir}/preferences.md"),
               "file_text": "# User preferences\n- Language: TypeScript\n- Editor: Helix\n"}),
        json!({"command": "view", "path": format!("{dir}/preferences.md")}),
        json!({"command": "str_replace", "path": format!("{dir}/preferences.md"),
               "old_str": "- Language: TypeScript", "new_str": "- Language: Rust (switched from TypeScript)"}),
        json!({"command": "insert", "path": format!("{dir}/preferences.md"), "insert_line": 1,
               "insert_text": "- Timezone: Europe/Berlin\n"}),
        json!({"command": "create", "path": format!("{dir}/projects/contextq.md"),
               "file_text": "Memory backend for Claude agents.\nStatus: adapter done, benchmarks next.\n"}),
        json!({"command": "create", "path": format!("{dir}/scratch.md"), "file_text": "temporary notes\n"}),
        json!({"command": "rename", "old_path": format!("{dir}/preferences.md"),
               "new_path": format!("{dir}/user/preferences.md")}),
        json!({"command": "view", "path": dir}),
        json!({"command": "delete", "path": format!("{dir}/scratch.md")}),
        json!({"command": "view", "path": format!("{dir}/user/preferences.md"), "view_range": [1, 3]}),
    ]
}

/// A directory for this run that holds nothing yet.
async fn new_dir(opened: &Opened) -> String {
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S");
    let mut dir = format!("/memories/demo/run-{stamp}");
    loop {
        let view = opened
            .tool
            .execute(json!({"command": "view", "path": dir}))
            .await;
        if view.is_error && view.content.contains("does not exist") {
            return dir;
        }
        dir = format!("/memories/demo/run-{stamp}-{:04x}", fastrand::u16(..));
    }
}

/// Runs the demo on `opened`.
pub async fn run(opened: &Opened) -> Result<()> {
    outln!("contextq-memory demo: a memory session as Claude would run it");
    outln!("{}", opened.describe());
    let dir = new_dir(opened).await;
    outln!(
        "It writes only beneath {dir} (new for this run) and deletes that directory, nothing else, at the end."
    );
    outln!();
    let mut failures = 0;
    for input in session(&dir) {
        outln!("> {input}");
        let result = opened.tool.execute(input).await;
        if result.is_error {
            failures += 1;
        }
        outln!("{}\n", result.content);
    }
    if let Some(cq) = &opened.contextq {
        let run = dir.rsplit('/').next().unwrap_or_default();
        print_rows(cq, run).await?;
    }
    let cleanup = opened
        .tool
        .execute(json!({"command": "delete", "path": dir}))
        .await;
    if cleanup.is_error {
        failures += 1;
        outln!("Cleaning up {dir}: {}", cleanup.content);
    } else {
        outln!("Cleaned up: deleted {dir}, which this demo created.");
    }
    if std::env::var("ANTHROPIC_API_KEY").is_ok_and(|k| !k.is_empty()) {
        outln!(
            "ANTHROPIC_API_KEY is set: run `contextq-memory chat` to talk to Claude with this memory."
        );
    } else {
        outln!(
            "To talk to Claude with this memory, set ANTHROPIC_API_KEY and run `contextq-memory chat`."
        );
    }
    if failures > 0 {
        anyhow::bail!("{failures} demo command(s) failed");
    }
    Ok(())
}

/// The rows of this run (`run`: its directory's name), read with the key, not the tool.
async fn print_rows(cq: &crate::stores::ContextQInfo, run: &str) -> Result<()> {
    let mut url = format!("{}/api/contexts?tag=mem-tool", cq.url.trim_end_matches('/'));
    if let Some(ws) = &cq.workspace {
        url.push_str(&format!("&workspace={ws}"));
    }
    outln!("Rows as ContextQ holds them (independent read: GET {url}):");
    let http = reqwest::Client::new();
    let mut cursor: Option<String> = None;
    let mut rows = Vec::new();
    loop {
        let page_url = match &cursor {
            Some(c) => format!("{url}&cursor={c}"),
            None => url.clone(),
        };
        let page: Value = http
            .get(&page_url)
            .bearer_auth(&cq.api_key)
            .send()
            .await
            .context("reading the rows back from ContextQ")?
            .error_for_status()?
            .json()
            .await?;
        for c in page["contexts"].as_array().into_iter().flatten() {
            let ext = c["externalId"].as_str().unwrap_or_default();
            if ext.contains(&format!("/demo/{run}/")) {
                rows.push(c.clone());
            }
        }
        match page["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    outln!(
        "{:<46} {:<10} {:>7} {:>6}",
        "externalId",
        "tag",
        "version",
        "size"
    );
    for c in &rows {
        outln!(
            "{:<46} {:<10} {:>7} {:>6}",
            c["externalId"].as_str().unwrap_or_default(),
            c["tags"][0].as_str().unwrap_or_default(),
            c["version"].to_string(),
            format!("{}B", c["sizeBytes"])
        );
    }
    outln!();
    Ok(())
}
