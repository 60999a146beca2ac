//! `contextq-bench overhead`: the same `view` through the tool and as a bare HTTP GET.

use std::time::{Duration, Instant};

use anyhow::Result;
use contextq_memory_tool::MemoryToolHandlers;
use contextq_memory_tool::testing::proxy::Proxy;
use serde_json::{Value, json};

use crate::harness::{ms, serve, stats};

/// The tool's `view` of a file against the same request made bare (with the `tree` and
/// `tree-file` extensions a view is one `GET /api/contexts/tree?...&file=`, checked through a
/// counting proxy first), and against the contract's plain read of one context for reference.
async fn overhead(ops: usize) -> Result<()> {
    let server = serve("sqlite", None, &[]).await?;
    let tool = server.tool(&server.url, "ws")?;
    let r = tool.execute(json!({"command": "create", "path": "/memories/o.md", "file_text": "one line of memory\n".repeat(10)})).await;
    anyhow::ensure!(!r.is_error, "{}", r.content);
    let view = || json!({"command": "view", "path": "/memories/o.md"});
    // What the tool sends for a view, once it knows the server's extensions.
    let count = Proxy::start(&server.url).await;
    let counted = server.tool(&count.url, "ws")?;
    anyhow::ensure!(!counted.execute(view()).await.is_error);
    count.take_log();
    anyhow::ensure!(!counted.execute(view()).await.is_error);
    let sent = count.take_log();
    anyhow::ensure!(
        sent == ["GET /api/contexts/tree"],
        "a view is no longer one tree request: {sent:?}; update this bench"
    );
    let http = reqwest::Client::new();
    let same = format!(
        "{}/api/contexts/tree?prefix=mem-tool%3Aws%2F&file=mem-tool%3Aws%2Fo.md&requireTag=mem-tool&workspace=ws",
        server.url
    );
    let seed = format!(
        "{}/api/contexts/by-external/mem-tool%3Aws%2Fo.md",
        server.url
    );
    let first: Value = http
        .get(&same)
        .bearer_auth(&server.key)
        .send()
        .await?
        .json()
        .await?;
    anyhow::ensure!(
        first["file"]["content"].is_string(),
        "the bare tree request did not bring the file: {first}"
    );
    let mut times: [Vec<Duration>; 3] = Default::default();
    for i in 0..ops + 200 {
        // Rotate which goes first; the first 200 rounds warm up.
        let mut round = [Duration::ZERO; 3];
        for step in 0..3 {
            let k = (i + step) % 3;
            let s = Instant::now();
            match k {
                0 => anyhow::ensure!(!tool.execute(view()).await.is_error),
                _ => {
                    let url = if k == 1 { &same } else { &seed };
                    let resp = http.get(url).bearer_auth(&server.key).send().await?;
                    anyhow::ensure!(resp.status() == 200);
                    let _: Value = resp.json().await?;
                }
            }
            round[k] = s.elapsed();
        }
        if i >= 200 {
            for k in 0..3 {
                times[k].push(round[k]);
            }
        }
    }
    let [t, same_t, seed_t] = times.map(|v| stats(v, Duration::ZERO));
    println!("| path | mean ms | p50 ms | p99 ms |");
    println!("|---|---|---|---|");
    for (label, s) in [
        ("`view` through ContextQMemoryTool", &t),
        ("the same `GET /api/contexts/tree?...&file=`, bare", &same_t),
        (
            "the contract's `GET /api/contexts/by-external`, bare",
            &seed_t,
        ),
    ] {
        println!(
            "| {label} | {} | {} | {} |",
            ms(s.mean),
            ms(s.p50),
            ms(s.p99)
        );
    }
    println!(
        "\nratio tool / the same request bare: mean {:.3}, p50 {:.3} ({ops} rounds, interleaved)",
        t.mean.as_secs_f64() / same_t.mean.as_secs_f64(),
        t.p50.as_secs_f64() / same_t.p50.as_secs_f64()
    );
    Ok(())
}

/// The same `view` through the tool and as a bare HTTP GET, in one run.
#[derive(clap::Args)]
pub(crate) struct Overhead {
    /// Pairs of requests.
    #[arg(long, default_value_t = 3000)]
    ops: usize,
}

impl Overhead {
    pub(crate) async fn run(self) -> Result<()> {
        let Overhead { ops } = self;
        overhead(ops).await
    }
}
