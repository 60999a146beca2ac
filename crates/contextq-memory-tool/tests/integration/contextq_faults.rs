//! Failures in the middle of multi-step commands, injected by a loopback proxy of the test's own:
//! double faults (an answer lost, and the read-backs that would settle it failing too), partial
//! failures of directory delete and rename, edits that run out of attempts, and a rename that
//! restarts after the source changed under it. Each test checks what Claude reads, what the
//! typed error says was done ([`ToolError::effects`]), and what the server really holds.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{ALL, Server, content, handle, options};
use contextq_memory_tool::contextq::{ContextQMemoryTool, contextq_memory_tool};
use contextq_memory_tool::handlers::{Applied, PathEffect, ToolError};
use contextq_memory_tool::testing::proxy::{Fault, Gate, Proxy};
use contextq_server::Backend;
use contextq_server::Plan;
use reqwest::Method;
use serde_json::{Value, json};

fn create(path: &str, text: &str) -> Value {
    json!({"command": "create", "path": path, "file_text": text})
}

fn rename(a: &str, b: &str) -> Value {
    json!({"command": "rename", "old_path": a, "new_path": b})
}

fn delete(path: &str) -> Value {
    json!({"command": "delete", "path": path})
}

/// Sorted effects, for comparison.
fn effects(list: &[(&str, Applied)]) -> Vec<PathEffect> {
    let mut v: Vec<PathEffect> = list
        .iter()
        .map(|(p, a)| PathEffect {
            path: p.to_string(),
            applied: *a,
        })
        .collect();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

/// An edit of `path` whose outcome the store could not confirm: the message says so, and the
/// effects name `path` as unknown.
fn assert_edit_unknown(e: &ToolError, path: &str) {
    assert_unknown(e, &format!("edit of {path}"), &[path]);
}

/// A write (`what`: "delete of /memories/c.md") whose outcome the store could not confirm:
/// the message says so, and the effects name each of `paths` as unknown.
fn assert_unknown(e: &ToolError, what: &str, paths: &[&str]) {
    assert!(
        e.message().starts_with(&format!(
            "The memory store did not confirm whether the {what} was applied ("
        )),
        "{}",
        e.message()
    );
    let unknown: Vec<(&str, Applied)> = paths.iter().map(|p| (*p, Applied::Unknown)).collect();
    assert_eq!(sorted(e.effects()), effects(&unknown));
}

fn sorted(e: &[PathEffect]) -> Vec<PathEffect> {
    let mut v = e.to_vec();
    v.sort_by(|a, b| a.path.cmp(&b.path));
    v
}

/// `e` stopped part way: its message says `head` before its cause, the cause ends with `last`
/// (when given), and it reports `list` as what was done to each path.
fn assert_stopped(e: &ToolError, head: &str, last: Option<&str>, list: &[(&str, Applied)]) {
    let (said, cause) = e.message().split_once(" Cause: ").unwrap();
    assert_eq!(said, head);
    if let Some(last) = last {
        assert!(cause.ends_with(last), "{cause}");
    }
    assert_eq!(sorted(e.effects()), effects(list));
}

struct Setup {
    server: Server,
    key: String,
    proxy: Proxy,
    tool: Arc<ContextQMemoryTool>,
}

impl Setup {
    /// A tenant with workspace `ws`, a proxy, and a tool through it with one retry. The proxy
    /// hides the `rename`, `by-prefix`, `delete-by-external` and `idempotency` extensions: these
    /// are the multi-step moves and deletes of a server without them, settled by reading back.
    async fn new(b: Backend) -> Setup {
        Self::hiding(
            b,
            &["rename", "by-prefix", "delete-by-external", "idempotency"],
        )
        .await
    }

    /// [`Setup::new`] with the proxy hiding `hidden` only (`&[]`: the server's one-request
    /// moves).
    async fn hiding(b: Backend, hidden: &[&str]) -> Setup {
        let server = Server::start(b).await;
        let (_, key) = server.tenant(Plan::Free, ALL, "ws").await;
        let proxy = Proxy::hiding(&server.url, hidden).await;
        let mut opts = options(&proxy.url, &key).workspace("ws");
        opts.retry.max_retries = 1;
        let tool = Arc::new(contextq_memory_tool(opts).unwrap());
        Setup {
            server,
            key,
            proxy,
            tool,
        }
    }

    async fn create(&self, path: &str, text: &str) {
        handle(&self.tool, create(path, text)).await.unwrap();
    }

    /// What the server holds at `/memories/<rel>`.
    async fn content(&self, rel: &str) -> Option<String> {
        content(&self.server.url, &self.key, &format!("mem-tool:ws/{rel}")).await
    }

    /// The next DELETE is applied but its answer lost, and every read-back by row id fails
    /// (beyond the one retry).
    fn lose_delete_and_read_backs(&self) {
        self.proxy
            .fault(Method::DELETE, "/api/contexts/", Fault::ForwardThenDrop, 1);
        self.proxy.fault(
            Method::GET,
            "/api/contexts/ctx_",
            Fault::Status(500, None),
            10,
        );
    }
}

async fn a_file_rename_whose_source_delete_is_unsettled_keeps_the_copy(b: Backend) {
    let s = Setup::new(b).await;
    s.create("/memories/a.md", "alpha\n").await;
    s.lose_delete_and_read_backs();
    let e = handle(&s.tool, rename("/memories/a.md", "/memories/b.md"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    assert!(
        e.message().starts_with(
            "Rename of /memories/a.md to /memories/b.md is incomplete: /memories/b.md was created, but the memory store did not confirm whether the source /memories/a.md (id ctx_"
        ),
        "{}",
        e.message()
    );
    assert!(
        e.message().ends_with(
            "View /memories/a.md: if it still exists, delete it to finish the rename; /memories/b.md holds its content."
        ),
        "{}",
        e.message()
    );
    assert_eq!(
        sorted(e.effects()),
        effects(&[
            ("/memories/a.md", Applied::Unknown),
            ("/memories/b.md", Applied::Yes)
        ])
    );
    // The delete was applied; the copy was not undone: the content survives.
    assert_eq!(s.content("a.md").await, None);
    assert_eq!(s.content("b.md").await.as_deref(), Some("alpha\n"));
}

async fn a_file_delete_whose_outcome_is_unsettled_says_so(b: Backend) {
    let s = Setup::new(b).await;
    s.create("/memories/c.md", "c").await;
    s.lose_delete_and_read_backs();
    let e = handle(&s.tool, delete("/memories//c.md"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    assert!(
        e.message().starts_with(
            "The memory store did not confirm whether the delete of /memories//c.md was applied ("
        ),
        "{}",
        e.message()
    );
    assert!(
        e.message()
            .ends_with("). View /memories//c.md to check before retrying."),
        "{}",
        e.message()
    );
    assert_eq!(
        e.effects(),
        effects(&[("/memories/c.md", Applied::Unknown)])
    );
    assert_eq!(s.content("c.md").await, None, "it was applied");
}

async fn a_directory_rename_whose_source_delete_is_unsettled_keeps_every_copy(b: Backend) {
    let s = Setup::new(b).await;
    for f in ["one", "two", "three"] {
        s.create(&format!("/memories/dir/{f}.md"), f).await;
    }
    s.lose_delete_and_read_backs();
    let e = handle(&s.tool, rename("/memories/dir", "/memories/moved"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    // Sources are deleted in name order: one, three, two.
    assert_stopped(
        &e,
        "Rename of /memories/dir to /memories/moved is incomplete: every file was copied to /memories/moved, but 2 of 3 sources could not be deleted and now exist at both places: /memories/dir/three.md, /memories/dir/two.md. Whether /memories/dir/one.md was deleted is unknown.",
        Some("Delete them from /memories/dir to finish."),
        &[
            ("/memories/dir/one.md", Applied::Unknown),
            ("/memories/dir/three.md", Applied::No),
            ("/memories/dir/two.md", Applied::No),
            ("/memories/moved/one.md", Applied::Yes),
            ("/memories/moved/three.md", Applied::Yes),
            ("/memories/moved/two.md", Applied::Yes),
        ],
    );
    assert_eq!(s.content("dir/one.md").await, None);
    for f in ["one", "two", "three"] {
        assert_eq!(
            s.content(&format!("moved/{f}.md")).await.as_deref(),
            Some(f)
        );
    }
    for f in ["two", "three"] {
        assert_eq!(s.content(&format!("dir/{f}.md")).await.as_deref(), Some(f));
    }
}

async fn a_directory_delete_whose_first_delete_is_unsettled_stops_and_says_what_is_left(
    b: Backend,
) {
    let s = Setup::new(b).await;
    for f in ["x", "y", "z"] {
        s.create(&format!("/memories/d/{f}.md"), f).await;
    }
    s.lose_delete_and_read_backs();
    let e = handle(&s.tool, delete("/memories/d")).await.unwrap_err();
    s.proxy.clear_faults();
    assert_stopped(
        &e,
        "Deleting /memories/d stopped part way: 0 of 3 files were deleted; whether /memories/d/x.md was deleted is unknown; still present: /memories/d/y.md, /memories/d/z.md.",
        Some("Run delete on /memories/d again to finish."),
        &[
            ("/memories/d/x.md", Applied::Unknown),
            ("/memories/d/y.md", Applied::No),
            ("/memories/d/z.md", Applied::No),
        ],
    );
    assert_eq!(s.content("d/x.md").await, None);
    assert_eq!(s.content("d/y.md").await.as_deref(), Some("y"));
    assert_eq!(s.content("d/z.md").await.as_deref(), Some("z"));
}

/// With the `rename` extension a file rename is one request. With recorded outcomes
/// (`idempotency`), an answer lost is asked for again with the same key: applied once, said
/// so; lost every time, unknown. Without them, an answer lost is unknown: a read-back cannot
/// tell this rename from another writer's, nor "not applied" from "applied late".
async fn a_server_rename_whose_answer_is_lost(b: Backend, keyed: bool) {
    let s = Setup::hiding(b, if keyed { &[] } else { &["idempotency"] }).await;
    let (tool, proxy) = (&s.tool, &s.proxy);
    s.create("/memories/a.md", "a").await;
    let stored = |rel: &'static str| s.content(rel);

    // Applied, answer lost once.
    proxy.fault(Method::POST, "/rename", Fault::ForwardThenDrop, 1);
    let r = handle(tool, rename("/memories/a.md", "/memories/b.md")).await;
    proxy.clear_faults();
    if keyed {
        assert_eq!(
            r,
            Ok("Successfully renamed /memories/a.md to /memories/b.md".to_string())
        );
    } else {
        let e = r.unwrap_err();
        assert_unknown(
            &e,
            "rename of /memories/a.md to /memories/b.md",
            &["/memories/a.md", "/memories/b.md"],
        );
    }
    assert_eq!(
        (stored("a.md").await, stored("b.md").await),
        (None, Some("a".into())),
        "applied once"
    );

    // Applied, every answer lost (the first, the retry and the client's asking again):
    // unknown, never "failed".
    proxy.fault(Method::POST, "/rename", Fault::ForwardThenDrop, 3);
    let e = handle(tool, rename("/memories/b.md", "/memories/c.md"))
        .await
        .unwrap_err();
    proxy.clear_faults();
    let m = e.message();
    assert!(
        m.starts_with("The memory store did not confirm whether the rename of /memories/b.md to /memories/c.md was applied (")
            && m.ends_with("). It is all or nothing: view /memories/c.md; if it exists the rename was applied, if not /memories/b.md is unchanged and the rename can be retried."),
        "{m}"
    );
    // Both paths may have changed (a soak once saw the destination filled while the error
    // named only the source).
    assert_eq!(
        sorted(e.effects()),
        effects(&[
            ("/memories/b.md", Applied::Unknown),
            ("/memories/c.md", Applied::Unknown)
        ])
    );
    assert_eq!(stored("c.md").await.as_deref(), Some("a"), "it was applied");

    // Never reached the server: unknown to the tool too, and nothing changed.
    proxy.fault(Method::POST, "/rename", Fault::Drop, 3);
    let e = handle(tool, rename("/memories/c.md", "/memories/d.md"))
        .await
        .unwrap_err();
    proxy.clear_faults();
    assert_eq!(
        stored("c.md").await.as_deref(),
        Some("a"),
        "{}",
        e.message()
    );
    assert_eq!(stored("d.md").await, None);
}

async fn a_server_rename_whose_answer_is_lost_is_asked_again(b: Backend) {
    a_server_rename_whose_answer_is_lost(b, true).await
}

async fn a_server_rename_whose_answer_is_lost_without_outcomes_is_unknown(b: Backend) {
    a_server_rename_whose_answer_is_lost(b, false).await
}

/// With the `delete-by-external` extension a file's delete is one request. Keyed, an answer
/// lost is asked for again: deleted once, said so; a delete that found nothing stays "does not
/// exist" though another writer created the file before the repeat. Without recorded outcomes,
/// the row known at the path and still there is deleted again at the version read; gone may be
/// another writer's delete, and is unknown (never "Successfully deleted" for a delete that
/// found nothing).
async fn a_server_delete_whose_answer_is_lost(b: Backend, keyed: bool) {
    let s = Setup::hiding(b, if keyed { &[] } else { &["idempotency"] }).await;
    let (tool, proxy) = (&s.tool, &s.proxy);
    for f in ["a", "b", "c"] {
        s.create(&format!("/memories/{f}.md"), f).await;
    }
    let by_external = "/api/contexts/by-external/";

    // Applied, answer lost once.
    proxy.fault(Method::DELETE, by_external, Fault::ForwardThenDrop, 1);
    let r = handle(tool, delete("/memories/a.md")).await;
    proxy.clear_faults();
    if keyed {
        assert_eq!(r, Ok("Successfully deleted /memories/a.md".to_string()));
    } else {
        assert_unknown(
            &r.unwrap_err(),
            "delete of /memories/a.md",
            &["/memories/a.md"],
        );
    }
    assert_eq!(s.content("a.md").await, None);

    // Not applied (dropped before the server): asked again (keyed) or deleted again at the
    // version read back.
    proxy.fault(Method::DELETE, by_external, Fault::Drop, 1);
    assert_eq!(
        handle(tool, delete("/memories/b.md")).await,
        Ok("Successfully deleted /memories/b.md".to_string())
    );
    assert_eq!(s.content("b.md").await, None);
    // Dropped every time (keyed: the first, its retry and the client's asking again, then the
    // same three for the delete again at the version read back; without: the first and the
    // delete again): unknown.
    s.create("/memories/b.md", "b").await;
    assert!(
        handle(tool, json!({"command": "view", "path": "/memories/b.md"}))
            .await
            .is_ok()
    );
    let every = if keyed { 6 } else { 2 };
    proxy.fault(Method::DELETE, by_external, Fault::Drop, every);
    let e = handle(tool, delete("/memories/b.md")).await.unwrap_err();
    proxy.clear_faults();
    assert_unknown(&e, "delete of /memories/b.md", &["/memories/b.md"]);
    assert_eq!(s.content("b.md").await.as_deref(), Some("b"));

    // Applied, every answer lost (the first, the retry and the client's asking again):
    // unknown, never "failed".
    proxy.fault(Method::DELETE, by_external, Fault::ForwardThenDrop, 3);
    let e = handle(tool, delete("/memories/c.md")).await.unwrap_err();
    proxy.clear_faults();
    assert_unknown(&e, "delete of /memories/c.md", &["/memories/c.md"]);
    assert_eq!(s.content("c.md").await, None, "it was applied");

    // A delete that found nothing (404), its answer lost, and another writer creating the
    // file before the tool asks again: keyed, the delete's own outcome ("does not exist") and
    // the new file stays; without, unknown (never "Successfully deleted").
    let gate = Gate::default();
    proxy.fault(Method::DELETE, by_external, Fault::ForwardThenDrop, 1);
    proxy.fault(Method::DELETE, by_external, Fault::Hold(gate.clone()), 1);
    let pending = {
        let tool = tool.clone();
        tokio::spawn(async move { handle(&tool, delete("/memories/e.md")).await })
    };
    if keyed {
        gate.arrived().await;
    }
    let other = contextq_memory_tool(options(&s.server.url, &s.key).workspace("ws")).unwrap();
    handle(&other, create("/memories/e.md", "theirs"))
        .await
        .unwrap();
    gate.open();
    let r = pending.await.unwrap();
    proxy.clear_faults();
    if keyed {
        assert_eq!(
            r.unwrap_err().message(),
            "The path /memories/e.md does not exist"
        );
    } else {
        assert_unknown(
            &r.unwrap_err(),
            "delete of /memories/e.md",
            &["/memories/e.md"],
        );
    }
    assert_eq!(s.content("e.md").await.as_deref(), Some("theirs"));

    // A directory's path: no file there, so the server deletes the directory whole.
    s.create("/memories/d/x.md", "x").await;
    assert_eq!(
        handle(tool, delete("/memories/d")).await,
        Ok("Successfully deleted /memories/d".to_string())
    );
    assert_eq!(s.content("d/x.md").await, None);
}

async fn a_server_delete_whose_answer_is_lost_is_asked_again(b: Backend) {
    a_server_delete_whose_answer_is_lost(b, true).await
}

async fn a_server_delete_whose_answer_is_lost_without_outcomes_is_unknown(b: Backend) {
    a_server_delete_whose_answer_is_lost(b, false).await
}

/// With the `by-prefix` extension a directory's rename and delete are one request each: keyed,
/// an answer lost is asked for again; without, unknown.
async fn a_server_directory_move_whose_answer_is_lost(b: Backend, keyed: bool) {
    let s = Setup::hiding(b, if keyed { &[] } else { &["idempotency"] }).await;
    let (tool, proxy) = (&s.tool, &s.proxy);
    for f in ["x", "y"] {
        s.create(&format!("/memories/d/{f}.md"), f).await;
    }
    let stored = |rel: &'static str| s.content(rel);

    // Applied, answer lost once.
    proxy.fault(Method::POST, "/by-prefix/rename", Fault::ForwardThenDrop, 1);
    let r = handle(tool, rename("/memories/d", "/memories/e")).await;
    proxy.clear_faults();
    if keyed {
        assert_eq!(
            r,
            Ok("Successfully renamed /memories/d to /memories/e".to_string())
        );
    } else {
        assert_unknown(
            &r.unwrap_err(),
            "rename of /memories/d to /memories/e",
            &["/memories/d", "/memories/e"],
        );
    }
    assert_eq!(
        (
            stored("d/x.md").await,
            stored("e/x.md").await,
            stored("e/y.md").await
        ),
        (None, Some("x".into()), Some("y".into()))
    );

    // Applied, every answer lost: unknown at both places.
    proxy.fault(Method::POST, "/by-prefix/rename", Fault::ForwardThenDrop, 3);
    let e = handle(tool, rename("/memories/e", "/memories/g"))
        .await
        .unwrap_err();
    proxy.clear_faults();
    assert_unknown(
        &e,
        "rename of /memories/e to /memories/g",
        &["/memories/e", "/memories/g"],
    );
    assert_eq!(
        stored("g/x.md").await.as_deref(),
        Some("x"),
        "it was applied"
    );
    assert_eq!(
        handle(tool, rename("/memories/g", "/memories/e")).await,
        Ok("Successfully renamed /memories/g to /memories/e".to_string())
    );

    // Never reached the server: nothing moved.
    proxy.fault(Method::POST, "/by-prefix/rename", Fault::Drop, 3);
    let e = handle(tool, rename("/memories/e", "/memories/f"))
        .await
        .unwrap_err();
    proxy.clear_faults();
    assert_eq!(
        stored("e/x.md").await.as_deref(),
        Some("x"),
        "{}",
        e.message()
    );
    assert_eq!(stored("f/x.md").await, None);

    // A delete whose answer is lost once.
    proxy.fault(Method::POST, "/by-prefix/delete", Fault::ForwardThenDrop, 1);
    let r = handle(tool, delete("/memories/e")).await;
    proxy.clear_faults();
    if keyed {
        assert_eq!(r, Ok("Successfully deleted /memories/e".to_string()));
    } else {
        assert_unknown(&r.unwrap_err(), "delete of /memories/e", &["/memories/e"]);
    }
    assert_eq!(
        (stored("e/x.md").await, stored("e/y.md").await),
        (None, None)
    );
}

async fn a_server_directory_move_whose_answer_is_lost_is_asked_again(b: Backend) {
    a_server_directory_move_whose_answer_is_lost(b, true).await
}

async fn a_server_directory_move_whose_answer_is_lost_without_outcomes_is_unknown(b: Backend) {
    a_server_directory_move_whose_answer_is_lost(b, false).await
}

async fn writes_whose_answer_and_read_back_are_lost_are_unknown_never_failed(b: Backend) {
    let s = Setup::new(b).await;
    s.create("/memories/a2.md", "a2").await;
    // A rename's copy: applied, answer lost, the read-back of the destination fails.
    s.proxy
        .fault(Method::POST, "/bulk-upsert", Fault::ForwardThenDrop, 1);
    s.proxy.fault(
        Method::GET,
        "/by-external/mem-tool%3Aws%2Fb2.md",
        Fault::Status(500, None),
        10,
    );
    let e = handle(&s.tool, rename("/memories/a2.md", "/memories/b2.md"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    assert!(
        e.message().starts_with("Rename of /memories/a2.md to /memories/b2.md did not finish: /memories/a2.md is unchanged, but the memory store did not confirm whether the copy at /memories/b2.md was created ("),
        "{}",
        e.message()
    );
    assert_eq!(
        sorted(e.effects()),
        effects(&[
            ("/memories/a2.md", Applied::No),
            ("/memories/b2.md", Applied::Unknown)
        ])
    );
    assert_eq!(s.content("a2.md").await.as_deref(), Some("a2"));
    assert_eq!(s.content("b2.md").await.as_deref(), Some("a2"));

    // A create: the same.
    s.proxy
        .fault(Method::POST, "/bulk-upsert", Fault::ForwardThenDrop, 1);
    s.proxy.fault(
        Method::GET,
        "/by-external/mem-tool%3Aws%2Fn.md",
        Fault::Status(500, None),
        10,
    );
    let e = handle(&s.tool, create("/memories/n.md", "new"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    assert!(
        e.message().starts_with(
            "The memory store did not confirm whether the creation of /memories/n.md was applied ("
        ),
        "{}",
        e.message()
    );
    assert_eq!(
        e.effects(),
        effects(&[("/memories/n.md", Applied::Unknown)])
    );
    assert_eq!(s.content("n.md").await.as_deref(), Some("new"));

    // An edit without the server's text edits: the PUT is applied, its answer lost, the
    // read-back by id fails.
    let hiding = Proxy::hiding(&s.proxy.url, &["text-edit"]).await;
    let mut opts = options(&hiding.url, &s.key).workspace("ws");
    opts.retry.max_retries = 1;
    let plain_edits = contextq_memory_tool(opts).unwrap();
    s.proxy
        .fault(Method::PUT, "/api/contexts/", Fault::ForwardThenDrop, 1);
    s.proxy.fault(
        Method::GET,
        "/api/contexts/ctx_",
        Fault::Status(500, None),
        10,
    );
    let e = handle(
        &plain_edits,
        json!({"command": "insert", "path": "/memories/n.md", "insert_line": 0, "insert_text": "top"}),
    )
    .await
    .unwrap_err();
    s.proxy.clear_faults();
    assert_edit_unknown(&e, "/memories/n.md");
    assert_eq!(s.content("n.md").await.as_deref(), Some("top\nnew\n"));

    // A text edit on the server whose every answer is lost (the repeat carries the same
    // Idempotency-Key, so it was applied once): unknown, never failed.
    s.proxy
        .fault(Method::POST, "/edit", Fault::ForwardThenDrop, 2);
    let e = handle(
        &s.tool,
        json!({"command": "insert", "path": "/memories/n.md", "insert_line": 0, "insert_text": "first"}),
    )
    .await
    .unwrap_err();
    s.proxy.clear_faults();
    assert_edit_unknown(&e, "/memories/n.md");
    assert_eq!(
        s.content("n.md").await.as_deref(),
        Some("first\ntop\nnew\n")
    );
}

async fn a_text_edit_whose_answer_is_lost_is_repeated_and_applied_once(b: Backend) {
    let s = Setup::new(b).await;
    s.create("/memories/i.md", "a\n").await;
    s.proxy.take_log();
    s.proxy
        .fault(Method::POST, "/edit", Fault::ForwardThenDrop, 1);
    let done = handle(
        &s.tool,
        json!({"command": "str_replace", "path": "/memories/i.md", "old_str": "a", "new_str": "a b"}),
    )
    .await
    .unwrap();
    assert_eq!(
        done,
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n     1\ta b\n     2\t"
    );
    // Sent twice, applied once: a second application would have failed (two matches of "a").
    assert_eq!(
        s.proxy.take_log(),
        vec![
            "POST /api/contexts/by-external/mem-tool%3Aws%2Fi.md/edit",
            "POST /api/contexts/by-external/mem-tool%3Aws%2Fi.md/edit"
        ]
    );
    assert_eq!(s.content("i.md").await.as_deref(), Some("a b\n"));
    // Edits refused by the server read as the protocol says.
    for (edit, message) in [
        (
            json!({"command": "str_replace", "path": "/memories/i.md", "old_str": "zz", "new_str": "y"}),
            "No replacement was performed, old_str `zz` did not appear verbatim in /memories/i.md.",
        ),
        (
            json!({"command": "insert", "path": "/memories/i.md", "insert_line": 9, "insert_text": "y"}),
            "Invalid `insert_line` parameter: 9. It should be within the range of lines of the file: [0, 1]",
        ),
        (
            json!({"command": "str_replace", "path": "/memories/nope.md", "old_str": "a", "new_str": "y"}),
            "The path /memories/nope.md does not exist. Please provide a valid path.",
        ),
    ] {
        let e = handle(&s.tool, edit).await.unwrap_err();
        assert_eq!(e.message(), message);
        assert!(e.changed_nothing());
    }
}

async fn directory_rename_failures_undo_or_name_what_is_left(b: Backend) {
    let s = Setup::new(b).await;
    for f in ["a", "b", "c"] {
        s.create(&format!("/memories/r/{f}.md"), f).await;
    }
    let forbidden = || Fault::Status(403, None);
    let pass = || Fault::Delay(std::time::Duration::ZERO);

    // The second copy is refused: the first copy is removed again, nothing changed.
    s.proxy.fault(Method::POST, "/bulk-upsert", pass(), 1);
    s.proxy.fault(Method::POST, "/bulk-upsert", forbidden(), 1);
    let e = handle(&s.tool, rename("/memories/r", "/memories/r2"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    assert_eq!(
        e.message(),
        "Rename of /memories/r to /memories/r2 failed while copying /memories/r/b.md: The ContextQ API key may not make this change: injected 403; nothing was changed."
    );
    assert!(e.changed_nothing(), "{:?}", e.effects());
    assert_eq!(s.content("r2/a.md").await, None);

    // The same, and removing the first copy is refused too: it exists at both places.
    s.proxy.fault(Method::POST, "/bulk-upsert", pass(), 1);
    s.proxy.fault(Method::POST, "/bulk-upsert", forbidden(), 1);
    s.proxy
        .fault(Method::DELETE, "/api/contexts/", forbidden(), 1);
    let e = handle(&s.tool, rename("/memories/r", "/memories/r2"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    assert!(
        e.message().ends_with(
            "these copies could not be removed and now exist at both places: /memories/r2/a.md."
        ),
        "{}",
        e.message()
    );
    assert_eq!(
        sorted(e.effects()),
        effects(&[
            ("/memories/r/a.md", Applied::No),
            ("/memories/r2/a.md", Applied::Yes)
        ])
    );
    assert_eq!(s.content("r2/a.md").await.as_deref(), Some("a"));
    handle(&s.tool, delete("/memories/r2")).await.unwrap();

    // Every copy made, the second source delete refused: the rest is named.
    s.proxy.fault(Method::DELETE, "/api/contexts/", pass(), 1);
    s.proxy
        .fault(Method::DELETE, "/api/contexts/", forbidden(), 1);
    let e = handle(&s.tool, rename("/memories/r", "/memories/r2"))
        .await
        .unwrap_err();
    s.proxy.clear_faults();
    assert_stopped(
        &e,
        "Rename of /memories/r to /memories/r2 is incomplete: every file was copied to /memories/r2, but 2 of 3 sources could not be deleted and now exist at both places: /memories/r/b.md, /memories/r/c.md.",
        None,
        &[
            ("/memories/r/a.md", Applied::Yes),
            ("/memories/r/b.md", Applied::No),
            ("/memories/r/c.md", Applied::No),
            ("/memories/r2/a.md", Applied::Yes),
            ("/memories/r2/b.md", Applied::Yes),
            ("/memories/r2/c.md", Applied::Yes),
        ],
    );
    assert_eq!(s.content("r/a.md").await, None);
    assert_eq!(s.content("r/b.md").await.as_deref(), Some("b"));
    assert_eq!(s.content("r2/c.md").await.as_deref(), Some("c"));
}

async fn a_directory_delete_refused_part_way_names_what_is_left(b: Backend) {
    let s = Setup::new(b).await;
    for f in ["a", "b", "c"] {
        s.create(&format!("/memories/q/{f}.md"), f).await;
    }
    s.proxy.fault(
        Method::DELETE,
        "/api/contexts/",
        Fault::Delay(std::time::Duration::ZERO),
        1,
    );
    s.proxy.fault(
        Method::DELETE,
        "/api/contexts/",
        Fault::Status(403, None),
        1,
    );
    let e = handle(&s.tool, delete("/memories/q")).await.unwrap_err();
    s.proxy.clear_faults();
    assert_stopped(
        &e,
        "Deleting /memories/q stopped part way: 1 of 3 files were deleted; still present: /memories/q/b.md, /memories/q/c.md.",
        None,
        &[
            ("/memories/q/a.md", Applied::Yes),
            ("/memories/q/b.md", Applied::No),
            ("/memories/q/c.md", Applied::No),
        ],
    );
}

async fn an_edit_that_keeps_losing_gives_up_when_its_budget_is_spent(b: Backend) {
    let s = Setup::new(b).await;
    s.create("/memories/e.md", "one\n").await;
    // Without the server's text edits (GET, then PUT with If-Match).
    let proxy = Proxy::hiding(&s.proxy.url, &["text-edit"]).await;
    let mut opts = options(&proxy.url, &s.key).workspace("ws");
    opts.edit_budget = Duration::from_millis(300);
    let tool = contextq_memory_tool(opts).unwrap();
    // Every conditional write finds another version (412).
    s.proxy.fault(
        Method::PUT,
        "/api/contexts/",
        Fault::Status(412, None),
        10_000,
    );
    let started = Instant::now();
    let e = handle(
        &tool,
        json!({"command": "str_replace", "path": "/memories/e.md", "old_str": "one", "new_str": "1"}),
    )
    .await
    .unwrap_err();
    let spent = started.elapsed();
    let message = e.message();
    let (head, tail) = message.split_once(" attempts in ").expect(message);
    let attempts: usize = head
        .strip_prefix("The file /memories/e.md was changed by other writers while this edit was being saved (")
        .expect(message)
        .parse()
        .unwrap();
    assert!(
        tail.ends_with(
            " s); nothing was changed by this command. View the file again and retry the edit."
        ),
        "{message}"
    );
    assert!(e.changed_nothing());
    // Backed off between attempts (ceilings 2, 4, 8, ... ms, jittered), within the budget.
    assert!(attempts >= 3, "{message}");
    assert!(spent < Duration::from_secs(5), "{spent:?}");
    let methods: Vec<String> = proxy
        .take_log()
        .iter()
        .filter(|l| *l != "GET /api/contexts") // the probe that learns the extensions
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(methods.len(), 2 * attempts, "{methods:?}");
    assert!(
        methods.chunks(2).all(|m| m == ["GET", "PUT"]),
        "{methods:?}"
    );
    assert_eq!(s.content("e.md").await.as_deref(), Some("one\n"));
}

async fn a_rename_restarts_when_the_source_changes_under_it(b: Backend) {
    let s = Setup::new(b).await;
    s.create("/memories/s.md", "v1\n").await;
    // Hold the source's delete (sent with If-Match: 1) until another writer has changed it.
    let gate = Gate::default();
    s.proxy.fault(
        Method::DELETE,
        "/api/contexts/",
        Fault::Hold(gate.clone()),
        1,
    );
    let tool = s.tool.clone();
    let renaming =
        tokio::spawn(
            async move { handle(&tool, rename("/memories/s.md", "/memories/t.md")).await },
        );
    gate.arrived().await;
    let other = contextq_memory_tool(options(&s.server.url, &s.key).workspace("ws")).unwrap();
    handle(
        &other,
        json!({"command": "str_replace", "path": "/memories/s.md", "old_str": "v1", "new_str": "v2"}),
    )
    .await
    .unwrap();
    s.proxy.take_log();
    gate.open();
    assert_eq!(
        renaming.await.unwrap().unwrap(),
        "Successfully renamed /memories/s.md to /memories/t.md"
    );
    // The held delete got 412; the copy was removed, the source read again, copied again.
    let log: Vec<String> = s
        .proxy
        .take_log()
        .iter()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(log, ["DELETE", "GET", "POST", "DELETE"], "after the hold");
    assert_eq!(s.content("s.md").await, None);
    assert_eq!(s.content("t.md").await.as_deref(), Some("v2\n"));
}

/// Writes applied whose answer is lost, on servers that cannot be asked again with a key: the
/// row read back settles them as applied (our content, at the version the write would make),
/// and Claude is told they succeeded. Conditional requests without recorded outcomes (a
/// create), and a plain ContextQ (a create, an edit written whole, a rename's copy).
async fn writes_whose_answer_is_lost_are_settled_by_reading_back(b: Backend) {
    let s = Setup::new(b).await;
    s.proxy
        .fault(Method::POST, "/bulk-upsert", Fault::ForwardThenDrop, 1);
    let r = handle(&s.tool, create("/memories/c.md", "created")).await;
    assert_eq!(
        r.as_deref(),
        Ok("File created successfully at: /memories/c.md")
    );
    assert_eq!(s.content("c.md").await.as_deref(), Some("created"));

    let plain = Proxy::plain(&s.server.url).await;
    let mut opts = options(&plain.url, &s.key).workspace("ws");
    opts.retry.max_retries = 1;
    let tool = contextq_memory_tool(opts).unwrap();
    plain.fault(Method::POST, "/bulk-upsert", Fault::ForwardThenDrop, 1);
    let r = handle(&tool, create("/memories/p.md", "plain")).await;
    assert_eq!(
        r.as_deref(),
        Ok("File created successfully at: /memories/p.md")
    );
    plain.fault(Method::POST, "/bulk-upsert", Fault::ForwardThenDrop, 1);
    let insert = json!({"command": "insert", "path": "/memories/p.md", "insert_line": 0, "insert_text": "top"});
    let r = handle(&tool, insert).await;
    assert_eq!(r.as_deref(), Ok("The file /memories/p.md has been edited."));
    assert_eq!(s.content("p.md").await.as_deref(), Some("top\nplain\n"));
    plain.fault(Method::POST, "/bulk-upsert", Fault::ForwardThenDrop, 1);
    let r = handle(&tool, rename("/memories/p.md", "/memories/q.md")).await;
    assert_eq!(
        r.as_deref(),
        Ok("Successfully renamed /memories/p.md to /memories/q.md")
    );
    assert_eq!(s.content("p.md").await, None);
    assert_eq!(s.content("q.md").await.as_deref(), Some("top\nplain\n"));
}

contextq_server::database_tests!(
    a_server_delete_whose_answer_is_lost_is_asked_again,
    a_server_delete_whose_answer_is_lost_without_outcomes_is_unknown,
    a_server_rename_whose_answer_is_lost_is_asked_again,
    a_server_rename_whose_answer_is_lost_without_outcomes_is_unknown,
    a_server_directory_move_whose_answer_is_lost_is_asked_again,
    a_server_directory_move_whose_answer_is_lost_without_outcomes_is_unknown,
    a_file_rename_whose_source_delete_is_unsettled_keeps_the_copy,
    a_file_delete_whose_outcome_is_unsettled_says_so,
    a_directory_rename_whose_source_delete_is_unsettled_keeps_every_copy,
    a_directory_delete_whose_first_delete_is_unsettled_stops_and_says_what_is_left,
    writes_whose_answer_and_read_back_are_lost_are_unknown_never_failed,
    writes_whose_answer_is_lost_are_settled_by_reading_back,
    directory_rename_failures_undo_or_name_what_is_left,
    a_directory_delete_refused_part_way_names_what_is_left,
    an_edit_that_keeps_losing_gives_up_when_its_budget_is_spent,
    a_text_edit_whose_answer_is_lost_is_repeated_and_applied_once,
    a_rename_restarts_when_the_source_changes_under_it,
);
