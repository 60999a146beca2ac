//! SQLite on mimalloc with its statistics off (`db::allocator`), in a test binary of its own:
//! the setting is the whole process's and must come before anything opens SQLite, which the
//! integration binary's tests, running in parallel, would race.
#![allow(unsafe_code)]

use contextq_server::db::allocator::sqlite_allocates_with_mimalloc;
use contextq_server::{AppState, Db, DbOptions, Plan, RunningServer, Scope, admin};
use rusqlite::ffi;
use serde_json::json;

#[tokio::test]
async fn sqlite_allocates_with_mimalloc_and_counts_nothing() {
    sqlite_allocates_with_mimalloc().expect("nothing has started SQLite yet");

    // A server's work on it: migrations, a tenant, a bulk write with its index, a search.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("contextq.db").display());
    let db = Db::connect(&url, &DbOptions::default()).await.unwrap();
    let made = admin::bootstrap(
        &db,
        "acme",
        Plan::Unlimited,
        "ws",
        &[Scope::Read, Scope::Write],
    )
    .await
    .unwrap();
    let server = RunningServer::bind("127.0.0.1:0", AppState::new(db.clone(), Default::default()))
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let contexts: Vec<_> = (0..200)
        .map(|i| json!({"externalId": format!("mem:ws/f{i}.md"), "workspace": "ws", "type": "reference", "content": format!("note {i} about the allocator")}))
        .collect();
    let r = http
        .post(format!("{}/api/contexts/bulk-upsert", server.url()))
        .bearer_auth(&made.key.api_key)
        .json(&json!({ "contexts": contexts }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let r = http
        .get(format!(
            "{}/api/contexts/search?q=allocator&limit=5",
            server.url()
        ))
        .bearer_auth(&made.key.api_key)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let found: serde_json::Value = r.json().await.unwrap();
    assert_eq!(found["hits"].as_array().map(Vec::len), Some(5));

    // SAFETY: SQLite's own functions on a block it allocated, freed once.
    let (used, size, good) = unsafe {
        let p = ffi::sqlite3_malloc(100);
        assert!(!p.is_null());
        let size = ffi::sqlite3_msize(p);
        ffi::sqlite3_free(p);
        (
            ffi::sqlite3_memory_used(),
            size,
            libmimalloc_sys::mi_good_size(100),
        )
    };
    assert_eq!(used, 0, "statistics off: SQLite counts no memory");
    // A block's size is mimalloc's size class for 100 bytes (112), not glibc's (104).
    assert_eq!(size as usize, good, "SQLite's blocks are mimalloc's");
    assert_ne!(good, 104, "mimalloc's size class differs from glibc's");

    // Too late now: SQLite refuses and keeps the allocator it runs on.
    assert_eq!(sqlite_allocates_with_mimalloc(), Err(ffi::SQLITE_MISUSE));
    server.stop().await.unwrap();
}

#[cfg(target_os = "linux")]
#[test]
fn transparent_huge_pages_are_off_after_the_call() {
    contextq_server::db::allocator::without_transparent_huge_pages().unwrap();
    assert!(rustix::thread::transparent_huge_pages_are_disabled().unwrap());
}
