//! `contextq-bench history`: what versions cost and how fast they are read and restored, on a
//! fresh `contextq-server serve` process per database (`--versions-kept 1000`):
//!
//! 1. one memory file edited until it has `versions` versions (the writes' rate);
//! 2. its whole history read (`ContextQMemoryTool::history`, pages of 500), one version read
//!    (`version`), and the two reads of a diff, each repeated and reported at the median;
//! 3. a tree of `files` files, then half of them edited, a quarter deleted and as many new ones
//!    created; the plan to restore the tree to the moment before (`restore_plan`) and carrying
//!    it out (`restore_tree`), checked against the expected counts.

use std::time::Instant;

use anyhow::{Result, bail};
use contextq_memory_tool::MemoryToolHandlers;
use contextq_memory_tool::contextq::history::StepAction;
use serde_json::json;

use crate::harness::{backends, serve};

fn median_ms(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(|a, b| a.total_cmp(b));
    samples[samples.len() / 2]
}

async fn ok(
    tool: &contextq_memory_tool::contextq::ContextQMemoryTool,
    input: serde_json::Value,
) -> Result<()> {
    let r = tool.execute(input.clone()).await;
    if r.is_error {
        bail!("{input}: {}", r.content);
    }
    Ok(())
}

/// Runs the benchmark on SQLite and, when given, PostgreSQL; prints a table.
pub async fn run(versions: usize, files: usize, postgres: Option<String>) -> Result<()> {
    println!("| backend | measure | value |");
    println!("|---|---|---|");
    let kept = versions.max(1).to_string();
    for backend in backends(postgres.as_deref()) {
        let server = serve(backend, postgres.as_deref(), &["--versions-kept", &kept]).await?;
        let tool = server.tool(&server.url, "ws")?;

        // 1. One file, `versions` versions.
        ok(
            &tool,
            json!({"command": "create", "path": "/memories/long.md", "file_text": "v1\n"}),
        )
        .await?;
        let started = Instant::now();
        for i in 1..versions {
            ok(
                &tool,
                json!({"command": "str_replace", "path": "/memories/long.md", "old_str": format!("v{i}\n"), "new_str": format!("v{}\n", i + 1)}),
            )
            .await?;
        }
        let secs = started.elapsed().as_secs_f64();
        println!(
            "| {backend} | {} edits of one file, writes/s | {:.0} |",
            versions - 1,
            (versions - 1) as f64 / secs
        );
        // 2. Reads.
        let mut history = Vec::new();
        let mut one = Vec::new();
        let mut diff = Vec::new();
        for _ in 0..21 {
            let t = Instant::now();
            let h = tool.history("/memories/long.md").await?;
            history.push(t.elapsed().as_secs_f64() * 1000.0);
            if h.len() != versions {
                bail!("{} versions listed, {versions} expected", h.len());
            }
            let t = Instant::now();
            tool.version("/memories/long.md", (versions / 2) as u64)
                .await?;
            one.push(t.elapsed().as_secs_f64() * 1000.0);
            let t = Instant::now();
            let (a, b) = tokio::join!(
                tool.version("/memories/long.md", 1),
                tool.version("/memories/long.md", versions as u64)
            );
            a?;
            b?;
            diff.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        println!(
            "| {backend} | history of a file with {versions} versions (2 pages), median ms | {:.2} |",
            median_ms(history)
        );
        println!(
            "| {backend} | one version with its content, median ms | {:.2} |",
            median_ms(one)
        );
        println!(
            "| {backend} | the two reads of a diff (concurrent), median ms | {:.2} |",
            median_ms(diff)
        );

        // 3. A tree of `files` files.
        for i in 0..files {
            ok(&tool, json!({"command": "create", "path": format!("/memories/tree/d{}/f{i:04}.md", i % 10), "file_text": format!("original {i}\n")})).await?;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let then = chrono::Utc::now();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let (edited, deleted) = (files / 2, files / 4);
        for i in 0..files {
            let path = format!("/memories/tree/d{}/f{i:04}.md", i % 10);
            if i < edited {
                ok(&tool, json!({"command": "str_replace", "path": path, "old_str": "original", "new_str": "changed"})).await?;
            } else if i < edited + deleted {
                ok(&tool, json!({"command": "delete", "path": path})).await?;
            }
        }
        for i in 0..deleted {
            ok(&tool, json!({"command": "create", "path": format!("/memories/tree/new/n{i:04}.md"), "file_text": "new\n"})).await?;
        }
        let t = Instant::now();
        let plan = tool.restore_plan("/memories/tree", then).await?;
        let plan_ms = t.elapsed().as_secs_f64() * 1000.0;
        let expected = [
            (StepAction::Revert, edited),
            (StepAction::Recreate, deleted),
            (StepAction::Remove, deleted),
            (StepAction::Unchanged, files - edited - deleted),
        ];
        for (action, n) in expected {
            if plan.count(action) != n {
                bail!("plan: {} x {action:?}, {n} expected", plan.count(action));
            }
        }
        let t = Instant::now();
        let report = tool.restore_tree(&plan, |_, _| {}).await?;
        let restore_s = t.elapsed().as_secs_f64();
        if !report.complete() {
            bail!("the restore did not complete");
        }
        let again = tool.restore_plan("/memories/tree", then).await?;
        if again.changes().next().is_some() {
            bail!("after the restore, the plan still has changes");
        }
        let changes = edited + 2 * deleted;
        println!(
            "| {backend} | plan of a {files}-file tree restore ({changes} changes), ms | {plan_ms:.0} |"
        );
        println!(
            "| {backend} | restore of the {files}-file tree ({changes} changes), s (changes/s) | {restore_s:.2} ({:.0}) |",
            changes as f64 / restore_s
        );
        drop(server);
    }
    Ok(())
}

/// Versions: writes of one file with many versions, reading its history and one version,
/// planning and carrying out the restore of a tree to a point in time.
#[derive(clap::Args)]
pub(crate) struct History {
    /// Versions of the one file (also the server's --versions-kept).
    #[arg(long, default_value_t = 1000)]
    versions: usize,
    /// Files in the tree restored.
    #[arg(long, default_value_t = 1000)]
    files: usize,
    /// Also run on PostgreSQL.
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl History {
    pub(crate) async fn run(self) -> Result<()> {
        let History {
            versions,
            files,
            postgres_url,
        } = self;
        run(versions, files, postgres_url).await
    }
}
