//! A database outage shorter than the retry budget costs Claude nothing: the memory tool over a
//! real server on PostgreSQL, the database cut away for a few seconds by a proxy
//! (`contextq_server::testing::OutageProxy`) while commands run, and one write whose `COMMIT`
//! answer is lost just before the outage. Every tool result is the command's real outcome
//! (none "did not confirm"), and each write is applied once. The server answers 503
//! `unavailable` meanwhile; the client retries those on time, not on count.

use crate::common;

use std::time::{Duration, Instant};

use common::handle;
use contextq_memory_tool::contextq::{ContextQMemoryToolOptions, RetryConfig};
use contextq_server::testing::{OutageMode, TestServer};
use contextq_server::{Plan, Scope};
use serde_json::json;

/// How long the database is away, as long as a failover takes: longer than counted retries
/// would last (three, each after the server's `Retry-After: 1`, about 5 s here), shorter than
/// the 30 s budget.
const OUTAGE: Duration = Duration::from_secs(7);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
async fn a_database_outage_within_the_budget_costs_claude_nothing() {
    let (server, proxy) = TestServer::behind_outage_proxy(Duration::from_millis(500)).await;
    let key = server
        .tenant(Plan::Unlimited, &[Scope::Read, Scope::Write], "ws")
        .await;
    // The library's defaults (30 s budget), as a user gets them.
    let tool = contextq_memory_tool::contextq_memory_tool(
        ContextQMemoryToolOptions::new(&key.api_key)
            .base_url(server.url())
            .retry(RetryConfig::default())
            .workspace("ws"),
    )
    .unwrap();
    for f in ["a", "gone"] {
        handle(
            &tool,
            json!({"command": "create", "path": format!("/memories/{f}.md"), "file_text": "alpha\n"}),
        )
        .await
        .unwrap();
    }

    // A create whose COMMIT is applied and its answer lost, and the database gone right
    // after: the server answers 500 (outcome unknown), then 503s; the client asks again with
    // the write's key until the database is back and gets the recorded outcome.
    proxy.set(OutageMode::CommitThenDown);
    let started = Instant::now();
    let back = {
        let proxy_down = async {
            // The first COMMIT is applied, its answer lost, and the database gone at once.
            while proxy.mode() != OutageMode::Down {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            tokio::time::sleep(OUTAGE).await;
            proxy.set(OutageMode::Up);
            started.elapsed()
        };
        let commands = async {
            let mut results = Vec::new();
            for input in [
                json!({"command": "create", "path": "/memories/b.md", "file_text": "beta\n"}),
                json!({"command": "view", "path": "/memories/a.md"}),
                json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "alpha", "new_str": "omega"}),
                json!({"command": "delete", "path": "/memories/gone.md"}),
                json!({"command": "create", "path": "/memories/c.md", "file_text": "gamma\n"}),
            ] {
                results.push((input["command"].clone(), handle(&tool, input).await));
            }
            results
        };
        let (back, results) = tokio::join!(proxy_down, commands);
        for (command, result) in &results {
            assert!(result.is_ok(), "{command}: {result:?}");
        }
        let texts: Vec<&str> = results.iter().map(|(_, r)| r.as_deref().unwrap()).collect();
        assert_eq!(texts[0], "File created successfully at: /memories/b.md");
        assert!(texts[1].contains("     1\talpha"), "{}", texts[1]);
        assert!(
            texts[2].starts_with("The memory file has been edited."),
            "{}",
            texts[2]
        );
        assert_eq!(texts[3], "Successfully deleted /memories/gone.md");
        assert_eq!(texts[4], "File created successfully at: /memories/c.md");
        back
    };
    assert!(
        started.elapsed() >= back,
        "the commands ended after the database came back"
    );
    // Each write applied once: one version each for the creates, two for the edit.
    for (file, versions) in [("b.md", 1), ("c.md", 1), ("a.md", 2)] {
        let path = format!("/api/contexts/by-external/mem-tool%3Aws%2F{file}/versions");
        let r = common::get_json(server.url(), &key.api_key, &path).await;
        assert_eq!(
            r["versions"].as_array().map(Vec::len),
            Some(versions),
            "{file}: {r}"
        );
    }
    let gone = handle(
        &tool,
        json!({"command": "view", "path": "/memories/gone.md"}),
    )
    .await
    .unwrap_err();
    assert!(
        gone.message().contains("does not exist"),
        "{}",
        gone.message()
    );
    server.stop().await;
}
