//! A precondition matches only the row it was read from: a file deleted and created again
//! between a read and a conditional write (its new row's own version restarts at 1, so it can
//! equal the version read) is never overwritten or deleted, through the store, a tree restore,
//! or a file restore whose check and write are one condition. Against the real server on SQLite
//! and (when configured) PostgreSQL.

use crate::common;

use common::{ALL, Server, content, create, moment, ok, options};
use contextq_memory_tool::contextq::history::{StepAction, StepOutcome};
use contextq_memory_tool::contextq::{ContextQMemoryTool, contextq_memory_tool};
use contextq_memory_tool::path::MemoryPath;
use contextq_memory_tool::store::{PutMode, Store};
use contextq_memory_tool::testing::proxy::{Fault, Gate, Late, Proxy};
use contextq_memory_tool::{Error, MemoryToolHandlers};
use contextq_server::{Backend, Plan};
use reqwest::Method;
use serde_json::{Value, json};

/// Deletes `/memories/<name>` and creates it again with `text` (a new row, version 1).
async fn recreate(other: &ContextQMemoryTool, name: &str, text: &str) {
    let path = format!("/memories/{name}");
    ok(other, json!({"command": "delete", "path": path})).await;
    ok(
        other,
        json!({"command": "create", "path": path, "file_text": text}),
    )
    .await;
}

async fn a_version_read_from_one_row_never_matches_the_next(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let (tool, other) = (server.tool(&key), server.tool(&key));
    let path = MemoryPath::parse("/memories/a.md").unwrap();
    for (name, write) in [("update", true), ("delete", false)] {
        create(&tool, "/memories/a.md", "first\n").await;
        let read = tool.store().get(&path).await.unwrap().unwrap();
        // Another client deletes it and creates it again: a new row at version 1, the
        // version just read.
        recreate(&other, "a.md", "second\n").await;
        let result = if write {
            tool.store()
                .put(&path, "lost?\n", PutMode::Update(read.version.unwrap()))
                .await
                .map(|_| ())
        } else {
            tool.store().delete(&path, read.version).await
        };
        assert!(
            matches!(result, Err(Error::Precondition { .. })),
            "{name}: {result:?}"
        );
        assert_eq!(
            server.stored(&key, "mem-tool:ws/a.md").await.as_deref(),
            Some("second\n"),
            "{name}"
        );
        // Gone without a new row: not found, as before.
        let read = tool.store().get(&path).await.unwrap().unwrap();
        ok(
            &other,
            json!({"command": "delete", "path": "/memories/a.md"}),
        )
        .await;
        let result = tool
            .store()
            .put(&path, "x", PutMode::Update(read.version.unwrap()))
            .await;
        assert!(
            matches!(result, Err(Error::NotFound { .. })),
            "{name}: {result:?}"
        );
    }
}

async fn a_tree_restore_never_writes_to_a_recreated_row(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let (tool, other) = (server.tool(&key), server.tool(&key));
    create(&tool, "/memories/t/f.md", "one\n").await;
    let at = moment().await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/t/f.md", "old_str": "one", "new_str": "two"})).await;
    let plan = tool.restore_plan("/memories/t", at).await.unwrap();
    assert_eq!(plan.steps[0].action, StepAction::Revert);
    // Deleted and created again, then edited: the new row is at version 2, as the planned one.
    recreate(&other, "t/f.md", "new\n").await;
    ok(&other, json!({"command": "str_replace", "path": "/memories/t/f.md", "old_str": "new", "new_str": "newer"})).await;
    let report = tool.restore_tree(&plan, |_, _| {}).await.unwrap();
    assert!(
        matches!(report.steps[0].1, StepOutcome::Conflict),
        "{:?}",
        report.steps
    );
    assert_eq!(
        server.stored(&key, "mem-tool:ws/t/f.md").await.as_deref(),
        Some("newer\n")
    );
}

async fn a_file_restore_checks_and_writes_in_one_condition(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let proxy = Proxy::start(&server.url).await;
    let tool = std::sync::Arc::new(
        contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap(),
    );
    let other = server.tool(&key);
    create(&tool, "/memories/f.md", "right\n").await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "right", "new_str": "wrong"})).await;
    // The user saw the newest version. Each read of the file the restore makes is held, and
    // another writer changes the file while it is: whichever read that is, the restore is
    // refused and the change is kept.
    for held in ["/api/contexts/by-external/", "/versions", "/versions/1"] {
        let seen = tool.history("/memories/f.md").await.unwrap()[0].version;
        let gate = Gate::default();
        proxy.fault(Method::GET, held, Fault::Hold(gate.clone()), 1);
        let restore = {
            let tool = tool.clone();
            tokio::spawn(async move { tool.restore("/memories/f.md", 1, Some(seen)).await })
        };
        gate.arrived().await;
        ok(&other, json!({"command": "insert", "path": "/memories/f.md", "insert_line": 0, "insert_text": "late\n"})).await;
        gate.open();
        let result = restore.await.unwrap();
        proxy.clear_faults();
        assert!(
            matches!(result, Err(Error::Precondition { .. })),
            "held {held}: {result:?}"
        );
        let now = content(&server.url, &key, "mem-tool:ws/f.md")
            .await
            .unwrap();
        assert!(now.starts_with("late\n"), "held {held}: {now:?}");
    }
    // Nothing in between: restored.
    let seen = tool.history("/memories/f.md").await.unwrap()[0].version;
    tool.restore("/memories/f.md", 1, Some(seen)).await.unwrap();
    assert_eq!(
        server.stored(&key, "mem-tool:ws/f.md").await.as_deref(),
        Some("right\n")
    );
}

/// Runs `input` through `tool` while the proxy loses the answer to its first `method` request
/// to `path` and holds the adapter's repeat of it; the lost request then commits (after the
/// adapter's read-back said "not applied"), and only then does the repeat go on.
async fn late_commit(
    proxy: &Proxy,
    tool: &std::sync::Arc<ContextQMemoryTool>,
    method: Method,
    path: &str,
    input: Value,
) -> contextq_memory_tool::ToolResult {
    let late = Late::default();
    let repeat = Gate::default();
    proxy.fault(method.clone(), path, Fault::LostThenLate(late.clone()), 1);
    proxy.fault(method, path, Fault::Hold(repeat.clone()), 1);
    let run = {
        let tool = tool.clone();
        tokio::spawn(async move { tool.execute(input).await })
    };
    repeat.arrived().await;
    late.commit().await;
    repeat.open();
    let result = run.await.unwrap();
    proxy.clear_faults();
    result
}

async fn a_write_that_commits_after_the_client_gave_up_is_its_own(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    // Conditional requests without text-edit: edits read, apply and PUT with If-Match.
    let proxy = Proxy::hiding(&server.url, &["text-edit"]).await;
    let tool = std::sync::Arc::new(
        contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap(),
    );
    ok(&tool, json!({"command": "view", "path": "/memories"})).await;

    // create: its own late create is not "already exists".
    let r = late_commit(
        &proxy,
        &tool,
        Method::POST,
        "/api/contexts/bulk-upsert",
        json!({"command": "create", "path": "/memories/c.md", "file_text": "mine\n"}),
    )
    .await;
    assert!(!r.is_error, "create: {}", r.content);
    // insert (read, apply, PUT If-Match): applied once, not twice.
    let r = late_commit(
        &proxy,
        &tool,
        Method::PUT,
        "/api/contexts/",
        json!({"command": "insert", "path": "/memories/c.md", "insert_line": 0, "insert_text": "top\n"}),
    )
    .await;
    assert!(!r.is_error, "insert: {}", r.content);
    assert_eq!(
        server.stored(&key, "mem-tool:ws/c.md").await.as_deref(),
        Some("top\nmine\n")
    );
    // delete: its own late delete is not "not found".
    let r = late_commit(
        &proxy,
        &tool,
        Method::DELETE,
        "/api/contexts/",
        json!({"command": "delete", "path": "/memories/c.md"}),
    )
    .await;
    assert!(!r.is_error, "delete: {}", r.content);
    assert_eq!(content(&server.url, &key, "mem-tool:ws/c.md").await, None);
}

contextq_server::database_tests!(
    a_write_that_commits_after_the_client_gave_up_is_its_own,
    a_version_read_from_one_row_never_matches_the_next,
    a_tree_restore_never_writes_to_a_recreated_row,
    a_file_restore_checks_and_writes_in_one_condition,
);
