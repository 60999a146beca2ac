//! `contextq-bench tenant-size`: a command's cost as the tenant grows.

use std::io::Write as _;
use std::sync::Arc;

use anyhow::Result;
use contextq_memory_tool::MemoryToolHandlers;
use serde_json::{Value, json};

use crate::harness::{Stats, backends, drive, ms, serve};

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
        crate::search::prose(file_bytes)
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

/// A command's cost as the tenant grows: p50/p99 of create, str_replace, view file and view
/// of a small directory, at concurrency 1, in a tenant that holds each number of files in
/// turn (loaded through bulk-upsert into another folder of the same workspace).
#[derive(clap::Args)]
pub(crate) struct TenantSize {
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
}

impl TenantSize {
    pub(crate) async fn run(self) -> Result<()> {
        let TenantSize {
            files,
            ops,
            tenants,
            tenant_files,
            file_bytes,
            postgres_url,
        } = self;
        tenant_size(
            files,
            ops,
            (tenants, tenant_files),
            file_bytes,
            postgres_url,
        )
        .await
    }
}
