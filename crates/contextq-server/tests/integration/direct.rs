//! SQLite's direct write connection (`db/direct.rs`), through [`Db`]: a write waits for
//! another connection's lock without blocking the runtime; a write given up while it waits
//! leaves no transaction open; a read while a write is open sees only what is committed; a
//! commit that runs here (no flush to disk) and one that runs on the connection's thread (a
//! flush) both commit, and both roll back a wrong row count; a flushing commit allowed to wait
//! where it was asked (`DbOptions::flush_on_calling_thread`) hands nothing to the thread on a
//! current-thread runtime and still goes there from a multi-thread one; a closed database refuses; two `Db`s on one file (two processes) write
//! alongside, each waiting for the other's lock.

use std::time::{Duration, Instant};

use contextq_server::db::{Batch, BatchError, Bind, Write};
use contextq_server::testing::TestDatabase;
use contextq_server::{Backend, Db, DbOptions};
use sqlx::Connection as _;

/// A database on `options` without the background index merge: its steps take the write lock
/// at times of their own (one right after opening), and these tests hold another connection
/// to "no busy wait" on that lock.
async fn db(options: &DbOptions) -> (TestDatabase, Db) {
    let database = TestDatabase::fresh(Backend::Sqlite).await;
    let mut options = options.clone();
    options.index_merge_interval = None;
    let db = database.open(&options).await;
    sqlx::raw_sql("CREATE TABLE probe (id BIGINT PRIMARY KEY, body TEXT)")
        .execute(db.pool())
        .await
        .unwrap();
    (database, db)
}

/// Another connection on the same file (as another process would be), with no busy wait.
async fn other(database: &TestDatabase) -> sqlx::SqliteConnection {
    let mut conn = sqlx::SqliteConnection::connect(&database.url)
        .await
        .unwrap();
    sqlx::raw_sql("PRAGMA busy_timeout = 0")
        .execute(&mut conn)
        .await
        .unwrap();
    conn
}

async fn begin(db: &Db) -> Result<Write, sqlx::Error> {
    db.begin_with_read("", "SELECT COUNT(*) AS n FROM probe", vec![])
        .await
        .map(|(write, _)| write)
}

fn insert(id: i64, body: &str) -> Batch {
    let mut batch = Batch::default();
    batch.push(
        "INSERT INTO probe (id, body) VALUES ($1, $2)",
        vec![Bind::Int(id), Bind::Text(body.into())],
        Some(1),
    );
    batch
}

async fn count(db: &Db) -> i64 {
    db.read_one("SELECT COUNT(*) AS n FROM probe", vec![])
        .await
        .unwrap()
        .unwrap()
        .try_get("n")
        .unwrap()
}

fn ordered() -> DbOptions {
    let mut options = DbOptions::default();
    options.sync_commits = false;
    options
}

#[tokio::test]
async fn a_write_waits_for_another_connections_lock_off_the_runtime() {
    let (database, db) = db(&DbOptions::default()).await;
    let mut other = other(&database).await;
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let writer = db.clone();
    let write = tokio::spawn(async move {
        let write = begin(&writer).await?;
        write
            .commit(insert(1, "after the lock"))
            .await
            .map_err(|e| sqlx::Error::Protocol(e.to_string()))
    });
    // This (single-threaded) runtime keeps running while the write waits.
    let started = Instant::now();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the runtime was blocked"
    );
    assert!(!write.is_finished(), "the write did not wait for the lock");
    sqlx::raw_sql("COMMIT").execute(&mut other).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), write)
        .await
        .expect("the write went on once the lock was free")
        .unwrap()
        .unwrap();
    assert_eq!(count(&db).await, 1);
}

#[tokio::test]
async fn a_write_given_up_while_waiting_leaves_no_transaction_open() {
    let (database, db) = db(&ordered()).await;
    let mut other = other(&database).await;
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .unwrap();
    let gave_up = tokio::time::timeout(Duration::from_millis(200), begin(&db)).await;
    assert!(gave_up.is_err(), "the write could not have begun");
    sqlx::raw_sql("COMMIT").execute(&mut other).await.unwrap();
    // The abandoned job begins once the lock is free (its busy handler polls at most every
    // 100 ms), finds nobody waiting, and rolls back: the lock is free again, and the other
    // connection gets it without waiting.
    tokio::time::sleep(Duration::from_millis(600)).await;
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut other)
        .await
        .expect("the direct connection kept the write lock");
    sqlx::raw_sql("ROLLBACK").execute(&mut other).await.unwrap();
    let write = begin(&db).await.unwrap();
    write.commit(insert(1, "next")).await.unwrap();
    assert_eq!(count(&db).await, 1);
}

#[tokio::test]
async fn a_read_while_a_write_is_open_sees_what_is_committed() {
    for options in [DbOptions::default(), ordered()] {
        let (_database, db) = db(&options).await;
        let write = begin(&db).await.unwrap();
        // Read elsewhere (the direct connection is in the write's transaction).
        assert_eq!(count(&db).await, 0);
        write.commit(insert(1, "one")).await.unwrap();
        assert_eq!(count(&db).await, 1);
        let row = db
            .read_one("SELECT body FROM probe WHERE id = $1", vec![Bind::Int(1)])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.try_get::<String, _>("body").unwrap(), "one");
        assert!(
            db.read_one("SELECT body FROM probe WHERE id = $1", vec![Bind::Int(2)])
                .await
                .unwrap()
                .is_none()
        );
        // A point read of a query with more rows than it takes leaves no read open behind it:
        // the log can still be truncated (a read left open would hold its snapshot).
        let write = begin(&db).await.unwrap();
        write.commit(insert(2, "two")).await.unwrap();
        let first = db
            .read_one("SELECT id FROM probe ORDER BY id", vec![])
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.try_get::<i64, _>("id").unwrap(), 1);
        assert_eq!(db.truncate_wal().await.unwrap(), Some(true));
    }
}

#[tokio::test]
async fn commits_here_and_on_the_thread_commit_and_roll_back_alike() {
    for options in [DbOptions::default(), ordered()] {
        let (_database, db) = db(&options).await;
        for id in 0..20 {
            let write = begin(&db).await.unwrap();
            write.commit(insert(id, "x")).await.unwrap();
        }
        assert_eq!(count(&db).await, 20);
        let mut batch = insert(100, "kept?");
        batch.push(
            "UPDATE probe SET body = $1 WHERE id = $2",
            vec![Bind::Text("y".into()), Bind::Int(999)],
            Some(1),
        );
        let write = begin(&db).await.unwrap();
        assert!(matches!(
            write.commit(batch).await,
            Err(BatchError::Mismatch(_))
        ));
        assert_eq!(count(&db).await, 20, "the wrong count committed nothing");
        // A statement the database refuses (a duplicate key) rolls back the same way, with
        // SQLite's code and message kept.
        let write = begin(&db).await.unwrap();
        match write.commit(insert(1, "dup")).await {
            Err(BatchError::Database(sqlx::Error::Database(e))) => {
                assert!(e.is_unique_violation(), "{e}");
                assert!(e.message().contains("UNIQUE"), "{e}");
            }
            other => panic!("expected a unique violation, got {other:?}"),
        }
        assert_eq!(count(&db).await, 20);
        // A write dropped before commit (a panic in between) is rolled back.
        drop(begin(&db).await.unwrap());
        let write = begin(&db).await.unwrap();
        write.commit(insert(21, "after")).await.unwrap();
        assert_eq!(count(&db).await, 21);
    }
}

#[tokio::test]
async fn a_parameter_without_a_value_is_an_error_not_null() {
    let (_database, db) = db(&ordered()).await;
    let write = begin(&db).await.unwrap();
    let mut batch = Batch::default();
    batch.push(
        "INSERT INTO probe (id, body) VALUES ($1, $2)",
        vec![Bind::Int(1)],
        Some(1),
    );
    assert!(matches!(
        write.commit(batch).await,
        Err(BatchError::Database(_))
    ));
    assert_eq!(count(&db).await, 0);
}

#[tokio::test]
async fn a_closed_database_refuses_writes_and_reads() {
    let (_database, db) = db(&DbOptions::default()).await;
    db.close().await;
    assert!(begin(&db).await.is_err());
    assert!(
        db.read_one("SELECT 1 AS n", vec![]).await.is_err(),
        "a read after close"
    );
}

/// Two `Db`s on one file (as two server processes would be), each with writers of its own
/// running at once: every write lands once, whichever waited for the other's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_databases_on_one_file_write_alongside() {
    write_alongside(&ordered(), &DbOptions::default()).await;
}

/// Two processes' writers on one file, each committing on its own runtime's one thread
/// (`flush_on_calling_thread`, the CLI's setting): a commit there never waits for a lock, so
/// neither blocks its runtime while the other holds the lock; a begin that meets the lock waits
/// on the connection's thread, and every write lands.
#[tokio::test]
async fn two_databases_committing_on_the_calling_thread_write_alongside() {
    let options = DbOptions::default().flush_on_calling_thread(true);
    write_alongside(&options, &options).await;
}

/// Two databases on one file (`first` opened with `a`, `second` with `b`), 4 tasks each writing
/// 25 rows at once, each yielding between its begin and its commit so that the other writer's
/// tasks run while it holds the lock: every write lands.
async fn write_alongside(a: &DbOptions, b: &DbOptions) {
    let database = TestDatabase::fresh(Backend::Sqlite).await;
    let first = database.open(a).await;
    sqlx::raw_sql("CREATE TABLE probe (id BIGINT PRIMARY KEY, body TEXT)")
        .execute(first.pool())
        .await
        .unwrap();
    let second = database.open(b).await;
    let mut tasks = Vec::new();
    for (n, db) in [first.clone(), second.clone()].into_iter().enumerate() {
        for w in 0..4i64 {
            let db = db.clone();
            tasks.push(tokio::spawn(async move {
                for i in 0..25i64 {
                    let id = (n as i64) * 1000 + w * 100 + i;
                    let write = begin(&db).await.unwrap();
                    tokio::task::yield_now().await;
                    write.commit(insert(id, "x")).await.unwrap();
                }
            }));
        }
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(60), t)
            .await
            .expect("the writes finished")
            .unwrap();
    }
    assert_eq!(count(&first).await, 200);
    assert_eq!(count(&second).await, 200);
}

/// Rows written by hand into the file (an attacker with write access, a broken tool): text that
/// is not UTF-8 and a number column holding text come back as decoding errors naming the
/// column, read on the direct connection, never as a panic or as a wrong value.
#[tokio::test]
async fn a_row_written_by_hand_is_a_decoding_error_not_a_panic() {
    let (_database, db) = db(&ordered()).await;
    sqlx::raw_sql(
        "INSERT INTO probe (id, body) VALUES (1, CAST(X'FF00FE' AS TEXT)); \
         INSERT INTO probe (id, body) VALUES ('not a number', 'x')",
    )
    .execute(db.pool())
    .await
    .unwrap();
    let row = db
        .read_one(
            "SELECT id, body FROM probe WHERE id = $1",
            vec![Bind::Int(1)],
        )
        .await
        .unwrap()
        .unwrap();
    let e = row.try_get::<String, _>("body").unwrap_err();
    assert!(matches!(e, sqlx::Error::ColumnDecode { .. }), "{e:?}");
    assert!(e.to_string().contains("body"), "{e}");
    let row = db
        .read_one(
            "SELECT id, body FROM probe WHERE body = $1",
            vec![Bind::Text("x".into())],
        )
        .await
        .unwrap()
        .unwrap();
    let e = row.try_get::<i64, _>("id").unwrap_err();
    assert!(
        e.to_string().contains("expected an integer, found text"),
        "{e}"
    );
}

/// 20 synced writes through `db`; how many hand-offs to the write connection's thread they
/// made, and how many commits.
async fn handoffs_of_twenty_writes(db: &Db) -> (u64, u64) {
    let (handoffs, commits) = (db.thread_handoffs(), db.commits());
    for id in 0..20 {
        let write = begin(db).await.unwrap();
        write.commit(insert(id, "x")).await.unwrap();
    }
    // A refused batch ends where a committed one does: the caller's thread, or the thread.
    let write = begin(db).await.unwrap();
    assert!(write.commit(insert(0, "dup")).await.is_err());
    assert_eq!(count(db).await, 20);
    (db.thread_handoffs() - handoffs, db.commits() - commits)
}

#[tokio::test]
async fn a_flushing_commit_goes_to_the_thread_unless_it_may_wait_here() {
    // The default: the caller's (here one-thread) runtime never waits for the disk.
    let (_database, store) = db(&DbOptions::default()).await;
    assert_eq!(handoffs_of_twenty_writes(&store).await, (21, 20));
    // Allowed to wait here, on a current-thread runtime: no hand-off.
    let (_database, store) = db(&DbOptions::default().flush_on_calling_thread(true)).await;
    assert_eq!(handoffs_of_twenty_writes(&store).await, (0, 20));
    // A commit that does not flush was always here.
    let (_database, store) = db(&ordered()).await;
    assert_eq!(handoffs_of_twenty_writes(&store).await, (0, 20));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_multi_thread_runtime_a_flushing_commit_still_goes_to_the_thread() {
    let (_database, store) = db(&DbOptions::default().flush_on_calling_thread(true)).await;
    // From a spawned task (a worker thread, as the server's handlers run) and from the
    // runtime's `block_on` thread alike: no worker waits for the disk.
    let spawned = {
        let store = store.clone();
        tokio::spawn(async move { handoffs_of_twenty_writes(&store).await })
    };
    assert_eq!(spawned.await.unwrap(), (21, 20));
    let (_database, store) = db(&DbOptions::default().flush_on_calling_thread(true)).await;
    assert_eq!(handoffs_of_twenty_writes(&store).await, (21, 20));
}
