//! The inspector's server side through real HTTP (SQLite and PostgreSQL): the page and its assets
//! compiled in, under a strict Content-Security-Policy; one-time sign-in tokens. The page's
//! behaviour in a real browser is tested by `contextq-memory-cli`'s `tests/inspector.rs`.

mod common;

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
    assert_eq!(body["apiKey"], t.client.key.as_str());
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
    s.stop().await;
}

contextq_server::database_tests!(
    the_page_is_served_with_a_strict_policy,
    sign_in_tokens_work_once
);
