//! SQLite on mimalloc with its statistics off (`db::allocator`), in a test binary of its own
//! without the test harness (`harness = false`): the setting is the whole process's, is made
//! only while the process has one thread, and must come before anything opens SQLite; the
//! harness runs each test on a thread of its own.
#![allow(unsafe_code)]

use contextq_server::db::allocator::sqlite_allocates_with_mimalloc;
use contextq_server::{AppState, Db, DbOptions, Plan, RunningServer, Scope, admin};
use rusqlite::ffi;
use serde_json::json;

fn main() {
    // What a test runner asks of a harness (`cargo nextest` lists first): one test, not ignored.
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--list") {
        if !args.iter().any(|a| a == "--ignored") {
            println!("sqlite_allocator: test");
        }
        return;
    }
    #[cfg(target_os = "linux")]
    {
        a_process_with_another_thread_is_refused();
        sqlite_allocates_with_mimalloc().expect("one thread, and nothing has started SQLite yet");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(sqlite_allocates_with_mimalloc_and_counts_nothing());
        transparent_huge_pages_are_off_after_the_call();
        println!("sqlite_allocator: 3 checks passed");
    }
}

/// While another thread lives (one that could be inside SQLite), the setting is refused and
/// SQLite is left as it was: the later call still succeeds.
#[cfg(target_os = "linux")]
fn a_process_with_another_thread_is_refused() {
    let (stop, wait) = std::sync::mpsc::channel::<()>();
    let other = std::thread::spawn(move || wait.recv());
    assert_eq!(sqlite_allocates_with_mimalloc(), Err(ffi::SQLITE_MISUSE));
    drop(stop);
    other.join().unwrap().unwrap_err();
    // A joined thread's task is gone from /proc once the kernel has reaped it.
    for _ in 0..100 {
        if std::fs::read_dir("/proc/self/task").unwrap().count() == 1 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("the other thread is still listed");
}

/// After the setting: a server's work on SQLite, whose blocks are then mimalloc's and counted
/// nowhere.
async fn sqlite_allocates_with_mimalloc_and_counts_nothing() {
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
fn transparent_huge_pages_are_off_after_the_call() {
    contextq_server::db::allocator::without_transparent_huge_pages().unwrap();
    assert!(rustix::thread::transparent_huge_pages_are_disabled().unwrap());
}
