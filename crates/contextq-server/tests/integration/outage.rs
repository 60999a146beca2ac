//! A database outage is an answer, not an internal error: with PostgreSQL behind a proxy of
//! this test's own that can cut every connection, refuse new ones, or cut a connection at a
//! write's `COMMIT` (before or after forwarding it), the server answers 503 `unavailable` with
//! `Retry-After` while the database is gone (an unknown key too: never a 401), `/ready` is 503
//! and `/health` 200, it serves again once the database is back without a restart, and a write
//! whose `COMMIT` lost its connection is a 500 (its outcome unknown), never a 503 (which says
//! nothing was done). PostgreSQL only: SQLite is a file in the server's process.

use std::time::{Duration, Instant};

use contextq_server::testing::{OutageMode as Mode, TestServer};
use contextq_server::{Plan, Scope, admin};
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common;
use common::Api;

fn upsert(external_id: &str, content: &str) -> serde_json::Value {
    json!({"contexts": [{"externalId": external_id, "workspace": "ws", "type": "reference", "content": content}]})
}

/// Asserts a 503 `unavailable` with `Retry-After`.
/// The server's `/metrics` page.
async fn metrics_of(server: &TestServer) -> String {
    let page = reqwest::get(format!("{}/metrics", server.url()))
        .await
        .unwrap();
    page.text().await.unwrap()
}

/// `a.md` written while the database is there.
async fn write_a(api: &Api) {
    let reply = api
        .post("/api/contexts/bulk-upsert", upsert("a.md", "one"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
}

/// A read of `a.md` and a write of `b.md`, both refused as unavailable.
async fn read_and_write_unavailable(api: &Api) {
    assert_unavailable(&api.get("/api/contexts/by-external/a.md").await, "a read");
    let write = api
        .post("/api/contexts/bulk-upsert", upsert("b.md", "two"))
        .await;
    assert_unavailable(&write, "a write");
}

fn assert_unavailable(reply: &common::Reply, what: &str) {
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{what}: {:?}",
        reply.body
    );
    assert_eq!(reply.code(), "unavailable", "{what}: {:?}", reply.body);
    assert_eq!(
        reply
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("1"),
        "{what}"
    );
}

/// Sends `request` until it answers anything but 503 (at most `within`); the answer.
async fn once_back<F, Fut>(within: Duration, mut request: F) -> common::Reply
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = common::Reply>,
{
    let started = Instant::now();
    loop {
        let reply = request().await;
        if reply.status != StatusCode::SERVICE_UNAVAILABLE || started.elapsed() > within {
            return reply;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
async fn a_database_outage_is_503_and_the_server_serves_again_after_it() {
    let (server, proxy) = TestServer::behind_outage_proxy(Duration::from_secs(3)).await;
    let db = server.db.clone();
    let key = server
        .tenant(Plan::Unlimited, &[Scope::Read, Scope::Write], "ws")
        .await;
    let api = Api::new(server.url(), &key.api_key);
    write_a(&api).await;

    // The database is gone: every request is a 503 `unavailable` with Retry-After, an unknown
    // key too (a 401 would tell its client the key is wrong).
    proxy.set(Mode::Down);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..3 {
        read_and_write_unavailable(&api).await;
        assert_unavailable(
            &api.delete("/api/contexts/by-external/a.md", None).await,
            "a delete",
        );
        let stranger = api.with_key(&format!("sk_live_{}", "0".repeat(40)));
        assert_unavailable(&stranger.get("/api/contexts").await, "an unknown key");
    }
    assert!(db.outage().is_on());
    // /ready answers within its bound (a probe with a 1.5 s timeout sees a 503, not a timeout:
    // the pool would wait 3 s here), twice (the second from the cached probe, with its age).
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_millis(1500))
        .build()
        .unwrap();
    for _ in 0..2 {
        let ready = probe
            .get(format!("{}/ready", server.url()))
            .send()
            .await
            .expect("/ready answers within 1.5 s during an outage");
        assert_eq!(ready.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body: serde_json::Value = ready.json().await.unwrap();
        assert!(body["probeAgeMs"].is_u64(), "{body}");
        assert!(
            body["reasons"][0]
                .as_str()
                .unwrap()
                .starts_with("the database does not answer"),
            "{body}"
        );
    }
    // A flood of /ready (100 at once) during the outage: each answered 503 within the same
    // bound, none waiting behind the others' probes (one probe at a time, the rest answered
    // its result).
    let flood: Vec<_> = (0..100)
        .map(|_| {
            let (probe, url) = (probe.clone(), format!("{}/ready", server.url()));
            tokio::spawn(async move { probe.get(url).send().await.map(|r| r.status()) })
        })
        .collect();
    for answer in flood {
        assert_eq!(
            answer.await.unwrap().expect("answered within 1.5 s"),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
    let metrics = metrics_of(&server).await;
    assert!(metrics.contains("\ncontextq_db_up 0\n"), "{metrics}");
    assert!(
        metrics.contains("\ncontextq_db_unavailable_requests_total 12\n"),
        "the 12 refused requests: {metrics}"
    );
    let health = reqwest::get(format!("{}/health", server.url()))
        .await
        .unwrap();
    assert_eq!(
        health.status(),
        StatusCode::OK,
        "liveness does not need the database"
    );

    // Back: served again without a restart; nothing the refused writes asked was done.
    proxy.set(Mode::Up);
    let reply = once_back(Duration::from_secs(10), || {
        api.get("/api/contexts/by-external/a.md")
    })
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    assert_eq!(reply.body["content"], "one");
    assert_eq!(
        api.get("/api/contexts/by-external/b.md").await.status,
        StatusCode::NOT_FOUND
    );
    assert!(!db.outage().is_on(), "an answered request ends the outage");
    // The probe cached during the outage is at most a second old.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let ready = reqwest::get(format!("{}/ready", server.url()))
        .await
        .unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    // Writes serve again at once: the first write after the outage meets a write connection
    // left idle through it, finds it dead before anything was sent that commits, and starts
    // again on a new one (never a 503 once the database answers).
    let reply = api
        .post("/api/contexts/bulk-upsert", upsert("w.md", "back"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    let metrics = metrics_of(&server).await;
    assert!(metrics.contains("\ncontextq_db_up 1\n"), "{metrics}");
    // An outage that only reads met: the write connections idle through it are all cut, and
    // still the first write after it is served.
    proxy.set(Mode::Down);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_unavailable(&api.get("/api/contexts/by-external/a.md").await, "a read");
    proxy.set(Mode::Up);
    let reply = once_back(Duration::from_secs(10), || {
        api.get("/api/contexts/by-external/a.md")
    })
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);
    let reply = api
        .post("/api/contexts/bulk-upsert", upsert("w2.md", "back"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{:?}", reply.body);

    // A write whose COMMIT never reached the database: the server cannot know that, so the
    // answer is a 500 (outcome unknown), not a 503; and indeed nothing was committed.
    proxy.set(Mode::CutBeforeCommit);
    let reply = api
        .post("/api/contexts/bulk-upsert", upsert("c.md", "three"))
        .await;
    assert_eq!(
        reply.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{:?}",
        reply.body
    );
    assert_eq!(reply.code(), "internal");
    proxy.set(Mode::Up);
    let reply = once_back(Duration::from_secs(10), || {
        api.get("/api/contexts/by-external/c.md")
    })
    .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{:?}", reply.body);

    // A keyed write whose COMMIT was applied and whose answer was lost: a 500; asked again
    // with its key once the database is back, the recorded outcome, applied once.
    let create_d = || {
        api.keyed(
            Method::POST,
            "/api/contexts/bulk-upsert",
            Some(upsert("d.md", "four")),
            None,
            Some("k-d"),
        )
    };
    proxy.set(Mode::CutAfterCommit);
    let reply = create_d().await;
    assert_eq!(
        reply.status,
        StatusCode::INTERNAL_SERVER_ERROR,
        "{:?}",
        reply.body
    );
    proxy.set(Mode::Up);
    let again = once_back(Duration::from_secs(10), create_d).await;
    assert_eq!(again.status, StatusCode::OK, "{:?}", again.body);
    assert_eq!(
        again
            .headers
            .get("idempotency-replayed")
            .and_then(|v| v.to_str().ok()),
        Some("true"),
        "the first attempt had committed"
    );
    let versions = api.get("/api/contexts/by-external/d.md/versions").await;
    assert_eq!(versions.status, StatusCode::OK, "{:?}", versions.body);
    assert_eq!(
        versions.body["versions"].as_array().map(Vec::len),
        Some(1),
        "{:?}",
        versions.body
    );

    // A key revoked after the outage is refused: the revocation listener reconnected (or the
    // server looks keys up while it has not).
    admin::revoke_key(&db, &key.key_id).await.unwrap();
    let refused = once_back(Duration::from_secs(10), || async {
        let r = api.get("/api/contexts").await;
        if r.status == StatusCode::OK {
            // Not heard yet: ask again.
            common::Reply {
                status: StatusCode::SERVICE_UNAVAILABLE,
                ..r
            }
        } else {
            r
        }
    })
    .await;
    assert_eq!(
        refused.status,
        StatusCode::UNAUTHORIZED,
        "{:?}",
        refused.body
    );
    server.stop().await;
}

/// What an operator pages on, from the binary's JSON log (no `RUST_LOG`): an outage is one
/// `WARN` when it starts and one `INFO` when it ends (with the count of refused requests),
/// never an `ERROR` per refused request, and every line of the log is JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
async fn an_outage_is_one_warning_and_one_all_clear_in_the_log() {
    use std::io::Read as _;
    const BIN: &str = env!("CARGO_BIN_EXE_contextq-server");
    let database =
        contextq_server::testing::TestDatabase::fresh(contextq_server::Backend::Postgres).await;
    let out = std::process::Command::new(BIN)
        .args([
            "admin",
            "--database-url",
            &database.url,
            "bootstrap",
            "--tenant",
            "t",
            "--workspace",
            "ws",
        ])
        .output()
        .unwrap();
    let key = common::bootstrapped_key(&out);
    let proxy = contextq_server::testing::OutageProxy::in_front_of(&database.url).await;
    let (mut child, url) = contextq_server::testing::spawn_serving_logged(
        std::process::Command::new(BIN)
            .args([
                "--log-format",
                "json",
                "serve",
                "--database-url",
                proxy.url(),
            ])
            .args(["--listen", "127.0.0.1:0"])
            .env_remove("RUST_LOG"),
        std::process::Stdio::piped(),
    );
    let api = Api::new(&url, &key);
    write_a(&api).await;
    proxy.set(Mode::Down);
    tokio::time::sleep(Duration::from_millis(100)).await;
    for _ in 0..6 {
        read_and_write_unavailable(&api).await;
    }
    proxy.set(Mode::Up);
    let reply = once_back(Duration::from_secs(10), || {
        api.get("/api/contexts/by-external/a.md")
    })
    .await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        api.post("/api/contexts/bulk-upsert", upsert("c.md", "three"))
            .await
            .status,
        StatusCode::OK
    );
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let _ = child.wait();
    let mut log = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let of = |level: &str, text: &str| {
        lines
            .iter()
            .filter(|l| {
                l["level"] == level
                    && l["fields"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(text))
            })
            .count()
    };
    assert_eq!(of("WARN", "the database is unavailable"), 1, "{log}");
    assert_eq!(of("INFO", "the database answers again"), 1, "{log}");
    assert!(lines.iter().all(|l| l["level"] != "ERROR"), "{log}");
    let ended = lines
        .iter()
        .find(|l| {
            l["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("the database answers again"))
        })
        .unwrap();
    assert!(
        ended["fields"]["refused"].as_u64().is_some_and(|n| n >= 12),
        "{ended}"
    );
    assert!(
        !log.contains(" at line "),
        "a database's source line numbers stay out of messages: {log}"
    );
}
