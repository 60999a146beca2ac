//! The client calling a ContextQ server in this process (`contextq::local`), on SQLite and
//! PostgreSQL: what a service receives (the contract's headers, path and query only), and the
//! failures that are answers lost after sending: a call that fails after the server applied
//! the write (read back, so the tool still answers right), a service that never answers
//! (the client's timeout), a handler that panics. The key never shows in an error.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{ALL, Server, create, ok, options};
use contextq_memory_tool::contextq::local::{LocalAnswer, LocalService, RouterService};
use contextq_memory_tool::contextq::{ContextQError, RetryConfig};
use contextq_memory_tool::{Error, MemoryToolHandlers};
use contextq_server::{AppState, Backend, Plan, ServerConfig};
use serde_json::json;

/// The server's router over `server`'s database, called in this process.
fn router_of(server: &Server) -> Arc<dyn LocalService> {
    let state = AppState::new(server.db.clone(), ServerConfig::default());
    Arc::new(RouterService::new(contextq_server::app(state)))
}

/// Keeps each request's method, URI and headers, then passes it on.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn LocalService>,
    seen: Mutex<Vec<(http::Method, String, http::HeaderMap)>>,
}

impl LocalService for Recording {
    fn call(&self, request: http::Request<Vec<u8>>) -> LocalAnswer {
        self.seen.lock().unwrap().push((
            request.method().clone(),
            request.uri().to_string(),
            request.headers().clone(),
        ));
        self.inner.call(request)
    }
}

/// Passes every request on, but loses the answer of the next `lose` writes after the server
/// applied them, with a message carrying the key (which the client must mask).
#[derive(Debug)]
struct LosesAnswers {
    inner: Arc<dyn LocalService>,
    lose: AtomicUsize,
    key: String,
}

impl LocalService for LosesAnswers {
    fn call(&self, request: http::Request<Vec<u8>>) -> LocalAnswer {
        let write = request.method() != http::Method::GET;
        let answer = self.inner.call(request);
        let lose = write
            && self
                .lose
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
        let message = format!("lost on the way back to {}", self.key);
        Box::pin(async move {
            let answer = answer.await;
            if lose {
                return Err(message.into());
            }
            answer
        })
    }
}

/// Never answers.
#[derive(Debug)]
struct Silent;

impl LocalService for Silent {
    fn call(&self, _request: http::Request<Vec<u8>>) -> LocalAnswer {
        Box::pin(std::future::pending())
    }
}

fn transport(e: Error) -> contextq_memory_tool::contextq::error::TransportError {
    match e.into_backend_error::<ContextQError>() {
        Ok(ContextQError::Transport(t)) => t,
        other => panic!("expected a transport error, got {other:?}"),
    }
}

async fn requests_carry_the_contracts_headers(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let recording = Arc::new(Recording {
        inner: router_of(&server),
        seen: Mutex::default(),
    });
    let tool = contextq_memory_tool::contextq_memory_tool(
        options(&server.url, &key)
            .workspace("ws")
            .local_service(recording.clone()),
    )
    .unwrap();
    create(&tool, "/memories/a.md", "one\ntwo\n").await;
    ok(
        &tool,
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "two", "new_str": "2"}),
    )
    .await;
    assert!(
        ok(&tool, json!({"command": "view", "path": "/memories/a.md"}))
            .await
            .contains("2\t2")
    );
    ok(
        &tool,
        json!({"command": "delete", "path": "/memories/a.md"}),
    )
    .await;
    assert_eq!(
        server.stored(&key, "mem-tool:ws/a.md").await,
        None,
        "the deletes reached the database"
    );

    let seen = recording.seen.lock().unwrap();
    let host = server.url.trim_start_matches("http://");
    for (method, uri, headers) in seen.iter() {
        assert!(
            uri.starts_with("/api/"),
            "{method} {uri}: path and query only"
        );
        assert_eq!(headers["host"], host, "{method} {uri}");
        assert_eq!(headers["authorization"], format!("Bearer {key}"));
        assert!(headers["authorization"].is_sensitive());
    }
    let with = |name: &str| {
        seen.iter()
            .filter(|(_, _, h)| h.contains_key(name))
            .map(|(m, u, _)| format!("{m} {u}"))
            .collect::<Vec<_>>()
    };
    assert!(
        with("idempotency-key").iter().any(|r| r.ends_with("/edit")),
        "the edit carries its Idempotency-Key: {:?}",
        with("idempotency-key")
    );
    // The delete is one request, scoped to the tool's tag and workspace.
    assert!(
        seen.iter().any(|(m, u, _)| *m == http::Method::DELETE
            && u == "/api/contexts/by-external/mem-tool%3Aws%2Fa.md?requireTag=mem-tool&workspace=ws"),
        "{:?}",
        seen.iter().map(|(m, u, _)| format!("{m} {u}")).collect::<Vec<_>>()
    );
    assert!(
        seen.iter()
            .filter(|(m, _, _)| *m == http::Method::POST || *m == http::Method::PUT)
            .all(|(_, _, h)| h["content-type"] == "application/json")
    );
}

async fn a_write_whose_answer_is_lost_in_process_is_read_back(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let service = Arc::new(LosesAnswers {
        inner: router_of(&server),
        lose: AtomicUsize::new(1),
        key: key.clone(),
    });
    let tool = contextq_memory_tool::contextq_memory_tool(
        options(&server.url, &key)
            .workspace("ws")
            .local_service(service.clone()),
    )
    .unwrap();
    // Applied, answer lost: the store reads it back and the tool reports the creation.
    let r = tool
        .execute(json!({"command": "create", "path": "/memories/a.md", "file_text": "x\n"}))
        .await;
    assert_eq!(
        (r.is_error, r.content.as_str()),
        (false, "File created successfully at: /memories/a.md")
    );
    assert_eq!(service.lose.load(Ordering::SeqCst), 0, "an answer was lost");
    assert_eq!(
        server.stored(&key, "mem-tool:ws/a.md").await.as_deref(),
        Some("x\n")
    );

    // The error of a lost answer says it was sent, and masks the key.
    service.lose.store(1, Ordering::SeqCst);
    let client = options(&server.url, &key)
        .retry(RetryConfig::default().max_retries(0))
        .local_service(service.clone())
        .client()
        .unwrap();
    let t = transport(
        client
            .create_workspace("other", "Other")
            .await
            .expect_err("lost"),
    );
    assert!(t.sent && !t.timeout, "{t:?}");
    assert!(!t.message.contains(&key), "{}", t.message);
    assert!(
        t.message.contains(&contextq_api::mask_secret(&key)),
        "{}",
        t.message
    );
    assert!(t.url.starts_with(&server.url), "{}", t.url);
}

async fn a_service_that_never_answers_times_out(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let client = options(&server.url, &key)
        .retry(RetryConfig::default().max_retries(0))
        .timeout(Duration::from_millis(200))
        .local_service(Arc::new(Silent))
        .client()
        .unwrap();
    let started = std::time::Instant::now();
    let t = transport(client.list_workspaces().await.expect_err("silent"));
    assert!(t.timeout && t.sent, "{t:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(t.message.contains("did not answer within"), "{}", t.message);
}

async fn a_handler_that_panics_is_a_lost_answer(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let panics = axum::Router::new().route(
        "/api/workspaces",
        axum::routing::get(|| async {
            panic!("a handler failed");
            #[allow(unreachable_code)]
            ""
        }),
    );
    let client = options(&server.url, &key)
        .retry(RetryConfig::default().max_retries(0))
        .local_service(Arc::new(RouterService::new(panics)))
        .client()
        .unwrap();
    let t = transport(client.list_workspaces().await.expect_err("panicked"));
    assert!(t.sent && !t.timeout, "{t:?}");
    assert!(
        t.message.contains("the server in this process failed"),
        "{}",
        t.message
    );
}

contextq_server::database_tests!(
    requests_carry_the_contracts_headers,
    a_write_whose_answer_is_lost_in_process_is_read_back,
    a_service_that_never_answers_times_out,
    a_handler_that_panics_is_a_lost_answer,
);
