//! `contextq-bench`: measures the memory tool on ContextQ and prints tables (docs/benchmarks.md).
//!
//! The server runs as a separate process (the release `contextq-server` next to this binary),
//! on loopback, so its peak memory can be read and client and server do not share a runtime.
//!
//! ```sh
//! cargo build --release -p contextq-server -p contextq-bench -p contextq-memory-cli
//! target/release/contextq-bench commands [--postgres-url URL]
//! target/release/contextq-bench overhead
//! target/release/contextq-bench scale [--postgres-url URL]
//! target/release/contextq-bench burst [--postgres-url URL]
//! target/release/contextq-bench scaleout --postgres-url URL [--one-way-ms 0.5,1.0]
//! target/release/contextq-bench floor [--postgres-url URL]
//! target/release/contextq-bench trace --commands 10000 --out trace.jsonl   # for bench/trace.sh
//! ```

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use clap::{Parser, Subcommand};
use contextq_memory_tool::contextq::{
    ContextQMemoryTool, ContextQMemoryToolOptions, contextq_memory_tool,
};
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{AnswerBudget, MemoryToolHandlers};
use contextq_server::Backend;
use contextq_server::testing::TestDatabase;
use serde_json::{Value, json};

#[derive(Parser)]
#[command(
    name = "contextq-bench",
    about = "Benchmarks of the memory tool on ContextQ"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Per command: ops/s, p50/p99 at concurrency 1 and 16, HTTP requests per command.
    Commands {
        /// Operations per command and concurrency.
        #[arg(long, default_value_t = 800)]
        ops: usize,
        /// Also run on PostgreSQL (a fresh database is created through this URL).
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// The same `view` through the tool and as a bare HTTP GET, in one run.
    Overhead {
        /// Pairs of requests.
        #[arg(long, default_value_t = 3000)]
        ops: usize,
    },
    /// Two replicas on one PostgreSQL behind a delaying proxy: writes/s of one tenant and of 8
    /// tenants, database round trips per write, concurrent inserts into one file.
    Scaleout {
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
    },
    /// Listing 1k/20k/100k files (whole, and within the default answer budget: time and
    /// characters); edits on 1 KiB/100 KiB/1 MiB files; server peak memory.
    Scale {
        /// Largest listing.
        #[arg(long, default_value_t = 100_000)]
        max_files: usize,
        /// Also run on PostgreSQL.
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// Server memory under bursts of large requests: peak and settled RSS with the default
    /// budget of bodies in flight and with a budget large enough to be no limit.
    Burst {
        /// Concurrent requests per burst.
        #[arg(long, default_value_t = 48)]
        concurrency: usize,
        /// Bursts of the largest legitimate writes.
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Also run on PostgreSQL.
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// Versions: writes of one file with many versions, reading its history and one version,
    /// planning and carrying out the restore of a tree to a point in time.
    History {
        /// Versions of the one file (also the server's --versions-kept).
        #[arg(long, default_value_t = 1000)]
        versions: usize,
        /// Files in the tree restored.
        #[arg(long, default_value_t = 1000)]
        files: usize,
        /// Also run on PostgreSQL.
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// A command's cost as the tenant grows: p50/p99 of create, str_replace, view file and view
    /// of a small directory, at concurrency 1, in a tenant that holds each number of files in
    /// turn (loaded through bulk-upsert into another folder of the same workspace).
    TenantSize {
        /// Files the tenant holds, in turn.
        #[arg(long, value_delimiter = ',', default_values_t = [0usize, 20_000, 100_000])]
        files: Vec<usize>,
        /// Operations per command and size.
        #[arg(long, default_value_t = 1000)]
        ops: usize,
        /// Other tenants beside the measured one, made before the first size.
        #[arg(long, default_value_t = 0)]
        tenants: usize,
        /// Files each other tenant holds.
        #[arg(long, default_value_t = 100)]
        tenant_files: usize,
        /// Bytes of prose in each file created and in the file edited (0: one short line), to
        /// see how a write's cost grows with what it writes (and indexes).
        #[arg(long, default_value_t = 0)]
        file_bytes: usize,
        /// Also run on PostgreSQL.
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// Full-text search (extension `search`): p50/p99 of each kind of query (an identifier, two
    /// words, a common word, a prefix, a phrase) as the tenant grows.
    Search {
        /// Files the tenant holds, in turn.
        #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 20_000, 100_000])]
        files: Vec<usize>,
        /// Queries of each kind at each size.
        #[arg(long, default_value_t = 200)]
        queries: usize,
        /// Also run on PostgreSQL.
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// One tenant's flood of heavy searches against another tenant's reads (docs/search.md,
    /// "Fair under load"): latencies, answers by status, the server's peak RSS.
    SearchFlood {
        /// Files the searching tenant holds.
        #[arg(long, default_value_t = 100_000)]
        files: usize,
        /// Its searches at once.
        #[arg(long, default_value_t = 32)]
        concurrency: usize,
        /// Also run on PostgreSQL.
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// The floors of a durable write on this machine: one client committing, one transaction at
    /// a time, the rows a write needs at the least (file, version, audit), then the rows a
    /// memory-tool write writes in the server's schema, on SQLite with `synchronous = FULL` and
    /// `NORMAL` and, with --postgres-url, on PostgreSQL in one round trip each.
    Floor {
        /// Writes per floor.
        #[arg(long, default_value_t = 2000)]
        writes: usize,
        /// Also on PostgreSQL (a fresh database is created through this admin URL).
        #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
        postgres_url: Option<String>,
    },
    /// Writes the deterministic command trace (JSON lines).
    Trace {
        #[arg(long, default_value_t = 10_000)]
        commands: usize,
        #[arg(long, default_value_t = 42)]
        seed: u64,
        #[arg(long)]
        out: std::path::PathBuf,
    },
}

mod burst;
mod floor;
mod history;
mod scaleout;
mod search;

/// A `contextq-server serve` process on `127.0.0.1:0`, killed when dropped.
struct Process {
    child: Child,
    url: String,
}

/// A server over a database bootstrapped with the tenant `bench` (workspace `ws`), and its key.
struct Server {
    process: Process,
    url: String,
    key: String,
    boot: Value,
    /// Dropped after the process (fields drop in order), which removes a PostgreSQL database.
    database: TestDatabase,
}

/// `contextq-server` beside this binary, or `CONTEXTQ_BENCH_SERVER_BIN` (another build, e.g.
/// the release before a change, to compare the two).
fn server_bin() -> Result<std::path::PathBuf> {
    let bin = match std::env::var_os("CONTEXTQ_BENCH_SERVER_BIN") {
        Some(bin) => std::path::PathBuf::from(bin),
        None => std::env::current_exe()?.with_file_name("contextq-server"),
    };
    if !bin.exists() {
        bail!(
            "{} not found: cargo build --release -p contextq-server -p contextq-bench",
            bin.display()
        );
    }
    Ok(bin)
}

/// A fresh database for one benchmark run (SQLite file or PostgreSQL database), dropped with
/// the returned guard.
/// A fresh database on `backend` (`sqlite`, or `postgres` under the admin URL `postgres`),
/// bootstrapped (tenant `bench`, workspace `ws`), and a server on it started with `serve_args`.
async fn serve(backend: &str, postgres: Option<&str>, serve_args: &[&str]) -> Result<Server> {
    let backend = if backend == "sqlite" {
        Backend::Sqlite
    } else {
        Backend::Postgres
    };
    let database = TestDatabase::create(backend, postgres).await?;
    let db = database.url.as_str();
    let bin = server_bin()?;
    let out = Command::new(&bin)
        .args([
            "admin",
            "--database-url",
            db,
            "bootstrap",
            "--tenant",
            "bench",
            "--plan",
            "unlimited",
            "--workspace",
            "ws",
        ])
        .output()?;
    if !out.status.success() {
        bail!("bootstrap failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let boot: Value = serde_json::from_slice(&out.stdout)?;
    let process = spawn_server_with(db, serve_args)?;
    Ok(Server {
        url: process.url.clone(),
        process,
        key: boot["apiKey"].as_str().unwrap_or_default().to_string(),
        boot,
        database,
    })
}

/// Starts `contextq-server serve` over the database `db` (already provisioned).
fn spawn_server(db: &str) -> Result<Process> {
    spawn_server_with(db, &[])
}

fn spawn_server_with(db: &str, extra: &[&str]) -> Result<Process> {
    let mut child = Command::new(server_bin()?)
        .args(["serve", "--database-url", db, "--listen", "127.0.0.1:0"])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().context("stdout")?).read_line(&mut line)?;
    if line.trim().is_empty() {
        bail!("contextq-server serve did not start on {db}");
    }
    Ok(Process {
        child,
        url: line.trim().to_string(),
    })
}

/// The memory tool with `key`, on the server at `url`, pinned to `workspace`.
fn tool(key: &str, url: &str, workspace: &str) -> Result<ContextQMemoryTool> {
    Ok(contextq_memory_tool(
        ContextQMemoryToolOptions::new(key.to_string())
            .base_url(url)
            .workspace(workspace),
    )?)
}

impl Server {
    /// `POST path` with the server's key; an error unless it succeeded.
    async fn post(&self, http: &reqwest::Client, path: &str, body: Value) -> Result<()> {
        self.post_as(http, &self.key, path, body).await
    }

    async fn post_as(
        &self,
        http: &reqwest::Client,
        key: &str,
        path: &str,
        body: Value,
    ) -> Result<()> {
        let r = http
            .post(format!("{}{path}", self.url))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await?;
        anyhow::ensure!(r.status().is_success(), "POST {path}: {}", r.status());
        Ok(())
    }

    /// Files `i` of `range` (16 bytes each) as `/memories/{folder}/d{i % dirs}/f{i}.md` of the
    /// workspace `ws` (numbers zero-padded: `d07/f000123.md`), through bulk-upsert, 100 a
    /// request.
    async fn load(
        &self,
        http: &reqwest::Client,
        ws: &str,
        folder: &str,
        dirs: usize,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        self.load_as(http, &self.key, ws, folder, dirs, range).await
    }

    /// [`Server::load`] into the tenant of `key`.
    async fn load_as(
        &self,
        http: &reqwest::Client,
        key: &str,
        ws: &str,
        folder: &str,
        dirs: usize,
        range: std::ops::Range<usize>,
    ) -> Result<()> {
        let width = (dirs.max(2) - 1).to_string().len();
        let all: Vec<usize> = range.collect();
        for chunk in all.chunks(100) {
            let items: Vec<Value> = chunk
                .iter()
                .map(|i| json!({"externalId": format!("mem-tool:{ws}/{folder}/d{:0width$}/f{i:06}.md", i % dirs), "workspace": ws, "type": "reference", "content": "0123456789abcdef", "tags": ["mem-tool"]}))
                .collect();
            self.post_as(
                http,
                key,
                "/api/contexts/bulk-upsert",
                json!({"contexts": items}),
            )
            .await?;
        }
        Ok(())
    }

    fn tool(&self, url: &str, workspace: &str) -> Result<ContextQMemoryTool> {
        tool(&self.key, url, workspace)
    }

    fn peak_mib(&self) -> Option<f64> {
        self.process.peak_mib()
    }
}

impl Process {
    /// Peak resident memory of the server process (VmHWM), in MiB.
    fn peak_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        let kb: f64 = status
            .lines()
            .find(|l| l.starts_with("VmHWM:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()?;
        Some(kb / 1024.0)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Stats {
    ops: usize,
    wall: Duration,
    p50: Duration,
    p99: Duration,
    mean: Duration,
}

fn stats(mut lat: Vec<Duration>, wall: Duration) -> Stats {
    lat.sort();
    let at = |q: f64| lat[((lat.len() as f64 * q) as usize).min(lat.len() - 1)];
    let mean = lat.iter().sum::<Duration>() / lat.len().max(1) as u32;
    Stats {
        ops: lat.len(),
        wall,
        p50: at(0.50),
        p99: at(0.99),
        mean,
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// Runs `ops` inputs (from `make(task, i)`) on `conc` tasks sharing `tool`.
async fn drive<F>(tool: &Arc<ContextQMemoryTool>, conc: usize, ops: usize, make: F) -> Result<Stats>
where
    F: Fn(usize, usize) -> Value + Send + Sync + 'static,
{
    let make = Arc::new(make);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for t in 0..conc {
        let (tool, make) = (tool.clone(), make.clone());
        let n = ops / conc + usize::from(t < ops % conc);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(n);
            for i in 0..n {
                let input = make(t, i);
                let s = Instant::now();
                let r = tool.execute(input.clone()).await;
                lat.push(s.elapsed());
                if r.is_error {
                    return Err(anyhow::anyhow!("{input}: {}", r.content));
                }
            }
            Ok(lat)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await??);
    }
    Ok(stats(all, started.elapsed()))
}

/// The backends a benchmark runs on: SQLite, and PostgreSQL when its URL is given.
fn backends(postgres: Option<&str>) -> Vec<&'static str> {
    let mut backends = vec!["sqlite"];
    if postgres.is_some() {
        backends.push("postgres");
    }
    backends
}

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

async fn tenant_size(
    sizes: Vec<usize>,
    ops: usize,
    (tenants, tenant_files): (usize, usize),
    file_bytes: usize,
    postgres: Option<String>,
) -> Result<()> {
    let prose = if file_bytes == 0 {
        String::new()
    } else {
        search::prose(file_bytes)
    };
    let http = reqwest::Client::new();
    for backend in backends(postgres.as_deref()) {
        let server = serve(backend, postgres.as_deref(), &[]).await?;
        let tool = Arc::new(server.tool(&server.url, "ws")?);
        if tenants > 0 {
            // Made through the database (as `admin bootstrap` would), filled through the API.
            let pool = contextq_server::Db::connect(
                &server.database.url,
                &contextq_server::DbOptions::default(),
            )
            .await?;
            for t in 0..tenants {
                let boot = contextq_server::admin::bootstrap(
                    &pool,
                    &format!("beside-{t}"),
                    contextq_server::Plan::Unlimited,
                    "ws",
                    &[contextq_server::Scope::Read, contextq_server::Scope::Write],
                )
                .await?;
                server
                    .load_as(&http, &boot.key.api_key, "ws", "load", 10, 0..tenant_files)
                    .await?;
            }
            pool.close().await;
        }
        println!(
            "\n{backend}: {ops} operations per command at concurrency 1, by files the tenant holds ({tenants} other tenants of {tenant_files} files beside it)\n"
        );
        println!(
            "| tenant files | create p50 / p99 ms | str_replace p50 / p99 ms | view file p50 / p99 ms | view directory (20 files) p50 / p99 ms | create p50 vs first row |"
        );
        println!("|---|---|---|---|---|---|");
        let mut loaded = 0;
        let mut first = None;
        for (round, &n) in sizes.iter().enumerate() {
            // Grow the tenant to n files (the commands' own files come on top).
            server.load(&http, "ws", "load", 1000, loaded..n).await?;
            loaded = loaded.max(n);
            let base = format!("/memories/r{round}");
            for i in 0..20 {
                let r = tool.execute(json!({"command": "create", "path": format!("{base}/dir/f{i}.md"), "file_text": "x\n"})).await;
                anyhow::ensure!(!r.is_error, "{}", r.content);
            }
            let edit = format!("{base}/edit.md");
            let r = tool
                .execute(json!({"command": "create", "path": edit, "file_text": format!("<v0>\n{prose}")}))
                .await;
            anyhow::ensure!(!r.is_error, "{}", r.content);
            type Make = Box<dyn Fn(usize, usize) -> Value + Send + Sync>;
            let (b1, b2, b3) = (base.clone(), base.clone(), base.clone());
            let text = format!("a remembered fact\n{prose}");
            let plan: [Make; 4] = [
                Box::new(
                    move |_, i| json!({"command": "create", "path": format!("{b1}/c/{i}.md"), "file_text": text}),
                ),
                Box::new(
                    move |_, i| json!({"command": "str_replace", "path": edit, "old_str": format!("<v{i}>"), "new_str": format!("<v{}>", i + 1)}),
                ),
                Box::new(move |_, i| json!({"command": "view", "path": format!("{b2}/c/{i}.md")})),
                Box::new(move |_, _| json!({"command": "view", "path": format!("{b3}/dir")})),
            ];
            let mut row = Vec::new();
            for make in plan {
                row.push(drive(&tool, 1, ops, make).await?);
            }
            let [create, replace, view, dir] = &row[..] else {
                unreachable!("four commands")
            };
            let first_p50 = *first.get_or_insert(create.p50);
            let pair = |s: &Stats| format!("{} / {}", ms(s.p50), ms(s.p99));
            println!(
                "| {n} | {} | {} | {} | {} | {:.2}x |",
                pair(create),
                pair(replace),
                pair(view),
                pair(dir),
                create.p50.as_secs_f64() / first_p50.as_secs_f64()
            );
            std::io::stdout().flush()?;
        }
    }
    Ok(())
}

/// The best of three `view`s of `path` with `tool`, and its answer (an error answer fails).
async fn best_view(tool: &ContextQMemoryTool, path: &str) -> Result<(std::time::Duration, String)> {
    let mut best: Option<(std::time::Duration, String)> = None;
    for _ in 0..3 {
        let s = Instant::now();
        let r = tool.execute(json!({"command": "view", "path": path})).await;
        let took = s.elapsed();
        anyhow::ensure!(!r.is_error, "{}", r.content);
        if best.as_ref().is_none_or(|(t, _)| took < *t) {
            best = Some((took, r.content));
        }
    }
    Ok(best.expect("three runs"))
}

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

#[tokio::main]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Commands { ops, postgres_url } => commands(ops, postgres_url).await,
        Cmd::TenantSize {
            files,
            ops,
            tenants,
            tenant_files,
            file_bytes,
            postgres_url,
        } => {
            tenant_size(
                files,
                ops,
                (tenants, tenant_files),
                file_bytes,
                postgres_url,
            )
            .await
        }
        Cmd::Overhead { ops } => overhead(ops).await,
        Cmd::Search {
            files,
            queries,
            postgres_url,
        } => search::run(files, queries, postgres_url).await,
        Cmd::SearchFlood {
            files,
            concurrency,
            postgres_url,
        } => search::flood(files, concurrency, postgres_url).await,
        Cmd::Scaleout {
            postgres_url,
            one_way_ms,
            seconds,
        } => {
            scaleout::run(scaleout::Options {
                postgres: postgres_url,
                delays: one_way_ms
                    .iter()
                    .map(|ms| Duration::from_secs_f64(ms / 1000.0))
                    .collect(),
                seconds,
            })
            .await
        }
        Cmd::Scale {
            max_files,
            postgres_url,
        } => scale(max_files, postgres_url).await,
        Cmd::Burst {
            concurrency,
            rounds,
            postgres_url,
        } => burst::run(concurrency, rounds, postgres_url).await,
        Cmd::History {
            versions,
            files,
            postgres_url,
        } => history::run(versions, files, postgres_url).await,
        Cmd::Floor {
            writes,
            postgres_url,
        } => floor::run(writes, postgres_url).await,
        Cmd::Trace {
            commands,
            seed,
            out,
        } => {
            let mut f = std::io::BufWriter::new(std::fs::File::create(&out)?);
            for input in contextq_memory_tool::testing::trace::generate(commands, seed) {
                writeln!(f, "{input}")?;
            }
            f.flush()?;
            eprintln!("wrote {commands} commands to {}", out.display());
            Ok(())
        }
    }
}
