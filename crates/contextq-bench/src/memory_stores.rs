//! `contextq-bench memory-stores`: the Memory Stores door (`/v1`, docs/memory-stores.md) as the
//! store grows: a memory page, a `depth=1` page, a version page and a retrieve at each size
//! (nothing on a request's path may cost more with more memories), and a create and an update
//! through the door against the same write through `/api/contexts`, run in turn.

use std::io::Write as _;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, ensure};
use serde_json::{Value, json};

use crate::harness::{Server, Stats, backends, ms, serve, stats};

/// One request, timed; a failure stops the benchmark.
async fn timed(
    http: &reqwest::Client,
    server: &Server,
    (method, path): (reqwest::Method, &str),
    body: Option<&Value>,
) -> Result<(Duration, Value)> {
    let mut r = http
        .request(method.clone(), format!("{}{path}", server.url))
        .bearer_auth(&server.key);
    if let Some(b) = body {
        r = r.json(b);
    }
    let started = Instant::now();
    let answer = r.send().await?;
    let status = answer.status();
    let value: Value = answer.json().await.unwrap_or(Value::Null);
    let took = started.elapsed();
    ensure!(status.is_success(), "{method} {path}: {status} {value}");
    Ok((took, value))
}

/// `ops` runs of `one(i)`, one at a time.
async fn series<F, Fut>(ops: usize, mut one: F) -> Result<Stats>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = Result<Duration>>,
{
    let started = Instant::now();
    let mut lat = Vec::with_capacity(ops);
    for i in 0..ops {
        lat.push(one(i).await?);
    }
    Ok(stats(lat, started.elapsed()))
}

async fn memory_stores(sizes: Vec<usize>, ops: usize, postgres: Option<String>) -> Result<()> {
    let http = reqwest::Client::new();
    for backend in backends(postgres.as_deref()) {
        let server = serve(backend, postgres.as_deref(), &[]).await?;
        let (_, stores) = timed(
            &http,
            &server,
            (reqwest::Method::GET, "/v1/memory_stores"),
            None,
        )
        .await?;
        let store = stores["data"][0]["id"]
            .as_str()
            .context("the workspace's store")?
            .to_string();
        let m = format!("/v1/memory_stores/{store}");
        println!(
            "\n{backend}: p50 ms of {ops} requests each, one at a time, by memories the store holds (1,000 directories)\n"
        );
        println!(
            "| memories | memory page (the first 100) | depth=1 page (100 directories) | version page (100) | retrieve | create: door / /api | update: door / /api |"
        );
        println!("|---|---|---|---|---|---|---|");
        let mut loaded = 0;
        for (round, &n) in sizes.iter().enumerate() {
            server.load(&http, "ws", "load", 1000, loaded..n).await?;
            loaded = loaded.max(n);
            let get = |path: String| {
                let (http, server) = (&http, &server);
                async move {
                    Ok(timed(http, server, (reqwest::Method::GET, &path), None)
                        .await?
                        .0)
                }
            };
            // The first page of everything the store holds: the same 100 memories' cost at
            // every size, unless a listing reads what it does not answer.
            let page = series(ops, |_| {
                get(format!("{m}/memories?limit=100&path_prefix=/load/"))
            })
            .await?;
            let depth = series(ops, |_| {
                get(format!("{m}/memories?limit=100&depth=1&path_prefix=/load/"))
            })
            .await?;
            let versions = series(ops, |_| get(format!("{m}/memory_versions?limit=100"))).await?;
            let (_, first) = timed(
                &http,
                &server,
                (reqwest::Method::GET, &format!("{m}/memories?limit=1")),
                None,
            )
            .await?;
            let id = first["data"][0]["id"]
                .as_str()
                .context("a memory")?
                .to_string();
            let retrieve = series(ops, |_| get(format!("{m}/memories/{id}"))).await?;

            // Writes, the two doors in turn, each on files of its own.
            let (mut door_create, mut api_create) = (Vec::new(), Vec::new());
            let (mut door_ids, mut api_ids) = (Vec::new(), Vec::new());
            for i in 0..ops {
                let body = json!({"path": format!("/w{round}/door/{i}.md"), "content": "a remembered fact\n"});
                let (t, v) = timed(
                    &http,
                    &server,
                    (reqwest::Method::POST, &format!("{m}/memories")),
                    Some(&body),
                )
                .await?;
                door_create.push(t);
                door_ids.push(v["id"].as_str().unwrap_or_default().to_string());
                let body = json!({"contexts": [{"externalId": format!("mem-tool:ws/w{round}/api/{i}.md"), "workspace": "ws", "type": "reference", "title": format!("/memories/w{round}/api/{i}.md"), "content": "a remembered fact\n", "tags": ["mem-tool"], "ifAbsent": true}]});
                let (t, v) = timed(
                    &http,
                    &server,
                    (reqwest::Method::POST, "/api/contexts/bulk-upsert"),
                    Some(&body),
                )
                .await?;
                api_create.push(t);
                api_ids.push(
                    v["results"][0]["id"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                );
            }
            let (mut door_update, mut api_update) = (Vec::new(), Vec::new());
            for i in 0..ops {
                let body = json!({"content": format!("a remembered fact, {i}\n")});
                let (t, _) = timed(
                    &http,
                    &server,
                    (
                        reqwest::Method::POST,
                        &format!("{m}/memories/{}", door_ids[i]),
                    ),
                    Some(&body),
                )
                .await?;
                door_update.push(t);
                let (t, _) = timed(
                    &http,
                    &server,
                    (
                        reqwest::Method::PUT,
                        &format!("/api/contexts/{}", api_ids[i]),
                    ),
                    Some(&body),
                )
                .await?;
                api_update.push(t);
            }
            let p50 = |lat: Vec<Duration>| stats(lat, Duration::ZERO).p50;
            let (dc, ac, du, au) = (
                p50(door_create),
                p50(api_create),
                p50(door_update),
                p50(api_update),
            );
            println!(
                "| {n} | {} | {} | {} | {} | {} / {} ({:.2}x) | {} / {} ({:.2}x) |",
                ms(page.p50),
                ms(depth.p50),
                ms(versions.p50),
                ms(retrieve.p50),
                ms(dc),
                ms(ac),
                dc.as_secs_f64() / ac.as_secs_f64(),
                ms(du),
                ms(au),
                du.as_secs_f64() / au.as_secs_f64(),
            );
            std::io::stdout().flush()?;
        }
    }
    Ok(())
}

/// The Memory Stores door as the store grows: p50 of a memory page, a `depth=1` page, a
/// version page and a retrieve at each size, and a create and an update through the door
/// against the same write through `/api/contexts`, in turn.
#[derive(clap::Args)]
pub(crate) struct MemoryStores {
    /// Memories the store holds, in turn.
    #[arg(long, value_delimiter = ',', default_values_t = [1_000usize, 100_000])]
    memories: Vec<usize>,
    /// Requests of each kind at each size.
    #[arg(long, default_value_t = 300)]
    ops: usize,
    /// Also run on PostgreSQL.
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl MemoryStores {
    pub(crate) async fn run(self) -> Result<()> {
        memory_stores(self.memories, self.ops, self.postgres_url).await
    }
}
