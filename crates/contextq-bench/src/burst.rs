//! `contextq-bench burst`: what bursts of large requests cost the server in memory. Each
//! configuration runs on a fresh `contextq-server serve` process (peak RSS, VmHWM, only grows),
//! through phases ordered from the cheapest expected:
//!
//! 1. `refused`: `concurrency` writes of 15 MiB bodies from a writer key (413 from the declared
//!    length, before any byte is read);
//! 2. `read-only`: `concurrency` 15 MiB writes from a key without `write` (403 from the head);
//! 3. `largest`: `rounds` bursts of `concurrency` writes of the largest legitimate body
//!    (1 MiB of newlines: 2 MiB of JSON), all answered 200.
//!
//! It prints RSS at start, the peak after each phase, and RSS 3 s after the last, for the
//! default budget of bodies in flight (64 MiB) and for a budget of 4 GiB (no limit in effect).

use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use crate::harness::{Server, backends, serve, server_bin};

fn rss_mib(server: &Server, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", server.process.child.id()))
        .unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Sends `concurrency` copies of a `PUT` with `body` (one per context id) with `key` at once;
/// returns the statuses seen and how many of each.
async fn burst(
    http: &reqwest::Client,
    url: &str,
    key: &str,
    ids: &[String],
    body: &bytes_body::Body,
) -> Result<Vec<(u16, usize)>> {
    let mut tasks = Vec::new();
    for id in ids {
        let req = http
            .put(format!("{url}/api/contexts/{id}"))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body.clone().into_reqwest());
        tasks.push(tokio::spawn(async move {
            match req.send().await {
                Ok(r) => r.status().as_u16(),
                Err(_) => 0,
            }
        }));
    }
    let mut counts: Vec<(u16, usize)> = Vec::new();
    for t in tasks {
        let status = t.await?;
        match counts.iter_mut().find(|(s, _)| *s == status) {
            Some((_, n)) => *n += 1,
            None => counts.push((status, 1)),
        }
    }
    counts.sort();
    Ok(counts)
}

/// A request body shared by every request of a burst without a copy each.
mod bytes_body {
    #[derive(Clone)]
    pub struct Body(pub std::sync::Arc<Vec<u8>>);

    impl Body {
        pub fn into_reqwest(self) -> reqwest::Body {
            reqwest::Body::from(bytes::Bytes::from_owner(ArcBytes(self.0)))
        }
    }

    struct ArcBytes(std::sync::Arc<Vec<u8>>);

    impl AsRef<[u8]> for ArcBytes {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }
}

fn statuses(counts: &[(u16, usize)]) -> String {
    counts
        .iter()
        .map(|(s, n)| {
            if *s == 0 {
                format!("{n} x no answer")
            } else {
                format!("{n} x {s}")
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

async fn one(
    backend: &str,
    postgres: Option<&str>,
    budget: Option<&str>,
    c: usize,
    rounds: usize,
) -> Result<()> {
    let args: Vec<&str> = match budget {
        Some(b) => vec!["--body-budget-bytes", b],
        None => vec![],
    };
    let server = serve(backend, postgres, &args).await?;
    let db = &server.database.url;
    let tenant = server.boot["tenantId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let out = std::process::Command::new(server_bin()?)
        .args([
            "admin",
            "--database-url",
            db,
            "create-key",
            "--tenant-id",
            &tenant,
            "--scopes",
            "read",
        ])
        .output()?;
    if !out.status.success() {
        bail!(
            "create-key failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let read_only = serde_json::from_slice::<Value>(&out.stdout)?["apiKey"]
        .as_str()
        .context("apiKey")?
        .to_string();
    let http = reqwest::Client::builder().build()?;
    // One context per concurrent request.
    let mut ids = Vec::new();
    for i in 0..c {
        let r: Value = http
            .post(format!("{}/api/contexts/bulk-upsert", server.url))
            .bearer_auth(&server.key)
            .json(&json!({"contexts": [{"externalId": format!("burst/{i}"), "workspace": "ws", "type": "reference", "content": "x"}]}))
            .send()
            .await?
            .json()
            .await?;
        ids.push(r["results"][0]["id"].as_str().context("an id")?.to_string());
    }
    let label = budget.map_or("64 MiB (default)".to_string(), |b| {
        format!("{} MiB", b.parse::<u64>().unwrap_or(0) >> 20)
    });
    println!(
        "\n{backend}, body budget {label}: RSS at start {:.0} MiB",
        rss_mib(&server, "VmRSS:")
    );
    println!("| phase | requests | answers | peak RSS so far |");
    println!("|---|---|---|---|");
    let huge = bytes_body::Body(std::sync::Arc::new({
        let mut b = br#"{"content":""#.to_vec();
        b.resize(15 << 20, b'x');
        b.extend_from_slice(br#""}"#);
        b
    }));
    let counts = burst(&http, &server.url, &server.key, &ids, &huge).await?;
    println!(
        "| 15 MiB bodies, writer key | {c} | {} | {:.0} MiB |",
        statuses(&counts),
        rss_mib(&server, "VmHWM:")
    );
    let counts = burst(&http, &server.url, &read_only, &ids, &huge).await?;
    println!(
        "| 15 MiB bodies, read-only key | {c} | {} | {:.0} MiB |",
        statuses(&counts),
        rss_mib(&server, "VmHWM:")
    );
    drop(huge);
    let largest = bytes_body::Body(std::sync::Arc::new({
        let mut b = br#"{"content":""#.to_vec();
        for _ in 0..(1 << 20) {
            b.extend_from_slice(br"\n");
        }
        b.extend_from_slice(br#""}"#);
        b
    }));
    for round in 1..=rounds {
        let counts = burst(&http, &server.url, &server.key, &ids, &largest).await?;
        println!(
            "| largest legitimate write (2 MiB body), burst {round} | {c} | {} | {:.0} MiB |",
            statuses(&counts),
            rss_mib(&server, "VmHWM:")
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "RSS 3 s after the last burst: {:.0} MiB",
        rss_mib(&server, "VmRSS:")
    );
    Ok(())
}

pub async fn run(concurrency: usize, rounds: usize, postgres: Option<String>) -> Result<()> {
    for backend in backends(postgres.as_deref()) {
        for budget in [None, Some("4294967296")] {
            one(backend, postgres.as_deref(), budget, concurrency, rounds).await?;
        }
    }
    Ok(())
}

/// Server memory under bursts of large requests: peak and settled RSS with the default
/// budget of bodies in flight and with a budget large enough to be no limit.
#[derive(clap::Args)]
pub(crate) struct Burst {
    /// Concurrent requests per burst.
    #[arg(long, default_value_t = 48)]
    concurrency: usize,
    /// Bursts of the largest legitimate writes.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Also run on PostgreSQL.
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl Burst {
    pub(crate) async fn run(self) -> Result<()> {
        let Burst {
            concurrency,
            rounds,
            postgres_url,
        } = self;
        run(concurrency, rounds, postgres_url).await
    }
}
