//! A revoked key is refused by the next request it makes. The server caches key lookups only
//! while it hears of every revocation (PostgreSQL: `LISTEN`; SQLite: a signal file rewritten
//! after each revocation commits); the revocation is made here through another pool, as
//! `contextq-server admin revoke-key` in another process does. Key changes racing each other
//! (revoke, expire, delete) each answer whether they changed the key, never an error.

use std::time::Duration;

use contextq_server::testing::TestDatabase;
use contextq_server::{AppState, Backend, DbOptions, Plan, RunningServer, Scope, admin};
use serde_json::json;

/// Waits (up to 30 s) until `done` holds.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..3000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting until {what}");
}

async fn a_revoked_key_is_refused_by_its_next_request(b: Backend) {
    let database = TestDatabase::fresh(b).await;
    let db = database.open(&DbOptions::default()).await;
    let state = AppState::new(db.clone(), Default::default());
    let cache = state.key_cache.clone();
    let server = RunningServer::bind("127.0.0.1:0", state).await.unwrap();
    let tenant = admin::create_tenant(&db, "t", Plan::Free).await.unwrap();
    admin::create_workspace(&db, &tenant, "ws", "ws")
        .await
        .unwrap();
    let key = admin::create_key(&db, &tenant, None, &[Scope::Read, Scope::Write])
        .await
        .unwrap();
    until("the server hears revocations", || cache.is_trusted()).await;
    let http = reqwest::Client::new();
    let write = |n: usize| {
        http.post(format!("{}/api/contexts/bulk-upsert", server.url()))
            .bearer_auth(&key.api_key)
            .json(&json!({"contexts": [{"externalId": format!("k{n}"), "workspace": "ws", "type": "note", "content": "x"}]}))
            .send()
    };
    let read = || {
        http.get(format!("{}/api/contexts", server.url()))
            .bearer_auth(&key.api_key)
            .send()
    };
    // Works, and the lookup is now cached: the key is found without the database.
    for n in 0..3 {
        assert_eq!(write(n).await.unwrap().status().as_u16(), 200);
        assert_eq!(read().await.unwrap().status().as_u16(), 200);
    }
    let hash = contextq_server::auth::hash_key(&key.api_key);
    assert!(cache.get(&hash).is_some(), "cached");
    let clears = cache.clears();
    let other = database.open(&DbOptions::default()).await;
    assert!(admin::revoke_key(&other, &key.key_id).await.unwrap());
    if b == Backend::Postgres {
        // The notification arrives asynchronously; on SQLite the next lookup sees the signal.
        until("the revocation is heard", || cache.clears() > clears).await;
    }
    let w = write(99).await.unwrap();
    assert_eq!(w.status().as_u16(), 401);
    assert_eq!(read().await.unwrap().status().as_u16(), 401);
    // Nothing was written with the revoked key.
    let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM contexts WHERE external_id = 'k99'")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(rows, 0);
    server.stop().await.unwrap();
}

/// Revocations, expiries and a delete of one key at once, twenty times: each answers whether
/// it changed the key (a change that lost the race to another is `false`, never an error), and
/// the key's audit rows are exactly the changes that said `true`.
async fn key_changes_racing_each_other_answer_true_or_false(b: Backend) {
    let database = TestDatabase::fresh(b).await;
    let db = database.open(&DbOptions::default()).await;
    let tenant = admin::create_tenant(&db, "t", Plan::Free).await.unwrap();
    for round in 0..20 {
        let key = admin::create_key(&db, &tenant, None, &[Scope::Read])
            .await
            .unwrap();
        let hour = Duration::from_secs(3600);
        let id = key.key_id.as_str();
        let (revoked, expired, deleted, revoked_again, expired_again) = tokio::join!(
            admin::revoke_key(&db, id),
            admin::expire_key(&db, id, hour),
            async {
                // Some rounds delete the key too.
                if round % 4 == 0 {
                    admin::delete_key(&db, id).await
                } else {
                    Ok(false)
                }
            },
            admin::revoke_key(&db, id),
            admin::expire_key(&db, id, hour),
        );
        let said: Vec<bool> = [revoked, expired, deleted, revoked_again, expired_again]
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| panic!("round {round}: {e}")))
            .collect();
        let rows: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM activity_logs WHERE entity_type = 'key' AND entity_id = $1 \
             AND action IN ('key.revoke', 'key.expire', 'key.delete')",
        )
        .bind(id.to_string())
        .fetch_one(db.pool())
        .await
        .unwrap();
        let changed = said.iter().filter(|t| **t).count();
        assert_eq!(rows as usize, changed, "round {round}: {said:?}");
        assert!(
            said[0] || said[3] || said[2],
            "round {round}: the key was neither revoked nor deleted: {said:?}"
        );
    }
}

contextq_server::database_tests!(
    a_revoked_key_is_refused_by_its_next_request,
    key_changes_racing_each_other_answer_true_or_false
);
