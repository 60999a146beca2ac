//! SQLite's write-ahead log checkpointed in the background (`DbOptions::checkpoint_interval`):
//! committed pages reach the database file without any write running a checkpoint, and under
//! writes that never pause the log still starts over, so it stays bounded. With the option off,
//! SQLite's own checkpoint (every 1,000 pages, in the committing write) is what runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use contextq_server::db::{Batch, Bind};
use contextq_server::testing::TestDatabase;
use contextq_server::{Backend, Db, DbOptions};

async fn db(options: DbOptions) -> (TestDatabase, Db, PathBuf) {
    let database = TestDatabase::fresh(Backend::Sqlite).await;
    let db = database.open(&options).await;
    sqlx::raw_sql("CREATE TABLE probe (id BIGINT PRIMARY KEY, body TEXT)")
        .execute(db.pool())
        .await
        .unwrap();
    let signal = db.revocations_file().expect("SQLite");
    let file = PathBuf::from(signal.to_string_lossy().trim_end_matches("-revocations"));
    (database, db, file)
}

/// Commits one row of `bytes` bytes at `id` through the write path (`Write::commit`).
async fn write(db: &Db, id: i64, bytes: usize) {
    let (write, _) = db
        .begin_with_read(
            "SELECT 1 FROM probe WHERE id = $1 FOR UPDATE",
            "SELECT COUNT(*) AS n FROM probe WHERE id = $1",
            vec![Bind::Int(id)],
        )
        .await
        .unwrap();
    let mut batch = Batch::default();
    batch.push(
        "INSERT INTO probe (id, body) VALUES ($1, $2)",
        vec![Bind::Int(id), Bind::Text("x".repeat(bytes))],
        Some(1),
    );
    write.commit(batch).await.unwrap();
}

fn size(path: &Path, suffix: &str) -> u64 {
    let mut p = path.as_os_str().to_owned();
    p.push(suffix);
    std::fs::metadata(PathBuf::from(p)).map_or(0, |m| m.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_pages_reach_the_database_file_in_the_background() {
    let options = DbOptions::default().checkpoint_interval(Some(Duration::from_millis(10)));
    let (_database, db, file) = db(options).await;
    let before = size(&file, "");
    // 1 MiB: far below SQLite's own threshold (1,000 pages), so only the background copies it.
    for id in 0..32 {
        write(&db, id, 32 * 1024).await;
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while size(&file, "") < before + 1024 * 1024 {
        assert!(
            std::time::Instant::now() < deadline,
            "the database file stayed at {} bytes",
            size(&file, "")
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_background_checkpoints_a_small_log_stays_in_the_log() {
    let options = DbOptions::default().checkpoint_interval(None);
    let (_database, db, file) = db(options).await;
    let before = size(&file, "");
    for id in 0..32 {
        write(&db, id, 32 * 1024).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(size(&file, ""), before, "nothing checkpointed a 1 MiB log");
    assert!(size(&file, "-wal") > 1024 * 1024);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_stays_bounded_under_writes_that_never_pause() {
    let options = DbOptions::default().checkpoint_interval(Some(Duration::from_millis(10)));
    let (_database, db, file) = db(options).await;
    // 64 MiB written without a pause; a checkpoint racing the writes would never complete, and
    // the log would never start over.
    let mut largest = 0;
    for id in 0..2048 {
        write(&db, id, 32 * 1024).await;
        largest = largest.max(size(&file, "-wal"));
    }
    assert!(
        largest < 40 * 1024 * 1024,
        "the log reached {largest} bytes for 64 MiB written"
    );
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM probe")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(rows, 2048);
}

/// A truncation (after a redaction) is never refused because the background checkpoint of this
/// process happened to be running: SQLite refuses a second checkpoint at once, without waiting,
/// so the two take turns. The race is shown to happen (truncations that found the checkpoint
/// running and waited), not assumed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_never_meets_this_process_background_checkpoint() {
    let options = DbOptions::default().checkpoint_interval(Some(Duration::from_millis(1)));
    let (_database, db, file) = db(options).await;
    let mut refused = 0;
    for id in 0..300 {
        write(&db, id, 256 * 1024).await;
        // Let the background checkpoint start on this commit's pages (its tick is 1 ms).
        tokio::time::sleep(Duration::from_micros(600 + (id as u64 % 11) * 120)).await;
        if db.truncate_wal().await.unwrap() != Some(true) {
            refused += 1;
        }
    }
    assert_eq!(refused, 0, "truncations refused");
    assert_eq!(size(&file, "-wal"), 0);
    let met = db.truncations_that_waited();
    assert!(
        met > 0,
        "no truncation met the background checkpoint in 300 tries"
    );
    eprintln!("{met} of 300 truncations met the background checkpoint and waited");
}
