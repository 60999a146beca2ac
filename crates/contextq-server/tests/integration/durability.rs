//! `DbOptions::sync_commits`: SQLite commits flush the write-ahead log (`synchronous = FULL`,
//! the default) or leave it to checkpoints (`NORMAL`), on the pooled connections (here; the
//! direct connection commits run on is checked in `db::pool`'s unit tests, and the flushes
//! themselves are counted under strace in the CLI's `tests/integration/cli.rs`).

use contextq_server::{Db, DbOptions};

async fn synchronous(db: &Db) -> i64 {
    let mut reader = db.reader().await.unwrap();
    sqlx::query_scalar("PRAGMA synchronous")
        .fetch_one(&mut *reader)
        .await
        .unwrap()
}

#[tokio::test]
async fn commits_are_synced_unless_asked_otherwise() {
    for (options, want) in [
        (DbOptions::default(), 2),
        (DbOptions::default().sync_commits(false), 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("d.db").display());
        let db = Db::connect(&url, &options).await.unwrap();
        // A pooled connection ...
        assert_eq!(synchronous(&db).await, want);
        // ... and another, taken while the first is held.
        let _busy = db.reader().await.unwrap();
        assert_eq!(synchronous(&db).await, want);
        drop(_busy);
        db.close().await;
    }
}
