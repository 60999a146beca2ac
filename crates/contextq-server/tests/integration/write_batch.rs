//! The write transaction's two steps on a real database ([`Db::begin_with_read`],
//! [`Write::commit`]), on SQLite and PostgreSQL: values (inlined as literals on PostgreSQL, bound on SQLite) come back exactly as
//! they went in, a batch whose statement changes another number of rows than it must commits
//! nothing, and a refused write leaves nothing behind. A property test round-trips arbitrary
//! strings (quotes, `$` tags, backslashes, any Unicode, the longest values the contract allows)
//! through both of the write's queries.

use contextq_api::limits::{MAX_CONTENT_BYTES, MAX_EXTERNAL_ID_BYTES};
use contextq_server::db::{Batch, BatchError, Bind, Write};
use contextq_server::testing::TestDatabase;
use contextq_server::{Backend, Db, DbOptions};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use sqlx::Row;

async fn db(b: Backend) -> (TestDatabase, Db) {
    let database = TestDatabase::fresh(b).await;
    let db = database.open(&DbOptions::default()).await;
    sqlx::raw_sql("CREATE TABLE probe (id BIGINT PRIMARY KEY, body TEXT)")
        .execute(db.pool())
        .await
        .unwrap();
    (database, db)
}

async fn begin(db: &Db) -> (Write, Option<contextq_server::db::Row>) {
    db.begin_with_read(
        "SELECT 1 FROM probe WHERE id = $1 FOR UPDATE OFFSET 1",
        "SELECT COUNT(*) AS n FROM probe WHERE id >= $1",
        vec![Bind::Int(0)],
    )
    .await
    .unwrap()
}

async fn bodies(db: &Db) -> Vec<String> {
    sqlx::query("SELECT body FROM probe ORDER BY id")
        .fetch_all(db.pool())
        .await
        .unwrap()
        .iter()
        .map(|r| r.try_get::<String, _>("body").unwrap())
        .collect()
}

/// One row a value, ids 0, 1, 2, ...
fn inserts(values: &[impl AsRef<str>]) -> Batch {
    let mut batch = Batch::default();
    for (i, text) in values.iter().enumerate() {
        batch.push(
            "INSERT INTO probe (id, body) VALUES ($1, $2)",
            vec![Bind::Int(i as i64), Bind::Text(text.as_ref().to_string())],
            Some(1),
        );
    }
    batch
}

/// Text that would break naive quoting on either database.
const AWKWARD: &[&str] = &[
    "it's",
    "''",
    "back\\slash\\",
    "$$ dollar $cq$ $1 $tag$",
    "line\nbreak\r\ttab",
    "ünïcödé 🦀 \u{2028}",
    "'); DROP TABLE probe; --",
    "",
];

async fn values_come_back_exactly(b: Backend) {
    let (_database, db) = db(b).await;
    let (write, row) = begin(&db).await;
    let n: i64 = row.unwrap().try_get("n").unwrap();
    assert_eq!(n, 0);
    write.commit(inserts(AWKWARD)).await.unwrap();
    assert_eq!(bodies(&db).await, AWKWARD);
}

async fn a_wrong_row_count_commits_nothing(b: Backend) {
    let (_database, db) = db(b).await;
    let (write, _) = begin(&db).await;
    let mut batch = inserts(&["kept?"]);
    // Changes no row, but must change one.
    batch.push(
        "UPDATE probe SET body = $1 WHERE id = $2",
        vec![Bind::Text("x".into()), Bind::Int(99)],
        Some(1),
    );
    match write.commit(batch).await {
        Err(BatchError::Mismatch(_)) => {}
        other => panic!("expected a mismatch, got {other:?}"),
    }
    assert!(bodies(&db).await.is_empty(), "nothing committed");
    // The connection went back clean: the next write works.
    let (write, _) = begin(&db).await;
    write.commit(inserts(&["after"])).await.unwrap();
    assert_eq!(bodies(&db).await, ["after"]);
}

async fn an_aborted_write_leaves_nothing(b: Backend) {
    let (_database, db) = db(b).await;
    for _ in 0..20 {
        let (write, _) = begin(&db).await;
        write.abort().await;
    }
    // A database error inside the batch rolls back too (duplicate key).
    let (write, _) = begin(&db).await;
    let mut batch = Batch::default();
    for id in [5, 5] {
        batch.push(
            "INSERT INTO probe (id, body) VALUES ($1, $2)",
            vec![Bind::Int(id), Bind::Text("dup".into())],
            Some(1),
        );
    }
    assert!(matches!(
        write.commit(batch).await,
        Err(BatchError::Database(_))
    ));
    assert!(bodies(&db).await.is_empty());
    let (write, row) = begin(&db).await;
    assert_eq!(row.unwrap().try_get::<i64, _>("n").unwrap(), 0);
    write.abort().await;
}

/// One piece of awkward text: what breaks quoting (quotes, `$`, tag-like runs, backslashes) and
/// any character but NUL (refused before any query, [`contextq_server::db::has_nul`]).
fn piece() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("'".to_string()),
        Just("''".to_string()),
        Just("$".to_string()),
        Just("$$".to_string()),
        Just("$cq".to_string()),
        Just("\\".to_string()),
        Just("$1".to_string()),
        "cq[0-9a-f]{0,16}\\$?",
        any::<char>()
            .prop_filter("NUL is refused before any query", |c| *c != '\0')
            .prop_map(String::from),
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(piece(), 0..48).prop_map(|p| p.concat())
}

/// Writes `values` (the last also as the read's echo) in one batch and reads them back.
async fn round_trip(db: &Db, values: &[String]) -> Result<(), TestCaseError> {
    sqlx::raw_sql("DELETE FROM probe")
        .execute(db.pool())
        .await
        .unwrap();
    let echo = values.last().cloned().unwrap_or_default();
    let (write, row) = db
        .begin_with_read(
            "SELECT 1 FROM probe WHERE body = $1 FOR UPDATE",
            "SELECT $1 AS echo, $2 AS n",
            vec![Bind::Text(echo.clone()), Bind::Int(-1)],
        )
        .await
        .unwrap();
    let row = row.unwrap();
    prop_assert_eq!(row.try_get::<String, _>("echo").unwrap(), echo);
    write.commit(inserts(values)).await.unwrap();
    prop_assert_eq!(bodies(db).await, values);
    Ok(())
}

async fn arbitrary_strings_round_trip(b: Backend) {
    let (_database, db) = db(b).await;
    // The longest values the contract allows: a whole file, an external id.
    let longest = [
        "$cq'\\\u{1F980}".repeat(MAX_CONTENT_BYTES / 9),
        "'$".repeat(MAX_EXTERNAL_ID_BYTES / 2),
    ];
    for value in &longest {
        assert!(value.len() <= MAX_CONTENT_BYTES);
        round_trip(&db, std::slice::from_ref(value)).await.unwrap();
    }
    let handle = tokio::runtime::Handle::current();
    // 96 in CI; `PROPTEST_CASES` for the long runs of docs/reliability.md.
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let outcome = tokio::task::block_in_place(|| {
        runner.run(&prop::collection::vec(text(), 1..12), |values| {
            handle.block_on(round_trip(&db, &values))
        })
    });
    if let Err(e) = outcome {
        panic!("{b:?}: {e}");
    }
}

contextq_server::database_tests!(
    arbitrary_strings_round_trip,
    values_come_back_exactly,
    a_wrong_row_count_commits_nothing,
    an_aborted_write_leaves_nothing,
);
