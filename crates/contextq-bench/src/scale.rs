//! `contextq-bench scale`: listings of 1k to 100k files, edits of large files, the server's
//! peak memory.

use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::Result;
use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, contextq_memory_tool};
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{AnswerBudget, MemoryToolHandlers};
use serde_json::json;

use crate::harness::{backends, best_view, ms, serve, stats};

async fn scale(max_files: usize, postgres: Option<String>) -> Result<()> {
    let http = reqwest::Client::new();
    for backend in backends(postgres.as_deref()) {
        let server = serve(backend, postgres.as_deref(), &[]).await?;
        println!(
            "\n{backend}: listing one directory (view, 2 levels, derived sizes), whole (no answer budget) and with the default budget\n"
        );
        println!(
            "| files | load (bulk-upsert) s | view ms, whole | characters, whole | ms per 1,000 files | view ms, default budget | characters, default budget | view of the parent ms, tree | view of the parent ms, listing | server peak RSS MiB |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|");
        // The same tool without the `tree` extension: the view lists every file beneath.
        let hiding = Proxy::hiding(&server.url, &["tree"]).await;
        for n in [1_000, 20_000, 100_000, 1_000_000]
            .into_iter()
            .filter(|n| *n <= max_files)
        {
            let ws = format!("s{n}");
            server
                .post(&http, "/api/workspaces", json!({"slug": ws}))
                .await?;
            let started = Instant::now();
            server.load(&http, &ws, "big", 100, 0..n).await?;
            let load = started.elapsed();
            let whole = contextq_memory_tool(
                ContextQMemoryToolOptions::new(server.key.clone())
                    .base_url(&server.url)
                    .workspace(&ws)
                    .answer_budget(AnswerBudget::UNLIMITED),
            )?;
            let budgeted = server.tool(&server.url, &ws)?;
            // Best of three views of each; the whole listing has every row.
            let (whole_time, whole_answer) = best_view(&whole, "/memories/big").await?;
            anyhow::ensure!(
                whole_answer.lines().count() == 2 + 100 + n,
                "{}",
                &whole_answer[..200.min(whole_answer.len())]
            );
            let (cut_time, cut_answer) = best_view(&budgeted, "/memories/big").await?;
            let (whole_chars, cut_chars) =
                (whole_answer.chars().count(), cut_answer.chars().count());
            // The workspace's root: the files lie three levels down, so the view shows the
            // folders with their sizes (101 rows) whatever the directory holds.
            let (tree_time, tree_answer) =
                best_view(&server.tool(&server.url, &ws)?, "/memories").await?;
            let (list_time, list_answer) =
                best_view(&server.tool(&hiding.url, &ws)?, "/memories").await?;
            anyhow::ensure!(
                tree_answer == list_answer,
                "the tree's view differs from the listing's"
            );
            let parent = [tree_time, list_time];
            println!(
                "| {n} | {:.1} | {} | {whole_chars} | {:.2} | {} | {cut_chars} | {} | {} | {:.0} |",
                load.as_secs_f64(),
                ms(whole_time),
                whole_time.as_secs_f64() * 1000.0 / (n as f64 / 1000.0),
                ms(cut_time),
                ms(parent[0]),
                ms(parent[1]),
                server.peak_mib().unwrap_or(0.0)
            );
            std::io::stdout().flush()?;
        }
        println!(
            "\n{backend}: edits on one large file (mean of 10, conditional PUT of the whole file)\n"
        );
        println!("| file size | str_replace ms | insert ms | view ms |");
        println!("|---|---|---|---|");
        let tool = server.tool(&server.url, "ws")?;
        for (label, size) in [
            ("1 KiB", 1024usize),
            ("100 KiB", 100 * 1024),
            ("1 MiB (minus 4 KiB of headroom)", (1 << 20) - 4096),
        ] {
            let line = "abcdefghijklmnopqrstuvwxyz0123456789 some memory text.\n";
            let mut body = String::from("<k0>\n");
            while body.len() + line.len() < size {
                body.push_str(line);
            }
            let path = format!("/memories/edit-{size}.md");
            let r = tool
                .execute(json!({"command": "create", "path": path, "file_text": body}))
                .await;
            anyhow::ensure!(!r.is_error, "{}", r.content);
            let (mut sr, mut ins, mut vw) = (Vec::new(), Vec::new(), Vec::new());
            for i in 0..10 {
                let s = Instant::now();
                let r = tool.execute(json!({"command": "str_replace", "path": path, "old_str": format!("<k{i}>"), "new_str": format!("<k{}>", i + 1)})).await;
                sr.push(s.elapsed());
                anyhow::ensure!(!r.is_error, "{}", r.content);
                let s = Instant::now();
                let r = tool.execute(json!({"command": "insert", "path": path, "insert_line": 1, "insert_text": "x"})).await;
                ins.push(s.elapsed());
                anyhow::ensure!(!r.is_error, "{}", r.content);
                let s = Instant::now();
                let r = tool.execute(json!({"command": "view", "path": path})).await;
                vw.push(s.elapsed());
                anyhow::ensure!(!r.is_error);
            }
            let mean = |v: Vec<Duration>| ms(stats(v, Duration::ZERO).mean);
            println!("| {label} | {} | {} | {} |", mean(sr), mean(ins), mean(vw));
        }
        println!(
            "\n{backend}: server peak RSS after everything: {:.0} MiB",
            server.peak_mib().unwrap_or(0.0)
        );
    }
    Ok(())
}

/// Listing 1k/20k/100k files (whole, and within the default answer budget: time and
/// characters); edits on 1 KiB/100 KiB/1 MiB files; server peak memory.
#[derive(clap::Args)]
pub(crate) struct Scale {
    /// Largest listing.
    #[arg(long, default_value_t = 100_000)]
    max_files: usize,
    /// Also run on PostgreSQL.
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl Scale {
    pub(crate) async fn run(self) -> Result<()> {
        let Scale {
            max_files,
            postgres_url,
        } = self;
        scale(max_files, postgres_url).await
    }
}
