//! The write transaction's two steps on a real database ([`Db::begin_with_read`],
//! [`Write::commit`]), on SQLite and PostgreSQL: values inlined as literals come back exactly as
//! they went in, a batch whose statement changes another number of rows than it must commits
//! nothing, and a refused write leaves nothing behind.

use contextq_server::db::{Batch, BatchError, Bind, Write};
use contextq_server::testing::TestDatabase;
use contextq_server::{Backend, Db, DbOptions};
use sqlx::Row;

async fn db(b: Backend) -> (TestDatabase, Db) {
    let database = TestDatabase::fresh(b).await;
    let db = Db::connect(&database.url, &DbOptions::default())
        .await
        .unwrap();
    sqlx::raw_sql("CREATE TABLE probe (id BIGINT PRIMARY KEY, body TEXT)")
        .execute(db.pool())
        .await
        .unwrap();
    (database, db)
}

async fn begin(db: &Db) -> (Write, Option<sqlx::any::AnyRow>) {
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

async fn inlined_values_come_back_exactly(b: Backend) {
    let (_database, db) = db(b).await;
    let (write, row) = begin(&db).await;
    let n: i64 = row.unwrap().try_get("n").unwrap();
    assert_eq!(n, 0);
    let mut batch = Batch::default();
    for (i, text) in AWKWARD.iter().enumerate() {
        batch.push(
            "INSERT INTO probe (id, body) VALUES ($1, $2)",
            vec![Bind::Int(i as i64), Bind::Text(text.to_string())],
            Some(1),
        );
    }
    write.commit(batch).await.unwrap();
    assert_eq!(bodies(&db).await, AWKWARD);
}

async fn a_wrong_row_count_commits_nothing(b: Backend) {
    let (_database, db) = db(b).await;
    let (write, _) = begin(&db).await;
    let mut batch = Batch::default();
    batch.push(
        "INSERT INTO probe (id, body) VALUES ($1, $2)",
        vec![Bind::Int(1), Bind::Text("kept?".into())],
        Some(1),
    );
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
    let mut batch = Batch::default();
    batch.push(
        "INSERT INTO probe (id, body) VALUES ($1, $2)",
        vec![Bind::Int(2), Bind::Text("after".into())],
        Some(1),
    );
    write.commit(batch).await.unwrap();
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

contextq_server::database_tests!(
    inlined_values_come_back_exactly,
    a_wrong_row_count_commits_nothing,
    an_aborted_write_leaves_nothing,
);
