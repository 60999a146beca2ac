//! SQLite: the search index's segments merged between writes rather than inside them.
//!
//! FTS5 writes each transaction's terms as a new segment, and by default (`automerge = 4`) the
//! write that completes a level's fourth segment merges them: a large file's edit paid for
//! merging everyone's postings, 20-30% of a 64 KiB edit (docs/benchmarks.md, "SQLite's page
//! size and FTS5's merges"). Migration 17 turns that off; this task merges instead, a bounded
//! step at a time (FTS5's `merge` command, [`STEP_PAGES`] pages of work at most), once at its
//! start and then whenever there were commits since its last step or its last step found more
//! to do, on the direct connection with this process's writer slot, in a transaction of its
//! own that does not flush (module `direct`, `merge_step`). A search in between reads a few
//! more segments; FTS5 still merges inside a write once a level holds `crisismerge` (16)
//! segments, so an index whose merger is off or behind stays bounded.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use super::direct::DirectConnection;

/// Default [`super::DbOptions::index_merge_interval`]: 100 ms.
pub const DEFAULT_INDEX_MERGE_INTERVAL: Duration = Duration::from_millis(100);

/// Pages of merge work in one step: the writer slot is held for about this many page writes
/// (a few milliseconds), so a write that arrives meanwhile waits no longer than that.
pub const STEP_PAGES: u32 = 64;

/// Every `interval`, a step of merging when there is reason to; ends when the direct
/// connection is closed or gone.
pub(super) async fn merge_in_background(
    direct: Weak<DirectConnection>,
    writer: Arc<tokio::sync::Mutex<Option<sqlx::AnyConnection>>>,
    commits: Arc<AtomicU64>,
    interval: Duration,
    synced: bool,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // A first step whatever: segments a process that exited left unmerged (a CLI's import)
    // are merged by the next one that stays.
    let (mut seen, mut more) = (commits.load(Ordering::Relaxed), true);
    loop {
        tick.tick().await;
        let now = commits.load(Ordering::Relaxed);
        if now == seen && !more {
            continue;
        }
        seen = now;
        let Some(direct) = direct.upgrade() else {
            return;
        };
        let slot = writer.clone().lock_owned().await;
        match direct.merge_index(slot, STEP_PAGES, synced).await {
            Ok(merged) => more = merged,
            Err(sqlx::Error::PoolClosed) => return,
            Err(e) => {
                more = false;
                tracing::warn!(error = %e, "merging the search index failed; it is tried again after the next write");
            }
        }
    }
}
