//! ContextQ adapter behaviour against the real server: round trips, the path model, tag scoping,
//! pagination, and every failure turned into a tool error Claude can act on, with faults
//! injected by a loopback proxy of the test's own.

use crate::common;

use std::time::{Duration, Instant};

use common::{ALL, Server, options};
use contextq_memory_tool::contextq::{ContextQMemoryTool, contextq_memory_tool};
use contextq_memory_tool::testing::proxy::{Fault, Gate, Proxy};
use contextq_memory_tool::{MemoryToolHandlers, ToolResult};
use contextq_server::Backend;
use contextq_server::{Plan, Scope};
use reqwest::Method;
use serde_json::{Value, json};

async fn run(tool: &ContextQMemoryTool, input: Value) -> ToolResult {
    tool.execute(input).await
}

fn create(path: &str, text: &str) -> Value {
    json!({"command": "create", "path": path, "file_text": text})
}

fn view(path: &str) -> Value {
    json!({"command": "view", "path": path})
}

/// The requests each command makes under `base` (`/memories` pinned to `ws`, or `/memories/ws`
/// in per-workspace mode), by step.
async fn requests_by_step(
    tool: &ContextQMemoryTool,
    proxy: &Proxy,
    base: &str,
) -> Vec<(&'static str, Vec<String>)> {
    let at = |p: &str| format!("{base}{p}");
    // The first read learns what the server offers.
    assert!(!run(tool, view(base)).await.is_error);
    proxy.take_log();
    let mut out = Vec::new();
    let mut ok = async |name: &'static str, input: Value| {
        let r = run(tool, input).await;
        assert!(!r.is_error, "{name}: {}", r.content);
        out.push((name, proxy.take_log()));
    };
    ok("create", create(&at("/a.md"), "one\ntwo\n")).await;
    ok("view file", view(&at("/a.md"))).await;
    ok(
        "str_replace",
        json!({"command": "str_replace", "path": at("/a.md"), "old_str": "one", "new_str": "1"}),
    )
    .await;
    ok(
        "insert",
        json!({"command": "insert", "path": at("/a.md"), "insert_line": 0, "insert_text": "zero"}),
    )
    .await;
    ok("create", create(&at("/d/b.md"), "b")).await;
    ok("view directory", view(&at("/d"))).await;
    ok(
        "rename file",
        json!({"command": "rename", "old_path": at("/a.md"), "new_path": at("/c.md")}),
    )
    .await;
    ok(
        "delete file",
        json!({"command": "delete", "path": at("/c.md")}),
    )
    .await;
    ok(
        "rename directory",
        json!({"command": "rename", "old_path": at("/d"), "new_path": at("/e")}),
    )
    .await;
    ok(
        "delete directory",
        json!({"command": "delete", "path": at("/e")}),
    )
    .await;
    out
}

/// Per-workspace mode (the mode of `CONTEXT_API_URL` without a workspace and of `mcp --http`)
/// makes the same requests as a store pinned to the workspace: the ContextQ store's own
/// commands, one request each where the server has the extension, never the fallbacks.
async fn round_trips_per_command_per_workspace(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let proxy = Proxy::start(&server.url).await;
    let pinned = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
    let pinned = requests_by_step(&pinned, &proxy, "/memories").await;
    let unpinned = contextq_memory_tool(options(&proxy.url, &key)).unwrap();
    let per_workspace = requests_by_step(&unpinned, &proxy, "/memories/ws").await;
    assert_eq!(per_workspace, pinned);
    for (name, log) in &pinned {
        let want = if name.contains("directory") && !name.starts_with("view") {
            2
        } else {
            1
        };
        assert_eq!(log.len(), want, "{name}: {log:?}");
    }
}

async fn round_trips_per_command(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let proxy = Proxy::start(&server.url).await;
    let tool = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
    // The first read learns that the server has conditional requests.
    assert!(
        run(&tool, view("/memories"))
            .await
            .content
            .contains("/memories")
    );
    proxy.take_log();

    let mut counts = Vec::new();
    let mut step = |name: &str, log: Vec<String>| counts.push((name.to_string(), log));
    assert!(
        !run(&tool, create("/memories/a.md", "one\ntwo\n"))
            .await
            .is_error
    );
    step("create", proxy.take_log());
    assert!(!run(&tool, view("/memories/a.md")).await.is_error);
    step("view file", proxy.take_log());
    assert!(!run(&tool, json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "one", "new_str": "1"})).await.is_error);
    step("str_replace", proxy.take_log());
    assert!(!run(&tool, json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "zero"})).await.is_error);
    step("insert", proxy.take_log());
    assert!(!run(&tool, view("/memories")).await.is_error);
    step("view root", proxy.take_log());
    assert!(!run(&tool, create("/memories/d/b.md", "b")).await.is_error);
    proxy.take_log();
    assert!(!run(&tool, view("/memories/d")).await.is_error);
    step("view directory", proxy.take_log());
    assert!(
        !run(
            &tool,
            json!({"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/c.md"})
        )
        .await
        .is_error
    );
    step("rename file", proxy.take_log());
    assert!(
        !run(
            &tool,
            json!({"command": "delete", "path": "/memories/c.md"})
        )
        .await
        .is_error
    );
    step("delete file", proxy.take_log());
    assert!(
        !run(&tool, create("/memories/d/sub/c.md", "c"))
            .await
            .is_error
    );
    proxy.take_log();
    let r = run(
        &tool,
        json!({"command": "rename", "old_path": "/memories/d", "new_path": "/memories/e"}),
    )
    .await;
    assert_eq!(r.content, "Successfully renamed /memories/d to /memories/e");
    step("rename directory", proxy.take_log());
    assert_eq!(
        run(&tool, view("/memories/e/sub/c.md")).await.content,
        "Here's the content of /memories/e/sub/c.md with line numbers:\n     1\tc"
    );
    assert!(run(&tool, view("/memories/d")).await.is_error);
    proxy.take_log();
    let r = run(&tool, json!({"command": "delete", "path": "/memories/e"})).await;
    assert_eq!(r.content, "Successfully deleted /memories/e");
    step("delete directory", proxy.take_log());
    assert!(run(&tool, view("/memories/e")).await.is_error);

    let shape: Vec<(String, Vec<String>)> = counts;
    let expect = |name: &str| shape.iter().find(|(n, _)| n == name).unwrap().1.clone();
    assert_eq!(expect("create"), vec!["POST /api/contexts/bulk-upsert"]);
    assert_eq!(expect("view file").len(), 1);
    let methods = |name: &str| {
        expect(name)
            .iter()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    // With the server's text edits, one request each.
    assert_eq!(
        expect("str_replace"),
        vec!["POST /api/contexts/by-external/mem-tool%3Aws%2Fa.md/edit"]
    );
    // With the server's rename, one request.
    assert_eq!(
        expect("rename file"),
        vec!["POST /api/contexts/by-external/mem-tool%3Aws%2Fa.md/rename"]
    );
    // With the server's delete by external id, one request.
    assert_eq!(
        expect("delete file"),
        vec!["DELETE /api/contexts/by-external/mem-tool%3Aws%2Fc.md"]
    );
    assert_eq!(methods("delete file"), vec!["DELETE"]);
    // A directory: the file rename finds none, then the server moves the directory whole; a
    // delete finds no file, then the server deletes the directory whole.
    assert_eq!(
        expect("rename directory"),
        vec![
            "POST /api/contexts/by-external/mem-tool%3Aws%2Fd/rename",
            "POST /api/contexts/by-prefix/rename"
        ]
    );
    assert_eq!(
        expect("delete directory"),
        vec![
            "DELETE /api/contexts/by-external/mem-tool%3Aws%2Fe",
            "POST /api/contexts/by-prefix/delete"
        ]
    );
    assert_eq!(
        expect("insert"),
        vec!["POST /api/contexts/by-external/mem-tool%3Aws%2Fa.md/edit"]
    );
    assert_eq!(expect("view root"), vec!["GET /api/contexts/tree"]);
    // With the server's tree-file, a view asks for the file and the directory at once.
    assert_eq!(expect("view directory"), vec!["GET /api/contexts/tree"]);
    assert_eq!(expect("view file"), vec!["GET /api/contexts/tree"]);

    // A file and a directory of the same name (ContextQ cannot refuse it, docs/stores.md): the
    // view shows the file, with and without tree-file.
    assert!(!run(&tool, create("/memories/n", "the file")).await.is_error);
    assert!(
        !run(&tool, create("/memories/n/x.md", "beneath"))
            .await
            .is_error
    );
    let file_view = "Here's the content of /memories/n with line numbers:\n     1\tthe file";
    assert_eq!(run(&tool, view("/memories/n")).await.content, file_view);
    assert!(
        run(&tool, view("/memories/n/x.md"))
            .await
            .content
            .contains("beneath")
    );
    assert!(
        !run(&tool, json!({"command": "delete", "path": "/memories/n"}))
            .await
            .is_error
    );
    let r = run(&tool, view("/memories/n")).await;
    assert!(r.content.contains("/memories/n/x.md"), "{}", r.content);
    assert!(!run(&tool, create("/memories/n", "the file")).await.is_error);

    // Without tree-file: the file first, then the directory.
    let no_tree_file = Proxy::hiding(&server.url, &["tree-file"]).await;
    let tool2 = contextq_memory_tool(options(&no_tree_file.url, &key).workspace("ws")).unwrap();
    assert!(!run(&tool2, view("/memories")).await.is_error);
    no_tree_file.take_log();
    assert!(!run(&tool2, create("/memories/t/f.md", "f")).await.is_error);
    no_tree_file.take_log();
    assert!(!run(&tool2, view("/memories/t")).await.is_error);
    assert_eq!(
        no_tree_file.take_log(),
        vec![
            "GET /api/contexts/by-external/mem-tool%3Aws%2Ft",
            "GET /api/contexts/tree"
        ]
    );
    assert_eq!(run(&tool2, view("/memories/n")).await.content, file_view);
    no_tree_file.take_log();
    let r = run(&tool2, view("/memories/t/f.md")).await;
    assert_eq!(
        r.content,
        "Here's the content of /memories/t/f.md with line numbers:\n     1\tf"
    );
    assert_eq!(
        no_tree_file.take_log(),
        vec!["GET /api/contexts/by-external/mem-tool%3Aws%2Ft%2Ff.md"]
    );

    eprintln!("round trips: {shape:#?}");

    // Without the delete-by-external extension: read, then delete the row read at its version.
    let no_delete = Proxy::hiding(&server.url, &["delete-by-external"]).await;
    let tool = contextq_memory_tool(options(&no_delete.url, &key).workspace("ws")).unwrap();
    assert!(!run(&tool, create("/memories/del.md", "d\n")).await.is_error);
    no_delete.take_log();
    let r = run(
        &tool,
        json!({"command": "delete", "path": "/memories/del.md"}),
    )
    .await;
    assert_eq!(r.content, "Successfully deleted /memories/del.md");
    let log = no_delete.take_log();
    assert_eq!(
        log.iter()
            .map(|l| l.split(' ').next().unwrap())
            .collect::<Vec<_>>(),
        vec!["GET", "DELETE"],
        "{log:?}"
    );
    assert!(log[1].starts_with("DELETE /api/contexts/ctx_"), "{log:?}");

    // Without the rename extension: read, create at the new path, delete the old one.
    let no_rename = Proxy::hiding(&server.url, &["rename"]).await;
    let tool = contextq_memory_tool(options(&no_rename.url, &key).workspace("ws")).unwrap();
    assert!(!run(&tool, create("/memories/r.md", "r\n")).await.is_error);
    no_rename.take_log();
    let r = run(
        &tool,
        json!({"command": "rename", "old_path": "/memories/r.md", "new_path": "/memories/r2.md"}),
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    let methods: Vec<String> = no_rename
        .take_log()
        .iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(methods, ["GET", "POST", "DELETE"]);

    // Without them: GET, then PUT with If-Match.
    let hiding = Proxy::hiding(&server.url, &["text-edit"]).await;
    let tool = contextq_memory_tool(options(&hiding.url, &key).workspace("ws")).unwrap();
    assert!(!run(&tool, create("/memories/p.md", "one\n")).await.is_error);
    hiding.take_log();
    for edit in [
        json!({"command": "str_replace", "path": "/memories/p.md", "old_str": "one", "new_str": "1"}),
        json!({"command": "insert", "path": "/memories/p.md", "insert_line": 0, "insert_text": "zero"}),
    ] {
        assert!(!run(&tool, edit).await.is_error);
        let log = hiding.take_log();
        assert_eq!(log[0], "GET /api/contexts/by-external/mem-tool%3Aws%2Fp.md");
        assert!(log[1].starts_with("PUT /api/contexts/"), "{log:?}");
        assert_eq!(log.len(), 2, "{log:?}");
    }
}

async fn per_workspace_path_model(b: Backend) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Free, ALL, "acme").await;
    server.workspace(&tenant, "empty").await;
    let tool = contextq_memory_tool(options(&server.url, &key)).unwrap();
    assert!(
        !run(&tool, create("/memories/acme/notes.md", "Prefers Rust\n"))
            .await
            .is_error
    );
    // The slug is lowercased: the row lives in workspace acme.
    assert_eq!(
        run(&tool, create("/memories/ACME/deep/x.md", "x")).await,
        ToolResult::ok("File created successfully at: /memories/ACME/deep/x.md")
    );
    let row = common::row(&server.url, &key, "mem-tool:acme/deep/x.md")
        .await
        .expect("the row, under the lowercased slug");
    assert_eq!(
        (row["workspace"].as_str(), row["content"].as_str()),
        (Some("acme"), Some("x"))
    );
    let root = run(&tool, view("/memories")).await;
    assert_eq!(
        root.content,
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items and node_modules:\n\
         14B\t/memories\n\
         14B\t/memories/acme/\n\
         1B\t/memories/acme/deep/\n\
         13B\t/memories/acme/notes.md\n\
         0B\t/memories/empty/"
    );
    // The external id carries the workspace.
    let raw = reqwest::Client::new()
        .get(format!(
            "{}/api/contexts/by-external/{}",
            server.url, "mem-tool%3Aacme%2Fnotes.md"
        ))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(raw.status(), 200);
    let body: Value = raw.json().await.unwrap();
    assert_eq!(body["workspace"], "acme");
    assert_eq!(body["type"], "reference");
    assert_eq!(body["tags"], json!(["mem-tool"]));
    // Files live inside a workspace; unknown and invalid workspaces are explained.
    let r = run(&tool, create("/memories/notes.md", "x")).await;
    assert!(
        r.is_error && r.content.contains("is not inside a workspace"),
        "{r:?}"
    );
    let r = run(&tool, create("/memories/nope/x.md", "x")).await;
    assert!(
        r.is_error && r.content.contains("does not exist in ContextQ"),
        "{r:?}"
    );
    let r = run(&tool, create("/memories/bad slug!/x.md", "x")).await;
    assert!(
        r.is_error && r.content.contains("cannot be a workspace"),
        "{r:?}"
    );
    assert_eq!(
        run(&tool, view("/memories/empty")).await.content,
        "Here're the files and directories up to 2 levels deep in /memories/empty, excluding hidden items and node_modules:\n0B\t/memories/empty"
    );
    assert!(run(&tool, view("/memories/nope")).await.is_error);
    // With create_workspaces, a missing workspace is created on first write.
    let auto = contextq_memory_tool(options(&server.url, &key).create_workspaces(true)).unwrap();
    assert!(
        !run(&auto, create("/memories/fresh/x.md", "x"))
            .await
            .is_error
    );
    assert!(
        run(&tool, view("/memories"))
            .await
            .content
            .contains("/memories/fresh/")
    );
}

async fn never_touches_rows_without_the_tag(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let http = reqwest::Client::new();
    // The caller's own contexts: one under the adapter's namespace but untagged, one elsewhere.
    let r = http
        .post(format!("{}/api/contexts/bulk-upsert", server.url))
        .bearer_auth(&key)
        .json(&json!({"contexts": [
            {"externalId": "mem-tool:ws/dir/foreign.md", "workspace": "ws", "type": "note", "content": "not mine"},
            {"externalId": "crm:42", "workspace": "ws", "type": "note", "content": "customer", "tags": ["crm"]}
        ]}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let tool = server.tool(&key);
    assert!(
        !run(&tool, create("/memories/dir/mine.md", "mine"))
            .await
            .is_error
    );
    let listing = run(&tool, view("/memories")).await.content;
    assert!(
        !listing.contains("foreign") && !listing.contains("crm"),
        "{listing}"
    );
    assert!(run(&tool, view("/memories/dir/foreign.md")).await.is_error);
    assert!(run(&tool, json!({"command": "str_replace", "path": "/memories/dir/foreign.md", "old_str": "not", "new_str": "now"})).await.is_error);
    assert!(
        !run(&tool, json!({"command": "delete", "path": "/memories/dir"}))
            .await
            .is_error
    );
    let still = http
        .get(format!(
            "{}/api/contexts/by-external/mem-tool%3Aws%2Fdir%2Fforeign.md",
            server.url
        ))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(
        still.status(),
        200,
        "the untagged row survived the directory delete"
    );
    let v: Value = still.json().await.unwrap();
    assert_eq!(v["content"], "not mine");
    assert_eq!(v["version"], 1);
}

/// A row whose external id is in this tool's namespace for workspace `acme`, tagged `mem-tool`,
/// but living in workspace `other` (external ids are unique per tenant, so anyone with the key
/// can plant one): pinned to `acme` or not, the tool treats it as absent on every path and
/// never changes it (a pinned tool used to view, edit and delete it).
async fn rows_of_another_workspace_are_never_touched(b: Backend) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Free, ALL, "acme").await;
    server.workspace(&tenant, "other").await;
    let planted = ["mem-tool:acme/planted.md", "mem-tool:acme/dir/buried.md"];
    let rows: Vec<Value> = planted
        .iter()
        .map(|ext| json!({"externalId": ext, "workspace": "other", "type": "reference", "content": "planted\n", "tags": ["mem-tool"]}))
        .collect();
    common::seed_rows(&server.url, &key, &rows).await;
    let pinned = contextq_memory_tool(options(&server.url, &key).workspace("acme")).unwrap();
    let open = contextq_memory_tool(options(&server.url, &key)).unwrap();
    for (tool, root) in [(&pinned, "/memories"), (&open, "/memories/acme")] {
        let file = format!("{root}/planted.md");
        let dir = format!("{root}/dir");
        for listing in [view("/memories"), view(root)] {
            let text = run(tool, listing).await.content;
            assert!(
                !text.contains("planted") && !text.contains("buried"),
                "{text}"
            );
        }
        for input in [
            view(&file),
            view(&dir),
            view(&format!("{dir}/buried.md")),
            json!({"command": "str_replace", "path": file, "old_str": "planted", "new_str": "mine"}),
            json!({"command": "insert", "path": file, "insert_line": 0, "insert_text": "mine"}),
            json!({"command": "rename", "old_path": file, "new_path": format!("{root}/taken.md")}),
            json!({"command": "rename", "old_path": dir, "new_path": format!("{root}/taken")}),
            json!({"command": "delete", "path": file}),
            json!({"command": "delete", "path": dir}),
        ] {
            let r = run(tool, input.clone()).await;
            assert!(r.is_error, "{input}: {}", r.content);
            assert!(
                r.content.contains("does not exist")
                    || r.content.contains("not found")
                    || r.content.contains("No such"),
                "{input}: {}",
                r.content
            );
        }
        assert!(run(tool, view(&format!("{root}/taken.md"))).await.is_error);
    }
    for ext in planted {
        let got = common::row(&server.url, &key, ext).await.unwrap();
        assert_eq!(
            (
                got["workspace"].as_str(),
                got["content"].as_str(),
                got["version"].as_i64()
            ),
            (Some("other"), Some("planted\n"), Some(1)),
            "{ext} untouched"
        );
    }
}

/// A server with a Free tenant, a fault proxy in front of it, and the tool through the proxy,
/// pinned to `ws`, without retries (so that each fault is seen as it is).
async fn behind_a_proxy(b: Backend) -> (Server, String, Proxy, ContextQMemoryTool) {
    behind_a_proxy_hiding(b, &[]).await
}

/// [`behind_a_proxy`], the proxy not advertising the extensions `hidden`.
async fn behind_a_proxy_hiding(
    b: Backend,
    hidden: &[&str],
) -> (Server, String, Proxy, ContextQMemoryTool) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let proxy = Proxy::hiding(&server.url, hidden).await;
    let opts = options(&proxy.url, &key).workspace("ws").max_retries(0);
    let tool = contextq_memory_tool(opts).unwrap();
    (server, key, proxy, tool)
}

/// The next `DELETE` of a context is answered `status` by the proxy, without reaching the
/// server.
fn fail_next_delete(proxy: &Proxy, status: u16) {
    proxy.fault(
        Method::DELETE,
        "/api/contexts/",
        Fault::Status(status, None),
        1,
    );
}

async fn listings_page_past_500_rows(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    let rows: Vec<Value> = (0..1200)
        .map(|n| json!({"externalId": format!("mem-tool:ws/bulk/f{n:04}.md"), "workspace": "ws", "type": "reference", "content": "12345", "tags": ["mem-tool"]}))
        .collect();
    common::seed_rows(&server.url, &key, &rows).await;
    // The whole listing (past the default answer budget of 1,000 entries): every page is read.
    let tool = server
        .tool(&key)
        .answer_budget(contextq_memory_tool::AnswerBudget::UNLIMITED);
    let out = run(&tool, view("/memories/bulk")).await.content;
    assert_eq!(
        out.lines().count(),
        2 + 1200,
        "header, the directory, 1,200 files"
    );
    assert!(out.contains("5.9K\t/memories/bulk\n"), "6,000 bytes in all");
    assert!(out.ends_with("5B\t/memories/bulk/f1199.md"));
    // Deleting the directory removes all 1,200.
    assert_eq!(
        run(
            &tool,
            json!({"command": "delete", "path": "/memories/bulk"})
        )
        .await
        .content,
        "Successfully deleted /memories/bulk"
    );
    assert!(run(&tool, view("/memories/bulk")).await.is_error);
}

async fn retries_what_is_safe_and_honours_retry_after(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let proxy = Proxy::start(&server.url).await;
    let tool = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
    assert!(!run(&tool, create("/memories/a.md", "a\n")).await.is_error);

    // 5xx then success on a read.
    proxy.fault(
        Method::GET,
        "/api/contexts/tree",
        Fault::Status(500, None),
        2,
    );
    let r = run(&tool, view("/memories/a.md")).await;
    assert!(!r.is_error, "{r:?}");
    // 503 on a conditional write: refused before doing anything, so retried.
    proxy.fault(Method::PUT, "/api/contexts/", Fault::Status(503, None), 1);
    let r = run(
        &tool,
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "a", "new_str": "b"}),
    )
    .await;
    assert!(!r.is_error, "{r:?}");
    // 429 with Retry-After: 1 is waited out.
    proxy.fault(
        Method::GET,
        "/api/contexts/tree",
        Fault::Status(429, Some(1)),
        1,
    );
    let started = Instant::now();
    let r = run(&tool, view("/memories/a.md")).await;
    assert!(!r.is_error, "{r:?}");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    // A dropped connection on a read is retried.
    proxy.fault(Method::GET, "/api/contexts/tree", Fault::Drop, 1);
    assert!(!run(&tool, view("/memories/a.md")).await.is_error);
    // Rate limited beyond the retries: Claude is told to retry later, nothing changed.
    proxy.fault(
        Method::POST,
        "/bulk-upsert",
        Fault::Status(429, Some(0)),
        10,
    );
    let r = run(&tool, create("/memories/b.md", "b")).await;
    assert!(r.is_error && r.content.contains("rate limiting"), "{r:?}");
    proxy.clear_faults();
    assert!(run(&tool, view("/memories/b.md")).await.is_error);
    // A Retry-After longer than the retry budget is not waited for.
    let mut opts = options(&proxy.url, &key).workspace("ws");
    opts.retry.retry_timeout = Duration::from_millis(500);
    let impatient = contextq_memory_tool(opts).unwrap();
    proxy.fault(
        Method::GET,
        "/api/contexts/tree",
        Fault::Status(429, Some(30)),
        1,
    );
    let started = Instant::now();
    let r = run(&impatient, view("/memories/a.md")).await;
    assert!(r.is_error && r.content.contains("retry after 30s"), "{r:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

async fn timeouts_and_lost_answers_are_reported_or_reconciled(b: Backend) {
    let (_server, key, proxy, tool) = behind_a_proxy(b).await;
    assert!(!run(&tool, create("/memories/a.md", "a\n")).await.is_error);

    // A read that never gets an answer (held at the proxy) times out, without retries: an
    // error saying so, and nothing changed. Only this tool has a short timeout.
    let mut opts = options(&proxy.url, &key)
        .workspace("ws")
        .timeout(Duration::from_millis(200));
    opts.retry.max_retries = 0;
    let impatient = contextq_memory_tool(opts).unwrap();
    let gate = Gate::default();
    proxy.fault(
        Method::GET,
        "/api/contexts/tree",
        Fault::Hold(gate.clone()),
        1,
    );
    let r = run(&impatient, view("/memories/a.md")).await;
    assert_eq!(
        (
            r.is_error,
            r.content
                .starts_with("Error: The memory store did not answer in time (")
        ),
        (true, true),
        "{r:?}"
    );
    assert!(
        r.content.ends_with("nothing was changed. Retry later."),
        "{r:?}"
    );
    gate.open();

    // The answer to an edit is lost after the server applied it: read back, reported as done,
    // applied exactly once.
    proxy.fault(Method::PUT, "/api/contexts/", Fault::ForwardThenDrop, 1);
    let r = run(&tool, json!({"command": "insert", "path": "/memories/a.md", "insert_line": 1, "insert_text": "b"})).await;
    assert_eq!(r.content, "The file /memories/a.md has been edited.");
    assert!(
        run(&tool, view("/memories/a.md"))
            .await
            .content
            .ends_with("     1\ta\n     2\tb\n     3\t")
    );
    // The same for a create.
    proxy.fault(Method::POST, "/bulk-upsert", Fault::ForwardThenDrop, 1);
    let r = run(&tool, create("/memories/new.md", "n")).await;
    assert_eq!(r.content, "File created successfully at: /memories/new.md");
    // And a delete.
    proxy.fault(Method::DELETE, "/api/contexts/", Fault::ForwardThenDrop, 1);
    let r = run(
        &tool,
        json!({"command": "delete", "path": "/memories/new.md"}),
    )
    .await;
    assert_eq!(r.content, "Successfully deleted /memories/new.md");
    // Never sent (dropped before forwarding): not applied, and the read-back retries it once.
    proxy.fault(Method::PUT, "/api/contexts/", Fault::Drop, 1);
    let r = run(&tool, json!({"command": "insert", "path": "/memories/a.md", "insert_line": 0, "insert_text": "top"})).await;
    assert!(!r.is_error, "{r:?}");
    let content = run(&tool, view("/memories/a.md")).await.content;
    assert_eq!(content.matches("top").count(), 1, "{content}");
}

async fn partial_failures_say_exactly_what_happened(b: Backend) {
    // The file-by-file moves and deletes a server without the `rename`, `by-prefix` and
    // `delete-by-external` extensions needs.
    let (server, key, proxy, tool) =
        behind_a_proxy_hiding(b, &["rename", "by-prefix", "delete-by-external"]).await;
    for f in ["a", "b", "c", "d"] {
        assert!(
            !run(&tool, create(&format!("/memories/dir/{f}.md"), f))
                .await
                .is_error
        );
    }
    // A failure in the middle of a directory delete.
    proxy.fault(
        Method::DELETE,
        "/api/contexts/",
        Fault::Delay(Duration::ZERO),
        2,
    );
    fail_next_delete(&proxy, 403);
    let r = run(&tool, json!({"command": "delete", "path": "/memories/dir"})).await;
    assert!(r.is_error);
    assert!(
        r.content.contains("2 of 4 files were deleted"),
        "{}",
        r.content
    );
    assert!(
        r.content
            .contains("still present: /memories/dir/c.md, /memories/dir/d.md"),
        "{}",
        r.content
    );
    let listing = run(&tool, view("/memories/dir")).await.content;
    assert!(
        listing.contains("c.md") && listing.contains("d.md") && !listing.contains("a.md"),
        "{listing}"
    );

    // Rename whose delete step fails with an unknown outcome (a 502 from a gateway), read back
    // as not applied: healed by one more try, the rename succeeds.
    fail_next_delete(&proxy, 502);
    let r = run(&tool, json!({"command": "rename", "old_path": "/memories/dir/d.md", "new_path": "/memories/d2.md"})).await;
    assert_eq!(
        r.content,
        "Successfully renamed /memories/dir/d.md to /memories/d2.md"
    );

    // Rename whose delete step is refused, undo succeeds: nothing changed.
    fail_next_delete(&proxy, 403);
    let r = run(&tool, json!({"command": "rename", "old_path": "/memories/dir/c.md", "new_path": "/memories/moved.md"})).await;
    assert!(
        r.is_error && r.content.contains("nothing was changed"),
        "{}",
        r.content
    );
    assert!(run(&tool, view("/memories/moved.md")).await.is_error);
    assert!(!run(&tool, view("/memories/dir/c.md")).await.is_error);

    // Rename whose delete step fails and whose undo fails too: both rows kept, both paths and
    // the source row's id named.
    let source_id = {
        let v = common::row(&server.url, &key, "mem-tool:ws/dir/c.md")
            .await
            .expect("c.md is there");
        v["id"].as_str().unwrap().to_string()
    };
    proxy.fault(
        Method::DELETE,
        "/api/contexts/",
        Fault::Status(403, None),
        2,
    );
    let r = run(&tool, json!({"command": "rename", "old_path": "/memories/dir/c.md", "new_path": "/memories/moved.md"})).await;
    assert!(r.is_error);
    assert!(
        r.content.contains("/memories/dir/c.md") && r.content.contains("/memories/moved.md"),
        "{}",
        r.content
    );
    assert!(r.content.contains(&source_id), "{}", r.content);
    assert!(r.content.contains("Both files now exist"), "{}", r.content);
    assert!(!run(&tool, view("/memories/moved.md")).await.is_error);
    assert!(!run(&tool, view("/memories/dir/c.md")).await.is_error);
}

async fn contextq_refusals_become_actionable_tool_errors(b: Backend) {
    let server = Server::start(b).await;
    // Quota: a free tenant at its cap of 100.
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let items: Vec<Value> = (0..100).map(|n| json!({"externalId": format!("x{n}"), "workspace": "ws", "type": "note", "content": ""})).collect();
    let r = reqwest::Client::new()
        .post(format!("{}/api/contexts/bulk-upsert", server.url))
        .bearer_auth(&key)
        .json(&json!({"contexts": items}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let tool = server.tool(&key);
    let r = run(&tool, create("/memories/one-too-many.md", "x")).await;
    assert!(r.is_error, "{r:?}");
    assert!(
        r.content.contains("full") && r.content.contains("free") && r.content.contains("100"),
        "{}",
        r.content
    );

    // Scope: a read-only key.
    let (tenant, _) = server.tenant(Plan::Free, ALL, "ws").await;
    let ro = contextq_server::admin::create_key(&server.db, &tenant, None, &[Scope::Read])
        .await
        .unwrap();
    let tool = contextq_memory_tool(options(&server.url, &ro.api_key).workspace("ws")).unwrap();
    let r = run(&tool, create("/memories/a.md", "x")).await;
    assert!(
        r.is_error
            && r.content.starts_with("Error: The memory is read-only here")
            && r.content.contains("nothing was changed"),
        "{}",
        r.content
    );
    assert!(!run(&tool, view("/memories")).await.is_error);

    // Archived workspace: read-only.
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let tool = server.tool(&key);
    assert!(!run(&tool, create("/memories/a.md", "x")).await.is_error);
    tool.store().client().archive_workspace("ws").await.unwrap();
    let r = run(&tool, create("/memories/b.md", "x")).await;
    assert!(
        r.is_error && r.content.contains("archived"),
        "{}",
        r.content
    );
    let r = run(
        &tool,
        json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": "y"}),
    )
    .await;
    assert!(
        r.is_error && r.content.contains("archived"),
        "{}",
        r.content
    );
    assert!(!run(&tool, view("/memories/a.md")).await.is_error);

    // Too large.
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let tool = server.tool(&key);
    let r = run(
        &tool,
        create("/memories/big.md", &"x".repeat((1 << 20) + 1)),
    )
    .await;
    assert!(
        r.is_error && r.content.contains("too large"),
        "{}",
        r.content
    );

    // A bad key and an unreachable server.
    let tool = contextq_memory_tool(
        options(
            &server.url,
            "sk_live_0000000000000000000000000000000000000000",
        )
        .workspace("ws"),
    )
    .unwrap();
    let r = run(&tool, view("/memories")).await;
    assert!(r.is_error && r.content.contains("401"), "{}", r.content);
    assert!(
        !r.content
            .contains("0000000000000000000000000000000000000000")
    );
    // A port that was just free: nothing listens there.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut opts = options(&format!("http://127.0.0.1:{port}"), &key).workspace("ws");
    opts.retry.max_retries = 1;
    let tool = contextq_memory_tool(opts).unwrap();
    let r = run(&tool, view("/memories")).await;
    assert!(
        r.is_error && r.content.contains("unreachable"),
        "{}",
        r.content
    );
}

/// 8 tools × 25 inserts into one file, each with the default edit budget; returns how many of
/// the 200 lines the file holds, and whether the tools used conditional requests and the
/// server's text edits.
async fn insert_race(url: &str, key: &str) -> (usize, Option<bool>, Option<bool>) {
    let setup = contextq_memory_tool(options(url, key).workspace("ws")).unwrap();
    assert!(!run(&setup, create("/memories/race.md", "")).await.is_error);
    let mut tasks = Vec::new();
    for worker in 0..8 {
        let tool = contextq_memory_tool(options(url, key).workspace("ws")).unwrap();
        tasks.push(tokio::spawn(async move {
            for i in 0..25 {
                let r = run(&tool, json!({"command": "insert", "path": "/memories/race.md", "insert_line": 0, "insert_text": format!("w{worker}-{i}")})).await;
                assert!(!r.is_error, "{r:?}");
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let content = run(&setup, view("/memories/race.md")).await.content;
    let lines = (0..8)
        .flat_map(|w| (0..25).map(move |i| format!("\tw{w}-{i}\n")))
        .filter(|l| content.contains(l.as_str()))
        .count();
    let known = setup.store().client().known_extensions();
    (
        lines,
        known.map(|e| e.conditional_requests),
        known.map(|e| e.text_edit),
    )
}

async fn concurrent_inserts_lose_nothing_with_text_edit(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let (lines, conditional, text_edit) = insert_race(&server.url, &key).await;
    assert_eq!((conditional, text_edit), (Some(true), Some(true)));
    assert_eq!(lines, 200, "{b:?}: every one of 8 × 25 inserts is present");
}

/// Without the server's text edits: GET, then PUT with If-Match, backing off after a lost race.
async fn concurrent_inserts_lose_nothing_with_etag(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let proxy = Proxy::hiding(&server.url, &["text-edit"]).await;
    let (lines, conditional, text_edit) = insert_race(&proxy.url, &key).await;
    assert_eq!((conditional, text_edit), (Some(true), Some(false)));
    assert_eq!(lines, 200, "{b:?}: every one of 8 × 25 inserts is present");
}

/// With `edit-snippet` the server answers an edit with the lines around the change; the tool's
/// answers are the same, byte for byte, as when it gets the whole new content (the extension
/// hidden) and as the local reference store's, at the edges: first and last lines, no trailing
/// newline, a replacement spanning lines, a file emptied.
async fn edits_answer_the_same_with_a_snippet(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let hiding = Proxy::hiding(&server.url, &["edit-snippet"]).await;
    let small = contextq_memory_tool(options(&server.url, &key).workspace("ws")).unwrap();
    let whole = contextq_memory_tool(options(&hiding.url, &key).workspace("ws")).unwrap();
    let local = contextq_memory_tool::MemoryTool::new(contextq_memory_tool::MemoryStore::new());
    let start = "one\ntwo\nthree\nfour\nfive\nsix\nseven";
    let edits = [
        json!({"command": "str_replace", "old_str": "one", "new_str": "ONE"}),
        json!({"command": "str_replace", "old_str": "seven", "new_str": "7\n8\n9"}),
        json!({"command": "str_replace", "old_str": "three\nfour", "new_str": "3-4"}),
        json!({"command": "insert", "insert_line": 2, "insert_text": "inserted"}),
        json!({"command": "str_replace", "old_str": "five", "new_str": ""}),
    ];
    for (n, tool) in [
        (0, &small as &dyn MemoryToolHandlers),
        (1, &whole),
        (2, &local),
    ] {
        let path = format!("/memories/e{n}.md");
        let r = tool
            .execute(json!({"command": "create", "path": path, "file_text": start}))
            .await;
        assert!(!r.is_error, "{r:?}");
    }
    for mut e in edits {
        let mut answers = Vec::new();
        for (n, tool) in [
            (0, &small as &dyn MemoryToolHandlers),
            (1, &whole),
            (2, &local),
        ] {
            let path = format!("/memories/e{n}.md");
            e["path"] = json!(path);
            let r = tool.execute(e.clone()).await;
            assert!(!r.is_error, "{r:?}");
            answers.push(r.content.replace(&path, "/memories/e.md"));
        }
        assert_eq!(answers[0], answers[2], "{e}");
        assert_eq!(answers[1], answers[2], "{e}");
    }
    // Emptied: every line replaced.
    let all = "ONE\ntwo\ninserted\n3-4\n\nsix\n7\n8\n9";
    let mut answers = Vec::new();
    for (n, tool) in [
        (0, &small as &dyn MemoryToolHandlers),
        (1, &whole),
        (2, &local),
    ] {
        let r = tool
            .execute(json!({"command": "str_replace", "path": format!("/memories/e{n}.md"), "old_str": all, "new_str": ""}))
            .await;
        assert!(!r.is_error, "{r:?}");
        answers.push(r.content);
    }
    assert_eq!(answers[0], answers[2]);
    assert_eq!(answers[1], answers[2]);
}

/// A directory `view` through the server's `tree` (two levels, sizes added up by the server) is
/// byte for byte the view of the whole listing (the extension hidden) and of a local store
/// holding the same files, pinned and per workspace, within the answer budget and past it.
async fn views_through_the_tree_are_the_listing_byte_for_byte(b: Backend) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Free, ALL, "ws").await;
    server.workspace(&tenant, "empty").await;
    let hiding = Proxy::hiding(&server.url, &["tree"]).await;
    let files = [
        ("a.md", "alpha\n"),
        ("d/b.md", "bb\n"),
        ("d/e/c.md", "ccc\n"),
        ("d/e/f/g/deep.md", &"x".repeat(5000)),
        ("d/.hidden/h.md", "h\n"),
        ("d/node_modules/n.md", "n\n"),
        ("ü/ß.md", "unicode\n"),
        ("z/y/x/w.md", "w\n"),
    ];
    let pinned = contextq_memory_tool(options(&server.url, &key).workspace("ws")).unwrap();
    let local = contextq_memory_tool::MemoryTool::new(contextq_memory_tool::MemoryStore::new());
    for (path, text) in files {
        let input = create(&format!("/memories/{path}"), text);
        assert!(!run(&pinned, input.clone()).await.is_error);
        assert!(!local.execute(input).await.is_error);
    }
    let budget = contextq_memory_tool::AnswerBudget::default()
        .listing_entries(3)
        .listing_chars(40_000);
    let whole = contextq_memory_tool(options(&hiding.url, &key).workspace("ws")).unwrap();
    for dir in [
        "/memories",
        "/memories/d",
        "/memories/d/e",
        "/memories/z",
        "/memories/nothing",
    ] {
        let tree = run(&pinned, view(dir)).await;
        assert_eq!(tree, run(&whole, view(dir)).await, "{dir}");
        assert_eq!(tree, local.execute(view(dir)).await, "{dir}");
    }
    // Past the budget the cut is the same.
    let cut = |url: &str| {
        contextq_memory_tool(options(url, &key).workspace("ws").answer_budget(budget)).unwrap()
    };
    let a = run(&cut(&server.url), view("/memories")).await;
    assert!(a.content.contains("are not shown"), "{}", a.content);
    assert_eq!(a, run(&cut(&hiding.url), view("/memories")).await);
    // Per workspace: the root lists every workspace, the empty one too.
    let per_ws = contextq_memory_tool(options(&server.url, &key)).unwrap();
    let per_ws_whole = contextq_memory_tool(options(&hiding.url, &key)).unwrap();
    for dir in [
        "/memories",
        "/memories/ws",
        "/memories/ws/d",
        "/memories/empty",
    ] {
        let tree = run(&per_ws, view(dir)).await;
        assert_eq!(tree, run(&per_ws_whole, view(dir)).await, "{dir}");
        assert!(
            !tree.is_error || dir == "/memories/empty",
            "{dir}: {tree:?}"
        );
    }
    // One request for the directory (the look for a file at its path in the same request,
    // extension tree-file).
    let through = Proxy::start(&server.url).await;
    let tool = contextq_memory_tool(options(&through.url, &key).workspace("ws")).unwrap();
    run(&tool, view("/memories")).await;
    through.take_log();
    run(&tool, view("/memories/d")).await;
    let log = through.take_log();
    assert_eq!(log, ["GET /api/contexts/tree"], "{log:?}");
}

/// `Store::list_after` pages in the order of paths as text, from the server's `startAfter`
/// (one request a page) or, without the extension, from the whole listing: the same walk, and
/// the same as a memory store's.
async fn pages_start_after_a_path(b: Backend) {
    use contextq_memory_tool::{MemoryPath, MemoryStore, Store};
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
    let hiding = Proxy::hiding(&server.url, &["start-after"]).await;
    let counting = Proxy::start(&server.url).await;
    let paths = [
        "d/x.md",
        "d-1/y.md",
        "a.md",
        "d/e/z.md",
        "ü.md",
        "d.md",
        "b/c/d/e.md",
    ];
    let memory = MemoryStore::new();
    let with = contextq_memory_tool(options(&counting.url, &key).workspace("ws")).unwrap();
    let without = contextq_memory_tool(options(&hiding.url, &key).workspace("ws")).unwrap();
    let per_ws = contextq_memory_tool(options(&counting.url, &key)).unwrap();
    for p in paths {
        let path = MemoryPath::parse(&format!("/memories/{p}")).unwrap();
        memory
            .put(&path, "x", contextq_memory_tool::PutMode::Create)
            .await
            .unwrap();
        assert!(
            !run(&with, create(&format!("/memories/{p}"), "x"))
                .await
                .is_error
        );
    }
    let mut expected: Vec<String> = paths.iter().map(|p| format!("/memories/{p}")).collect();
    expected.sort();
    async fn walk(store: &dyn Store, page: usize) -> Vec<String> {
        let root = MemoryPath::root();
        let mut seen = Vec::new();
        let mut after: Option<MemoryPath> = None;
        loop {
            let files = store
                .list_after(
                    &root,
                    contextq_memory_tool::store::Page {
                        after: after.as_ref(),
                        limit: page,
                    },
                )
                .await
                .unwrap();
            assert!(files.len() <= page);
            seen.extend(files.iter().map(|f| f.path.normalized()));
            match files.last() {
                Some(f) if files.len() == page => after = Some(f.path.clone()),
                _ => return seen,
            }
        }
    }
    counting.take_log();
    assert_eq!(walk(with.store(), 2).await, expected);
    let log = counting.take_log();
    // Four pages of two (the last one short), one request each.
    assert_eq!(log.len(), 4, "{log:?}");
    assert!(log.iter().all(|l| l == "GET /api/contexts"), "{log:?}");
    assert_eq!(walk(without.store(), 2).await, expected);
    assert_eq!(walk(&memory, 2).await, expected);
    let in_ws: Vec<String> = expected
        .iter()
        .map(|p| p.replacen("/memories/", "/memories/ws/", 1))
        .collect();
    assert_eq!(walk(per_ws.store(), 3).await, in_ws);
}

/// `memory_search` through ContextQ's `search` extension: what it finds, line numbers Claude can
/// `str_replace` from, the path scope, the limit's note, every bad input an error Claude can act
/// on, hidden files and rows of another workspace never found, per-workspace mode across
/// workspaces; and with the extension hidden, an explicit error, never a listing.
async fn memory_search_through_contextq(b: Backend) {
    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    let tool = server.tool(&key);
    for (path, text) in [
        (
            "/memories/ops/incidents.md",
            "# Incidents\nTicket OPS-4471: the staging password rotated.\n",
        ),
        (
            "/memories/ops/probes.md",
            "probe /healthz/deep\nstaging differs\n",
        ),
        ("/memories/people.md", "Herr Müller (staging owner)\n"),
        ("/memories/.secret/staging.md", "staging hidden\n"),
    ] {
        assert!(!run(&tool, create(path, text)).await.is_error);
    }
    let search = |input: Value| {
        let tool = &tool;
        async move { tool.execute_search(input).await }
    };
    let r = search(json!({"query": "OPS-4471"})).await;
    assert!(!r.is_error, "{}", r.content);
    assert_eq!(
        r.content,
        "1 file in /memories match \"OPS-4471\", best first:\n\n/memories/ops/incidents.md\n     2\tTicket OPS-4471: the staging password rotated."
    );
    // The line number is view's: str_replace from it works.
    let r = run(
        &tool,
        json!({"command": "view", "path": "/memories/ops/incidents.md", "view_range": [2, 2]}),
    )
    .await;
    assert!(
        r.content
            .ends_with("     2\tTicket OPS-4471: the staging password rotated."),
        "{}",
        r.content
    );
    // Scope, ranking, hidden files.
    let r = search(json!({"query": "staging", "path": "/memories/ops"})).await;
    assert!(
        r.content.starts_with("2 files in /memories/ops match"),
        "{}",
        r.content
    );
    assert!(!r.content.contains("people.md"));
    let r = search(json!({"query": "staging"})).await;
    assert!(
        r.content.starts_with("3 files in /memories match"),
        "{}",
        r.content
    );
    assert!(!r.content.contains(".secret"), "{}", r.content);
    let r = search(json!({"query": "muller"})).await;
    assert!(r.content.contains("/memories/people.md"), "{}", r.content);
    let r = search(json!({"query": "staging", "limit": 1})).await;
    assert!(
        r.content
            .ends_with("or ask for a higher limit (at most 50)."),
        "{}",
        r.content
    );
    let r = search(json!({"query": "nothingmatches"})).await;
    assert_eq!(
        (r.is_error, r.content.as_str()),
        (false, "No files in /memories match \"nothingmatches\".")
    );
    // Every bad input: an error result naming what to change.
    for (input, says) in [
        (json!({"query": "\"open"}), "closing"),
        (json!({"query": "*"}), "a * must end a word"),
        (json!({"query": "-"}), "no letters or digits"),
        (
            json!({"query": "x", "limit": 0}),
            "limit must be from 1 to 50",
        ),
        (
            json!({"query": "x", "limit": 500}),
            "limit must be from 1 to 50",
        ),
        (json!({"query": "x", "path": "/etc"}), "/memories"),
        (
            json!({"query": "x", "path": "/memories/../etc"}),
            "/memories",
        ),
        (json!({"path": "/memories"}), "memory_search takes"),
        (json!({"query": 5}), "memory_search takes"),
        (json!({"query": "x", "extra": 1}), "memory_search takes"),
    ] {
        let r = search(input.clone()).await;
        assert!(r.is_error, "{input}: {}", r.content);
        assert!(r.content.contains(says), "{input}: {}", r.content);
    }
    // A row of another workspace holding an external id of this namespace is never found.
    server.workspace(&tenant, "other").await;
    common::seed_rows(
        &server.url,
        &key,
        &[json!({"externalId": "mem-tool:ws/planted.md", "workspace": "other", "type": "reference", "content": "plantedword", "tags": ["mem-tool"]})],
    )
    .await;
    let r = search(json!({"query": "plantedword"})).await;
    assert!(r.content.starts_with("No files"), "{}", r.content);
    // Per-workspace mode: the root spans workspaces, each file under its workspace's folder.
    let per_workspace = contextq_memory_tool(options(&server.url, &key)).unwrap();
    assert!(
        !per_workspace
            .execute(create("/memories/other/notes.md", "staging in other\n"))
            .await
            .is_error
    );
    let r = per_workspace
        .execute_search(json!({"query": "staging"}))
        .await;
    assert!(
        r.content.contains("/memories/other/notes.md")
            && r.content.contains("/memories/ws/ops/incidents.md"),
        "{}",
        r.content
    );
    let r = per_workspace
        .execute_search(json!({"query": "staging", "path": "/memories/other"}))
        .await;
    assert!(
        r.content.starts_with("1 file in /memories/other match"),
        "{}",
        r.content
    );
    // Without the extension (the seed's ContextQ): an explicit error, nothing listed.
    for hidden in [&["search"][..], &[]] {
        let proxy = if hidden.is_empty() {
            Proxy::plain(&server.url).await
        } else {
            Proxy::hiding(&server.url, hidden).await
        };
        let t = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
        let r = t.execute_search(json!({"query": "staging"})).await;
        assert!(r.is_error, "{}", r.content);
        assert!(
            r.content
                .contains("Search is not available for this memory store"),
            "{}",
            r.content
        );
        assert!(!r.content.contains("incidents"));
    }
}

/// A search the server stops at its time budget is an error result that tells Claude how to
/// narrow the query, and changes nothing; a search refused because the tenant has its limit of
/// searches in flight (429) is retried after `Retry-After` and answered.
async fn memory_search_when_the_server_bounds_it(b: Backend) {
    use contextq_server::db::search::SearchLimits;
    let server = Server::start_with_options(
        b,
        contextq_server::DbOptions::default().search(SearchLimits {
            budget: Duration::from_millis(1),
            ..SearchLimits::default()
        }),
    )
    .await;
    let (_, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    let tool = server.tool(&key);
    let rows: Vec<Value> = (0..3_000)
        .map(|i| json!({"externalId": format!("mem-tool:ws/n{i}.md"), "workspace": "ws", "type": "reference", "content": format!("common words {i}, common again\n"), "tags": ["mem-tool"]}))
        .collect();
    common::seed_rows(&server.url, &key, &rows).await;
    let r = tool.execute_search(json!({"query": "common"})).await;
    assert!(r.is_error, "{}", r.content);
    assert!(r.content.contains("too broad"), "{}", r.content);
    assert!(r.content.contains("Narrow it"), "{}", r.content);
    assert!(!run(&tool, view("/memories/n1.md")).await.is_error);

    let server = Server::start(b).await;
    let (tenant, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    let tool = server.tool(&key);
    assert!(
        !run(&tool, create("/memories/a.md", "staging\n"))
            .await
            .is_error
    );
    let limit = server.db.search_limits().per_tenant;
    let mut held = Vec::new();
    for _ in 0..limit {
        held.push(server.db.begin_search(&tenant).await.unwrap());
    }
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        drop(held);
    });
    let started = Instant::now();
    let r = tool.execute_search(json!({"query": "staging"})).await;
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("/memories/a.md"), "{}", r.content);
    // It waited for the server's `Retry-After` (1 s), not a busy loop of retries.
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    release.await.unwrap();
}

contextq_server::database_tests!(
    memory_search_when_the_server_bounds_it,
    memory_search_through_contextq,
    edits_answer_the_same_with_a_snippet,
    pages_start_after_a_path,
    views_through_the_tree_are_the_listing_byte_for_byte,
    round_trips_per_command,
    round_trips_per_command_per_workspace,
    per_workspace_path_model,
    never_touches_rows_without_the_tag,
    rows_of_another_workspace_are_never_touched,
    listings_page_past_500_rows,
    retries_what_is_safe_and_honours_retry_after,
    timeouts_and_lost_answers_are_reported_or_reconciled,
    partial_failures_say_exactly_what_happened,
    contextq_refusals_become_actionable_tool_errors,
    concurrent_inserts_lose_nothing_with_etag,
    concurrent_inserts_lose_nothing_with_text_edit,
);
