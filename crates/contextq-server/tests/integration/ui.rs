//! The inspector's server side through real HTTP (SQLite and PostgreSQL): the page and its assets
//! compiled in, under a strict Content-Security-Policy; one-time sign-in tokens. The page's
//! behaviour in a real browser is tested by `contextq-memory-cli`'s `tests/integration/inspector.rs`.

use crate::common;

use common::{ALL, TestServer};
use contextq_server::{Backend, Plan};
use reqwest::StatusCode;

async fn the_page_is_served_with_a_strict_policy(b: Backend) {
    let s = TestServer::start(b).await;
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let r = http.get(format!("{}/ui", s.url)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::PERMANENT_REDIRECT);
    assert_eq!(r.headers()["location"], "/ui/");
    // The bare address leads to the inspector too.
    let r = http.get(format!("{}/", s.url)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(r.headers()["location"], "/ui/");
    for (path, kind, needle) in [
        (
            "/ui/",
            "text/html",
            "<script src=\"app.js\" defer></script>",
        ),
        ("/ui/app.js", "text/javascript", "textContent"),
        ("/ui/app.css", "text/css", "prefers-color-scheme"),
    ] {
        let r = http.get(format!("{}{path}", s.url)).send().await.unwrap();
        assert_eq!(r.status(), StatusCode::OK, "{path}");
        let h = r.headers().clone();
        assert!(
            h["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("default-src 'none'") && csp.contains("script-src 'self';"),
            "{csp}"
        );
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"),
            "{csp}"
        );
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["x-frame-options"], "DENY");
        let body = r.text().await.unwrap();
        assert!(body.contains(needle), "{path}");
        // Nothing from another origin: no fonts, scripts or styles from a CDN.
        assert!(
            !body.contains("https://") && !body.contains("http://"),
            "{path}"
        );
    }
    // The page has no inline script or style and no inline event handler.
    let html = http
        .get(format!("{}/ui/", s.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(html.matches("<script").count(), 1);
    assert!(!html.contains("<style") && !html.contains(" onclick=") && !html.contains(" style="));
    // The API is not under the policy's headers (it answers JSON to any client).
    let r = http.get(format!("{}/health", s.url)).send().await.unwrap();
    assert!(r.headers().get("content-security-policy").is_none());
    s.stop().await;
}

async fn sign_in_tokens_work_once(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let http = reqwest::Client::new();
    let token = s.sign_in().issue(&t.client.key);
    let redeem = |token: String| {
        let http = http.clone();
        let url = format!("{}/ui/session", s.url);
        async move {
            let r = http
                .post(url)
                .json(&serde_json::json!({ "token": token }))
                .send()
                .await
                .unwrap();
            let status = r.status();
            let body: serde_json::Value = r.json().await.unwrap();
            (status, body)
        }
    };
    let (status, body) = redeem(token.clone()).await;
    assert_eq!(status, StatusCode::OK);
    // A session key minted for the sign-in, never the key the link stands for.
    let session = body["apiKey"].as_str().unwrap().to_string();
    assert_ne!(session, t.client.key);
    assert!(contextq_api::valid_key_format(&session));
    let expires_at = chrono::DateTime::parse_from_rfc3339(body["expiresAt"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    let left = expires_at - chrono::Utc::now();
    assert!(
        left > chrono::Duration::hours(7) && left <= chrono::Duration::hours(8),
        "{left}"
    );
    let as_session = t.client.with_key(&session);
    assert_eq!(
        as_session.get("/api/workspaces").await.status,
        StatusCode::OK
    );
    // Sign out revokes the session (and only a session: the typed-in key stays valid).
    let sign_out = |key: String| {
        let http = http.clone();
        let url = format!("{}/ui/session", s.url);
        async move {
            http.delete(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
        }
    };
    assert_eq!(
        sign_out(t.client.key.clone()).await,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(t.client.get("/api/workspaces").await.status, StatusCode::OK);
    assert_eq!(sign_out(session.clone()).await, StatusCode::NO_CONTENT);
    assert_eq!(
        as_session.get("/api/workspaces").await.status,
        StatusCode::UNAUTHORIZED
    );
    let (status, body) = redeem(token).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthorized");
    let (status, _) = redeem("0".repeat(64)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let r = http
        .post(format!("{}/ui/session", s.url))
        .body("not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    // A body past the route's small limit is refused from its declared length, at once.
    let started = std::time::Instant::now();
    let mut raw = tokio::net::TcpStream::connect(s.url.trim_start_matches("http://"))
        .await
        .unwrap();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    raw.write_all(
        b"POST /ui/session HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 6291456\r\n\r\n{\"token\"",
    )
    .await
    .unwrap();
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(std::time::Duration::from_secs(5), raw.read(&mut answer))
        .await
        .expect("no answer to a 6 MiB declared body within 5 s")
        .unwrap();
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("payload_too_large"), "{answer}");
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    drop(raw);
    s.stop().await;
}

/// Keys can expire: refused from their expiry on, on every request (also when cached).
async fn an_expired_key_is_refused(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let soon = (chrono::Utc::now() + chrono::Duration::milliseconds(1500))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    use contextq_server::store::tenants::{KeySpec, create_key_with};
    let spec = KeySpec {
        expires_at: Some(&soon),
        ..KeySpec::new(&t.tenant_id, ALL)
    };
    let key = create_key_with(&s.db, spec).await.unwrap();
    let c = t.client.with_key(&key.api_key);
    assert_eq!(c.get("/api/workspaces").await.status, StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_millis(1600)).await;
    let r = c.get("/api/workspaces").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.message().contains("expired"), "{}", r.message());
    // admin create-key --expires-in: a key that works now.
    let key = expiring_key(&s, &t, 3600).await;
    assert_eq!(
        t.client
            .with_key(&key.api_key)
            .get("/api/workspaces")
            .await
            .status,
        StatusCode::OK
    );
    s.stop().await;
}

/// A new key of `t` with every scope that stops working `secs` from now.
async fn expiring_key(
    s: &TestServer,
    t: &common::Tenant,
    secs: u64,
) -> contextq_server::admin::NewKey {
    let lifetime = std::time::Duration::from_secs(secs);
    contextq_server::admin::create_expiring_key(&s.db, &t.tenant_id, ALL, lifetime)
        .await
        .unwrap()
}

/// Redeems a sign-in token at `url`: the session key and its expiry.
async fn redeem(url: &str, token: &str) -> (String, chrono::DateTime<chrono::Utc>) {
    let r = reqwest::Client::new()
        .post(format!("{url}/ui/session"))
        .json(&serde_json::json!({ "token": token }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let body: serde_json::Value = r.json().await.unwrap();
    let expires_at = chrono::DateTime::parse_from_rfc3339(body["expiresAt"].as_str().unwrap())
        .unwrap()
        .with_timezone(&chrono::Utc);
    (body["apiKey"].as_str().unwrap().to_string(), expires_at)
}

/// Polls `api` until `/api/workspaces` answers 401 (at most `within`); the last status.
async fn refused_within(api: &common::Api, within: std::time::Duration) -> StatusCode {
    let started = std::time::Instant::now();
    loop {
        let status = api.get("/api/workspaces").await.status;
        if status == StatusCode::UNAUTHORIZED || started.elapsed() >= within {
            return status;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A sign-in session lives at most as long as the key it was minted from: it expires with it,
/// ends when it is revoked or deleted, and cannot mint sign-in tokens (so never renews itself).
async fn a_session_ends_with_its_key(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    // PostgreSQL: revocations reach the key cache by notification (milliseconds).
    let window = match b {
        Backend::Sqlite => std::time::Duration::ZERO,
        Backend::Postgres => std::time::Duration::from_secs(2),
    };

    // Expiry: an admin key that expires in 3 s gives a session that expires with it.
    let parent = expiring_key(&s, &t, 3).await;
    let (session, expires_at) = redeem(&s.url, &s.sign_in().issue(&parent.api_key)).await;
    assert!(
        expires_at <= chrono::Utc::now() + chrono::Duration::seconds(3),
        "{expires_at}"
    );
    let as_session = t.client.with_key(&session);
    assert_eq!(
        as_session.get("/api/workspaces").await.status,
        StatusCode::OK
    );
    // It cannot make a sign-in link: no session renews itself.
    let r = as_session
        .post("/ui/sign-in-tokens", serde_json::json!({}))
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{}", r.message());
    tokio::time::sleep(std::time::Duration::from_millis(3100)).await;
    let r = as_session.get("/api/workspaces").await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert!(r.message().contains("expired"), "{}", r.message());

    // Revocation and deletion of the parent end its sessions, at once on this server.
    for delete in [false, true] {
        let parent = contextq_server::admin::create_key(&s.db, &t.tenant_id, None, ALL)
            .await
            .unwrap();
        let (session, _) = redeem(&s.url, &s.sign_in().issue(&parent.api_key)).await;
        let (other, _) = redeem(&s.url, &s.sign_in().issue(&t.client.key)).await;
        let as_session = t.client.with_key(&session);
        assert_eq!(
            as_session.get("/api/workspaces").await.status,
            StatusCode::OK
        );
        if delete {
            assert!(
                contextq_server::store::tenants::delete_key(&s.db, &parent.key_id)
                    .await
                    .unwrap()
            );
        } else {
            contextq_server::admin::revoke_key(&s.db, &parent.api_key)
                .await
                .unwrap();
        }
        assert_eq!(
            refused_within(&as_session, window).await,
            StatusCode::UNAUTHORIZED,
            "delete: {delete}"
        );
        // A session of another key lives on.
        assert_eq!(
            t.client
                .with_key(&other)
                .get("/api/workspaces")
                .await
                .status,
            StatusCode::OK
        );
    }
    // The revoked parent's session is listed as revoked too.
    let keys = contextq_server::store::tenants::list_keys(&s.db, &t.tenant_id)
        .await
        .unwrap();
    let sessions: Vec<_> = keys.iter().filter(|k| k.kind == "ui-session").collect();
    assert_eq!(sessions.len(), 4, "{keys:?}");
    assert_eq!(
        sessions.iter().filter(|k| k.revoked_at.is_some()).count(),
        1,
        "the revoked parent's session (the deleted one's is gone, the expired one's expired)"
    );
    s.stop().await;
}

contextq_server::database_tests!(
    a_session_ends_with_its_key,
    an_expired_key_is_refused,
    the_page_is_served_with_a_strict_policy,
    sign_in_tokens_work_once
);
