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

use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use contextq_server::Backend;
use contextq_server::testing::TestDatabase;
use sqlx::Connection as _;

use crate::{Stats, stats};

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
        row(
            &format!("PostgreSQL (one round trip, synchronous_commit = {synchronous_commit})"),
            if synchronous_commit == "off" {
                "ordered"
            } else {
                "synced"
            },
            &s,
        );
    }
    Ok(())
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
    let mut lat = Vec::with_capacity(writes);
    let started = Instant::now();
    for i in 0..writes {
        let t = Instant::now();
        // Literals: the texts are this module's constants (no quotes in them), so the whole
        // transaction goes as one simple query, one round trip.
        let batch = format!(
            "BEGIN;
             WITH f AS (INSERT INTO files (path, content, version) VALUES ('{p}', '{NOTE}', 1)
                        ON CONFLICT (path) DO UPDATE SET content = excluded.content, version = files.version + 1
                        RETURNING version)
             INSERT INTO versions (path, version, content) SELECT '{p}', version, '{NOTE}' FROM f;
             INSERT INTO audit (id, detail) VALUES ({i}, '{AUDIT}');
             COMMIT;",
            p = path(i)
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(batch))
            .execute(&mut conn)
            .await?;
        lat.push(t.elapsed());
    }
    let wall = started.elapsed();
    conn.close().await?;
    drop(database);
    Ok((stats(lat, wall), synchronous_commit))
}
