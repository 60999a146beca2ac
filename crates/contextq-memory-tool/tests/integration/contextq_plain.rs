//! The adapter against the ContextQ the seed describes: contextq-server behind a proxy that hides
//! every extension of the contract (no `ContextQ-Extensions`, `ETag`, `If-Match`, `ifAbsent`,
//! `externalIdPrefix`, cursors or `sizeBytes`). Create never overwrites, even from a second
//! process that has read nothing yet; a listing capped at one page says so, and directory
//! rename and delete still reach every file; and the seed's documented gap (a racing edit can be
//! lost) is shown exactly, next to the same race on a server with conditional requests.

use crate::common;

use std::sync::Arc;

use common::{ALL, Server, content, handle, options};
use contextq_memory_tool::contextq::contextq_memory_tool;
use contextq_memory_tool::testing::proxy::{Fault, Gate, Proxy};
use contextq_memory_tool::{MemoryStore, MemoryTool, MemoryToolHandlers};
use contextq_server::Backend;
use contextq_server::Plan;
use reqwest::Method;
use serde_json::{Value, json};

fn create(path: &str, text: &str) -> Value {
    json!({"command": "create", "path": path, "file_text": text})
}

async fn create_never_overwrites_from_a_second_process(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let plain = Proxy::plain(&server.url).await;
    // Two clients that share nothing, as two processes would; neither has read anything.
    let first = contextq_memory_tool(options(&plain.url, &key).workspace("ws")).unwrap();
    let second = contextq_memory_tool(options(&plain.url, &key).workspace("ws")).unwrap();
    assert_eq!(
        handle(&first, create("/memories/p.md", "first")).await,
        Ok("File created successfully at: /memories/p.md".to_string())
    );
    plain.take_log();
    let e = handle(&second, create("/memories/p.md", "second"))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "File /memories/p.md already exists");
    assert!(e.changed_nothing());
    // The second client probed the server (no extensions), then checked; it never wrote.
    assert_eq!(
        plain.take_log(),
        [
            "GET /api/contexts",
            "GET /api/contexts/by-external/mem-tool%3Aws%2Fp.md"
        ]
    );
    assert_eq!(second.store().conditional_requests(), Some(false));
    assert_eq!(
        server.stored(&key, "mem-tool:ws/p.md").await.as_deref(),
        Some("first")
    );

    // On contextq-server itself the second create is refused by the server (ifAbsent).
    let direct = server.tool(&key);
    let e = handle(&direct, create("/memories/p.md", "third"))
        .await
        .unwrap_err();
    assert_eq!(e.message(), "File /memories/p.md already exists");
    assert_eq!(direct.store().conditional_requests(), Some(true));
    assert_eq!(
        server.stored(&key, "mem-tool:ws/p.md").await.as_deref(),
        Some("first")
    );
}

async fn a_capped_listing_says_so_and_directory_commands_reach_every_file(b: Backend) {
    const FILES: usize = 520; // one page of 500, and more
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    let rows: Vec<Value> = (0..FILES)
        .map(|n| json!({"externalId": format!("mem-tool:ws/big/f{n:04}.md"), "workspace": "ws", "type": "reference", "content": "x", "tags": ["mem-tool"]}))
        .collect();
    common::seed_rows(&server.url, &key, &rows).await;
    let plain = Proxy::plain(&server.url).await;
    let tool = contextq_memory_tool(options(&plain.url, &key).workspace("ws")).unwrap();
    let out = handle(&tool, json!({"command": "view", "path": "/memories/big"}))
        .await
        .unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines.len(),
        2 + 500 + 2,
        "header, own line, 500 rows, blank, note"
    );
    assert!(
        lines[2].ends_with("\t/memories/big/f0000.md"),
        "{}",
        lines[2]
    );
    assert!(lines[501].ends_with("\t/memories/big/f0499.md"));
    assert_eq!(lines[502], "");
    assert_eq!(
        lines[503],
        "Note: this memory store returned one full page of entries and no way to the next, so this listing may be incomplete."
    );

    // Rename and delete list again until nothing is left.
    assert_eq!(
        handle(
            &tool,
            json!({"command": "rename", "old_path": "/memories/big", "new_path": "/memories/moved"})
        )
        .await,
        Ok("Successfully renamed /memories/big to /memories/moved".to_string())
    );
    let direct = server.tool(&key);
    let moved = handle(
        &direct,
        json!({"command": "view", "path": "/memories/moved"}),
    )
    .await
    .unwrap();
    assert_eq!(moved.lines().count(), 2 + FILES, "every file moved");
    assert_eq!(
        handle(&direct, json!({"command": "view", "path": "/memories/big"}))
            .await
            .unwrap_err()
            .message(),
        "The path /memories/big does not exist. Please provide a valid path."
    );
    assert_eq!(
        handle(
            &tool,
            json!({"command": "delete", "path": "/memories/moved"})
        )
        .await,
        Ok("Successfully deleted /memories/moved".to_string())
    );
    let root = handle(&direct, json!({"command": "view", "path": "/memories"}))
        .await
        .unwrap();
    assert_eq!(root.lines().count(), 2, "nothing left: {root}");
}

/// Two edits of one file race: A reads, B reads and writes, then A writes. The proxy holds A's
/// write until B is done, so the interleaving is exact. On a plain ContextQ B's edit is lost (the
/// seed's named gap); with conditional requests A's `PUT` is refused and A re-applies; with the
/// `text-edit` extension A's edit is one request, applied on the server after B's.
async fn a_racing_edit_is_lost_on_a_plain_contextq_and_kept_with_etags(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    for front in ["plain", "etag", "text-edit"] {
        let proxy = match front {
            "plain" => Proxy::plain(&server.url).await,
            "etag" => Proxy::hiding(&server.url, &["text-edit"]).await,
            _ => Proxy::start(&server.url).await,
        };
        let file = format!("{front}.md");
        let path = format!("/memories/{file}");
        let tool =
            || Arc::new(contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap());
        let (setup, a, b) = (tool(), tool(), tool());
        handle(&*setup, create(&path, "")).await.unwrap();
        // Without conditional requests an edit is written with a plain upsert, with them with
        // a conditional PUT, with text-edit it is one POST .../edit: hold A's write until B's
        // edit is done.
        let write = if front == "etag" {
            Method::PUT
        } else {
            Method::POST
        };
        let gate = Gate::default();
        proxy.fault(write, "/api/contexts/", Fault::Hold(gate.clone()), 1);
        let insert = |text: &str| json!({"command": "insert", "path": path, "insert_line": 0, "insert_text": text});
        let edit_a = {
            let (a, input) = (a.clone(), insert("from A"));
            tokio::spawn(async move { handle(&*a, input).await })
        };
        gate.arrived().await;
        let edit_b = handle(&*b, insert("from B")).await;
        gate.open();
        let edit_a = edit_a.await.unwrap();
        // Both are told their edit was saved.
        let saved = Ok(format!("The file {path} has been edited."));
        assert_eq!((&edit_a, &edit_b), (&saved, &saved), "{front}");
        let stored = content(&server.url, &key, &format!("mem-tool:ws/{file}")).await;
        if front == "plain" {
            // The seed's named gap: A's write, based on what it read before B's edit, replaced it.
            assert_eq!(stored.as_deref(), Some("from A\n"), "B's edit was lost");
        } else {
            // etag: A's conditional write was refused (412); A read again and re-applied its
            // edit. text-edit: A's edit reached the server after B's and applied to its result.
            assert_eq!(
                stored.as_deref(),
                Some("from A\nfrom B\n"),
                "{front}: both edits kept"
            );
        }
    }
}

/// The size column of a listing line (sizes on contextq-server and in memory, times on a plain
/// ContextQ) is the one place where the answers may differ.
fn masked(text: &str) -> String {
    if !text.starts_with("Here're the files") {
        return text.to_string();
    }
    text.lines()
        .map(|l| {
            l.split_once('\t')
                .map_or(l.to_string(), |(_, p)| format!("<size>\t{p}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A realistic mixed trace, run by three clients in turn (as three processes sharing the
/// memory would), with every create repeated a few commands later, gives command for command
/// the reference results (those of one in-memory store) on a plain ContextQ, sizes aside.
async fn a_trace_gives_the_reference_results_on_a_plain_contextq(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Unlimited, ALL, "ws").await;
    let plain = Proxy::plain(&server.url).await;
    let clients: Vec<_> = (0..3)
        .map(|_| contextq_memory_tool(options(&plain.url, &key).workspace("ws")).unwrap())
        .collect();
    let reference = MemoryTool::new(MemoryStore::new());
    let mut trace = contextq_memory_tool::testing::trace::generate(400, 49);
    let creates: Vec<(usize, Value)> = trace
        .iter()
        .enumerate()
        .filter(|(_, c)| c["command"] == "create")
        .map(|(i, c)| (i, c.clone()))
        .collect();
    for (k, (i, c)) in creates.into_iter().enumerate().rev() {
        let at = (i + 5 + k % 3).min(trace.len());
        trace.insert(at, c);
    }
    let mut differ = Vec::new();
    for (n, input) in trace.iter().enumerate() {
        let (got, want) = (
            clients[n % clients.len()].execute(input.clone()).await,
            reference.execute(input.clone()).await,
        );
        if (got.is_error, masked(&got.content)) != (want.is_error, masked(&want.content)) {
            differ.push(format!("{input}:\n  got  {got:?}\n  want {want:?}"));
        }
    }
    eprintln!(
        "{b:?}: {} of {} trace results as the reference on a plain ContextQ",
        trace.len() - differ.len(),
        trace.len()
    );
    assert!(differ.is_empty(), "{}", differ.join("\n"));
}

/// What a key reaches, as the path model asks it: a key limited to one workspace on
/// contextq-server; on a ContextQ without `workspace-keys` (no `limitedTo`), the whole tenant,
/// as the seed's keys are (the server still enforces its limit).
async fn a_keys_reach_without_the_extension_is_the_tenant(b: Backend) {
    use contextq_memory_tool::contextq::{KeyReach, PathModel, path_model};
    let server = Server::start(b).await;
    let (tenant, _) = server.tenant(Plan::Free, ALL, "ws").await;
    let key = contextq_server::admin::create_key_limited(
        &server.db,
        &tenant,
        ALL,
        None,
        Some(&["ws".to_string()]),
    )
    .await
    .unwrap()
    .api_key;
    let ours = Proxy::start(&server.url).await;
    let plain = Proxy::plain(&server.url).await;
    let reach = async |url: &str| {
        options(url, &key)
            .client()
            .unwrap()
            .key_reach()
            .await
            .unwrap()
    };
    assert_eq!(
        reach(&ours.url).await,
        KeyReach::Workspaces(vec!["ws".into()])
    );
    assert_eq!(reach(&plain.url).await, KeyReach::Tenant);
    assert_eq!(
        path_model(&reach(&plain.url).await, None),
        PathModel::PerWorkspace
    );
}

contextq_server::database_tests!(
    a_keys_reach_without_the_extension_is_the_tenant,
    a_trace_gives_the_reference_results_on_a_plain_contextq,
    create_never_overwrites_from_a_second_process,
    a_capped_listing_says_so_and_directory_commands_reach_every_file,
    a_racing_edit_is_lost_on_a_plain_contextq_and_kept_with_etags,
);
