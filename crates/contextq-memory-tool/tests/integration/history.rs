//! History, versions and restores through `ContextQMemoryTool` against the real server (SQLite
//! and PostgreSQL): the versions each of the six commands leaves, restoring a file and a tree to
//! a point in time, restores refused on a concurrent change, pinned-workspace isolation, a
//! ContextQ without the extension; read-only use and the secret guard.

use crate::common;

use common::{ALL, Server, content, create, moment, ok, options, seed_rows};
use contextq_api::history::Action;
use contextq_memory_tool::contextq::contextq_memory_tool;
use contextq_memory_tool::contextq::history::{Restored, StepAction, StepOutcome};
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{ContextQError, Error, MemoryToolHandlers};
use contextq_server::{Backend, Plan, Scope};
use serde_json::json;

fn actions(h: &[contextq_memory_tool::contextq::history::FileVersion]) -> Vec<(u64, Action)> {
    h.iter().map(|v| (v.version, v.action)).collect()
}

/// The content of `path`'s version `n`.
async fn content_of(
    tool: &contextq_memory_tool::contextq::ContextQMemoryTool,
    path: &str,
    n: u64,
) -> Option<String> {
    tool.version(path, n).await.unwrap().content
}

async fn every_command_leaves_versions(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let tool = server.tool(&key);
    create(&tool, "/memories/a.md", "one\n").await;
    ok(&tool, json!({"command": "view", "path": "/memories/a.md"})).await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "two"})).await;
    ok(&tool, json!({"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "three\n"})).await;
    let h = tool.history("/memories/a.md").await.unwrap();
    assert_eq!(
        actions(&h),
        [
            (3, Action::Update),
            (2, Action::Update),
            (1, Action::Create)
        ]
    );
    assert_eq!(h[0].size, "two\nthree\n".len() as u64);
    assert_eq!(
        h[0].key.as_deref(),
        Some(&*format!("sk_live_…{}", &key[key.len() - 4..]))
    );
    assert!(h[0].content.is_none());
    assert_eq!(
        content_of(&tool, "/memories/a.md", 2).await.as_deref(),
        Some("two\n")
    );
    // Rename: the old path ends with a delete, the new one starts with a create.
    ok(
        &tool,
        json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b.md"}),
    )
    .await;
    assert_eq!(
        actions(&tool.history("/memories/a.md").await.unwrap())[0],
        (4, Action::Delete)
    );
    let h = tool.history("/memories/b.md").await.unwrap();
    assert_eq!(actions(&h), [(1, Action::Create)]);
    assert_eq!(
        content_of(&tool, "/memories/b.md", 1).await.as_deref(),
        Some("two\nthree\n")
    );
    // Directory rename and delete: every file beneath gets its versions.
    create(&tool, "/memories/d/x.md", "x\n").await;
    create(&tool, "/memories/d/e/y.md", "y\n").await;
    ok(
        &tool,
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d2"}),
    )
    .await;
    for (old, new) in [
        ("/memories/d/x.md", "/memories/d2/x.md"),
        ("/memories/d/e/y.md", "/memories/d2/e/y.md"),
    ] {
        assert_eq!(
            actions(&tool.history(old).await.unwrap()),
            [(2, Action::Delete), (1, Action::Create)]
        );
        assert_eq!(
            actions(&tool.history(new).await.unwrap()),
            [(1, Action::Create)]
        );
    }
    ok(&tool, json!({"command": "delete", "path": "/memories/d2"})).await;
    assert_eq!(
        actions(&tool.history("/memories/d2/e/y.md").await.unwrap()),
        [(2, Action::Delete), (1, Action::Create)]
    );
    // Errors name what is wrong.
    assert!(matches!(
        tool.history("/memories/never.md").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        tool.version("/memories/b.md", 9).await,
        Err(Error::VersionNotFound { version: 9, .. })
    ));
    assert!(matches!(
        tool.history("/memories").await,
        Err(Error::IsADirectory { .. })
    ));
    assert!(matches!(
        tool.history("/etc/passwd").await,
        Err(Error::Path(_))
    ));
}

async fn restore_a_file(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let (tool, other) = (server.tool(&key), server.tool(&key));
    create(&tool, "/memories/f.md", "right\n").await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/f.md", "old_str": "right", "new_str": "wrong"})).await;
    // The user looked at version 2 (the newest); another writer changes it: refused.
    ok(&other, json!({"command": "insert", "path": "/memories/f.md", "insert_line": 1, "insert_text": "more\n"})).await;
    assert!(matches!(
        tool.restore("/memories/f.md", 1, Some(2)).await,
        Err(Error::Precondition { .. })
    ));
    assert_eq!(
        server.stored(&key, "mem-tool:ws/f.md").await.as_deref(),
        Some("wrong\nmore\n")
    );
    // Looking again (version 3 is the newest): restored, as a new version.
    assert_eq!(
        tool.restore("/memories/f.md", 1, Some(3)).await.unwrap(),
        Restored::Rewrote
    );
    assert_eq!(
        server.stored(&key, "mem-tool:ws/f.md").await.as_deref(),
        Some("right\n")
    );
    // Marked as what it was: a restore of version 1 (extension `restore-marks`).
    let h = tool.history("/memories/f.md").await.unwrap();
    assert_eq!(actions(&h)[0], (4, Action::Restore));
    assert_eq!(h[0].restored_from, Some(1));
    assert_eq!(
        tool.restore("/memories/f.md", 4, None).await.unwrap(),
        Restored::Unchanged
    );
    // Restoring a delete deletes; restoring a version of a deleted file recreates it.
    ok(
        &tool,
        json!({"command": "delete", "path": "/memories/f.md"}),
    )
    .await;
    assert_eq!(
        tool.restore("/memories/f.md", 2, None).await.unwrap(),
        Restored::Recreated
    );
    assert_eq!(
        server.stored(&key, "mem-tool:ws/f.md").await.as_deref(),
        Some("wrong\n")
    );
    let h = tool.history("/memories/f.md").await.unwrap();
    assert_eq!(
        (actions(&h)[0], h[0].restored_from),
        ((6, Action::Restore), Some(2))
    );
    assert_eq!(
        tool.restore("/memories/f.md", 5, None).await.unwrap(),
        Restored::Deleted
    );
    assert_eq!(content(&server.url, &key, "mem-tool:ws/f.md").await, None);
    // A server that does not mark restores (the extension hidden): the adapter sends no mark,
    // and the restore is the plain update it always was.
    let proxy = Proxy::hiding(&server.url, &["restore-marks"]).await;
    let unmarked = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
    assert_eq!(
        unmarked.restore("/memories/f.md", 2, None).await.unwrap(),
        Restored::Recreated
    );
    let h = unmarked.history("/memories/f.md").await.unwrap();
    assert_eq!(
        (actions(&h)[0], h[0].restored_from),
        ((8, Action::Create), None)
    );
}

async fn restore_a_tree_to_a_point_in_time(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let tool = server.tool(&key);
    for (p, t) in [
        ("p/a.md", "a1\n"),
        ("p/b.md", "b1\n"),
        ("p/same.md", "s\n"),
        ("q/out.md", "o\n"),
    ] {
        ok(
            &tool,
            json!({"command": "create", "path": format!("/memories/{p}"), "file_text": t}),
        )
        .await;
    }
    let then = moment().await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/p/a.md", "old_str": "a1", "new_str": "a2"})).await;
    ok(
        &tool,
        json!({"command": "delete", "path": "/memories/p/b.md"}),
    )
    .await;
    create(&tool, "/memories/p/c.md", "c\n").await;
    create(&tool, "/memories/p/deep/d.md", "d\n").await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/q/out.md", "old_str": "o", "new_str": "O"})).await;

    let plan = tool.restore_plan("/memories/p", then).await.unwrap();
    let steps: Vec<(String, StepAction)> = plan
        .steps
        .iter()
        .map(|s| (s.path.normalized(), s.action))
        .collect();
    assert_eq!(
        steps,
        [
            ("/memories/p/a.md".to_string(), StepAction::Revert),
            ("/memories/p/b.md".into(), StepAction::Recreate),
            ("/memories/p/c.md".into(), StepAction::Remove),
            ("/memories/p/deep/d.md".into(), StepAction::Remove),
            ("/memories/p/same.md".into(), StepAction::Unchanged),
        ]
    );
    // A plan changes nothing; a change after it is left alone and reported.
    ok(&tool, json!({"command": "str_replace", "path": "/memories/p/c.md", "old_str": "c", "new_str": "C"})).await;
    let mut calls = Vec::new();
    let report = tool
        .restore_tree(&plan, |done, total| calls.push((done, total)))
        .await
        .unwrap();
    assert_eq!(calls, [(1, 4), (2, 4), (3, 4), (4, 4)]);
    assert_eq!(report.done(StepAction::Revert), 1);
    assert_eq!(report.done(StepAction::Recreate), 1);
    assert_eq!(report.done(StepAction::Remove), 1);
    let conflicts: Vec<String> = report.conflicts().map(|s| s.path.normalized()).collect();
    assert_eq!(conflicts, ["/memories/p/c.md"]);
    assert!(!report.complete());
    let get = |p: &'static str| content(&server.url, &key, p);
    assert_eq!(get("mem-tool:ws/p/a.md").await.as_deref(), Some("a1\n"));
    assert_eq!(get("mem-tool:ws/p/b.md").await.as_deref(), Some("b1\n"));
    assert_eq!(get("mem-tool:ws/p/c.md").await.as_deref(), Some("C\n"));
    assert_eq!(get("mem-tool:ws/p/deep/d.md").await, None);
    // Outside the directory: untouched.
    assert_eq!(get("mem-tool:ws/q/out.md").await.as_deref(), Some("O\n"));
    // History was added to, never rewritten; the recreation is marked as a restore.
    assert_eq!(
        actions(&tool.history("/memories/p/b.md").await.unwrap()),
        [
            (3, Action::Restore),
            (2, Action::Delete),
            (1, Action::Create)
        ]
    );
    // Done again: only the conflict is left.
    let again = tool.restore_plan("/memories/p", then).await.unwrap();
    let changes: Vec<String> = again.changes().map(|s| s.path.normalized()).collect();
    assert_eq!(changes, ["/memories/p/c.md"]);
}

async fn history_stays_in_its_workspace(b: Backend) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Free, ALL, "acme").await;
    server.workspace(&tenant, "other").await;
    let tool = contextq_memory_tool(options(&server.url, &key).workspace("acme")).unwrap();
    // A row of workspace `other` holding an external id of acme's namespace, with history.
    seed_rows(
        &server.url,
        &key,
        &[json!({"externalId": "mem-tool:acme/planted.md", "workspace": "other", "type": "reference", "content": "planted\n", "tags": ["mem-tool"]})],
    )
    .await;
    assert!(matches!(
        tool.history("/memories/planted.md").await,
        Err(Error::NotFound { .. })
    ));
    assert!(matches!(
        tool.version("/memories/planted.md", 1).await,
        Err(Error::VersionNotFound { .. })
    ));
    let plan = tool
        .restore_plan("/memories", "2100-01-01T00:00:00Z".parse().unwrap())
        .await
        .unwrap();
    assert!(plan.steps.is_empty(), "{:?}", plan.steps);
    // A row without the tool's tag has no history for the tool either.
    seed_rows(
        &server.url,
        &key,
        &[json!({"externalId": "mem-tool:acme/untagged.md", "workspace": "acme", "type": "reference", "content": "x\n"})],
    )
    .await;
    assert!(matches!(
        tool.history("/memories/untagged.md").await,
        Err(Error::NotFound { .. })
    ));
    // Another tenant's history is never seen.
    let (_, key2) = server.tenant(Plan::Free, ALL, "acme").await;
    let tool2 = contextq_memory_tool(options(&server.url, &key2).workspace("acme")).unwrap();
    create(&tool, "/memories/mine.md", "m\n").await;
    assert!(matches!(
        tool2.history("/memories/mine.md").await,
        Err(Error::NotFound { .. })
    ));
    // Per-workspace mode: the root spans workspaces and cannot be restored as one.
    let per_ws = contextq_memory_tool(options(&server.url, &key)).unwrap();
    let err = per_ws
        .restore_plan("/memories", "2100-01-01T00:00:00Z".parse().unwrap())
        .await
        .unwrap_err();
    assert!(
        matches!(err.contextq(), Some(ContextQError::OutsideWorkspace { .. })),
        "{err}"
    );
    assert_eq!(
        actions(&per_ws.history("/memories/acme/mine.md").await.unwrap()),
        [(1, Action::Create)]
    );
}

async fn without_the_extension_history_is_a_clear_error(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let proxy = Proxy::plain(&server.url).await;
    let tool = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
    create(&tool, "/memories/a.md", "a\n").await;
    for err in [
        tool.history("/memories/a.md").await.unwrap_err(),
        tool.version("/memories/a.md", 1).await.unwrap_err(),
        tool.restore("/memories/a.md", 1, None).await.unwrap_err(),
        tool.restore_plan("/memories", "2026-01-01T00:00:00Z".parse().unwrap())
            .await
            .unwrap_err(),
    ] {
        assert!(
            matches!(
                err.contextq(),
                Some(ContextQError::HistoryUnavailable { .. })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("keeps no history"), "{err}");
    }
}

async fn read_only_and_the_secret_guard(b: Backend) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let tool = server.tool(&key);
    create(&tool, "/memories/a.md", "a\n").await;
    let ro =
        contextq_memory_tool(options(&server.url, &key).workspace("ws").read_only(true)).unwrap();
    assert!(
        ok(&ro, json!({"command": "view", "path": "/memories"}))
            .await
            .contains("a.md")
    );
    for (command, input) in [
        (
            "create",
            json!({"command": "create", "path": "/memories/b.md", "file_text": "b"}),
        ),
        (
            "str_replace",
            json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"}),
        ),
        (
            "insert",
            json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "b"}),
        ),
        (
            "delete",
            json!({"command": "delete", "path": "/memories/a.md"}),
        ),
        (
            "rename",
            json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"}),
        ),
    ] {
        let r = ro.execute(input).await;
        assert!(r.is_error);
        assert_eq!(
            r.content,
            format!(
                "Error: The memory is read-only here: {command} is not allowed and nothing was changed. Memory can still be viewed."
            )
        );
    }
    assert_eq!(
        actions(&tool.history("/memories/a.md").await.unwrap()),
        [(1, Action::Create)]
    );
    // A key without the write scope: the same kind of message, not a raw 403.
    let read_key = contextq_server::admin::create_key(&server.db, &tenant, None, &[Scope::Read])
        .await
        .unwrap();
    let reader =
        contextq_memory_tool(options(&server.url, &read_key.api_key).workspace("ws")).unwrap();
    let r = reader
        .execute(json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"}))
        .await;
    assert!(r.is_error);
    assert!(
        r.content.starts_with("Error: The memory is read-only here"),
        "{}",
        r.content
    );

    // The secret guard: nothing is written.
    let secret = "sk-ant-api03-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    for input in [
        json!({"command": "create", "path": "/memories/k.md", "file_text": format!("key:\n{secret}\n")}),
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": secret}),
        json!({"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "AKIAIOSFODNN7EXAMPLE"}),
    ] {
        let r = tool.execute(input).await;
        assert!(r.is_error);
        assert!(
            r.content.contains("Do not store credentials"),
            "{}",
            r.content
        );
    }
    let r = tool
        .execute(json!({"command": "create", "path": "/memories/k.md", "file_text": format!("key:\n{secret}\n")}))
        .await;
    assert!(
        r.content
            .contains("line 2 of the content looks like an Anthropic API key"),
        "{}",
        r.content
    );
    assert_eq!(content(&server.url, &key, "mem-tool:ws/k.md").await, None);
    assert_eq!(
        server.stored(&key, "mem-tool:ws/a.md").await.as_deref(),
        Some("a\n")
    );
    // Turned off, it is stored.
    let unguarded = contextq_memory_tool(
        options(&server.url, &key)
            .workspace("ws")
            .secret_guard(false),
    )
    .unwrap();
    ok(
        &unguarded,
        json!({"command": "create", "path": "/memories/k.md", "file_text": secret}),
    )
    .await;

    // Restores go through the same policy: read-only refuses them, and the guard refuses to
    // bring a credential back. Nothing changes.
    let at = chrono::Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(15)).await;
    ok(&unguarded, json!({"command": "str_replace", "path": "/memories/k.md", "old_str": secret, "new_str": "gone"})).await;
    let latest = tool.history("/memories/k.md").await.unwrap()[0].version;
    assert!(matches!(
        ro.restore("/memories/k.md", 1, Some(latest)).await,
        Err(Error::ReadOnly { command: "restore" })
    ));
    let plan = ro.restore_plan("/memories", at).await.unwrap();
    assert!(matches!(
        ro.restore_tree(&plan, |_, _| {}).await,
        Err(Error::ReadOnly { command: "restore" })
    ));
    assert!(matches!(
        tool.restore("/memories/k.md", 1, Some(latest)).await,
        Err(Error::SecretRefused { .. })
    ));
    let plan = tool.restore_plan("/memories", at).await.unwrap();
    let report = tool.restore_tree(&plan, |_, _| {}).await.unwrap();
    assert!(
        report
            .steps
            .iter()
            .any(|(_, o)| matches!(o, StepOutcome::Failed(Error::SecretRefused { .. }))),
        "{:?}",
        report.steps
    );
    assert_eq!(
        server.stored(&key, "mem-tool:ws/k.md").await.as_deref(),
        Some("gone")
    );
}

contextq_server::database_tests!(
    every_command_leaves_versions,
    restore_a_file,
    restore_a_tree_to_a_point_in_time,
    history_stays_in_its_workspace,
    without_the_extension_history_is_a_clear_error,
    read_only_and_the_secret_guard,
);
