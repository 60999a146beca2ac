//! SQLite's side of the pool: WAL switched on (waiting out another process's lock), the
//! pragmas every connection runs, and the background checkpointer.

use super::*;

/// Puts a SQLite database in write-ahead-log mode (persistent in the file). Changing the mode
/// takes an exclusive lock that SQLite's busy timeout does not wait for, so when several
/// processes open a new database at once all but one find it busy: they try again, for as long
/// as the busy timeout would have waited.
pub(super) async fn use_wal(pool: &sqlx::AnyPool) -> Result<()> {
    let deadline = std::time::Instant::now() + crate::db::direct::BUSY_TIMEOUT;
    loop {
        match sqlx::query("PRAGMA journal_mode = WAL").execute(pool).await {
            Ok(_) => return Ok(()),
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Whether SQLite refused for another connection's lock (`SQLITE_BUSY` or `SQLITE_LOCKED`,
/// with their extended codes).
pub(super) fn is_busy(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(d)
        if d.code().and_then(|c| c.parse::<i32>().ok()).is_some_and(|c| matches!(c & 0xff, 5 | 6)))
}

/// Set on every SQLite connection.
pub(super) const SQLITE_PRAGMAS: &[&str] = &[
    // `direct::BUSY_TIMEOUT`.
    "PRAGMA busy_timeout = 30000",
    "PRAGMA foreign_keys = ON",
    // Freed content is overwritten with zeros, so that a file's old text, a pruned or a
    // redacted version does not linger in free space of the database file (docs/history.md).
    "PRAGMA secure_delete = ON",
    // A write-ahead log that grew under a burst of writes is cut back to 16 MiB when it starts
    // over (it is rewound, not truncated, otherwise).
    "PRAGMA journal_size_limit = 16777216",
];

/// The page cache of the connection that writes (SQLite's default is 2 MiB): a bulk upsert of a
/// thousand files dirties more pages than that, and a full cache spills them to the log before
/// the commit and reads index pages back from the file (docs/benchmarks.md, "Import at
/// scale"). Pages are allocated as they are used, so a small database never holds this much.
pub(super) const WRITER_CACHE: &str = "PRAGMA cache_size = -65536";

/// Every pragma a SQLite connection is set up with: [`SQLITE_PRAGMAS`], how it commits
/// ([`DbOptions::sync_commits`]): flushing the write-ahead log before a commit is answered, or
/// leaving the flush to checkpoints (still atomic and consistent), and whether a commit may run
/// a checkpoint itself (not when they run in the background, [`DbOptions::checkpoint_interval`]).
pub(super) fn sqlite_setup(
    sync_commits: bool,
    background_checkpoints: bool,
) -> impl Iterator<Item = &'static str> {
    let synchronous = if sync_commits {
        "PRAGMA synchronous = FULL"
    } else {
        "PRAGMA synchronous = NORMAL"
    };
    let checkpoints = if background_checkpoints {
        "PRAGMA wal_autocheckpoint = 0"
    } else {
        "PRAGMA wal_autocheckpoint = 1000"
    };
    SQLITE_PRAGMAS
        .iter()
        .copied()
        .chain([synchronous, checkpoints])
}

/// Default [`DbOptions::checkpoint_interval`]: 50 ms.
pub const DEFAULT_CHECKPOINT_INTERVAL: Duration = Duration::from_millis(50);

/// SQLite: the write-ahead log's length, in pages, past which the background checkpoint runs
/// with this process's writer slot held, so that it completes and the next write starts the
/// log over (a checkpoint racing writers never catches up, and the log would only grow).
pub(super) const CHECKPOINT_RESET_PAGES: i64 = 4000;

/// SQLite: every `interval`, when there were commits since the last one, a PASSIVE checkpoint
/// (committed pages copied from the write-ahead log into the database file, without waiting for
/// readers) on a pooled connection, beside the writes; once the log is past
/// [`CHECKPOINT_RESET_PAGES`], the next one holds the writer slot. Ends when the pool is closed.
pub(super) async fn checkpoint_in_background(
    pool: AnyPool,
    writer: std::sync::Arc<tokio::sync::Mutex<Option<sqlx::AnyConnection>>>,
    checkpointing: std::sync::Arc<tokio::sync::Mutex<()>>,
    commits: std::sync::Arc<std::sync::atomic::AtomicU64>,
    interval: Duration,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let (mut done, mut log_pages) = (0, 0i64);
    loop {
        tick.tick().await;
        if pool.is_closed() {
            return;
        }
        let now = commits.load(std::sync::atomic::Ordering::Relaxed);
        if now == done {
            continue;
        }
        let _slot = if log_pages > CHECKPOINT_RESET_PAGES {
            Some(writer.lock().await)
        } else {
            None
        };
        let _checkpointing = checkpointing.lock().await;
        // One row: busy, pages in the log, pages checkpointed.
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&pool)
            .await
        {
            Ok(row) => {
                done = now;
                log_pages = sqlx::Row::try_get::<i64, _>(&row, 1).unwrap_or(0);
            }
            Err(e) => {
                tracing::warn!(error = %e, "the background checkpoint failed; it runs again at the next tick")
            }
        }
    }
}
