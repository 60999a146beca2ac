//! SQLite's search index is merged between writes, never inside one (migration 17,
//! `db::merges`): a write adds its segment and leaves merging to the background task, which
//! merges the segments soon after, and the same queries find the same files before and after.

use crate::common;

use std::time::{Duration, Instant};

use common::{RW, TestServer};
use contextq_server::{Backend, DbOptions, Plan, ServerConfig};
use reqwest::StatusCode;
use serde_json::json;

/// Pages of the index's segments (FTS5's rows past its averages, 1, and structure, 10).
async fn index_pages(s: &TestServer) -> i64 {
    let row =
        s.db.read_one(
            "SELECT COUNT(*) AS n FROM context_fts_data WHERE id > 10",
            vec![],
        )
        .await
        .unwrap()
        .unwrap();
    row.try_get::<i64, _>("n").unwrap()
}

async fn found(c: &common::Api, q: &str) -> Vec<String> {
    let r = c
        .get(&format!(
            "/api/contexts/search?q={}&limit=100",
            common::seg(q)
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{q}: {:?}", r.body);
    common::strings(&r.body["hits"], "externalId")
}

/// `WRITES` files written one request each, with the background merge every `merges` (`None`:
/// off): the index's pages right after the writes, after the merge has had its time, and what
/// a few queries find.
async fn written(merges: Option<Duration>) -> (i64, i64, Vec<Vec<String>>) {
    const WRITES: usize = 15;
    let options = DbOptions::default().index_merge_interval(merges);
    let s = TestServer::start_with_options(Backend::Sqlite, ServerConfig::default(), options).await;
    let t = s.tenant(Plan::Unlimited, RW).await;
    let c = &t.client;
    for i in 0..WRITES {
        let r = c
            .post(
                "/api/contexts/bulk-upsert",
                json!({"contexts": [{"externalId": format!("mem:ws/f{i}.md"), "workspace": "ws", "type": "reference", "content": format!("note {i}: alpha beta{i} gamma")}]}),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    let after_writes = index_pages(&s).await;
    // The merger's steps, given time until the pages stop going down (at most 10 s).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut settled = after_writes;
    while merges.is_some() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = index_pages(&s).await;
        if now == settled && now < after_writes {
            break;
        }
        settled = now;
    }
    let queries = ["alpha", "beta7", "gamma", "note", "beta1*"];
    let mut hits = Vec::new();
    for q in queries {
        let mut h = found(c, q).await;
        h.sort();
        hits.push(h);
    }
    (after_writes, settled, hits)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_leave_merging_to_the_background() {
    let (unmerged, unmerged_later, plain) = written(None).await;
    // Each write's segment is there: no write merged (FTS5's `automerge` would have merged
    // them four at a time; `crisismerge` waits for 16).
    assert!(unmerged >= 15, "{unmerged} pages for 15 writes");
    assert_eq!(
        unmerged_later, unmerged,
        "nothing merges them without the task"
    );
    let (_, merged, with_merges) = written(Some(Duration::from_millis(10))).await;
    assert!(
        merged * 2 <= unmerged,
        "the background merge left {merged} pages of {unmerged}"
    );
    assert_eq!(with_merges, plain, "merging changes no answer");
    assert_eq!(plain[0].len(), 15);
    assert_eq!(plain[1], vec!["mem:ws/f7.md".to_string()]);
}

/// A bulk write whose terms pass FTS5's default 1 MiB of memory writes them as one segment
/// (migration 19: 8 MiB), not two: half the segments for the writer to merge after an import.
#[tokio::test]
async fn a_bulk_write_is_one_segment() {
    let options = DbOptions::default().index_merge_interval(None);
    let s = TestServer::start_with_options(Backend::Sqlite, ServerConfig::default(), options).await;
    let t = s.tenant(Plan::Unlimited, RW).await;
    // 1,000 files of 100 terms each from a vocabulary of 20,000: more than FTS5's
    // default 1 MiB of memory (two segments at that default).
    let contexts: Vec<_> = (0..1000)
        .map(|i| {
            let words: Vec<String> = (0..100)
                .map(|j| format!("w{}", (i * 7919 + j * 104_729) % 20_000))
                .collect();
            let content = format!("only{i} {}", words.join(" "));
            json!({"externalId": format!("mem:ws/bulk/f{i}.md"), "workspace": "ws", "type": "reference", "content": content})
        })
        .collect();
    let segments = || async {
        s.db.read_one(
            "SELECT COUNT(DISTINCT segid) AS n FROM context_fts_idx",
            vec![],
        )
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64, _>("n")
        .unwrap()
    };
    let before = segments().await;
    let r = t
        .client
        .post("/api/contexts/bulk-upsert", json!({ "contexts": contexts }))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        segments().await - before,
        1,
        "segments the bulk write added"
    );
    let hits = found(&t.client, "only999").await;
    assert_eq!(
        hits,
        vec!["mem:ws/bulk/f999.md".to_string()],
        "found after the write"
    );
}
