//! `contextq-bench scaleout`: the write path with many writers, tenants and server replicas.
//!
//! Two `contextq-server` processes (replicas) share one PostgreSQL database, reached through a
//! loopback TCP proxy of this process that delays each direction (a database across a network)
//! and counts round trips ([`contextq_server::testing::TcpProxy`]). It measures:
//!
//! - **throughput**: one tenant writing sequentially, then 8 tenants with one writer each, spread
//!   over the two replicas, together; writes per second, database round trips per write;
//! - **contention**: N writers (alternating between the replicas) each `insert` M lines into one
//!   memory file; how many were acknowledged, kept, lost and refused, with the server-side text
//!   edit (`text-edit`) and with it hidden (the adapter's `GET` + `If-Match` `PUT` with backoff);
//! - that the audit chains verify afterwards.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use contextq_memory_tool::MemoryToolHandlers;
use contextq_memory_tool::contextq::ContextQMemoryTool;
use contextq_server::testing::{TcpProxy, TestDatabase};
use contextq_server::{Backend, Db, DbOptions, Plan, Scope, admin};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use contextq_memory_tool::testing::proxy::Proxy;

use crate::harness::{spawn_server, tool};

/// One tenant's key (each tenant has the workspace `ws`).
#[derive(Clone)]
struct Tenant {
    key: String,
}

/// What `scaleout` runs with.
pub struct Options {
    /// Admin URL of the PostgreSQL server (a fresh database is created through it).
    pub postgres: String,
    /// Delays of each direction through the database proxy, for the delayed rows.
    pub delays: Vec<Duration>,
    /// How long each throughput phase writes.
    pub seconds: f64,
}

pub async fn run(options: Options) -> Result<()> {
    let database = TestDatabase::create(Backend::Postgres, Some(&options.postgres)).await?;
    let db_url = database.url.clone();
    let tenants = provision(&db_url, 9).await?;
    println!(
        "database: a fresh PostgreSQL database; 2 replicas (separate contextq-server processes) \
         reach it through a loopback TCP proxy of this benchmark\n"
    );
    println!("## Throughput ({:.0} s per phase)\n", options.seconds);
    println!(
        "| proxy delay each way | measured database round trip ms | one tenant, sequential, writes/s | database round trips per write | 8 tenants on 2 replicas, writes/s | ratio | control: 8 writers of one tenant on 2 replicas, writes/s | ratio |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let delays: Vec<Duration> = std::iter::once(Duration::ZERO)
        .chain(options.delays.iter().copied())
        .collect();
    for &one_way in &delays {
        let (proxy, proxied) = TcpProxy::in_front_of(&db_url, one_way).await;
        let rtt = ping(one_way).await?;
        let replicas = [spawn_server(&proxied)?, spawn_server(&proxied)?];
        let urls: Vec<String> = replicas.iter().map(|r| r.url.clone()).collect();
        let trips = proxy.round_trips();
        let one = writers(&tenants[..1], &urls, options.seconds, "one").await?;
        let per_write = (proxy.round_trips() - trips) as f64 / one.writes as f64;
        let many = writers(&tenants[1..9], &urls, options.seconds, "many").await?;
        // The control: as many writers and replicas, all in one tenant, whose writes queue on
        // its one audit-chain head; the gap to the row before is what separate tenants buy.
        let same = vec![tenants[0].clone(); 8];
        let crowded = writers(&same, &urls, options.seconds, "crowded").await?;
        println!(
            "| {:.1} ms | {:.2} | {:.0} | {:.1} | {:.0} | {:.2}x | {:.0} | {:.2}x |",
            one_way.as_secs_f64() * 1000.0,
            rtt.as_secs_f64() * 1000.0,
            one.rate(),
            per_write,
            many.rate(),
            many.rate() / one.rate(),
            crowded.rate(),
            crowded.rate() / one.rate()
        );
    }

    println!("\n## Contention: inserts into one file from two replicas\n");
    println!(
        "| edits | proxy delay each way | writers x inserts | acknowledged | kept | lost | refused | seconds |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &one_way in &delays {
        let (_proxy, proxied) = TcpProxy::in_front_of(&db_url, one_way).await;
        let replicas = [spawn_server(&proxied)?, spawn_server(&proxied)?];
        for hide in [false, true] {
            // The same replicas, seen through a front that hides `text-edit` (or nothing).
            let hidden: &'static [&'static str] = if hide { &["text-edit"] } else { &[] };
            let fronts = [
                Proxy::hiding(&replicas[0].url, hidden).await,
                Proxy::hiding(&replicas[1].url, hidden).await,
            ];
            for (n, m) in [(8, 25), (32, 10)] {
                let c = contend(&tenants[0], &fronts, n, m).await?;
                println!(
                    "| {} | {:.1} ms | {n} x {m} | {} | {} | {} | {} | {:.2} |",
                    if hide {
                        "`GET` + `If-Match` `PUT`, backoff"
                    } else {
                        "server-side (`text-edit`)"
                    },
                    one_way.as_secs_f64() * 1000.0,
                    c.acknowledged,
                    c.kept,
                    c.lost,
                    c.refused,
                    c.wall.as_secs_f64()
                );
            }
        }
    }

    let db = Db::connect(&db_url, &DbOptions::default()).await?;
    let v = admin::verify_audit(&db, None).await?;
    match v.first_bad {
        None => println!(
            "\naudit: {} rows in {} chains verified (`admin::verify_audit`)",
            v.rows, v.chains
        ),
        Some(bad) => bail!("the audit chain does not verify: {bad:?}"),
    }
    Ok(())
}

/// `n` tenants (plan `unlimited`, workspace `ws`, a key with every scope).
async fn provision(db_url: &str, n: usize) -> Result<Vec<Tenant>> {
    let db = Db::connect(db_url, &DbOptions::default()).await?;
    let mut tenants = Vec::new();
    for i in 0..n {
        let b = admin::bootstrap(
            &db,
            &format!("scaleout-{i}"),
            Plan::Unlimited,
            "ws",
            &[Scope::Read, Scope::Write, Scope::Admin],
        )
        .await?;
        tenants.push(Tenant {
            key: b.key.api_key.clone(),
        });
    }
    Ok(tenants)
}

/// The round trip the proxy adds, measured on an echo server behind a proxy with the same
/// delay: one byte out and back on an open connection, the median of 51 (a new PostgreSQL
/// connection would measure its start-up, not the network).
async fn ping(one_way: Duration) -> Result<Duration> {
    let echo = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let echo_addr = echo.local_addr()?;
    tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = s.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    let proxy = TcpProxy::start(echo_addr, one_way).await;
    let mut s = tokio::net::TcpStream::connect(proxy.addr()).await?;
    s.set_nodelay(true)?;
    let mut times = Vec::new();
    for _ in 0..51 {
        let started = Instant::now();
        s.write_all(b"x").await?;
        let mut answer = [0u8; 1];
        s.read_exact(&mut answer).await?;
        times.push(started.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

struct Rate {
    writes: usize,
    wall: Duration,
}

impl Rate {
    fn rate(&self) -> f64 {
        self.writes as f64 / self.wall.as_secs_f64()
    }
}

/// One writer per tenant (tenant `i` on replica `i % 2`), each creating new files one after the
/// other for `seconds`; every create is one write transaction.
async fn writers(tenants: &[Tenant], urls: &[String], seconds: f64, run: &str) -> Result<Rate> {
    let until = Instant::now() + Duration::from_secs_f64(seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (i, t) in tenants.iter().enumerate() {
        let tool = tool(&t.key, &urls[i % urls.len()], "ws")?;
        let run = format!("{run}-{}", fastrand::u32(..));
        tasks.push(tokio::spawn(async move {
            let mut n = 0usize;
            while Instant::now() < until {
                let r = tool
                    .execute(json!({"command": "create", "path": format!("/memories/{run}/f{n}.md"), "file_text": "a line\n"}))
                    .await;
                if r.is_error {
                    bail!("a write failed: {}", r.content);
                }
                n += 1;
            }
            Ok(n)
        }));
    }
    let mut writes = 0;
    for t in tasks {
        writes += t.await??;
    }
    Ok(Rate {
        writes,
        wall: started.elapsed(),
    })
}

struct Contention {
    acknowledged: usize,
    kept: usize,
    lost: usize,
    refused: usize,
    wall: Duration,
}

/// `n` writers (writer `w` through `fronts[w % 2]`) each insert `m` distinct lines at the top of
/// one new file, all at once; then the file is read and every acknowledged line looked for.
async fn contend(tenant: &Tenant, fronts: &[Proxy], n: usize, m: usize) -> Result<Contention> {
    let path = format!("/memories/contention-{:08x}.md", fastrand::u32(..));
    let setup = tool(&tenant.key, &fronts[0].url, "ws")?;
    let created = setup
        .execute(json!({"command": "create", "path": path, "file_text": ""}))
        .await;
    if created.is_error {
        bail!("cannot create {path}: {}", created.content);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..n {
        let tool: Arc<ContextQMemoryTool> = Arc::new(tool(&tenant.key, &fronts[w % 2].url, "ws")?);
        let path = path.clone();
        tasks.push(tokio::spawn(async move {
            let mut acked = Vec::new();
            let mut refused = Vec::new();
            for i in 0..m {
                let line = format!("writer {w} line {i}");
                let r = tool
                    .execute(json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": line}))
                    .await;
                if r.is_error {
                    refused.push(r.content);
                } else {
                    acked.push(line);
                }
            }
            (acked, refused)
        }));
    }
    let (mut acked, mut refused) = (Vec::new(), Vec::new());
    for t in tasks {
        let (a, r) = t.await?;
        acked.extend(a);
        refused.extend(r);
    }
    let wall = started.elapsed();
    if let Some(first) = refused.first() {
        eprintln!("{} refused; the first: {first}", refused.len());
    }
    let content = read(&fronts[0].url, &tenant.key, &path).await?;
    let lines: std::collections::HashSet<&str> = content.lines().collect();
    let kept = acked.iter().filter(|l| lines.contains(l.as_str())).count();
    Ok(Contention {
        acknowledged: acked.len(),
        kept,
        lost: acked.len() - kept,
        refused: refused.len(),
        wall,
    })
}

/// The content of the memory file `path` (pinned to `ws`), read with a bare `GET`.
async fn read(url: &str, key: &str, path: &str) -> Result<String> {
    let rest = path.trim_start_matches("/memories/");
    let external = format!("mem-tool:ws/{rest}")
        .replace(':', "%3A")
        .replace('/', "%2F");
    let body: Value = reqwest::Client::new()
        .get(format!("{url}/api/contexts/by-external/{external}"))
        .bearer_auth(key)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(body["content"]
        .as_str()
        .context("a context has content")?
        .to_string())
}

/// Two replicas on one PostgreSQL behind a delaying proxy: writes/s of one tenant and of 8
/// tenants, database round trips per write, concurrent inserts into one file.
#[derive(clap::Args)]
pub(crate) struct Scaleout {
    /// Admin URL of PostgreSQL (a fresh database is created through it).
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: String,
    /// Delays of each direction between the servers and PostgreSQL, in milliseconds, run in
    /// turn after a run without delay (the proxy's timer adds up to 1 ms more; the measured
    /// round trip is printed).
    #[arg(long, value_delimiter = ',', default_values_t = [0.5, 1.0])]
    one_way_ms: Vec<f64>,
    /// Seconds per throughput phase.
    #[arg(long, default_value_t = 5.0)]
    seconds: f64,
}

impl Scaleout {
    pub(crate) async fn run(self) -> Result<()> {
        let Scaleout {
            postgres_url,
            one_way_ms,
            seconds,
        } = self;
        run(Options {
            postgres: postgres_url,
            delays: one_way_ms
                .iter()
                .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                .collect(),
            seconds,
        })
        .await
    }
}
