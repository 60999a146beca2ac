//! `contextq-bench floor`: what a durable write costs the database itself, measured on this
//! machine in this run, as the floor the memory tool's writes are compared with (issue 52,
//! docs/benchmarks.md "Writes and their floor").
//!
//! One client commits, one transaction at a time, the rows a write needs at the least: the
//! file's row (upserted: path, content, version), its version row and an audit row, with the
//! note's text (about 50 bytes, the trace's). Nothing else: no HTTP, no adapter, no idempotency
//! record, no search index, no MAC. SQLite through rusqlite on a fresh file in WAL mode with
//! `synchronous = FULL` (a commit flushes the log, as `--durability synced` does) and, for
//! comparison, `NORMAL` (`ordered`); PostgreSQL through one connection with the server's own
//! `synchronous_commit` (on unless the server was told otherwise; the table says which), the
//! transaction sent as one simple-query batch: one round trip and one WAL flush per write.
//!
//! Then the same on the second floor (module `rows`): the rows a memory-tool write writes, in
//! the server's own schema, so that a write's distance from it is our code's and not our
//! schema's.

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use contextq_server::Backend;
use contextq_server::testing::TestDatabase;
use sqlx::Connection as _;

use crate::harness::{Stats, stats};

mod rows;

/// The note each write stores (the trace's notes are about this long).
const NOTE: &str = "note: the deploy of service-7 moved to rack r3 on Tuesday.\n";

/// An audit row's detail, about what the server records for a write.
const AUDIT: &str = "{\"action\":\"context.create\",\"path\":\"/memories/notes/f.md\",\"bytes\":60,\"key\":\"key_0123456789abcdef\",\"request\":\"req_0123456789abcdef\"}";

/// Runs `writes` writes on each floor and prints the table.
pub async fn run(writes: usize, postgres: Option<String>) -> Result<()> {
    println!("| floor | durability | writes | mean µs per write | p50 µs | p99 µs |");
    println!("|---|---|---|---|---|---|");
    for (durability, synchronous) in [("synced", "FULL"), ("ordered", "NORMAL")] {
        let s = sqlite(writes, synchronous)?;
        row(
            &format!("SQLite (rusqlite, WAL, synchronous = {synchronous})"),
            durability,
            &s,
        );
    }
    if let Some(admin) = postgres {
        let (s, synchronous_commit) = postgres_floor(writes, &admin).await?;
        let durability = if synchronous_commit == "off" {
            "ordered"
        } else {
            "synced"
        };
        row(
            &format!("PostgreSQL (one round trip, synchronous_commit = {synchronous_commit})"),
            durability,
            &s,
        );
        let s = postgres_rows(writes, &admin).await?;
        row(
            &format!(
                "PostgreSQL, the rows of a memory-tool write (one round trip, synchronous_commit = {synchronous_commit})"
            ),
            durability,
            &s,
        );
    }
    for (durability, synchronous) in [("synced", "FULL"), ("ordered", "NORMAL")] {
        let s = sqlite_rows(writes, synchronous).await?;
        row(
            &format!(
                "SQLite, the rows of a memory-tool write (rusqlite, WAL, synchronous = {synchronous})"
            ),
            durability,
            &s,
        );
    }
    Ok(())
}

/// The second floor on SQLite: the server's schema (its migrations run by opening it), then
/// each write's statements (module `rows`) prepared once and bound, one transaction each.
async fn sqlite_rows(writes: usize, synchronous: &str) -> Result<Stats> {
    let database = TestDatabase::create(Backend::Sqlite, None).await?;
    let db = contextq_server::Db::connect(&database.url, &contextq_server::DbOptions::default())
        .await
        .context("migrating the floor's SQLite database")?;
    db.close().await;
    let file = database.url.trim_start_matches("sqlite:").to_string();
    let conn = rusqlite::Connection::open(&file)?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    let run = |statements: Vec<rows::Statement>| -> Result<()> {
        for (sql, values) in statements {
            let values = values.into_iter().map(|v| match v {
                rows::V::Text(s) => rusqlite::types::Value::Text(s),
                rows::V::Int(n) => rusqlite::types::Value::Integer(n),
                rows::V::Null => rusqlite::types::Value::Null,
            });
            conn.prepare_cached(sql)?
                .execute(rusqlite::params_from_iter(values))
                .with_context(|| format!("the floor's statement {sql}"))?;
        }
        Ok(())
    };
    run(rows::setup())?;
    let mut w = rows::Writes::new(Backend::Sqlite);
    let mut lat = Vec::with_capacity(writes);
    let started = Instant::now();
    for i in 0..writes {
        // Made before the clock starts, as the PostgreSQL floor's batches are.
        let statements = w.next(i);
        let t = Instant::now();
        let tx =
            rusqlite::Transaction::new_unchecked(&conn, rusqlite::TransactionBehavior::Immediate)?;
        run(statements)?;
        tx.commit()?;
        lat.push(t.elapsed());
    }
    Ok(stats(lat, started.elapsed()))
}

/// The second floor on PostgreSQL: the server's schema, each write as one simple-query batch
/// (`BEGIN`, its statements, `COMMIT`): one round trip. Each statement is `PREPARE`d on the
/// connection the first time it is sent (in the same batch) and `EXECUTE`d with literals after,
/// as the server's write connections do, so that the floor does not plan what the server does
/// not.
async fn postgres_rows(writes: usize, admin: &str) -> Result<Stats> {
    let database = TestDatabase::create(Backend::Postgres, Some(admin)).await?;
    let db = contextq_server::Db::connect(&database.url, &contextq_server::DbOptions::default())
        .await
        .context("migrating the floor's PostgreSQL database")?;
    db.close().await;
    let mut conn = sqlx::PgConnection::connect(&database.url)
        .await
        .context("connecting to the floor's database")?;
    let mut prepared: std::collections::HashMap<&'static str, usize> = Default::default();
    let mut batch = |statements: Vec<rows::Statement>| {
        let mut sql = String::from("BEGIN;");
        for (s, values) in statements {
            let next = prepared.len();
            let name = *prepared.entry(s).or_insert_with(|| {
                let numbered = (1..=values.len()).rev().fold(s.to_string(), |q, k| {
                    q.replace(&format!("?{k}"), &format!("${k}"))
                });
                sql.push_str(&format!("PREPARE floor_{next} AS {numbered};"));
                next
            });
            let args: Vec<String> = (0..values.len()).map(|k| format!("?{}", k + 1)).collect();
            let execute = if args.is_empty() {
                format!("EXECUTE floor_{name}")
            } else {
                format!("EXECUTE floor_{name}({})", args.join(", "))
            };
            sql.push_str(&rows::inline(&execute, &values));
            sql.push(';');
        }
        sql.push_str("COMMIT;");
        sql
    };
    sqlx::raw_sql(sqlx::AssertSqlSafe(batch(rows::setup())))
        .execute(&mut conn)
        .await?;
    let mut w = rows::Writes::new(Backend::Postgres);
    let s = timed_batches(conn, writes, |i| batch(w.next(i))).await?;
    drop(database);
    Ok(s)
}

/// Sends `writes` transactions made by `batch` on `conn`, each one simple query (one round
/// trip), each timed from sending to its answer; then closes the connection.
async fn timed_batches(
    mut conn: sqlx::PgConnection,
    writes: usize,
    mut batch: impl FnMut(usize) -> String,
) -> Result<Stats> {
    let mut lat = Vec::with_capacity(writes);
    let started = Instant::now();
    for i in 0..writes {
        let sql = batch(i);
        let t = Instant::now();
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(&mut conn)
            .await?;
        lat.push(t.elapsed());
    }
    let wall = started.elapsed();
    conn.close().await?;
    Ok(stats(lat, wall))
}

fn row(name: &str, durability: &str, s: &Stats) {
    let us = |d: Duration| format!("{:.0}", d.as_secs_f64() * 1e6);
    println!(
        "| {name} | {durability} | {} | {} | {} | {} |",
        s.ops,
        us(s.mean),
        us(s.p50),
        us(s.p99)
    );
}

const SCHEMA: &str = "CREATE TABLE files (path TEXT PRIMARY KEY, content TEXT NOT NULL, version BIGINT NOT NULL);
CREATE TABLE versions (path TEXT NOT NULL, version BIGINT NOT NULL, content TEXT NOT NULL, PRIMARY KEY (path, version));
CREATE TABLE audit (id BIGINT PRIMARY KEY, detail TEXT NOT NULL);";

/// The path of write `i`: a tenth of the writes go to files written before (an update).
fn path(i: usize) -> String {
    let file = if i % 10 == 9 { i / 10 } else { i };
    format!("/memories/notes/f{file}.md")
}

fn sqlite(writes: usize, synchronous: &str) -> Result<Stats> {
    let dir = tempfile::tempdir()?;
    let conn = rusqlite::Connection::open(dir.path().join("floor.db"))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.execute_batch(SCHEMA)?;
    let mut lat = Vec::with_capacity(writes);
    let started = Instant::now();
    for i in 0..writes {
        let t = Instant::now();
        let p = path(i);
        let tx =
            rusqlite::Transaction::new_unchecked(&conn, rusqlite::TransactionBehavior::Immediate)?;
        let version: i64 = tx.query_row(
            "INSERT INTO files (path, content, version) VALUES (?1, ?2, 1)
             ON CONFLICT (path) DO UPDATE SET content = excluded.content, version = files.version + 1
             RETURNING version",
            rusqlite::params![p, NOTE],
            |r| r.get(0),
        )?;
        tx.execute(
            "INSERT INTO versions (path, version, content) VALUES (?1, ?2, ?3)",
            rusqlite::params![p, version, NOTE],
        )?;
        tx.execute(
            "INSERT INTO audit (id, detail) VALUES (?1, ?2)",
            rusqlite::params![i as i64, AUDIT],
        )?;
        tx.commit()?;
        lat.push(t.elapsed());
    }
    Ok(stats(lat, started.elapsed()))
}

/// Returns the floor and the server's `synchronous_commit`.
async fn postgres_floor(writes: usize, admin: &str) -> Result<(Stats, String)> {
    let database = TestDatabase::create(Backend::Postgres, Some(admin)).await?;
    let mut conn = sqlx::PgConnection::connect(&database.url)
        .await
        .context("connecting to the floor's database")?;
    sqlx::raw_sql(SCHEMA).execute(&mut conn).await?;
    let (synchronous_commit,): (String,) = sqlx::query_as("SHOW synchronous_commit")
        .fetch_one(&mut conn)
        .await?;
    // Literals: the texts are this module's constants (no quotes in them), so the whole
    // transaction goes as one simple query, one round trip.
    let s = timed_batches(conn, writes, |i| {
        format!(
            "BEGIN;
             WITH f AS (INSERT INTO files (path, content, version) VALUES ('{p}', '{NOTE}', 1)
                        ON CONFLICT (path) DO UPDATE SET content = excluded.content, version = files.version + 1
                        RETURNING version)
             INSERT INTO versions (path, version, content) SELECT '{p}', version, '{NOTE}' FROM f;
             INSERT INTO audit (id, detail) VALUES ({i}, '{AUDIT}');
             COMMIT;",
            p = path(i)
        )
    })
    .await?;
    drop(database);
    Ok((s, synchronous_commit))
}

/// The floors of a durable write on this machine: one client committing, one transaction at
/// a time, the rows a write needs at the least (file, version, audit), then the rows a
/// memory-tool write writes in the server's schema, on SQLite with `synchronous = FULL` and
/// `NORMAL` and, with --postgres-url, on PostgreSQL in one round trip each.
#[derive(clap::Args)]
pub(crate) struct Floor {
    /// Writes per floor.
    #[arg(long, default_value_t = 2000)]
    writes: usize,
    /// Also on PostgreSQL (a fresh database is created through this admin URL).
    #[arg(long, env = "CONTEXTQ_BENCH_POSTGRES_URL")]
    postgres_url: Option<String>,
}

impl Floor {
    pub(crate) async fn run(self) -> Result<()> {
        let Floor {
            writes,
            postgres_url,
        } = self;
        run(writes, postgres_url).await
    }
}
