//! Running it as a service: `/ready` (the database answers, its migrations are this server's,
//! the audit key is the loaded one), `/metrics` (Prometheus text with bounded labels), JSON logs,
//! and a graceful stop on SIGTERM that lets requests in flight finish, within a bound.

use crate::common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{ALL, TestServer};
use contextq_server::{Backend, Plan};
use reqwest::StatusCode;
use serde_json::json;

const BIN: &str = env!("CARGO_BIN_EXE_contextq-server");

async fn ready_and_metrics(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let http = reqwest::Client::new();
    let get = |path: &str| {
        let url = format!("{}{path}", t.client.base);
        let http = http.clone();
        async move { http.get(url).send().await.unwrap() }
    };
    let r = get("/ready").await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["status"], "ready");
    assert_eq!(
        body["schemaVersion"],
        contextq_server::db::latest_schema_version()
    );

    // Some traffic: a read, a read of a row by id, a refused write, a path that matches nothing.
    let c = &t.client;
    let reader = s.tenant(Plan::Free, &[contextq_server::Scope::Read]).await;
    assert_eq!(c.get("/api/contexts").await.status, StatusCode::OK);
    assert_eq!(
        c.get("/api/contexts/ctx_secret-looking-id").await.status,
        StatusCode::NOT_FOUND
    );
    let r = reader.client.upsert("x", "x\n", &[]).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    assert_eq!(
        c.get("/no/such/path-of-a-tenant").await.status,
        StatusCode::NOT_FOUND
    );
    let r = get("/metrics").await;
    assert_eq!(r.status(), StatusCode::OK);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4")
    );
    let text = r.text().await.unwrap();
    for needle in [
        r#"contextq_http_requests_total{route="/api/contexts",method="GET",status="200"} 1"#,
        r#"contextq_http_requests_total{route="/api/contexts/{id}",method="GET",status="404"} 1"#,
        r#"contextq_http_requests_total{route="unmatched",method="GET",status="404"} 1"#,
        r#"contextq_http_request_duration_seconds_bucket{route="/api/contexts",method="GET",le="+Inf"} 1"#,
        r#"contextq_writes_refused_total{reason="forbidden"} 1"#,
        r#"contextq_db_pool_connections{state="idle"}"#,
        r#"contextq_db_pool_connections{state="in_use"}"#,
    ] {
        assert!(text.contains(needle), "{needle} not in:\n{text}");
    }
    // Bounded labels: no tenant, key or path of a request.
    for secret in [
        t.tenant_id.as_str(),
        t.key_id.as_str(),
        "ctx_secret-looking-id",
        "path-of-a-tenant",
    ] {
        assert!(!text.contains(secret), "{secret} leaked into the metrics");
    }

    // Not ready: a migration this server does not know, or an audit keying not its own; each
    // is said, and liveness stays.
    for (broken, mended, reason) in [
        (
            "INSERT INTO schema_migrations (version, description, applied_at) VALUES (999, 'future', 'now')",
            "DELETE FROM schema_migrations WHERE version = 999",
            "schema version 999",
        ),
        (
            "INSERT INTO audit_meta (id, key_fingerprint, keyed_at) VALUES (1, 'not-this-servers-key', 'now') \
             ON CONFLICT (id) DO UPDATE SET key_fingerprint = excluded.key_fingerprint",
            "DELETE FROM audit_meta",
            "audit log's key",
        ),
    ] {
        // `/ready` answers its last probe for a second: a change is seen after that.
        let fresh = contextq_server::api::ready::FRESH_FOR;
        common::sql(&s.db, broken, &[]).await;
        tokio::time::sleep(fresh).await;
        let r = get("/ready").await;
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        let body: serde_json::Value = r.json().await.unwrap();
        assert!(
            body["reasons"][0].as_str().unwrap().contains(reason),
            "{body}"
        );
        assert_eq!(get("/health").await.status(), StatusCode::OK);
        common::sql(&s.db, mended, &[]).await;
        tokio::time::sleep(fresh).await;
        assert_eq!(get("/ready").await.status(), StatusCode::OK, "{mended}");
    }
    // `/ready` names the database in use, its password masked.
    let body: serde_json::Value = get("/ready").await.json().await.unwrap();
    let database = body["database"].as_str().unwrap().to_string();
    match b {
        Backend::Sqlite => assert!(database.starts_with("sqlite:"), "{database}"),
        Backend::Postgres => {
            assert!(database.contains(":***@"), "{database}");
            assert!(!database.contains(":postgres@"), "{database}");
        }
    }
    // The database gone: not ready, and liveness untouched (a liveness probe must not restart
    // every replica during a database outage).
    s.db.close().await;
    tokio::time::sleep(contextq_server::api::ready::FRESH_FOR).await;
    let r = get("/ready").await;
    assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
    let r = get("/health").await;
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["status"], "ok");
    s.stop().await;
}

/// A server listening beyond loopback without a database URL refuses to start, naming the
/// flag; on loopback it names the SQLite file it serves.
#[test]
fn a_server_beyond_loopback_needs_its_database_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["serve", "--listen", "0.0.0.0:0"])
        .current_dir(dir.path())
        .env_remove("CONTEXTQ_DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--database-url"), "{stderr}");
    assert!(
        !dir.path().join("contextq.db").exists(),
        "no database was created"
    );
}

contextq_server::database_tests!(ready_and_metrics);

/// The metrics' series after `requests` hostile requests: every series (its line without the
/// value) and the exposition's size.
async fn series(url: &str) -> (std::collections::BTreeSet<String>, usize) {
    let text = reqwest::get(format!("{url}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let series = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.rsplit_once(' ').map(|(s, _)| s.to_string()))
        .collect();
    (series, text.len())
}

/// Nothing a client sends becomes a label: thousands of requests with methods of every name (up
/// to 16 KiB), paths that match nothing and keys that are no keys leave the same series, and
/// the exposition grows only by the digits of its counters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_requests_leave_the_metrics_as_they_were() {
    let s = TestServer::start(Backend::Sqlite).await;
    let http = reqwest::Client::new();
    let hostile = |i: usize| {
        let method = match i % 3 {
            0 => format!("FOO{i}"),
            1 => format!("M{}", "X".repeat(1 + (i * 7919) % 16_000)),
            _ => "PROPFIND".to_string(),
        };
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        http.request(method, format!("{}/no/such/{i}/path", s.url))
            .bearer_auth(format!("sk_live_{i:040}"))
            .send()
    };
    for i in 0..30 {
        let _ = hostile(i).await;
    }
    // The first scrape adds its own series.
    series(&s.url).await;
    let (before, size_before) = series(&s.url).await;
    for i in 30..3_000 {
        let _ = hostile(i).await;
    }
    let (after, size_after) = series(&s.url).await;
    assert_eq!(before, after, "the series changed");
    assert!(
        size_after <= size_before + 100,
        "{size_before} -> {size_after} bytes"
    );
    assert!(
        after.iter().any(|l| l.contains(r#"method="other""#)),
        "{after:?}"
    );
    s.stop().await;
}

/// A server of the binary, bootstrapped on a fresh SQLite file, logging JSON at `info` to a
/// pipe: (child, URL, key).
fn serve(dir: &std::path::Path, extra: &[&str]) -> (std::process::Child, String, String) {
    serve_logging(dir, extra, Some("info"))
}

/// [`serve`] with `RUST_LOG` set to `log`, or unset (the server's default).
fn serve_logging(
    dir: &std::path::Path,
    extra: &[&str],
    log: Option<&str>,
) -> (std::process::Child, String, String) {
    let db = format!("sqlite:{}", dir.join("cq.db").display());
    let out = Command::new(BIN)
        .args(["admin", "--database-url", &db, "bootstrap", "--tenant", "t"])
        .output()
        .unwrap();
    let key = common::bootstrapped_key(&out);
    let mut command = Command::new(BIN);
    command
        .args(["--log-format", "json", "serve", "--database-url", &db])
        .args(["--listen", "127.0.0.1:0"])
        .args(extra);
    match log {
        Some(level) => command.env("RUST_LOG", level),
        None => command.env_remove("RUST_LOG"),
    };
    let (child, url) = contextq_server::testing::spawn_serving_logged(&mut command, Stdio::piped());
    (child, url, key)
}

/// Sends a request head with `Expect: 100-continue`, waits for the server's `100 Continue` (its
/// handler is reading the body: the request is in flight, no sleep needed to know it), then the
/// first half of the body; the rest is for the caller.
fn half_a_request(url: &str, key: &str, body: &str) -> (std::net::TcpStream, String) {
    let addr = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /api/contexts/bulk-upsert HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\
         Expect: 100-continue\r\n\r\n",
        body.len()
    );
    let (first, rest) = body.split_at(body.len() / 2);
    stream.write_all(head.as_bytes()).unwrap();
    let mut continued = Vec::new();
    let mut byte = [0u8; 1];
    while !continued.ends_with(b"\r\n\r\n") {
        assert_eq!(
            stream.read(&mut byte).unwrap(),
            1,
            "closed before 100 Continue"
        );
        continued.push(byte[0]);
    }
    assert!(
        continued.starts_with(b"HTTP/1.1 100"),
        "{}",
        String::from_utf8_lossy(&continued)
    );
    stream.write_all(first.as_bytes()).unwrap();
    (stream, rest.to_string())
}

/// Waits (at most 5 s) until the server at `url` takes no new connection: its listener is
/// closed.
fn until_refused(url: &str) {
    let started = Instant::now();
    while std::net::TcpStream::connect(url.trim_start_matches("http://")).is_ok() {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "a new connection was still accepted 5 s into the stop"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What an exited server wrote to its piped stderr: its log.
fn logs_of(child: &mut std::process::Child) -> String {
    let mut logs = String::new();
    child
        .stderr
        .take()
        .expect("stderr piped")
        .read_to_string(&mut logs)
        .unwrap();
    logs
}

fn terminate(child: &std::process::Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn wait_exit(
    child: &mut std::process::Child,
    within: Duration,
) -> (std::process::ExitStatus, Duration) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, started.elapsed());
        }
        assert!(started.elapsed() < within, "still running after {within:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_finishes_requests_in_flight_then_stops() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url, key) = serve(dir.path(), &["--shutdown-grace-secs", "20"]);
    let body = json!({"contexts": [{"externalId": "late", "workspace": "default", "type": "reference", "content": "written during the stop\n"}]}).to_string();
    let (mut stream, rest) = half_a_request(&url, &key, &body);
    terminate(&child);
    // Stopping: the listener is closed, no new connection is taken...
    until_refused(&url);
    // ...but the request in flight finishes and is answered.
    stream.write_all(rest.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let (status, _) = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    // JSON logs: every line one object, the stop said.
    let logs = logs_of(&mut child);
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert!(
        lines.iter().any(|l| l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shutting down"))),
        "{logs}"
    );
    assert!(!logs.contains(&key), "the key reached the log");
}

#[test]
fn a_request_that_never_finishes_is_cut_after_the_grace() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url, key) = serve(dir.path(), &["--shutdown-grace-secs", "1"]);
    let body = json!({"contexts": []}).to_string() + &" ".repeat(1000);
    let (_stream, _rest) = half_a_request(&url, &key, &body);
    terminate(&child);
    // The request timeout is 30 s; the grace of 1 s is what ends it.
    let (status, took) = wait_exit(&mut child, Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

/// With `--log-format json`, one line per request at info by default (no `RUST_LOG`): method,
/// route template, status, latency and key id, refusals included; never the key, a path's
/// value or a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_have_one_line_per_request_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url, key) = serve_logging(dir.path(), &[], None);
    let http = reqwest::Client::new();
    let secret = "a secret content line";
    let body = json!({"contexts": [{"externalId": "private/path.md", "workspace": "default", "type": "reference", "content": secret}]});
    let r = http
        .post(format!("{url}/api/contexts/bulk-upsert"))
        .bearer_auth(&key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let bogus = format!("sk_live_{}", "0".repeat(40));
    let r = http
        .get(format!("{url}/api/contexts/by-external/private%2Fpath.md"))
        .bearer_auth(&bogus)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    terminate(&child);
    wait_exit(&mut child, Duration::from_secs(20));
    let logs = logs_of(&mut child);
    let requests: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["target"] == "contextq::request")
        .map(|l| l["fields"].clone())
        .collect();
    assert_eq!(requests.len(), 2, "{logs}");
    assert_eq!(
        (
            &requests[0]["method"],
            &requests[0]["route"],
            &requests[0]["status"]
        ),
        (
            &json!("POST"),
            &json!("/api/contexts/bulk-upsert"),
            &json!(200)
        )
    );
    assert!(
        requests[0]["key_id"].as_str().unwrap().starts_with("key_"),
        "{:?}",
        requests[0]
    );
    assert!(requests[0]["latency_ms"].is_number());
    assert_eq!(
        (
            &requests[1]["route"],
            &requests[1]["status"],
            &requests[1]["key_id"]
        ),
        (
            &json!("/api/contexts/by-external/{external_id}"),
            &json!(401),
            &json!("-")
        )
    );
    for leak in [key.as_str(), bogus.as_str(), secret, "private"] {
        assert!(!logs.contains(leak), "{leak} reached the log:\n{logs}");
    }
    // The start line names the database.
    assert!(logs.contains("cq.db"), "{logs}");
}

/// A known key refused (revoked, expired) is logged by its id with why, so an operator can tell
/// which agent still uses it; an unknown key stays `-`. Each 401 is counted by reason in
/// `/metrics`. The client's answer is the same for unknown and revoked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_keys_are_logged_by_id_and_counted_by_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, url, _key) = serve_logging(dir.path(), &[], None);
    let db = format!("sqlite:{}", dir.path().join("cq.db").display());
    let tenant = {
        let out = Command::new(BIN)
            .args(["admin", "--database-url", &db, "list-tenants", "--json"])
            .output()
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_slice(out.stdout.split(|b| *b == b'\n').next().unwrap()).unwrap();
        v["tenantId"].as_str().unwrap().to_string()
    };
    let create = |extra: &[&str]| {
        let out = Command::new(BIN)
            .args([
                "admin",
                "--database-url",
                &db,
                "create-key",
                "--tenant-id",
                &tenant,
            ])
            .args(extra)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            v["keyId"].as_str().unwrap().to_string(),
            v["apiKey"].as_str().unwrap().to_string(),
        )
    };
    let (revoked_id, revoked) = create(&["--name", "old-laptop"]);
    let (expired_id, expired) = create(&["--expires-in", "1s"]);
    let out = Command::new(BIN)
        .args(["admin", "--database-url", &db, "revoke-key", &revoked_id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(1100));
    let http = reqwest::Client::new();
    let unknown = format!("sk_live_{}", "0".repeat(40));
    let mut bodies = Vec::new();
    for key in [&revoked, &expired, &unknown] {
        let r = http
            .get(format!("{url}/api/contexts"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 401);
        bodies.push(r.text().await.unwrap());
    }
    assert_eq!(bodies[0], bodies[2], "revoked and unknown answer alike");
    let r = http
        .get(format!("{url}/api/contexts"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let metrics = http
        .get(format!("{url}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for reason in ["revoked", "expired", "unknown", "missing"] {
        assert!(
            metrics.contains(&format!(
                "contextq_auth_refused_total{{reason=\"{reason}\"}} 1"
            )),
            "{reason}: {metrics}"
        );
    }
    terminate(&child);
    wait_exit(&mut child, Duration::from_secs(20));
    let logs = logs_of(&mut child);
    let refusals: Vec<serde_json::Value> = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["target"] == "contextq::request" && l["fields"]["status"] == 401)
        .map(|l| l["fields"].clone())
        .collect();
    assert_eq!(refusals.len(), 4, "{logs}");
    assert_eq!(
        (&refusals[0]["key_id"], &refusals[0]["refused"]),
        (&json!(revoked_id), &json!("revoked"))
    );
    assert_eq!(
        (&refusals[1]["key_id"], &refusals[1]["refused"]),
        (&json!(expired_id), &json!("expired"))
    );
    assert_eq!(refusals[2]["key_id"], "-");
    assert!(
        refusals[2].get("refused").is_none_or(|r| r == "unknown"),
        "{:?}",
        refusals[2]
    );
    for leak in [revoked.as_str(), expired.as_str()] {
        assert!(!logs.contains(leak), "a key reached the log");
    }
}
