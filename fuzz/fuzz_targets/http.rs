//! Fuzzes contextq-server's HTTP edge where untrusted input enters: JSON bodies and query
//! strings of every endpoint, with a valid key, through the real router (`contextq_server::app`)
//! over a SQLite database in a temporary directory. Input: one byte choosing the endpoint, then
//! the query (or path segment) up to the first NUL byte, then the body. Never a panic, never a
//! 500, and every error answer is the contract's envelope `{"error":{"code","message"}}`.
#![no_main]

use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use contextq_server::{AppState, Db, DbOptions, Plan, ServerConfig, Scope, admin};
use libfuzzer_sys::fuzz_target;
use tower::ServiceExt;

struct World {
    rt: tokio::runtime::Runtime,
    router: axum::Router,
    key: String,
    id: String,
    _dir: tempfile::TempDir,
}

fn world() -> &'static World {
    static WORLD: OnceLock<World> = OnceLock::new();
    WORLD.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("fuzz.db").display());
        let (router, key, id) = rt.block_on(async {
            let db = Db::connect(&url, &DbOptions::default()).await.unwrap();
            let all = [Scope::Read, Scope::Write, Scope::Admin];
            let b = admin::bootstrap(&db, "fuzz", Plan::Unlimited, "ws", &all)
                .await
                .unwrap();
            let router = contextq_server::app(AppState::new(db, ServerConfig::default()));
            let key = b.key.api_key.clone();
            let req = Request::post("/api/contexts/bulk-upsert")
                .header("authorization", format!("Bearer {key}"))
                .header("content-type", "application/json")
                .body(Body::from(
                    r#"{"contexts":[{"externalId":"seed","workspace":"ws","type":"note","content":"a\nb\n"}]}"#,
                ))
                .unwrap();
            let res = router.clone().oneshot(req).await.unwrap();
            let bytes = axum::body::to_bytes(res.into_body(), 1 << 20).await.unwrap();
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let id = v["results"][0]["id"].as_str().unwrap().to_string();
            (router, key, id)
        });
        World { rt, router, key, id, _dir: dir }
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&route, rest)) = data.split_first() else {
        return;
    };
    let (query, body) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &[][..]),
    };
    let Ok(query) = std::str::from_utf8(query) else {
        return;
    };
    let w = world();
    let (method, uri) = match route % 8 {
        0 => (Method::GET, format!("/api/contexts?{query}")),
        1 => (Method::GET, format!("/api/workspaces?{query}")),
        2 => (Method::POST, format!("/api/contexts/bulk-upsert?{query}")),
        3 => (Method::PUT, format!("/api/contexts/{}?{query}", w.id)),
        4 => (Method::POST, "/api/contexts/by-external/seed/edit".to_string()),
        5 => (Method::POST, "/api/workspaces".to_string()),
        6 => (Method::GET, format!("/api/contexts/by-external/{query}")),
        _ => (Method::POST, format!("/api/contexts/by-external/{query}/edit")),
    };
    // What hyper would refuse before the router: not a URI.
    let Ok(req) = Request::builder()
        .method(method)
        .uri(&uri)
        .header("authorization", format!("Bearer {}", w.key))
        .header("content-type", "application/json")
        .body(Body::from(body.to_vec()))
    else {
        return;
    };
    let (status, bytes) = w.rt.block_on(async {
        let res = w.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        (status, axum::body::to_bytes(res.into_body(), 64 << 20).await.unwrap())
    });
    assert_ne!(status, StatusCode::INTERNAL_SERVER_ERROR, "{uri}: {}", String::from_utf8_lossy(&bytes));
    if status.as_u16() >= 400 {
        let v: serde_json::Value = serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("{uri}: {status} without a JSON body ({e})"));
        assert!(
            v["error"]["code"].is_string() && v["error"]["message"].is_string(),
            "{uri}: {status} {v}"
        );
    }
});
