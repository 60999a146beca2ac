//! Crash: kill -9 the server in the middle of a write load, restart it on the same database,
//! and check that every acknowledged write is there, nothing is half-written, and the audit
//! chain verifies. On SQLite and (when configured) PostgreSQL. `CRASH_ROUNDS` repeats it.

use crate::common;

use std::collections::HashMap;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{ALL, Api, seg};
use contextq_server::Backend;
use contextq_server::Plan;
use contextq_server::testing::TestDatabase;
use contextq_server::{Db, admin};
use reqwest::StatusCode;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_contextq-server");

/// Acknowledged state: externalId -> (version, writer, write number).
type Acked = Arc<Mutex<HashMap<String, (i64, usize, usize)>>>;

fn spawn_server(db: &str) -> (Child, String) {
    contextq_server::testing::spawn_serving(
        Command::new(BIN)
            .args(["serve", "--database-url", db, "--listen", "127.0.0.1:0"])
            .env("RUST_LOG", "warn"),
    )
}

/// Content of write `n` by writer `w`: long enough that a torn write would show.
fn body(w: usize, n: usize) -> String {
    format!("writer {w} write {n}\n{}", "x".repeat(4096 + n))
}

async fn acknowledged_writes_survive_kill_9(b: Backend) {
    let rounds: usize = std::env::var("CRASH_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    {
        for round in 0..rounds {
            let database = TestDatabase::fresh(b).await;
            let url = database.url.clone();
            let db = Db::connect(&url, &Default::default()).await.unwrap();
            let tenant = admin::create_tenant(&db, "crash", Plan::Unlimited)
                .await
                .unwrap();
            let key = admin::create_key(&db, &tenant, None, ALL).await.unwrap();
            admin::create_workspace(&db, &tenant, "ws", "ws")
                .await
                .unwrap();
            db.close().await;

            let (mut child, base) = spawn_server(&url);
            let api = Api::new(&base, &key.api_key);
            let acked: Acked = Default::default();
            let progress = Arc::new((AtomicUsize::new(0), tokio::sync::Notify::new()));
            let mut writers = Vec::new();
            for w in 0..4 {
                let api = api.clone();
                let acked = acked.clone();
                let progress = progress.clone();
                writers.push(tokio::spawn(async move {
                    for n in 0.. {
                        // Alternate creating new contexts and updating this writer's first one.
                        let ext = if n % 2 == 0 { format!("w{w}-n{n}") } else { format!("w{w}-n0") };
                        let r = tokio::time::timeout(
                            Duration::from_secs(5),
                            api.http
                                .post(format!("{}/api/contexts/bulk-upsert", api.base))
                                .bearer_auth(&api.key)
                                .json(&json!({"contexts": [{"externalId": ext, "workspace": "ws", "type": "reference", "content": body(w, n)}]}))
                                .send(),
                        )
                        .await;
                        let Ok(Ok(resp)) = r else { return n };
                        if resp.status() != StatusCode::OK {
                            return n;
                        }
                        let Ok(v) = resp.json::<serde_json::Value>().await else { return n };
                        let version = v["results"][0]["version"].as_i64().unwrap();
                        acked.lock().unwrap().insert(ext, (version, w, n));
                        progress.0.fetch_add(1, Ordering::SeqCst);
                        progress.1.notify_one();
                    }
                    unreachable!()
                }));
            }
            // Let the load run until it has acknowledged a number of writes (more every
            // round), then kill -9 in the middle of it.
            let target = 100 + 50 * round;
            tokio::time::timeout(Duration::from_secs(60), async {
                while progress.0.load(Ordering::SeqCst) < target {
                    progress.1.notified().await;
                }
            })
            .await
            .expect("the load acknowledged writes");
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            // Each writer stops at its first failed write: n acknowledged, n + 1 attempted.
            let (mut acknowledged, mut attempted) = (0, 0);
            for w in writers {
                let n = w.await.unwrap();
                acknowledged += n;
                attempted += n + 1;
            }
            let acked = acked.lock().unwrap().clone();
            assert!(
                acked.len() > 4,
                "{b:?}: the load acknowledged too little before the kill: {}",
                acked.len()
            );

            let (mut child, base) = spawn_server(&url);
            let api = Api::new(&base, &key.api_key);
            for (ext, (version, w, n)) in &acked {
                let r = api
                    .get(&format!("/api/contexts/by-external/{}", seg(ext)))
                    .await;
                assert_eq!(
                    r.status,
                    StatusCode::OK,
                    "{b:?}: acknowledged {ext} is missing"
                );
                let got_version = r.body["version"].as_i64().unwrap();
                let content = r.body["content"].as_str().unwrap();
                // Never torn: exactly one write's full content. Never older than acknowledged:
                // at most one later write (in flight at the kill) may have landed too.
                let later = (*n..*n + 3).any(|m| content == body(*w, m));
                assert!(
                    later,
                    "{b:?}: {ext} holds content that no single write produced"
                );
                assert!(
                    got_version == *version || got_version == *version + 1,
                    "{b:?}: {ext} at {got_version}, acked {version}"
                );
            }
            let db = Db::connect(&url, &Default::default()).await.unwrap();
            let v = admin::verify_audit(&db, None).await.unwrap();
            assert!(v.ok(), "{b:?}: {v:?}");
            eprintln!(
                "crash {b:?} round {round}: {attempted} writes attempted, {acknowledged} acknowledged (to {} contexts) before kill -9, all present, audit chain of {} rows verifies",
                acked.len(),
                v.rows
            );
            db.close().await;
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }
}

contextq_server::database_tests!(acknowledged_writes_survive_kill_9);
