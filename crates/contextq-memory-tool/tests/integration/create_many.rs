//! `MemoryTool::create_many` (what `contextq-memory import` writes with) through contextq-server:
//! one bulk-upsert per 1,000 files (`large-bulk`; 100 without it) with `ifAbsent`, an existing file refused and never overwritten,
//! the write policy per file; on a plain ContextQ each file checked first and the absent sent
//! together; and a bulk request whose answer is lost settled file by file, each created once.

use crate::common;

use common::{ALL, Server, options};
use contextq_memory_tool::contextq::contextq_memory_tool;
use contextq_memory_tool::testing::proxy::{Fault, Proxy};
use contextq_memory_tool::{Error, MemoryPath};
use contextq_server::{Backend, Plan};
use reqwest::Method;

fn files(n: usize) -> Vec<(MemoryPath, String)> {
    (0..n)
        .map(|i| {
            (
                MemoryPath::parse(&format!("/memories/d{}/f{i:03}.md", i % 7)).unwrap(),
                format!("file {i}\n"),
            )
        })
        .collect()
}

/// `n` files of one line in `/memories/<dir>/`.
fn small(dir: &str, n: usize) -> Vec<(MemoryPath, String)> {
    (0..n)
        .map(|i| {
            let path = MemoryPath::parse(&format!("/memories/{dir}/g{i:04}.md")).unwrap();
            (path, "x\n".to_string())
        })
        .collect()
}

/// Requests of the proxy's log whose line starts with `prefix`.
fn count(log: &[String], prefix: &str) -> usize {
    log.iter().filter(|l| l.starts_with(prefix)).count()
}

async fn one_bulk_request_per_hundred_files(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    let proxy = Proxy::start(&server.url).await;
    let tool = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
    let mut batch = files(250);
    // One file there already (other content), one holding a credential.
    common::seed_rows(
        &server.url,
        &key,
        &[serde_json::json!({"externalId": "mem-tool:ws/d3/f003.md", "workspace": "ws", "type": "reference", "content": "mine\n", "tags": ["mem-tool"]})],
    )
    .await;
    batch[10].1 = "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n".into();
    proxy.take_log();

    let results = tool.create_many("import", &batch).await;
    let log = proxy.take_log();
    assert_eq!(results.len(), 250);
    for (i, r) in results.iter().enumerate() {
        match i {
            3 => assert!(matches!(r, Err(Error::AlreadyExists { .. })), "{r:?}"),
            10 => assert!(matches!(r, Err(Error::SecretRefused { .. })), "{r:?}"),
            _ => assert!(matches!(r, Ok(Some(_))), "{i}: {r:?}"),
        }
    }
    // 248 files and the existing one: one request of 250 (`large-bulk`), refused whole (409),
    // then three of at most 100 items; the first, holding the existing file, is refused whole
    // too and its 100 files go one by one.
    assert_eq!(
        count(&log, "POST /api/contexts/bulk-upsert"),
        1 + 3 + 100,
        "{log:?}"
    );
    assert_eq!(
        server
            .stored(&key, "mem-tool:ws/d3/f003.md")
            .await
            .as_deref(),
        Some("mine\n"),
        "never overwritten"
    );
    assert_eq!(
        server
            .stored(&key, "mem-tool:ws/d0/f249.md")
            .await
            .as_deref(),
        None,
        "f249 is in d4"
    );
    assert_eq!(
        server
            .stored(&key, "mem-tool:ws/d4/f249.md")
            .await
            .as_deref(),
        Some("file 249\n")
    );
    assert_eq!(server.stored(&key, "mem-tool:ws/d3/f010.md").await, None);

    // Without an existing file among them: exactly one request per 1,000 (`large-bulk`).
    proxy.take_log();
    assert!(
        tool.create_many("import", &small("more", 1_200))
            .await
            .iter()
            .all(|r| r.is_ok())
    );
    assert_eq!(proxy.take_log(), ["POST /api/contexts/bulk-upsert"; 2]);

    // A server that does not say `large-bulk` (an earlier contextq-server): one per 100.
    let older = Proxy::hiding(&server.url, &["large-bulk"]).await;
    let tool = contextq_memory_tool(options(&older.url, &key).workspace("ws")).unwrap();
    assert!(
        tool.create_many("import", &small("last", 250))
            .await
            .iter()
            .all(|r| r.is_ok())
    );
    assert_eq!(
        count(&older.take_log(), "POST /api/contexts/bulk-upsert"),
        3
    );
}

async fn a_plain_contextq_checks_each_file_then_sends_the_absent_together(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    common::seed_rows(
        &server.url,
        &key,
        &[serde_json::json!({"externalId": "mem-tool:ws/d5/f005.md", "workspace": "ws", "type": "reference", "content": "mine\n", "tags": ["mem-tool"]})],
    )
    .await;
    let plain = Proxy::plain(&server.url).await;
    let tool = contextq_memory_tool(options(&plain.url, &key).workspace("ws")).unwrap();
    let results = tool.create_many("import", &files(150)).await;
    let log = plain.take_log();
    for (i, r) in results.iter().enumerate() {
        if i == 5 {
            assert!(matches!(r, Err(Error::AlreadyExists { .. })), "{r:?}");
        } else {
            // No versions without conditional requests.
            assert!(matches!(r, Ok(None)), "{i}: {r:?}");
        }
    }
    assert_eq!(count(&log, "GET /api/contexts/by-external/"), 150);
    assert_eq!(count(&log, "POST /api/contexts/bulk-upsert"), 2, "{log:?}");
    assert_eq!(
        server
            .stored(&key, "mem-tool:ws/d5/f005.md")
            .await
            .as_deref(),
        Some("mine\n")
    );
    assert_eq!(
        server
            .stored(&key, "mem-tool:ws/d6/f146.md")
            .await
            .as_deref(),
        Some("file 146\n")
    );
}

async fn a_lost_bulk_answer_is_settled_file_by_file(b: Backend) {
    let server = Server::start(b).await;
    let (_, key) = server.tenant(Plan::Pro, ALL, "ws").await;
    let proxy = Proxy::start(&server.url).await;
    let tool = contextq_memory_tool(options(&proxy.url, &key).workspace("ws")).unwrap();
    // The first bulk request is applied, but its answer never comes.
    proxy.fault(
        Method::POST,
        "/api/contexts/bulk-upsert",
        Fault::ForwardThenDrop,
        1,
    );
    let results = tool.create_many("import", &files(30)).await;
    // Each file was created once, by the lost request; settled one by one, each reads as
    // there already (the caller, an import, then compares the content: identical).
    for (i, r) in results.iter().enumerate() {
        assert!(
            matches!(r, Err(Error::AlreadyExists { .. }) | Ok(Some(_))),
            "{i}: {r:?}"
        );
    }
    for i in [0usize, 13, 29] {
        assert_eq!(
            server
                .stored(&key, &format!("mem-tool:ws/d{}/f{i:03}.md", i % 7))
                .await,
            Some(format!("file {i}\n"))
        );
    }
}

contextq_server::database_tests!(
    one_bulk_request_per_hundred_files,
    a_plain_contextq_checks_each_file_then_sends_the_absent_together,
    a_lost_bulk_answer_is_settled_file_by_file,
);
