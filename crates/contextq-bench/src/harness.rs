//! What every benchmark stands on: a `contextq-server` process over a fresh database, the
//! memory tool pointed at it, latency statistics and a driver at a given concurrency.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use contextq_memory_tool::MemoryToolHandlers;
use contextq_memory_tool::contextq::{
    ContextQMemoryTool, ContextQMemoryToolOptions, contextq_memory_tool,
};
use contextq_server::Backend;
use contextq_server::testing::TestDatabase;
use serde_json::{Value, json};

/// A `contextq-server serve` process on `127.0.0.1:0`, killed when dropped.
pub(crate) struct Process {
    pub(crate) child: Child,
    pub(crate) url: String,
}

/// A server over a database bootstrapped with the tenant `bench` (workspace `ws`), and its key.
pub(crate) struct Server {
    pub(crate) process: Process,
    pub(crate) url: String,
    pub(crate) key: String,
    pub(crate) boot: Value,
    /// Dropped after the process (fields drop in order), which removes a PostgreSQL database.
    pub(crate) database: TestDatabase,
}

/// `contextq-server` beside this binary, or `CONTEXTQ_BENCH_SERVER_BIN` (another build, e.g.
/// the release before a change, to compare the two).
pub(crate) fn server_bin() -> Result<std::path::PathBuf> {
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
pub(crate) async fn serve(
    backend: &str,
    postgres: Option<&str>,
    serve_args: &[&str],
) -> Result<Server> {
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
pub(crate) fn spawn_server(db: &str) -> Result<Process> {
    spawn_server_with(db, &[])
}

pub(crate) fn spawn_server_with(db: &str, extra: &[&str]) -> Result<Process> {
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
pub(crate) fn tool(key: &str, url: &str, workspace: &str) -> Result<ContextQMemoryTool> {
    Ok(contextq_memory_tool(
        ContextQMemoryToolOptions::new(key.to_string())
            .base_url(url)
            .workspace(workspace),
    )?)
}

impl Server {
    /// `POST path` with the server's key; an error unless it succeeded.
    pub(crate) async fn post(&self, http: &reqwest::Client, path: &str, body: Value) -> Result<()> {
        self.post_as(http, &self.key, path, body).await
    }

    pub(crate) async fn post_as(
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
    pub(crate) async fn load(
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
    pub(crate) async fn load_as(
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

    pub(crate) fn tool(&self, url: &str, workspace: &str) -> Result<ContextQMemoryTool> {
        tool(&self.key, url, workspace)
    }

    pub(crate) fn peak_mib(&self) -> Option<f64> {
        self.process.peak_mib()
    }
}

impl Process {
    /// Peak resident memory of the server process (VmHWM), in MiB.
    pub(crate) fn peak_mib(&self) -> Option<f64> {
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

pub(crate) struct Stats {
    pub(crate) ops: usize,
    pub(crate) wall: Duration,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) mean: Duration,
}

pub(crate) fn stats(mut lat: Vec<Duration>, wall: Duration) -> Stats {
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

pub(crate) fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1000.0)
}

/// Runs `ops` inputs (from `make(task, i)`) on `conc` tasks sharing `tool`.
pub(crate) async fn drive<F>(
    tool: &Arc<ContextQMemoryTool>,
    conc: usize,
    ops: usize,
    make: F,
) -> Result<Stats>
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
pub(crate) fn backends(postgres: Option<&str>) -> Vec<&'static str> {
    let mut backends = vec!["sqlite"];
    if postgres.is_some() {
        backends.push("postgres");
    }
    backends
}

/// The best of three `view`s of `path` with `tool`, and its answer (an error answer fails).
pub(crate) async fn best_view(
    tool: &ContextQMemoryTool,
    path: &str,
) -> Result<(std::time::Duration, String)> {
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
