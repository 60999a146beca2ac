//! `contextq-bench commands`: per command, ops/s and p50/p99 at concurrency 1 and 16, and
//! HTTP requests per command.

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Result;
use contextq_memory_tool::MemoryToolHandlers;
use contextq_memory_tool::testing::proxy::Proxy;
use serde_json::{Value, json};

use crate::harness::{backends, drive, ms, serve};

async fn commands(ops: usize, postgres: Option<String>) -> Result<()> {
    println!(
        "| backend | command | concurrency | ops | ops/s | p50 ms | p99 ms | HTTP requests (one probe) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for backend in backends(postgres.as_deref()) {
        let server = serve(backend, postgres.as_deref(), &[]).await?;
        // Counts HTTP requests per command.
        let count = Proxy::start(&server.url).await;
        let counted = Arc::new(server.tool(&count.url, "ws")?);
        // The client learns the server's extensions from its first answer: let that happen
        // before anything is counted.
        let warm = counted
            .execute(json!({"command": "view", "path": "/memories"}))
            .await;
        anyhow::ensure!(!warm.is_error, "{}", warm.content);
        let tool = Arc::new(server.tool(&server.url, "ws")?);
        // A small tree for `view directory`: 50 files in 5 folders.
        for i in 0..50 {
            let r = tool.execute(json!({"command": "create", "path": format!("/memories/tree/d{}/f{i}.md", i % 5), "file_text": "x\n".repeat(20)})).await;
            anyhow::ensure!(!r.is_error, "{}", r.content);
        }
        for conc in [1usize, 16] {
            let base = format!("/memories/c{conc}");
            // One file per task for the edits.
            for t in 0..conc {
                tool.execute(json!({"command": "create", "path": format!("{base}/edit{t}.md"), "file_text": "<v0>\nbody\n"})).await;
            }
            let b = base.clone();
            type Make = Box<dyn Fn(usize, usize) -> Value + Send + Sync>;
            let plan: Vec<(&str, Make)> = vec![
                (
                    "create",
                    Box::new(
                        move |t, i| json!({"command": "create", "path": format!("{b}/c/{t}-{i}.md"), "file_text": "a remembered fact\nwith two lines\n"}),
                    ),
                ),
                ("view file", {
                    let b = base.clone();
                    Box::new(
                        move |t, i| json!({"command": "view", "path": format!("{b}/c/{t}-{i}.md")}),
                    )
                }),
                ("str_replace", {
                    let b = base.clone();
                    Box::new(
                        move |t, i| json!({"command": "str_replace", "path": format!("{b}/edit{t}.md"), "old_str": format!("<v{i}>"), "new_str": format!("<v{}>", i + 1)}),
                    )
                }),
                ("insert", {
                    let b = base.clone();
                    Box::new(
                        move |t, i| json!({"command": "insert", "path": format!("{b}/edit{t}.md"), "insert_line": 1, "insert_text": format!("line {i}")}),
                    )
                }),
                (
                    "view directory",
                    Box::new(|_, _| json!({"command": "view", "path": "/memories/tree"})),
                ),
                ("rename", {
                    let b = base.clone();
                    Box::new(
                        move |t, i| json!({"command": "rename", "old_path": format!("{b}/c/{t}-{i}.md"), "new_path": format!("{b}/r/{t}-{i}.md")}),
                    )
                }),
                ("delete", {
                    let b = base.clone();
                    Box::new(
                        move |t, i| json!({"command": "delete", "path": format!("{b}/r/{t}-{i}.md")}),
                    )
                }),
            ];
            // Every command touches the same set of (task, i) pairs, so each phase finds what the
            // previous one left.
            for (name, make) in plan {
                let make = Arc::new(make);
                let m = make.clone();
                let st = drive(&tool, conc, ops, move |t, i| m(t, i)).await?;
                // Requests per command, counted through the proxy on fresh inputs.
                let per_op = if conc == 1 {
                    let before = count.requests();
                    let probe = match name {
                        "create" => {
                            json!({"command": "create", "path": format!("{base}/probe.md"), "file_text": "p"})
                        }
                        "view file" => {
                            json!({"command": "view", "path": format!("{base}/probe.md")})
                        }
                        "str_replace" => {
                            json!({"command": "str_replace", "path": format!("{base}/probe.md"), "old_str": "p", "new_str": "q"})
                        }
                        "insert" => {
                            json!({"command": "insert", "path": format!("{base}/probe.md"), "insert_line": 0, "insert_text": "i"})
                        }
                        "view directory" => json!({"command": "view", "path": "/memories/tree"}),
                        "rename" => {
                            json!({"command": "rename", "old_path": format!("{base}/probe.md"), "new_path": format!("{base}/probe2.md")})
                        }
                        _ => json!({"command": "delete", "path": format!("{base}/probe2.md")}),
                    };
                    let r = counted.execute(probe).await;
                    anyhow::ensure!(!r.is_error, "{}", r.content);
                    (count.requests() - before).to_string()
                } else {
                    "".into()
                };
                println!(
                    "| {backend} | {name} | {conc} | {} | {:.0} | {} | {} | {per_op} |",
                    st.ops,
                    st.ops as f64 / st.wall.as_secs_f64(),
                    ms(st.p50),
                    ms(st.p99)
                );
                std::io::stdout().flush()?;
            }
        }
        if let Some(mib) = server.peak_mib() {
            println!("| {backend} | (server peak RSS {mib:.0} MiB) | | | | | | |");
        }
    }
    Ok(())
}

/// Per command: ops/s, p50/p99 at concurrency 1 and 16, HTTP requests per command.
#[derive(clap::Args)]
pub(crate) struct Commands {
    /// Operations per command and concurrency.
    #[arg(long, default_value_t = 800)]
    ops: usize,
    /// Also run on PostgreSQL (a fresh database is created through this URL).
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl Commands {
    pub(crate) async fn run(self) -> Result<()> {
        let Commands { ops, postgres_url } = self;
        commands(ops, postgres_url).await
    }
}
