//! Every endpoint, status and error code of the contract, through real HTTP on 127.0.0.1:0,
//! on SQLite and (when CONTEXTQ_TEST_DATABASE_URL is set) PostgreSQL.

use crate::common;

use contextq_api::ErrorCode;

use common::{ALL, RW, TestServer, seg};
use contextq_server::Backend;
use contextq_server::{Plan, Scope};
use reqwest::StatusCode;
use serde_json::json;

async fn workspaces(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let r = c
        .post("/api/workspaces", json!({"slug": "notes", "name": "Notes"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{:?}", r.body);
    assert_eq!(r.body["slug"], "notes");
    assert_eq!(r.body["archived"], false);
    let r = c.post("/api/workspaces", json!({"slug": "notes"})).await;
    r.assert_error(ErrorCode::Conflict);
    for bad in ["Bad", "-x", "", "a b", &"a".repeat(64)] {
        let r = c.post("/api/workspaces", json!({"slug": bad})).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            "{bad}"
        );
    }
    let r = c.post("/api/workspaces", json!({"name": "no slug"})).await;
    r.assert_error(ErrorCode::BadRequest);
    let r = c.get("/api/workspaces").await;
    let slugs = common::strings(&r.body["workspaces"], "slug");
    assert_eq!(slugs, vec!["notes", "ws"]);

    // Archive: read-only, still listed and flagged.
    assert_eq!(c.upsert("keep", "x", &[]).await.status, StatusCode::OK);
    let r = c.post("/api/workspaces/ws/archive", json!({})).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["archived"], true);
    let r = c.upsert("new", "x", &[]).await;
    r.assert_error(ErrorCode::Conflict);
    assert!(r.message().contains("archived"));
    let ctx = c
        .get(&format!("/api/contexts/by-external/{}", seg("keep")))
        .await;
    assert_eq!(ctx.status, StatusCode::OK);
    let id = ctx.body["id"].as_str().unwrap();
    assert_eq!(
        c.put_content(id, "y", None).await.status,
        StatusCode::CONFLICT
    );
    assert_eq!(
        c.delete(&format!("/api/contexts/{id}"), None).await.status,
        StatusCode::CONFLICT
    );
    let r = c.get("/api/workspaces").await;
    assert_eq!(r.body["workspaces"][1]["archived"], true);

    // Delete: 409 while it holds contexts, 204 when empty, 404 after.
    let r = c.delete("/api/workspaces/ws", None).await;
    r.assert_error(ErrorCode::Conflict);
    assert_eq!(
        c.delete("/api/workspaces/notes", None).await.status,
        StatusCode::NO_CONTENT
    );
    let r = c.delete("/api/workspaces/notes", None).await;
    r.assert_error(ErrorCode::NotFound);
    assert_eq!(
        c.post("/api/workspaces/nope/archive", json!({}))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

async fn contexts_crud_and_conditional_requests(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let ext = "mem-tool:ws/dir/a b ü.md";
    let r = c
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [
                {"externalId": ext, "workspace": "ws", "type": "reference", "title": "A", "content": "hello", "tags": ["mem-tool"]},
                {"externalId": "other", "workspace": "ws", "type": "note", "content": ""}
            ]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["results"][0]["status"], "created");
    assert_eq!(r.body["results"][0]["version"], 1);
    assert_eq!(r.body["results"][1]["externalId"], "other");

    let got = c
        .get(&format!("/api/contexts/by-external/{}", seg(ext)))
        .await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.etag.as_deref(), Some("\"1\""));
    assert_eq!(got.body["externalId"], ext);
    assert_eq!(got.body["workspace"], "ws");
    assert_eq!(got.body["type"], "reference");
    assert_eq!(got.body["title"], "A");
    assert_eq!(got.body["content"], "hello");
    assert_eq!(got.body["tags"], json!(["mem-tool"]));
    let id = got.body["id"].as_str().unwrap().to_string();
    let by_id = c.get(&format!("/api/contexts/{id}")).await;
    assert_eq!(by_id.body, got.body);

    // Upsert again: same content is not a change; new content is.
    let r = c.upsert(ext, "hello", &["mem-tool"]).await;
    assert_eq!(
        (
            r.body["results"][0]["status"].as_str(),
            r.body["results"][0]["version"].as_i64()
        ),
        (Some("updated"), Some(1))
    );
    let r = c.upsert(ext, "hello 2", &["mem-tool"]).await;
    assert_eq!(r.body["results"][0]["version"], 2);

    // PUT with If-Match.
    let r = c.put_content(&id, "v3", Some(2)).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.etag.as_deref(), Some("\"3\""));
    assert_eq!(r.body["version"], 3);
    assert_eq!(r.body["title"], "A", "title kept when absent");
    let r = c.put_content(&id, "stale", Some(2)).await;
    r.assert_error(ErrorCode::PreconditionFailed);
    assert_eq!(
        c.get(&format!("/api/contexts/{id}")).await.body["content"],
        "v3"
    );
    let r = c
        .put(
            &format!("/api/contexts/{id}"),
            json!({"content": "v4", "title": null, "tags": ["x", "mem-tool"]}),
            None,
        )
        .await;
    assert_eq!(r.body["version"], 4);
    assert_eq!(r.body["title"], json!(null));
    assert_eq!(r.body["tags"], json!(["x", "mem-tool"]));
    let r = c
        .send(
            reqwest::Method::PUT,
            &format!("/api/contexts/{id}"),
            Some(json!({"content": "x"})),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let bad = c
        .http
        .put(format!("{}/api/contexts/{id}", c.base))
        .bearer_auth(&c.key)
        .header("If-Match", "nonsense")
        .json(&json!({"content": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);

    // DELETE with If-Match.
    let r = c.delete(&format!("/api/contexts/{id}"), Some(1)).await;
    assert_eq!(r.status, StatusCode::PRECONDITION_FAILED);
    let r = c.delete(&format!("/api/contexts/{id}"), Some(5)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT);
    for path in [
        format!("/api/contexts/{id}"),
        format!("/api/contexts/by-external/{}", seg(ext)),
    ] {
        let r = c.get(&path).await;
        r.assert_error(ErrorCode::NotFound);
    }
    assert_eq!(
        c.delete(&format!("/api/contexts/{id}"), None).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        c.put_content(&id, "x", None).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(c.get("/api/nothing").await.status, StatusCode::NOT_FOUND);

    // Validation of bulk-upsert.
    let r = c
        .post("/api/contexts/bulk-upsert", json!({"contexts": []}))
        .await;
    assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
    // More items than `large-bulk` allows (1,000), or ten times that, refused before anything is
    // read: 422 naming the limit, nothing written.
    for n in [1_001, 10_000] {
        let many: Vec<_> = (0..n).map(|i| json!({"externalId": format!("m{i}"), "workspace": "ws", "type": "reference", "content": ""})).collect();
        let r = c
            .post("/api/contexts/bulk-upsert", json!({"contexts": many}))
            .await;
        assert_eq!(r.status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(r.message().contains("give 1 to 1000 items"), "{:?}", r.body);
    }
    let r = c.post("/api/contexts/bulk-upsert", json!({"contexts": [{"externalId": "x", "workspace": "nope", "type": "reference", "content": ""}]})).await;
    r.assert_error(ErrorCode::NotFound);
    let r = c.post("/api/contexts/bulk-upsert", "not json".into()).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    s.stop().await;
}

async fn if_absent_and_all_or_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    assert_eq!(c.upsert("exists", "1", &[]).await.status, StatusCode::OK);
    let r = c
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [
                {"externalId": "fresh", "workspace": "ws", "type": "reference", "content": "new"},
                {"externalId": "exists", "workspace": "ws", "type": "reference", "content": "2", "ifAbsent": true}
            ]}),
        )
        .await;
    r.assert_error(ErrorCode::Conflict);
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg("fresh")))
            .await
            .status,
        StatusCode::NOT_FOUND,
        "all or nothing"
    );
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg("exists")))
            .await
            .body["content"],
        "1"
    );
    // A duplicate in one request, and one too-large item, also change nothing.
    let r = c
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [
                {"externalId": "fresh", "workspace": "ws", "type": "reference", "content": "new"},
                {"externalId": "big", "workspace": "ws", "type": "reference", "content": "x".repeat((1 << 20) + 1)}
            ]}),
        )
        .await;
    r.assert_error(ErrorCode::PayloadTooLarge);
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg("fresh")))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let r = c.post("/api/workspaces", json!({"slug": "second"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = c
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [{"externalId": "exists", "workspace": "second", "type": "reference", "content": "moved?"}]}),
        )
        .await;
    assert_eq!(
        r.status,
        StatusCode::CONFLICT,
        "externalId is unique per tenant, not per workspace"
    );
    // Exactly 1 MiB is allowed.
    assert_eq!(
        c.upsert("edge", &"x".repeat(1 << 20), &[]).await.status,
        StatusCode::OK
    );
    let id = c.id_of("edge").await;
    let r = c
        .put(
            &format!("/api/contexts/{id}"),
            json!({"content": "y".repeat((1 << 20) + 1)}),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE);
    s.stop().await;
}

/// Sends `head` (and no body) on a new connection and returns the answer's first bytes, which
/// must come before the body is sent.
async fn answer_to_head(addr: &str, head: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 2048];
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), conn.read(&mut answer))
        .await
        .unwrap_or_else(|_| panic!("no answer before the body was sent: {head}"))
        .unwrap();
    String::from_utf8_lossy(&answer[..n]).into_owned()
}

/// Each route has its body limit (one context: 2 MiB + 64 KiB, bulk: 8 MiB), 413 in the envelope
/// past it: a declared length past it is refused before any body is read, an undeclared
/// (chunked) one as soon as it passes the limit. The largest content the contract allows fits,
/// also when its JSON escapes double it.
async fn body_limits_per_route(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let c = &t.client;
    let addr = s.url.trim_start_matches("http://").to_string();
    let key = &c.key;
    for (method, path, length) in [
        ("PUT", "/api/contexts/ctx_x", (2 << 20) + (64 << 10) + 1),
        ("POST", "/api/contexts/by-external/x/edit", 3 << 20),
        ("POST", "/api/workspaces", 3 << 20),
        ("POST", "/api/contexts/bulk-upsert", (8 << 20) + 1),
    ] {
        let text = answer_to_head(
            &addr,
            &format!(
                "{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {key}\r\n\
                 Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
            ),
        )
        .await;
        assert!(text.starts_with("HTTP/1.1 413"), "{method} {path}: {text}");
        assert!(
            text.contains(r#"{"error":{"code":"payload_too_large","#),
            "{method} {path}: {text}"
        );
    }
    // Chunked, with no length declared: cut at the limit.
    let r = c
        .http
        .put(format!("{}/api/contexts/ctx_x", s.url))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(reqwest::Body::wrap_stream(futures::stream::iter(
            (0..40).map(|_| Ok::<_, std::io::Error>(vec![b' '; 100 << 10])),
        )))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large");

    // 1 MiB of newlines is 2 MiB of JSON: it fits the one-context limit.
    let newlines = "\n".repeat(1 << 20);
    assert_eq!(c.upsert("nl", "x", &[]).await.status, StatusCode::OK);
    let id = c.id_of("nl").await;
    let r = c.put_content(&id, &newlines, None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body["error"]);
    // A bulk upsert of three 1 MiB contexts (past the one-context limit) fits the bulk limit;
    // nine (past 8 MiB) do not, and nothing of them is stored.
    let items = |n: usize, prefix: &str| {
        json!({"contexts": (0..n).map(|i| json!({
            "externalId": format!("{prefix}{i}"), "workspace": "ws", "type": "reference",
            "content": "z".repeat(1 << 20)})).collect::<Vec<_>>()})
    };
    let r = c.post("/api/contexts/bulk-upsert", items(3, "three")).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body["error"]);
    let r = c.post("/api/contexts/bulk-upsert", items(9, "nine")).await;
    r.assert_error(ErrorCode::PayloadTooLarge);
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg("nine0")))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

/// A body waits for room in the server's budget of bodies in flight: with a 3 MiB budget, a
/// 2 MiB body being uploaded holds 2 MiB, and a second 1.5 MiB body waits until the first
/// is answered.
async fn bodies_wait_for_room_in_the_budget(b: Backend) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = TestServer::start_with(
        b,
        contextq_server::ServerConfig::default().body_budget_bytes(3 << 20),
    )
    .await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let c = t.client.clone();
    assert_eq!(c.upsert("a", "a", &[]).await.status, StatusCode::OK);
    let id = c.id_of("a").await;
    // Bodies of escaped newlines: twice as long as their content, which stays within 1 MiB.
    let body = |len: usize| {
        let mut b = String::from(r#"{"content":""#);
        b.push_str(&"\\n".repeat((len - b.len() - 2) / 2));
        b.push_str(r#""}"#);
        b
    };
    let first = body(2 << 20);
    let mut conn = tokio::net::TcpStream::connect(s.url.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "PUT /api/contexts/{id} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        c.key,
        first.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&first.as_bytes()[..1 << 20]).await.unwrap();
    // The first holds its 2 MiB now; the second cannot get 1.5 MiB of the remaining 1 MiB.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    let second = tokio::spawn({
        let c = c.clone();
        let path = format!("/api/contexts/{id}");
        let content = "\n".repeat(3 << 18);
        async move { c.put(&path, json!({"content": content}), None).await }
    });
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert!(
        !second.is_finished(),
        "the second body was read while the first held the budget"
    );
    conn.write_all(&first.as_bytes()[1 << 20..]).await.unwrap();
    let mut answer = vec![0u8; 1024];
    let n = conn.read(&mut answer).await.unwrap();
    let text = String::from_utf8_lossy(&answer[..n]).into_owned();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let r = second.await.unwrap();
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body["error"]);
    s.stop().await;
}

async fn request_body_limit_is_413(b: Backend) {
    let s = TestServer::start_with(
        b,
        contextq_server::ServerConfig::default()
            .max_body_bytes(64 * 1024)
            .max_bulk_body_bytes(64 * 1024),
    )
    .await;
    let t = s.tenant(Plan::Free, ALL).await;
    let r = t.client.upsert("x", &"y".repeat(100 * 1024), &[]).await;
    r.assert_error(ErrorCode::PayloadTooLarge);
    s.stop().await;
}

/// Every error answer is the JSON envelope, also those the framework writes: a query or path it
/// cannot parse, a method the endpoint does not have (405, with `Allow`), an unknown endpoint.
async fn every_error_is_the_json_envelope(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let cases = [
        (
            reqwest::Method::GET,
            "/api/contexts?limit=abc",
            400,
            "bad_request",
        ),
        (
            reqwest::Method::GET,
            "/api/contexts/by-external/%FF%FE",
            400,
            "bad_request",
        ),
        (
            reqwest::Method::PATCH,
            "/api/contexts/ctx_1",
            405,
            "method_not_allowed",
        ),
        (
            reqwest::Method::DELETE,
            "/health",
            405,
            "method_not_allowed",
        ),
        (
            reqwest::Method::PUT,
            "/api/contexts/bulk-upsert",
            405,
            "method_not_allowed",
        ),
        (reqwest::Method::GET, "/api/nothing-here", 404, "not_found"),
    ];
    for (method, path, status, code) in cases {
        let r = t.client.send(method.clone(), path, None, None).await;
        assert_eq!(r.status.as_u16(), status, "{method} {path}");
        assert!(
            r.headers[reqwest::header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("application/json"),
            "{method} {path}"
        );
        assert_eq!(r.code(), code, "{method} {path}: {}", r.body);
        assert!(!r.message().is_empty(), "{method} {path}: {}", r.body);
        if status == 405 {
            let allow = r
                .headers
                .get(reqwest::header::ALLOW)
                .map(|v| v.to_str().unwrap().to_string())
                .expect("405 says what is allowed");
            assert!(
                !allow.is_empty() && r.message().contains(method.as_str()),
                "{}",
                r.message()
            );
        }
    }
    s.stop().await;
}

/// Every field is bounded (docs/contextq-api.md): one byte past a limit is 422 and nothing is
/// stored; the limit itself is accepted.
async fn field_limits_are_422(b: Backend) {
    use contextq_api::limits::{MAX_TITLE_BYTES, MAX_TYPE_BYTES, MAX_WORKSPACE_NAME_BYTES};
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let item = |ext: &str, kind: usize, title: usize| json!({"contexts": [{"externalId": ext, "workspace": "ws", "type": "t".repeat(kind), "title": "x".repeat(title), "content": "c"}]});
    for (body, status) in [
        (item("ok", MAX_TYPE_BYTES, MAX_TITLE_BYTES), 200),
        (item("long-type", MAX_TYPE_BYTES + 1, 1), 422),
        (item("long-title", 1, MAX_TITLE_BYTES + 1), 422),
    ] {
        let r = t.client.post("/api/contexts/bulk-upsert", body).await;
        assert_eq!(r.status.as_u16(), status);
        if status == 422 {
            assert_eq!(r.code(), "validation_failed", "{}", r.body);
        }
    }
    for ext in ["long-type", "long-title"] {
        let r = t
            .client
            .get(&format!("/api/contexts/by-external/{ext}"))
            .await;
        assert_eq!(r.status.as_u16(), 404, "{ext} was not stored");
    }
    let stored = t.client.get("/api/contexts/by-external/ok").await;
    let id = stored.body["id"].as_str().unwrap();
    let r = t
        .client
        .put(
            &format!("/api/contexts/{id}"),
            json!({"content": "d", "title": "x".repeat(MAX_TITLE_BYTES + 1)}),
            None,
        )
        .await;
    assert_eq!(r.status.as_u16(), 422);
    for (name, status) in [
        ("n".repeat(MAX_WORKSPACE_NAME_BYTES), 201),
        ("n".repeat(MAX_WORKSPACE_NAME_BYTES + 1), 422),
    ] {
        let slug = format!("w{status}");
        let r = t
            .client
            .post("/api/workspaces", json!({"slug": slug, "name": name}))
            .await;
        assert_eq!(r.status.as_u16(), status);
    }
    s.stop().await;
}

/// Authentication and scope are checked from the request's head, before any of its body is
/// read: a request announcing 15 MB and sending a few bytes is answered at once (it would
/// otherwise wait for the rest of the body, until the 30 s request timeout).
async fn scopes_are_checked_before_the_body_is_read(b: Backend) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let s = TestServer::start(b).await;
    let admin = s.tenant(Plan::Free, ALL).await;
    let read_only =
        contextq_server::admin::create_key(&s.db, &admin.tenant_id, None, &[Scope::Read])
            .await
            .unwrap()
            .api_key;
    let rw = contextq_server::admin::create_key(&s.db, &admin.tenant_id, None, RW)
        .await
        .unwrap()
        .api_key;
    let addr = s.url.trim_start_matches("http://").to_string();
    let cases = [
        (
            "POST",
            "/api/contexts/bulk-upsert",
            Some(read_only.as_str()),
            "403",
        ),
        (
            "PUT",
            "/api/contexts/ctx_x",
            Some(read_only.as_str()),
            "403",
        ),
        (
            "POST",
            "/api/contexts/by-external/x/edit",
            Some(read_only.as_str()),
            "403",
        ),
        ("POST", "/api/workspaces", Some(rw.as_str()), "403"),
        ("POST", "/api/contexts/bulk-upsert", None, "401"),
    ];
    for (method, path, key, status) in cases {
        let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let auth = key
            .map(|k| format!("Authorization: Bearer {k}\r\n"))
            .unwrap_or_default();
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json\r\nContent-Length: 15000000\r\n\r\n{{\"contexts\": ["
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 512];
        let n = tokio::time::timeout(std::time::Duration::from_secs(10), conn.read(&mut answer))
            .await
            .unwrap_or_else(|_| panic!("{method} {path}: no answer before the body was sent"))
            .unwrap();
        let text = String::from_utf8_lossy(&answer[..n]);
        assert!(
            text.starts_with(&format!("HTTP/1.1 {status}")),
            "{method} {path}: {text}"
        );
    }
    s.stop().await;
}

async fn auth_and_scopes(b: Backend) {
    let s = TestServer::start(b).await;
    let admin = s.tenant(Plan::Free, ALL).await;
    let read_only = {
        let k = contextq_server::admin::create_key(&s.db, &admin.tenant_id, None, &[Scope::Read])
            .await
            .unwrap();
        admin.client.with_key(&k.api_key)
    };
    let rw = {
        let k = contextq_server::admin::create_key(&s.db, &admin.tenant_id, None, RW)
            .await
            .unwrap();
        admin.client.with_key(&k.api_key)
    };
    assert_eq!(read_only.get("/api/contexts").await.status, StatusCode::OK);
    let r = read_only.upsert("x", "y", &[]).await;
    r.assert_error(ErrorCode::Forbidden);
    assert!(r.message().contains("write"));
    let r = rw.post("/api/workspaces", json!({"slug": "n"})).await;
    r.assert_error(ErrorCode::Forbidden);
    assert_eq!(rw.upsert("x", "y", &[]).await.status, StatusCode::OK);
    let id = rw.id_of("x").await;
    assert_eq!(
        read_only
            .delete(&format!("/api/contexts/{id}"), None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        read_only.put_content(&id, "z", None).await.status,
        StatusCode::FORBIDDEN
    );

    for key in [
        "",
        "sk_live_short",
        "sk_live_0000000000000000000000000000000000000000",
        "Bearer x",
    ] {
        let r = admin.client.with_key(key).get("/api/workspaces").await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNAUTHORIZED, "unauthorized"),
            "{key:?}"
        );
    }
    let r = reqwest::get(format!("{}/api/workspaces", s.url))
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    // Revocation takes effect (this server's cache is bypassed after its TTL; a fresh key
    // that was never used is refused at once).
    let k = contextq_server::admin::create_key(&s.db, &admin.tenant_id, None, RW)
        .await
        .unwrap();
    assert!(
        contextq_server::admin::revoke_key(&s.db, &k.key_id)
            .await
            .unwrap()
    );
    assert_eq!(
        admin
            .client
            .with_key(&k.api_key)
            .get("/api/contexts")
            .await
            .status,
        StatusCode::UNAUTHORIZED
    );
    assert!(
        !contextq_server::admin::revoke_key(&s.db, &k.key_id)
            .await
            .unwrap()
    );
    s.stop().await;
}

async fn tenant_isolation(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s.tenant(Plan::Free, ALL).await;
    let bt = s.tenant(Plan::Free, ALL).await;
    assert_eq!(
        a.client
            .upsert("shared-name", "A's secret", &["mem-tool"])
            .await
            .status,
        StatusCode::OK
    );
    let a_ctx = a
        .client
        .get(&format!("/api/contexts/by-external/{}", seg("shared-name")))
        .await
        .body;
    let a_id = a_ctx["id"].as_str().unwrap();

    // B guesses A's id and external id: not found, never changed.
    let bc = &bt.client;
    assert_eq!(
        bc.get(&format!("/api/contexts/{a_id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        bc.get(&format!("/api/contexts/by-external/{}", seg("shared-name")))
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        bc.put(
            &format!("/api/contexts/{a_id}"),
            json!({"content": "pwned"}),
            None
        )
        .await
        .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        bc.delete(&format!("/api/contexts/{a_id}"), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        bc.get("/api/contexts?tag=mem-tool").await.body["contexts"],
        json!([])
    );
    // B's own row with the same external id is a different row.
    let r = bc.upsert("shared-name", "B's", &[]).await;
    assert_eq!(r.body["results"][0]["status"], "created");
    assert_ne!(r.body["results"][0]["id"].as_str().unwrap(), a_id);
    // Workspaces are per tenant: B archiving its "ws" leaves A's alone.
    assert_eq!(
        bc.post("/api/workspaces/ws/archive", json!({}))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        a.client.upsert("still-writable", "x", &[]).await.status,
        StatusCode::OK
    );
    let again = a.client.get(&format!("/api/contexts/{a_id}")).await.body;
    assert_eq!(again, a_ctx);
    s.stop().await;
}

async fn quota_per_plan(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let batch = |from: usize, n: usize| {
        let items: Vec<_> = (from..from + n)
            .map(|i| json!({"externalId": format!("q{i:03}"), "workspace": "ws", "type": "reference", "content": "x"}))
            .collect();
        json!({"contexts": items})
    };
    assert_eq!(
        c.post("/api/contexts/bulk-upsert", batch(0, 99))
            .await
            .status,
        StatusCode::OK
    );
    let r = c.post("/api/contexts/bulk-upsert", batch(99, 2)).await;
    r.assert_error(ErrorCode::QuotaExceeded);
    let m = r.message();
    assert!(
        m.contains("free") && m.contains("100") && m.contains("99"),
        "{m}"
    );
    assert_eq!(
        c.post("/api/contexts/bulk-upsert", batch(99, 1))
            .await
            .status,
        StatusCode::OK
    );
    let r = c.upsert("one-more", "x", &[]).await;
    assert_eq!(r.status, StatusCode::PAYMENT_REQUIRED);
    // Updates and deletes are never refused for quota.
    assert_eq!(
        c.upsert("q000", "changed", &[]).await.status,
        StatusCode::OK
    );
    let id = c.id_of("q001").await;
    assert_eq!(c.put_content(&id, "y", None).await.status, StatusCode::OK);
    assert_eq!(
        c.delete(&format!("/api/contexts/{id}"), None).await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(c.upsert("one-more", "x", &[]).await.status, StatusCode::OK);
    s.stop().await;
}

async fn pagination_prefix_tags_and_sizes(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let c = &t.client;
    for chunk in 0..12 {
        let items: Vec<_> = (0..100)
            .map(|i| {
                let n = chunk * 100 + i;
                let (ext, tags) = if n % 2 == 0 { (format!("mem-tool:ws/p/{n:04}"), vec!["mem-tool"]) } else { (format!("other/{n:04}"), vec![]) };
                json!({"externalId": ext, "workspace": "ws", "type": "reference", "content": "é".repeat(n % 7), "tags": tags})
            })
            .collect();
        let r = c
            .post("/api/contexts/bulk-upsert", json!({"contexts": items}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    // All 1,200 rows in pages of at most 500, ordered by externalId, no duplicates.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = Vec::new();
    loop {
        let q = match &cursor {
            Some(cur) => format!("/api/contexts?workspace=ws&limit=1000&cursor={cur}"),
            None => "/api/contexts?workspace=ws&limit=1000".into(),
        };
        let r = c.get(&q).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        let page = r.body["contexts"].as_array().unwrap();
        pages.push(page.len());
        for ctx in page {
            assert!(ctx.get("content").is_none(), "a summary has no content");
            seen.push(ctx["externalId"].as_str().unwrap().to_string());
        }
        match r.body["nextCursor"].as_str() {
            Some(n) => cursor = Some(n.to_string()),
            None => break,
        }
    }
    assert_eq!(pages, vec![500, 500, 200]);
    let mut sorted = seen.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(seen, sorted);
    assert_eq!(seen.len(), 1200);

    // Tag and prefix filters, sizeBytes.
    let r = c
        .get("/api/contexts?workspace=ws&tag=mem-tool&limit=10")
        .await;
    let page = r.body["contexts"].as_array().unwrap();
    assert_eq!(page.len(), 10);
    assert!(page.iter().all(|x| x["tags"] == json!(["mem-tool"])));
    assert_eq!(page[1]["externalId"], "mem-tool:ws/p/0002");
    assert_eq!(page[1]["sizeBytes"], 4, "2 × 'é' is 4 bytes of UTF-8");
    let r = c
        .get(&format!(
            "/api/contexts?externalIdPrefix={}",
            seg("other/01")
        ))
        .await;
    let page = r.body["contexts"].as_array().unwrap();
    assert_eq!(page.len(), 50);
    assert!(
        page.iter()
            .all(|x| x["externalId"].as_str().unwrap().starts_with("other/01"))
    );
    let r = c
        .get(&format!(
            "/api/contexts?externalIdPrefix={}&limit=5",
            seg("mem-tool:ws/p/119")
        ))
        .await;
    assert_eq!(r.body["contexts"].as_array().unwrap().len(), 5);
    assert_eq!(r.body["nextCursor"], json!(null));
    for bad in ["limit=0", "limit=-1", "limit=abc", "cursor=%%%"] {
        let r = c.get(&format!("/api/contexts?{bad}")).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    assert_eq!(
        c.get("/api/contexts?workspace=nope").await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

async fn health_and_graceful_shutdown(b: Backend) {
    let s = TestServer::start(b).await;
    let r = reqwest::get(format!("{}/health", s.url)).await.unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let url = s.url.clone();
    s.stop().await; // returns only once the server has finished
    assert!(reqwest::get(format!("{url}/health")).await.is_err());
}

async fn text_edit_extension(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let ext = "mem-tool:ws/a.md";
    let r = c.upsert(ext, "a\nb\nc\n", &["mem-tool"]).await;
    assert_eq!(r.status, StatusCode::OK);
    let advertised = r.headers["contextq-extensions"]
        .to_str()
        .unwrap()
        .to_string();
    assert!(advertised.contains("text-edit"), "{advertised}");
    let sr = |old: &str, new: &str| json!({"edit": {"strReplace": {"oldStr": old, "newStr": new}}, "requireTag": "mem-tool", "workspace": "ws"});

    // Applied, with the line where it starts and the new ETag.
    let r = c.edit(ext, sr("b", "B"), None, Some("k1")).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["context"]["content"], "a\nB\nc\n");
    assert_eq!(r.body["context"]["version"], 2);
    assert_eq!(r.body["changedLine"], 2);
    assert_eq!(r.body["replayed"], false);
    assert_eq!(r.etag.as_deref(), Some("\"2\""));
    // The same key with the same request again: the first outcome, nothing applied twice.
    let r = c.edit(ext, sr("b", "B"), None, Some("k1")).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        (
            &r.body["replayed"],
            &r.body["context"]["version"],
            &r.body["changedLine"]
        ),
        (&json!(true), &json!(2), &json!(2))
    );
    assert_eq!(r.body["context"]["content"], "a\nB\nc\n");

    // edit-snippet: the answer is the context without its content and the lines around the
    // change, however large the file.
    assert!(advertised.contains("edit-snippet"), "{advertised}");
    let big = "mem-tool:ws/big.md";
    let content: String = (1..=20_000).map(|i| format!("line {i}\n")).collect();
    c.upsert(big, &content, &["mem-tool"]).await;
    let mut small = sr("line 10000\n", "changed\n");
    small["snippetLines"] = json!(2);
    let r = c.edit(big, small.clone(), None, Some("k-big")).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(r.body["context"].get("content").is_none(), "{:?}", r.body);
    assert_eq!(r.body["context"]["version"], 2);
    assert_eq!(r.body["context"]["sizeBytes"], content.len() - 3);
    assert_eq!(r.body["changedLine"], 10_000);
    assert_eq!(
        r.body["snippet"],
        json!({"firstLine": 9_998, "lines": ["line 9998", "line 9999", "changed", "line 10001", "line 10002"]})
    );
    assert!(r.body.to_string().len() < 1_000, "{}", r.body);
    assert_eq!(r.etag.as_deref(), Some("\"2\""));
    // Too many lines asked for: refused before anything is applied.
    let mut greedy = sr("line 1\n", "first\n");
    greedy["snippetLines"] = json!(101);
    let r = c.edit(big, greedy, None, Some("k-greedy")).await;
    r.assert_error(ErrorCode::BadRequest);
    let r = c
        .get(&format!("/api/contexts/by-external/{}", seg(big)))
        .await;
    assert_eq!(r.body["version"], 2, "nothing applied");

    // The key is bound to its request: another edit, another file or another condition with
    // it is refused (422 naming the key), and nothing is applied or said to be.
    let other = "mem-tool:ws/b.md";
    c.upsert(other, "b\n", &["mem-tool"]).await;
    for (id, body, if_match) in [
        (ext, sr("c", "C"), None),
        (other, sr("b", "B"), None),
        (ext, sr("b", "B"), Some(2)),
    ] {
        let r = c.edit(id, body, if_match, Some("k1")).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::UNPROCESSABLE_ENTITY, "validation_failed"),
            "{id}: {:?}",
            r.body
        );
        assert!(r.message().contains("\"k1\""), "{}", r.message());
    }
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg(other)))
            .await
            .body["content"],
        "b\n"
    );
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg(ext)))
            .await
            .body["version"],
        2
    );
    // A key past its hour never replays: the same request is applied again.
    let top = json!({"edit": {"insert": {"line": 0, "text": "top\n"}}});
    let r = c.edit(other, top.clone(), None, Some("k2")).await;
    assert_eq!(r.body["context"]["version"], 2, "{:?}", r.body);
    let two_hours_ago = (chrono::Utc::now() - chrono::Duration::hours(2))
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    sqlx::query("UPDATE write_outcomes SET created_at = $1 WHERE key = 'k2'")
        .bind(two_hours_ago)
        .execute(s.db.pool())
        .await
        .unwrap();
    let r = c.edit(other, top, None, Some("k2")).await;
    assert_eq!(
        (r.status, &r.body["replayed"], &r.body["context"]["content"]),
        (StatusCode::OK, &json!(false), &json!("top\ntop\nb\n")),
        "{:?}",
        r.body
    );

    // Edits that cannot apply: 409 edit_failed, with the reason; nothing changed.
    let failed = |r: &common::Reply| {
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::CONFLICT, "edit_failed"),
            "{:?}",
            r.body
        );
        r.body["error"]["edit"].clone()
    };
    let r = c.edit(ext, sr("zzz", "y"), None, None).await;
    assert_eq!(failed(&r), json!({"reason": "not_found"}));
    c.upsert(ext, "x\ny\nx\n", &["mem-tool"]).await;
    let r = c.edit(ext, sr("x", "y"), None, None).await;
    assert_eq!(failed(&r), json!({"reason": "multiple", "lines": [1, 3]}));
    let r = c.edit(ext, sr("", "y"), None, None).await;
    assert_eq!(failed(&r), json!({"reason": "empty_old_str"}));
    let insert = |line: i64, text: &str| json!({"edit": {"insert": {"line": line, "text": text}}});
    let r = c.edit(ext, insert(4, "t"), None, None).await;
    assert_eq!(
        failed(&r),
        json!({"reason": "line_out_of_range", "line": 4, "lineCount": 3})
    );
    let r = c.edit(ext, insert(-1, "t"), None, None).await;
    assert_eq!(failed(&r)["reason"], "line_out_of_range");
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg(ext)))
            .await
            .body["version"],
        3
    );

    // Insert, with If-Match: the current version applies, a stale one is 412.
    let r = c.edit(ext, insert(0, "top\n"), Some(3), None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["context"]["content"], "top\nx\ny\nx\n");
    assert!(r.body.get("changedLine").is_none(), "{:?}", r.body);
    let r = c.edit(ext, insert(0, "again"), Some(3), None).await;
    r.assert_error(ErrorCode::PreconditionFailed);

    // Conditions: a tag the row lacks, another workspace, an unknown id: 404 alike.
    let mut other_tag = sr("top", "T");
    other_tag["requireTag"] = json!("other");
    assert_eq!(
        c.edit(ext, other_tag, None, None).await.status,
        StatusCode::NOT_FOUND
    );
    let mut other_ws = sr("top", "T");
    other_ws["workspace"] = json!("elsewhere");
    assert_eq!(
        c.edit(ext, other_ws, None, None).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        c.edit("nope", sr("a", "b"), None, None).await.status,
        StatusCode::NOT_FOUND
    );

    // Another tenant sees nothing to edit; a read-only key may not edit; bad keys and NUL.
    let other = s.tenant(Plan::Free, ALL).await;
    let r = other.client.edit(ext, sr("top", "T"), None, None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let reader = s.tenant(Plan::Free, &[Scope::Read]).await;
    assert_eq!(
        reader
            .client
            .edit(ext, sr("top", "T"), None, None)
            .await
            .status,
        StatusCode::FORBIDDEN
    );
    let r = c
        .edit(ext, sr("top", "T"), None, Some(&"k".repeat(129)))
        .await;
    r.assert_error(ErrorCode::BadRequest);
    let r = c.edit(ext, sr("top", "T\u{0}"), None, None).await;
    r.assert_error(ErrorCode::ValidationFailed);
    let now = c
        .get(&format!("/api/contexts/by-external/{}", seg(ext)))
        .await;
    assert_eq!(
        (now.body["version"].as_i64(), now.body["content"].as_str()),
        (Some(4), Some("top\nx\ny\nx\n"))
    );

    // Concurrent edits of one row never conflict: each is applied once, in some order.
    let mut tasks = Vec::new();
    for i in 0..16 {
        let c = c.clone();
        tasks.push(tokio::spawn(async move {
            c.edit(
                ext,
                json!({"edit": {"insert": {"line": 0, "text": format!("line {i}")}}}),
                None,
                Some(&format!("c{i}")),
            )
            .await
            .status
        }));
    }
    for task in tasks {
        assert_eq!(task.await.unwrap(), StatusCode::OK);
    }
    let now = c
        .get(&format!("/api/contexts/by-external/{}", seg(ext)))
        .await;
    assert_eq!(now.body["version"], 20);
    let content = now.body["content"].as_str().unwrap().to_string();
    for i in 0..16 {
        assert_eq!(
            content.matches(&format!("line {i}\n")).count(),
            1,
            "{content}"
        );
    }
    // Archived: read-only.
    c.post("/api/workspaces/ws/archive", json!({})).await;
    assert_eq!(
        c.edit(ext, sr("top", "T"), None, None).await.status,
        StatusCode::CONFLICT
    );
    assert!(
        contextq_server::admin::verify_audit(&s.db, None)
            .await
            .unwrap()
            .ok()
    );
}

/// A server started read-only refuses every write with 403 in the envelope, whatever the key,
/// and still answers reads.
async fn a_read_only_server_refuses_every_write(b: Backend) {
    let s =
        TestServer::start_with(b, contextq_server::ServerConfig::default().read_only(true)).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let c = &t.client;
    let refused = |r: common::Reply| {
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{:?}",
            r.body
        );
        assert!(r.message().contains("read-only"), "{}", r.message());
    };
    refused(c.upsert("a", "a", &[]).await);
    refused(
        c.post("/api/workspaces", json!({"slug": "other", "name": "other"}))
            .await,
    );
    refused(
        c.edit(
            "a",
            json!({"edit": {"insert": {"line": 0, "text": "x"}}}),
            None,
            None,
        )
        .await,
    );
    refused(
        c.put("/api/contexts/ctx_x", json!({"content": "x"}), None)
            .await,
    );
    refused(c.delete("/api/contexts/ctx_x", None).await);
    assert_eq!(c.get("/api/workspaces").await.status, StatusCode::OK);
    assert_eq!(c.get("/api/contexts").await.status, StatusCode::OK);
    // Not even a key's last use is written (a server that writes it does so within
    // milliseconds, in the background: watched for a second).
    for _ in 0..20 {
        let keys = contextq_server::admin::list_keys(&s.db, &t.tenant_id)
            .await
            .unwrap();
        let used = keys.iter().find(|k| k.key_id == t.key_id).unwrap();
        assert_eq!(used.last_used_at, None, "a read-only server wrote {used:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    s.stop().await;
}

/// The `rename` extension: one transaction, never over a context or a directory, history kept
/// on both ids (the new one's create names where it came from), the row's version moved on,
/// counts and audit chain intact.
async fn rename_extension(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let r = c.upsert("mem-tool:ws/a.md", "alpha\n", &["mem-tool"]).await;
    assert!(common::has_extension(&r, "rename"));
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    c.upsert("mem-tool:ws/taken.md", "t\n", &["mem-tool"]).await;
    c.upsert("mem-tool:ws/dir/x.md", "x\n", &["mem-tool"]).await;
    c.upsert("untagged", "u\n", &[]).await;
    let rename = |from: &str, to: &str| {
        let path = format!("/api/contexts/by-external/{}/rename", seg(from));
        let body = json!({"to": to, "title": "/memories/b.md", "requireTag": "mem-tool", "workspace": "ws"});
        async move { c.post(&path, body).await }
    };
    // Refused, nothing changed: onto a context, onto a directory, a missing or untagged source.
    for (from, to, status) in [
        (
            "mem-tool:ws/a.md",
            "mem-tool:ws/taken.md",
            StatusCode::CONFLICT,
        ),
        ("mem-tool:ws/a.md", "mem-tool:ws/dir", StatusCode::CONFLICT),
        ("mem-tool:ws/a.md", "mem-tool:ws/a.md", StatusCode::CONFLICT),
        (
            "mem-tool:ws/none.md",
            "mem-tool:ws/b.md",
            StatusCode::NOT_FOUND,
        ),
        ("untagged", "mem-tool:ws/b.md", StatusCode::NOT_FOUND),
    ] {
        let r = rename(from, to).await;
        assert_eq!(r.status, status, "{from} -> {to}: {:?}", r.body);
    }
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}",
            seg("mem-tool:ws/a.md")
        ))
        .await;
    assert_eq!(
        (r.body["version"].clone(), r.body["content"].clone()),
        (json!(1), json!("alpha\n"))
    );

    // Moved: same row, next version, new title, no content in the answer.
    let r = rename("mem-tool:ws/a.md", "mem-tool:ws/b.md").await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["context"]["id"], id.as_str());
    assert_eq!(r.body["context"]["externalId"], "mem-tool:ws/b.md");
    assert_eq!(r.body["context"]["title"], "/memories/b.md");
    assert_eq!(r.body["context"]["version"], 2);
    assert!(r.body["context"].get("content").is_none());
    assert_eq!(r.etag.as_deref(), Some("\"2\""));
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}",
            seg("mem-tool:ws/a.md")
        ))
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}",
            seg("mem-tool:ws/b.md")
        ))
        .await;
    assert_eq!(r.body["content"], "alpha\n");
    // A stale precondition on the row no longer holds.
    let r = c.put_content(&id, "late\n", Some(1)).await;
    assert_eq!(r.status, StatusCode::PRECONDITION_FAILED);

    // History: the old id ends with a delete, the new one starts with a create from it.
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions",
            seg("mem-tool:ws/a.md")
        ))
        .await;
    assert_eq!(r.body["versions"][0]["action"], "delete");
    assert_eq!(r.body["versions"][0]["version"], 2);
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions",
            seg("mem-tool:ws/b.md")
        ))
        .await;
    assert_eq!(r.body["versions"][0]["action"], "create");
    assert_eq!(r.body["versions"][0]["renamedFrom"], "mem-tool:ws/a.md");
    assert_eq!(r.body["versions"].as_array().unwrap().len(), 1);

    // Back again: numbers go on for the old id.
    let r = rename("mem-tool:ws/b.md", "mem-tool:ws/a.md").await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions",
            seg("mem-tool:ws/a.md")
        ))
        .await;
    assert_eq!(r.body["versions"][0]["version"], 3);
    assert_eq!(r.body["versions"][0]["renamedFrom"], "mem-tool:ws/b.md");

    s.stop_consistent().await;
}

/// Extension `by-prefix`: a directory deleted or moved in one transaction, all or nothing;
/// each context keeps its history (a rename's create version records where it came from).
async fn by_prefix_extension(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    for (id, text) in [
        ("mem-tool:ws/d/a.md", "a\n"),
        ("mem-tool:ws/d/sub/b.md", "b\n"),
        ("mem-tool:ws/d/ü.md", "u\n"),
        ("mem-tool:ws/dx.md", "not beneath d/\n"),
        ("mem-tool:ws/taken", "a file where a directory would go\n"),
        ("mem-tool:ws/busy/c.md", "c\n"),
    ] {
        let r = c.upsert(id, text, &["mem-tool"]).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    c.upsert("mem-tool:ws/d/untagged.md", "other tag\n", &["x"])
        .await;
    let r = c.get("/api/contexts").await;
    assert!(common::has_extension(&r, "by-prefix"));
    let scope = json!({"requireTag": "mem-tool", "workspace": "ws"});
    let rename = |from: &str, to: &str| {
        let mut body = scope.clone();
        body["from"] = json!(from);
        body["to"] = json!(to);
        body["titleFrom"] = json!("/memories/d/");
        body["titleTo"] = json!("/memories/e/");
        async move { c.post("/api/contexts/by-prefix/rename", body).await }
    };
    // Refused, nothing changed: onto a directory, onto a file, into itself, nothing there, not
    // a directory's prefix.
    for (from, to, status) in [
        ("mem-tool:ws/d/", "mem-tool:ws/busy/", StatusCode::CONFLICT),
        ("mem-tool:ws/d/", "mem-tool:ws/taken/", StatusCode::CONFLICT),
        (
            "mem-tool:ws/d/",
            "mem-tool:ws/d/sub/x/",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        ("mem-tool:ws/none/", "mem-tool:ws/e/", StatusCode::NOT_FOUND),
        (
            "mem-tool:ws/d",
            "mem-tool:ws/e/",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let r = rename(from, to).await;
        assert_eq!(r.status, status, "{from} -> {to}: {:?}", r.body);
    }
    let listed = |prefix: &str| {
        let path = format!("/api/contexts?externalIdPrefix={}", seg(prefix));
        async move {
            let r = c.get(&path).await;
            let mut ids: Vec<String> = r.body["contexts"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x["externalId"].as_str().unwrap().to_string())
                .collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(listed("mem-tool:ws/d/").await.len(), 4);

    // Moved: every tagged context under d/, nothing else; titles follow the path.
    let r = rename("mem-tool:ws/d/", "mem-tool:ws/e/").await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let moved: Vec<(String, String, i64)> = r.body["changed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["externalId"].as_str().unwrap().to_string(),
                x["to"].as_str().unwrap().to_string(),
                x["version"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        moved,
        vec![
            ("mem-tool:ws/d/a.md".into(), "mem-tool:ws/e/a.md".into(), 2),
            (
                "mem-tool:ws/d/sub/b.md".into(),
                "mem-tool:ws/e/sub/b.md".into(),
                2
            ),
            ("mem-tool:ws/d/ü.md".into(), "mem-tool:ws/e/ü.md".into(), 2),
        ]
    );
    assert_eq!(
        listed("mem-tool:ws/d/").await,
        vec!["mem-tool:ws/d/untagged.md"]
    );
    assert_eq!(
        listed("mem-tool:ws/e/").await,
        vec![
            "mem-tool:ws/e/a.md",
            "mem-tool:ws/e/sub/b.md",
            "mem-tool:ws/e/ü.md"
        ]
    );
    assert_eq!(listed("mem-tool:ws/dx").await, vec!["mem-tool:ws/dx.md"]);
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}",
            seg("mem-tool:ws/e/ü.md")
        ))
        .await;
    assert_eq!(r.body["content"], "u\n");
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions",
            seg("mem-tool:ws/e/sub/b.md")
        ))
        .await;
    assert_eq!(
        r.body["versions"][0]["renamedFrom"],
        "mem-tool:ws/d/sub/b.md"
    );
    assert_eq!(r.body["versions"][0]["action"], "create");
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions",
            seg("mem-tool:ws/d/sub/b.md")
        ))
        .await;
    assert_eq!(r.body["versions"][0]["action"], "delete");

    // Deleted: every tagged context under e/, each with its delete version; the other tag's
    // context under d/ is not touched by a delete of d/ scoped to mem-tool (404: none there).
    let delete = |prefix: &str| {
        let mut body = scope.clone();
        body["prefix"] = json!(prefix);
        async move { c.post("/api/contexts/by-prefix/delete", body).await }
    };
    let r = delete("mem-tool:ws/d/").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    let r = delete("mem-tool:ws/e/").await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["changed"].as_array().unwrap().len(), 3);
    assert_eq!(listed("mem-tool:ws/e/").await, Vec::<String>::new());
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions",
            seg("mem-tool:ws/e/a.md")
        ))
        .await;
    assert_eq!(r.body["versions"][0]["action"], "delete");
    // The new id's second version; the row's own version at the delete.
    assert_eq!(r.body["versions"][0]["version"], 2);
    assert_eq!(r.body["versions"][0]["contextVersion"], 2);

    // Archived: refused whole.
    let r = c.post("/api/workspaces/ws/archive", json!({})).await;
    assert!(r.status.is_success(), "{:?}", r.body);
    let r = delete("mem-tool:ws/busy/").await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);

    s.stop_consistent().await;
}

/// Extension `tree`: a directory two levels deep, sizes and counts added up by the server, within
/// the tag and workspace; the per-workspace layout's check of the first segment.
async fn tree_extension(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    for (id, text) in [
        ("m:ws/a.md", "1"),
        ("m:ws/d/b.md", "22"),
        ("m:ws/d/e/c.md", "333"),
        ("m:ws/d/e/f/g.md", "4444"),
        ("m:other/planted.md", "55555"),
    ] {
        c.upsert(id, text, &["m"]).await;
    }
    c.upsert("m:ws/d/untagged.md", "666666", &["x"]).await;
    let r = c
        .get("/api/contexts/tree?prefix=m%3Aws%2F&requireTag=m&workspace=ws")
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(common::has_extension(&r, "tree"));
    assert_eq!(
        (r.body["files"].clone(), r.body["sizeBytes"].clone()),
        (json!(4), json!(10))
    );
    let entries: Vec<(String, u64, u64)> = r.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["path"].as_str().unwrap().to_string(),
                e["files"].as_u64().unwrap(),
                e["sizeBytes"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        vec![
            ("a.md".into(), 1, 1),
            ("d/".into(), 3, 9),
            ("d/b.md".into(), 1, 2),
            ("d/e/".into(), 2, 7),
        ]
    );
    // A page that starts after an external id the client names (extension start-after).
    let r = c
        .get("/api/contexts?externalIdPrefix=m%3Aws%2F&startAfter=m%3Aws%2Fa.md&limit=1")
        .await;
    assert_eq!(
        r.body["contexts"][0]["externalId"], "m:ws/d/b.md",
        "{:?}",
        r.body
    );
    assert!(common::has_extension(&r, "start-after"));
    let next = r.body["nextCursor"].as_str().unwrap().to_string();
    let r = c
        .get(&format!(
            "/api/contexts?startAfter=m%3Aws%2Fa.md&cursor={next}"
        ))
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // One level: the directory's own entries only.
    let r = c
        .get("/api/contexts/tree?prefix=m%3Aws%2F&requireTag=m&workspace=ws&depth=1")
        .await;
    let paths = common::strings(&r.body["entries"], "path");
    assert_eq!(paths, ["a.md", "d/"]);
    assert_eq!(r.body["entries"][1]["files"], 3);
    let r = c.get("/api/contexts/tree?prefix=m%3A&depth=3").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    // Without the tag filter the untagged context counts too.
    let r = c.get("/api/contexts/tree?prefix=m%3Aws%2Fd%2F").await;
    assert_eq!(r.body["files"], 4);
    // The per-workspace layout: "m:other/planted.md" lives in workspace ws, not "other".
    let r = c.get("/api/contexts/tree?prefix=m%3A&requireTag=m").await;
    assert_eq!(r.body["files"], 5);
    let r = c
        .get("/api/contexts/tree?prefix=m%3A&requireTag=m&workspaceFirst=true")
        .await;
    assert_eq!(r.body["files"], 4, "{:?}", r.body);
    assert!(!r.body.to_string().contains("other"), "{:?}", r.body);
    // An unknown workspace is 404, as for a listing; a bad flag 400; another tenant sees nothing.
    let r = c.get("/api/contexts/tree?prefix=m%3A&workspace=nope").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    let r = c
        .get("/api/contexts/tree?prefix=m%3A&workspaceFirst=yes")
        .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    let other = s.tenant(Plan::Free, ALL).await;
    let r = other.client.get("/api/contexts/tree?prefix=m%3A").await;
    assert_eq!(
        (r.status, r.body["files"].clone()),
        (StatusCode::OK, json!(0))
    );
    s.stop().await;
}

/// Extension `tree-file`: the context at `file` comes back instead of the tree, within the
/// tree's tag and workspace and the key's workspaces; absent otherwise (the tree then as
/// without `file`).
async fn tree_file_extension(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    s.workspace(&t.tenant_id, "other").await;
    let c = &t.client;
    c.upsert("m:ws/notes", "a file named like a directory\n", &["m"])
        .await;
    c.upsert("m:ws/notes/inner.md", "22", &["m"]).await;
    c.upsert("m:ws/untagged.md", "x", &["x"]).await;
    let r = c
        .get("/api/contexts/tree?prefix=m%3Aws%2Fnotes%2F&requireTag=m&workspace=ws&file=m%3Aws%2Fnotes")
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(common::has_extension(&r, "tree-file"));
    // The file instead of the tree: a view shows the file.
    assert_eq!(r.body["files"], 0, "{:?}", r.body);
    assert_eq!(r.body["entries"], json!([]), "{:?}", r.body);
    assert_eq!(r.body["file"]["externalId"], "m:ws/notes");
    assert_eq!(
        r.body["file"]["content"], "a file named like a directory\n",
        "{:?}",
        r.body
    );
    assert_eq!(r.body["file"]["version"], 1);
    // No file there, none asked for, outside the tag, outside the workspace: no `file`, and the
    // tree as without it.
    let r = c
        .get("/api/contexts/tree?prefix=m%3Aws%2Fnotes%2F&requireTag=m&workspace=ws")
        .await;
    assert_eq!(r.body["files"], 1, "{:?}", r.body);
    assert_eq!(r.body["entries"][0]["path"], "inner.md", "{:?}", r.body);
    for query in [
        "prefix=m%3Aws%2Fnone%2F&requireTag=m&workspace=ws&file=m%3Aws%2Fnone",
        "prefix=m%3Aws%2Fnotes%2F&requireTag=m&workspace=ws",
        "prefix=m%3Aws%2F&requireTag=m&workspace=ws&file=m%3Aws%2Funtagged.md",
        "prefix=m%3Aother%2F&requireTag=m&workspace=other&file=m%3Aws%2Fnotes",
    ] {
        let r = c.get(&format!("/api/contexts/tree?{query}")).await;
        assert_eq!(r.status, StatusCode::OK, "{query}: {:?}", r.body);
        assert!(r.body.get("file").is_none(), "{query}: {:?}", r.body);
    }
    // A key limited to workspace "other" does not see the file in "ws".
    let key = s
        .limited_key(&t.tenant_id, &[Scope::Read], &["other"])
        .await;
    let r = c
        .with_key(&key.api_key)
        .get("/api/contexts/tree?prefix=m%3Aws%2Fnotes%2F&requireTag=m&file=m%3Aws%2Fnotes")
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(r.body.get("file").is_none(), "{:?}", r.body);
    assert_eq!(r.body["files"], 0, "{:?}", r.body);
    s.stop().await;
}

/// Extension `diff`: two versions' line diff, computed by the server; a delete reads as empty;
/// missing or bad versions are refused; another workspace's versions are not found.
async fn diff_extension(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let r = c.upsert("m:ws/a.md", "one\ntwo\nthree\n", &["m"]).await;
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    c.put_content(&id, "one\n2\nthree\nfour\n", Some(1)).await;
    c.delete(&format!("/api/contexts/{id}"), None).await;
    let path = |q: &str| format!("/api/contexts/by-external/{}/diff?{q}", seg("m:ws/a.md"));
    let r = c.get(&path("from=1&to=2&workspace=ws")).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert!(common::has_extension(&r, "diff"));
    let lines: Vec<(String, String)> = r.body["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["op"].as_str().unwrap().into(),
                l["text"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expect = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    };
    assert_eq!(
        lines,
        expect(&[
            ("same", "one"),
            ("del", "two"),
            ("add", "2"),
            ("same", "three"),
            ("add", "four")
        ])
    );
    // The delete (version 3) reads as empty.
    let r = c.get(&path("from=2&to=3")).await;
    assert_eq!(r.body["lines"].as_array().unwrap().len(), 4);
    assert!(
        r.body["lines"]
            .as_array()
            .unwrap()
            .iter()
            .all(|l| l["op"] == "del")
    );
    for (q, status) in [
        ("to=2", StatusCode::BAD_REQUEST),
        ("from=0&to=2", StatusCode::BAD_REQUEST),
        ("from=1&to=9", StatusCode::NOT_FOUND),
        ("from=1&to=2&workspace=other", StatusCode::NOT_FOUND),
    ] {
        assert_eq!(c.get(&path(q)).await.status, status, "{q}");
    }
    let other = s.tenant(Plan::Free, ALL).await;
    assert_eq!(
        other.client.get(&path("from=1&to=2")).await.status,
        StatusCode::NOT_FOUND
    );
    s.stop().await;
}

/// A directory over `MAX_PREFIX_CONTEXTS` is refused whole (413), nothing changed.
async fn by_prefix_is_bounded(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    let c = &t.client;
    let n = contextq_api::limits::MAX_PREFIX_CONTEXTS + 1;
    for chunk in (0..n).collect::<Vec<_>>().chunks(100) {
        let items: Vec<_> = chunk
            .iter()
            .map(|i| json!({"externalId": format!("big/{i:05}"), "workspace": "ws", "type": "reference", "content": "x", "tags": ["t"]}))
            .collect();
        let r = c
            .post("/api/contexts/bulk-upsert", json!({"contexts": items}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    let r = c
        .post("/api/contexts/by-prefix/delete", json!({"prefix": "big/"}))
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{:?}", r.body);
    assert!(
        r.body.to_string().contains("nothing was changed"),
        "{}",
        r.body
    );
    let r = c
        .post(
            "/api/contexts/by-prefix/rename",
            json!({"from": "big/", "to": "other/"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{:?}", r.body);
    let r = c.get("/api/contexts?externalIdPrefix=big%2F&limit=1").await;
    assert_eq!(r.body["contexts"][0]["externalId"], "big/00000");
    s.stop().await;
}

/// `DELETE /api/contexts/by-external/:id` (extension `delete-by-external`): within the tag and
/// the workspace given (outside them "not found", nothing changed), `If-Match` honoured, the
/// same `delete` version and audit row as a delete by id; a key limited to workspaces names the
/// workspace and deletes only there; a deleted and re-created context is deleted as the new row.
async fn delete_by_external_extension(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    s.workspace(&t.tenant_id, "other").await;
    let c = &t.client;
    let r = c.upsert("mem-tool:ws/a.md", "alpha\n", &["mem-tool"]).await;
    assert!(common::has_extension(&r, "delete-by-external"));
    c.upsert("untagged", "u\n", &[]).await;
    let url = |ext: &str, query: &str| format!("/api/contexts/by-external/{}{query}", seg(ext));
    let scoped = "?requireTag=mem-tool&workspace=ws";
    let exists =
        |ext: &'static str| async move { c.get(&url(ext, "")).await.status == StatusCode::OK };

    // Refused, nothing changed: missing, untagged, another workspace, a stale If-Match.
    for (ext, query, if_match, status) in [
        ("mem-tool:ws/none.md", scoped, None, StatusCode::NOT_FOUND),
        ("untagged", scoped, None, StatusCode::NOT_FOUND),
        (
            "mem-tool:ws/a.md",
            "?requireTag=mem-tool&workspace=other",
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "mem-tool:ws/a.md",
            "?requireTag=other-tag",
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "mem-tool:ws/a.md",
            scoped,
            Some(7),
            StatusCode::PRECONDITION_FAILED,
        ),
    ] {
        let r = c.delete(&url(ext, query), if_match).await;
        assert_eq!(r.status, status, "{ext}{query}: {:?}", r.body);
    }
    assert!(exists("mem-tool:ws/a.md").await && exists("untagged").await);

    // Deleted, conditionally and not.
    let r = c.delete(&url("mem-tool:ws/a.md", scoped), Some(1)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    assert!(!exists("mem-tool:ws/a.md").await);
    let r = c.delete(&url("mem-tool:ws/a.md", scoped), None).await;
    assert_eq!(
        r.status,
        StatusCode::NOT_FOUND,
        "a second delete finds nothing"
    );
    let r = c.delete(&url("untagged", ""), None).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "no scope: any context");

    // Re-created: the new row goes, its life's versions end with the delete.
    c.upsert("mem-tool:ws/a.md", "again\n", &["mem-tool"]).await;
    let r = c.delete(&url("mem-tool:ws/a.md", scoped), Some(1)).await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    let r = c.get(&url("mem-tool:ws/a.md", "/versions")).await;
    let actions: Vec<&str> = r.body["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        ["delete", "create", "delete", "create"],
        "{:?}",
        r.body
    );
    let r = c.get("/api/audit?action=context.delete").await;
    assert_eq!(
        r.body["entries"].as_array().map(Vec::len),
        Some(3),
        "{:?}",
        r.body
    );

    // A key limited to workspace "other": names it, deletes only there.
    c.upsert("mem-tool:ws/b.md", "b\n", &["mem-tool"]).await;
    let r = c
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [{"externalId": "mem-tool:other/c.md", "workspace": "other", "type": "reference", "content": "c\n", "tags": ["mem-tool"]}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let key = s
        .limited_key(&t.tenant_id, &[Scope::Read, Scope::Write], &["other"])
        .await;
    let limited = c.with_key(&key.api_key);
    let r = limited
        .delete(&url("mem-tool:ws/b.md", "?requireTag=mem-tool"), None)
        .await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.body);
    let r = limited.delete(&url("mem-tool:ws/b.md", scoped), None).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN, "{:?}", r.body);
    let r = limited
        .delete(
            &url("mem-tool:ws/b.md", "?requireTag=mem-tool&workspace=other"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NOT_FOUND, "{:?}", r.body);
    assert!(exists("mem-tool:ws/b.md").await);
    let r = limited
        .delete(
            &url(
                "mem-tool:other/c.md",
                "?requireTag=mem-tool&workspace=other",
            ),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{:?}", r.body);
    common::consistent(&s.db).await;
}

/// What another tenant's requests to the endpoints that change many rows (by-prefix delete and
/// rename, rename, delete by external id) answer and change.
async fn many_row_attempts(c: &common::Api) -> Vec<(StatusCode, serde_json::Value)> {
    let scope = json!({"requireTag": "mem-tool", "workspace": "ws"});
    let mut delete_dir = scope.clone();
    delete_dir["prefix"] = json!("mem-tool:ws/d/");
    let mut move_dir = scope.clone();
    move_dir["from"] = json!("mem-tool:ws/d/");
    move_dir["to"] = json!("mem-tool:ws/e/");
    move_dir["titleFrom"] = json!("/memories/d/");
    move_dir["titleTo"] = json!("/memories/e/");
    let mut move_file = scope.clone();
    move_file["to"] = json!("mem-tool:ws/g.md");
    move_file["title"] = json!("/memories/g.md");
    let file = seg("mem-tool:ws/f.md");
    let mut out = Vec::new();
    for r in [
        c.post("/api/contexts/by-prefix/delete", delete_dir).await,
        c.post("/api/contexts/by-prefix/rename", move_dir).await,
        c.post(
            &format!("/api/contexts/by-external/{file}/rename"),
            move_file,
        )
        .await,
        c.delete(&format!("/api/contexts/by-external/{file}"), None)
            .await,
    ] {
        out.push((r.status, r.body));
    }
    out
}

/// Everything a tenant holds, as it reads it: each context and its versions.
async fn holdings(c: &common::Api) -> Vec<serde_json::Value> {
    let listed = c.get("/api/contexts?limit=100").await.body;
    let mut out = vec![listed.clone()];
    for x in listed["contexts"].as_array().unwrap() {
        let id = x["id"].as_str().unwrap();
        out.push(c.get(&format!("/api/contexts/{id}")).await.body);
        out.push(c.get(&format!("/api/contexts/{id}/versions")).await.body);
    }
    out
}

/// The endpoints that change many rows never reach another tenant's: a tenant asking to move or
/// delete paths only another tenant holds gets the answer a path nobody holds gets, and the
/// other tenant's contexts and versions are as they were; the same paths of its own are changed
/// alone.
async fn many_row_endpoints_stay_in_their_tenant(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s.tenant(Plan::Free, ALL).await;
    let other = s.tenant(Plan::Free, ALL).await;
    let nobody_holds = many_row_attempts(&other.client).await;
    for (id, text) in [
        ("mem-tool:ws/d/a.md", "A's a\n"),
        ("mem-tool:ws/d/sub/b.md", "A's b\n"),
        ("mem-tool:ws/f.md", "A's f\n"),
    ] {
        let r = a.client.upsert(id, text, &["mem-tool"]).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    let before = holdings(&a.client).await;
    assert_eq!(before[0]["contexts"].as_array().unwrap().len(), 3);
    let a_holds = many_row_attempts(&other.client).await;
    assert_eq!(
        a_holds, nobody_holds,
        "another tenant's paths answer as unknown ones"
    );
    for (status, _) in &a_holds {
        assert_eq!(*status, StatusCode::NOT_FOUND);
    }
    assert_eq!(holdings(&a.client).await, before, "nothing of A changed");
    // The other tenant's own files at the same paths: its requests change them, A's stay.
    for id in ["mem-tool:ws/d/a.md", "mem-tool:ws/f.md"] {
        let r = other.client.upsert(id, "theirs\n", &["mem-tool"]).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    let theirs = many_row_attempts(&other.client).await;
    assert_eq!(theirs[0].0, StatusCode::OK, "{:?}", theirs[0].1);
    assert_eq!(
        common::strings(&theirs[0].1["changed"], "externalId"),
        ["mem-tool:ws/d/a.md"],
        "{:?}",
        theirs[0].1
    );
    assert_eq!(
        theirs[1].0,
        StatusCode::NOT_FOUND,
        "d/ is gone: {:?}",
        theirs[1].1
    );
    assert_eq!(theirs[2].0, StatusCode::OK, "{:?}", theirs[2].1);
    assert_eq!(
        theirs[3].0,
        StatusCode::NOT_FOUND,
        "f.md was moved: {:?}",
        theirs[3].1
    );
    assert_eq!(
        common::strings(
            &other.client.get("/api/contexts").await.body["contexts"],
            "externalId"
        ),
        ["mem-tool:ws/g.md"]
    );
    assert_eq!(holdings(&a.client).await, before, "nothing of A changed");
    s.stop_consistent().await;
}

/// The server's routes are the contract's table (`contextq_api::endpoints`), no more: each
/// endpoint answers a request without a key with 401 (it is routed), and the table's paths with
/// another method, or a path not in it, are "no such endpoint" or 405.
async fn routes_are_the_contracts_table(b: Backend) {
    use contextq_api::endpoints::{ENDPOINTS, find};
    let s = TestServer::start(b).await;
    let http = reqwest::Client::new();
    let send = |method: &str, path: &str| {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        http.request(method, format!("{}{path}", s.url)).send()
    };
    for e in ENDPOINTS {
        let path = e
            .path
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x1" } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        let status = send(e.method, &path).await.unwrap().status();
        let expected = if e.path == "/health" {
            StatusCode::OK
        } else {
            StatusCode::UNAUTHORIZED
        };
        assert_eq!(status, expected, "{} {}", e.method, e.path);
        for other in ["GET", "POST", "PUT", "DELETE"] {
            if find(other, &path).is_none() {
                let status = send(other, &path).await.unwrap().status();
                assert!(
                    matches!(
                        status,
                        StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND
                    ),
                    "{other} {path}: {status}"
                );
            }
        }
    }
    for path in [
        "/api/contexts/by-prefix/move",
        "/api/nothing",
        "/api/contexts/a/b/c",
    ] {
        let status = send("GET", path).await.unwrap().status();
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
    }
}

contextq_server::database_tests!(
    routes_are_the_contracts_table,
    delete_by_external_extension,
    many_row_endpoints_stay_in_their_tenant,
    rename_extension,
    by_prefix_extension,
    by_prefix_is_bounded,
    tree_extension,
    tree_file_extension,
    diff_extension,
    a_read_only_server_refuses_every_write,
    text_edit_extension,
    workspaces,
    request_body_limit_is_413,
    body_limits_per_route,
    bodies_wait_for_room_in_the_budget,
    every_error_is_the_json_envelope,
    field_limits_are_422,
    scopes_are_checked_before_the_body_is_read,
    health_and_graceful_shutdown,
    contexts_crud_and_conditional_requests,
    if_absent_and_all_or_nothing,
    auth_and_scopes,
    tenant_isolation,
    quota_per_plan,
    pagination_prefix_tags_and_sizes,
);
