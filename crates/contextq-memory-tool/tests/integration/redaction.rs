//! Redaction through `ContextQMemoryTool` against the real server (SQLite and PostgreSQL): one
//! version, every version holding a text (a file, a directory, the whole memory in
//! per-workspace mode), a plan that changes nothing, a match of more than one request; history,
//! versions and restores that say "redacted"; refusals that change nothing; a pinned tool that
//! never reaches another workspace; a ContextQ without the extension.

use crate::common;

use common::{ALL, Server, create, moment, ok, options};
use contextq_memory_tool::contextq::ErrorCode;
use contextq_memory_tool::contextq::contextq_memory_tool;
use contextq_memory_tool::contextq::history::StepAction;
use contextq_memory_tool::contextq::redaction::RedactTarget;
use contextq_memory_tool::testing::proxy::Proxy;
use contextq_memory_tool::{ContextQError, Error};
use contextq_server::{Backend, Plan};
use serde_json::json;

const SECRET: &str = "hunter2-Zq8-vault-pass";

fn matching(all_paths: bool) -> RedactTarget<'static> {
    RedactTarget::Matching {
        text: SECRET,
        all_paths,
    }
}

async fn redact_a_version_and_what_history_says(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let tool = server.tool(&key);
    create(&tool, "/memories/db.md", &format!("password: {SECRET}\n")).await;
    let before = moment().await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/db.md", "old_str": SECRET, "new_str": "(vault)"})).await;

    // The file's current version is refused, nothing changed.
    let err = tool
        .redact("/memories/db.md", RedactTarget::Version(2), false)
        .await
        .unwrap_err();
    match err.contextq() {
        Some(ContextQError::Api {
            code: Some(ErrorCode::Conflict),
            message,
            ..
        }) => assert!(message.contains("current content"), "{message}"),
        _ => panic!("{err}"),
    }
    // The plan, then the redaction.
    let plan = tool
        .redact("/memories/db.md", RedactTarget::Version(1), true)
        .await
        .unwrap();
    assert!(plan.dry_run);
    assert_eq!(plan.versions.len(), 1);
    assert_eq!(plan.newly_redacted(), 1);
    assert!(
        tool.version("/memories/db.md", 1)
            .await
            .unwrap()
            .content
            .is_some()
    );
    let done = tool
        .redact("/memories/db.md", RedactTarget::Version(1), false)
        .await
        .unwrap();
    assert_eq!(
        (
            done.versions[0].version,
            done.versions[0].already,
            done.versions[0].path.as_ref().map(|p| p.normalized())
        ),
        (1, false, Some("/memories/db.md".to_string()))
    );
    assert_eq!(done.wal_truncated, (b == Backend::Sqlite).then_some(true));
    let h = tool.history("/memories/db.md").await.unwrap();
    assert!(h[1].redacted_at.is_some() && h[1].size == 0 && h[1].sha256.is_some());
    assert!(h[0].redacted_at.is_none());
    let v1 = tool.version("/memories/db.md", 1).await.unwrap();
    assert!(v1.content.is_none() && v1.redacted_at.is_some());
    // Restoring it is refused with a clear error, nothing written.
    let err = tool
        .restore("/memories/db.md", 1, Some(2))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Redacted { version: 1, .. }), "{err}");
    assert!(err.to_string().contains("redacted"), "{err}");
    assert_eq!(tool.history("/memories/db.md").await.unwrap().len(), 2);
    // A directory restore to when it held the redacted version leaves it, and says so.
    let plan = tool.restore_plan("/memories", before).await.unwrap();
    let step = plan
        .steps
        .iter()
        .find(|s| s.path.normalized() == "/memories/db.md")
        .unwrap();
    assert_eq!((step.action, step.target), (StepAction::Redacted, Some(1)));
    assert_eq!(plan.changes().count(), 0);
    // Again: already redacted.
    let again = tool
        .redact("/memories/db.md", RedactTarget::Version(1), false)
        .await
        .unwrap();
    assert_eq!(
        (again.versions[0].already, again.newly_redacted()),
        (true, 0)
    );
    // A read-only tool refuses before asking; its plan is allowed.
    let ro = server.tool(&key).read_only(true);
    assert!(matches!(
        ro.redact("/memories/db.md", RedactTarget::Version(1), false)
            .await,
        Err(Error::ReadOnly { .. })
    ));
    assert!(
        ro.redact("/memories/db.md", RedactTarget::Version(1), true)
            .await
            .is_ok()
    );
}

async fn redact_matching_files_and_directories(b: Backend) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Free, ALL, "ws").await;
    server.workspace(&tenant, "other").await;
    let tool = server.tool(&key);
    let other = contextq_memory_tool(options(&server.url, &key).workspace("other")).unwrap();
    create(&tool, "/memories/a.md", &format!("{SECRET} a\n")).await;
    create(&tool, "/memories/dir/b.md", &format!("{SECRET} b\n")).await;
    create(&tool, "/memories/dir/c.md", "clean\n").await;
    create(&other, "/memories/a.md", &format!("{SECRET} elsewhere\n")).await;
    ok(
        &other,
        json!({"command": "delete", "path": "/memories/a.md"}),
    )
    .await;

    // The live files hold it: refused whole, naming one of them.
    let err = tool
        .redact("/memories", matching(true), false)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("holds the text"), "{err}");
    // A directory needs --all-paths.
    let err = tool
        .redact("/memories/dir", matching(false), true)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("--all-paths"), "{err}");
    ok(
        &tool,
        json!({"command": "delete", "path": "/memories/a.md"}),
    )
    .await;
    ok(&tool, json!({"command": "str_replace", "path": "/memories/dir/b.md", "old_str": SECRET, "new_str": "x"})).await;
    let plan = tool
        .redact("/memories", matching(true), true)
        .await
        .unwrap();
    let planned: Vec<(String, u64)> = plan
        .versions
        .iter()
        .map(|v| (v.path.as_ref().unwrap().normalized(), v.version))
        .collect();
    assert_eq!(
        planned,
        [
            ("/memories/a.md".to_string(), 1),
            ("/memories/dir/b.md".to_string(), 1)
        ]
    );
    // One file only, then the rest of the directory.
    let one = tool
        .redact("/memories/a.md", matching(false), false)
        .await
        .unwrap();
    assert_eq!(one.newly_redacted(), 1);
    let rest = tool
        .redact("/memories/dir", matching(true), false)
        .await
        .unwrap();
    assert_eq!(rest.newly_redacted(), 1);
    assert_eq!(
        tool.redact("/memories", matching(true), true)
            .await
            .unwrap()
            .versions,
        []
    );
    // The pinned tool never reached the other workspace's version.
    assert_eq!(
        other
            .version("/memories/a.md", 1)
            .await
            .unwrap()
            .content
            .as_deref(),
        Some(&*format!("{SECRET} elsewhere\n"))
    );
    // Per-workspace mode: the root spans every workspace's files.
    let everywhere = contextq_memory_tool(options(&server.url, &key)).unwrap();
    let done = everywhere
        .redact("/memories", matching(true), false)
        .await
        .unwrap();
    let paths: Vec<String> = done
        .versions
        .iter()
        .map(|v| v.path.as_ref().unwrap().normalized())
        .collect();
    assert_eq!(paths, ["/memories/other/a.md"]);
    assert!(
        other
            .version("/memories/a.md", 1)
            .await
            .unwrap()
            .redacted_at
            .is_some()
    );
}

/// More matching versions than one request takes: the plan pages through all of them, the
/// redaction takes them in requests of 1,000.
async fn a_large_match_through_the_tool(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let tool = server.tool(&key);
    let client = tool.store().client();
    let item = |f: usize, content: String| contextq_memory_tool::contextq::client::ContextInput {
        external_id: format!("mem-tool:ws/f{f:02}.md"),
        workspace: "ws".into(),
        kind: "note".into(),
        title: None,
        content,
        tags: Some(vec!["mem-tool".into()]),
        if_absent: false,
    };
    for round in 0..100 {
        let items: Vec<_> = (0..11)
            .map(|f| item(f, format!("{SECRET} {round}\n")))
            .collect();
        client.bulk_upsert(&items).await.unwrap();
    }
    let items: Vec<_> = (0..11).map(|f| item(f, "clean\n".into())).collect();
    client.bulk_upsert(&items).await.unwrap();
    let plan = tool
        .redact("/memories", matching(true), true)
        .await
        .unwrap();
    assert_eq!(plan.versions.len(), 11 * 99);
    let done = tool
        .redact("/memories", matching(true), false)
        .await
        .unwrap();
    assert_eq!(done.newly_redacted(), 11 * 99);
    assert!(
        tool.redact("/memories", matching(true), true)
            .await
            .unwrap()
            .versions
            .is_empty()
    );
}

async fn without_the_extension_redaction_is_a_clear_error(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    for proxy in [
        Proxy::plain(&server.url).await,
        Proxy::hiding(&server.url, &["redaction"]).await,
    ] {
        let tool = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
        create(&tool, "/memories/a.md", "a\n").await;
        let err = tool
            .redact("/memories/a.md", RedactTarget::Version(1), true)
            .await
            .unwrap_err();
        assert!(
            matches!(
                err.contextq(),
                Some(ContextQError::RedactionUnavailable { .. })
            ),
            "{err}"
        );
        assert!(err.to_string().contains("cannot redact"), "{err}");
        ok(
            &tool,
            json!({"command": "delete", "path": "/memories/a.md"}),
        )
        .await;
    }
}

contextq_server::database_tests!(
    redact_a_version_and_what_history_says,
    redact_matching_files_and_directories,
    a_large_match_through_the_tool,
    without_the_extension_redaction_is_a_clear_error,
);
