//! The Memory Stores door (`/v1/memory_stores...`, extension `memory-stores`): the official SDKs
//! drive every endpoint (Python `anthropic==2.17.0`, TypeScript `@anthropic-ai/sdk@1.17.0`,
//! `tests/sdk/`), and here, over HTTP on both databases, what they cannot show: one memory
//! through three doors, concurrent writers, paging while others write, the attacker's requests,
//! and what a redaction leaves in the other doors' answers.
//!
//! The SDKs come from the package registries: `CONTEXTQ_ANTHROPIC_PYTHON` names a Python with
//! `anthropic==2.17.0` and `CONTEXTQ_ANTHROPIC_TS_SDK` a directory holding
//! `node_modules/@anthropic-ai/sdk` 1.17.0 (`.ci/run` installs both). Without them the SDK test
//! says so and passes, unless `CONTEXTQ_SDK_TESTS=required` (CI).

use std::collections::HashSet;
use std::path::Path;

use crate::common;

use common::{ALL, Api, RW, TestServer};
use contextq_server::{Backend, Plan, Scope};
use reqwest::StatusCode;
use serde_json::{Value, json};

const STORES: &str = "/v1/memory_stores";

fn sdks_required() -> bool {
    std::env::var("CONTEXTQ_SDK_TESTS").as_deref() == Ok("required")
}

/// A store made through the door: its id.
async fn store(api: &Api, name: &str) -> String {
    let r = api.post(STORES, json!({ "name": name })).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    r.body["id"].as_str().unwrap().to_string()
}

async fn create(api: &Api, store: &str, path: &str, content: &str) -> common::Reply {
    api.post(
        &format!("{STORES}/{store}/memories"),
        json!({ "path": path, "content": content }),
    )
    .await
}

/// Every item of a listing, page by page, and how many pages.
async fn walk(api: &Api, first: &str) -> (Vec<Value>, usize) {
    let (mut items, mut pages) = (Vec::new(), 0);
    let mut url = first.to_string();
    loop {
        let r = api.get(&url).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        pages += 1;
        items.extend(r.body["data"].as_array().unwrap().iter().cloned());
        match r.body["next_page"].as_str() {
            Some(t) => {
                let sep = if first.contains('?') { '&' } else { '?' };
                url = format!("{first}{sep}page={t}");
            }
            None => return (items, pages),
        }
    }
}

fn sha(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// Every error on `/v1` is Anthropic's envelope.
#[track_caller]
fn anthropic_error(r: &common::Reply, status: u16, kind: &str) {
    assert_eq!(r.status.as_u16(), status, "{:?}", r.body);
    assert_eq!(r.body["type"], "error", "{:?}", r.body);
    assert_eq!(r.body["error"]["type"], kind, "{:?}", r.body);
    assert!(r.body["request_id"].as_str().unwrap().starts_with("req_"));
}

async fn official_sdks_drive_every_endpoint(b: Backend) {
    let python = std::env::var("CONTEXTQ_ANTHROPIC_PYTHON").ok();
    let ts = std::env::var("CONTEXTQ_ANTHROPIC_TS_SDK").ok();
    if python.is_none() || ts.is_none() {
        assert!(
            !sdks_required(),
            "CONTEXTQ_SDK_TESTS=required but CONTEXTQ_ANTHROPIC_PYTHON or CONTEXTQ_ANTHROPIC_TS_SDK is not set"
        );
        eprintln!(
            "skipped: set CONTEXTQ_ANTHROPIC_PYTHON and CONTEXTQ_ANTHROPIC_TS_SDK (see .ci/run)"
        );
        return;
    }
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let ro = contextq_server::admin::create_key(&s.db, &t.tenant_id, None, &[Scope::Read])
        .await
        .unwrap();
    let other = s.tenant(Plan::Pro, ALL).await;
    s.workspace(&t.tenant_id, "lim").await;
    let limited = s.limited_key(&t.tenant_id, ALL, &["lim"]).await;
    let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    let run = |mut c: std::process::Command, who: &str| {
        let out = c.output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "{who}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let r: Value = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(r["ok"], true, "{who}: {r}");
    };
    let mut py = std::process::Command::new(python.unwrap());
    py.arg(scripts.join("memory_stores.py")).args([
        &s.url,
        &t.client.key,
        &ro.api_key,
        &other.client.key,
        &limited.api_key,
        "lim",
    ]);
    let mut node = std::process::Command::new("node");
    node.arg(scripts.join("memory_stores.mjs")).args([
        ts.as_deref().unwrap(),
        &s.url,
        &t.client.key,
        &ro.api_key,
        &other.client.key,
    ]);
    tokio::task::spawn_blocking(move || {
        run(py, "python");
        run(node, "typescript");
    })
    .await
    .unwrap();
    s.stop_consistent().await;
}

/// A memory written through the door is the memory tool's file (`mem-tool:<slug><path>` in the
/// store's workspace), and a file written as the memory tool writes it is a memory; a rename or
/// an edit through `/api` keeps the memory's id and adds its versions.
async fn one_memory_three_doors(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = &t.client;
    // Every workspace is a store: the tenant's `ws`, by its slug as name.
    let r = api.get(STORES).await;
    let ws_store = r.body["data"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(r.body["data"][0]["name"], "ws", "{:?}", r.body);
    let m = create(api, &ws_store, "/notes/a.md", "from the door\n").await;
    assert_eq!(m.status, StatusCode::OK, "{:?}", m.body);
    let mem_id = m.body["id"].as_str().unwrap().to_string();
    // The answers of a create and an update (made from what was written) are what a read gives.
    let read = |api: &Api, st: &str, id: &str| {
        let (api, url) = (
            api.clone(),
            format!("{STORES}/{st}/memories/{id}?view=basic"),
        );
        async move { api.get(&url).await.body }
    };
    assert_eq!(m.body, read(api, &ws_store, &mem_id).await);
    let u = api
        .post(
            &format!("{STORES}/{ws_store}/memories/{mem_id}"),
            json!({"content": "from the door, again\n"}),
        )
        .await;
    assert_eq!(u.body, read(api, &ws_store, &mem_id).await);
    assert_ne!(u.body["memory_version_id"], m.body["memory_version_id"]);
    let u = api
        .post(
            &format!("{STORES}/{ws_store}/memories/{mem_id}"),
            json!({"content": "from the door\n"}),
        )
        .await;
    assert_eq!(u.status, StatusCode::OK, "{:?}", u.body);
    let c = api
        .get("/api/contexts/by-external/mem-tool:ws%2Fnotes%2Fa.md")
        .await;
    assert_eq!(c.status, StatusCode::OK, "{:?}", c.body);
    assert_eq!(c.body["content"], "from the door\n");
    assert_eq!(c.body["workspace"], "ws");
    assert_eq!(format!("mem_{}", c.body["id"].as_str().unwrap()), mem_id);

    // Written as the memory tool writes, at a path longer than the door allows: still listed.
    let deep = format!("mem-tool:ws/{}z.md", "d/".repeat(25));
    let r = api
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [
                {"externalId": "mem-tool:ws/tool.md", "workspace": "ws", "type": "reference", "content": "from the tool\n", "tags": ["mem-tool"]},
                {"externalId": deep, "workspace": "ws", "type": "reference", "content": "deep\n", "tags": ["mem-tool"]},
                {"externalId": "other:ws/not-a-memory", "workspace": "ws", "type": "reference", "content": "x", "tags": []}
            ]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let (items, _) = walk(api, &format!("{STORES}/{ws_store}/memories")).await;
    let paths: Vec<&str> = items.iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(paths.len(), 3, "{paths:?}");
    assert!(paths.contains(&"/tool.md") && paths.contains(&"/notes/a.md"));
    let tool = items.iter().find(|i| i["path"] == "/tool.md").unwrap();
    assert_eq!(tool["content_sha256"], sha("from the tool\n"));

    // An edit and a rename through the contract: the same memory, two more versions.
    let r = api
        .post(
            "/api/contexts/by-external/mem-tool:ws%2Fnotes%2Fa.md/edit",
            json!({"edit": {"strReplace": {"oldStr": "door", "newStr": "tool"}}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = api
        .post(
            "/api/contexts/by-external/mem-tool:ws%2Fnotes%2Fa.md/rename",
            json!({"to": "mem-tool:ws/notes/b.md"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let got = api
        .get(&format!("{STORES}/{ws_store}/memories/{mem_id}"))
        .await;
    assert_eq!(got.body["path"], "/notes/b.md", "{:?}", got.body);
    assert_eq!(got.body["content"], "from the tool\n");
    let (versions, _) = walk(
        api,
        &format!("{STORES}/{ws_store}/memory_versions?memory_id={mem_id}"),
    )
    .await;
    let ops: Vec<&str> = versions
        .iter()
        .map(|v| v["operation"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        ["modified", "modified", "modified", "modified", "created"],
        "{versions:?}"
    );
    assert_eq!(versions[0]["id"], got.body["memory_version_id"]);
    assert_eq!(versions[0]["path"], "/notes/b.md");
    assert_eq!(versions[4]["path"], "/notes/a.md");

    // A store made through the door is a workspace, its slug from its name.
    let id = store(api, "Team Notes!").await;
    let again = store(api, "team notes").await;
    let list = api.get("/api/workspaces").await;
    let slugs: Vec<&str> = list.body["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["slug"].as_str().unwrap())
        .collect();
    assert!(
        slugs.contains(&"team-notes") && slugs.contains(&"team-notes-2"),
        "{slugs:?}"
    );
    assert_ne!(id, again);
    s.stop_consistent().await;
}

/// 20 simultaneous conditional updates of one memory: one wins, one version; 20 simultaneous
/// creates of one path: one memory, 19 path conflicts.
async fn concurrent_writers(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = t.client.clone();
    let st = store(&api, "race").await;
    let m = create(&api, &st, "/m.md", "base").await;
    let mem = m.body["id"].as_str().unwrap().to_string();
    let mut tasks = Vec::new();
    for i in 0..20 {
        let (api, path) = (api.clone(), format!("{STORES}/{st}/memories/{mem}"));
        tasks.push(tokio::spawn(async move {
            api.post(
                &path,
                json!({"content": format!("writer {i}"), "precondition": {"type": "content_sha256", "content_sha256": sha("base")}}),
            )
            .await
        }));
    }
    let mut won = 0;
    for task in tasks {
        let r = task.await.unwrap();
        match r.status {
            StatusCode::OK => won += 1,
            _ => anthropic_error(&r, 409, "memory_precondition_failed_error"),
        }
    }
    assert_eq!(won, 1);
    let (versions, _) = walk(
        &api,
        &format!("{STORES}/{st}/memory_versions?memory_id={mem}"),
    )
    .await;
    assert_eq!(versions.len(), 2, "{versions:?}");

    let mut tasks = Vec::new();
    for i in 0..20 {
        let (api, st) = (api.clone(), st.clone());
        tasks.push(tokio::spawn(async move {
            create(&api, &st, "/same.md", &format!("creator {i}")).await
        }));
    }
    let (mut created, mut conflicts) = (0, 0);
    for task in tasks {
        let r = task.await.unwrap();
        if r.status == StatusCode::OK {
            created += 1;
        } else {
            anthropic_error(&r, 409, "memory_path_conflict_error");
            assert_eq!(r.headers["x-should-retry"], "false");
            conflicts += 1;
        }
    }
    assert_eq!((created, conflicts), (1, 19));
    s.stop_consistent().await;
}

/// Creates and renames at overlapping paths (`/a` against `/a/b.md`): the door's check before
/// the write is made again under the write's lock, so two writes that both passed the first
/// check cannot both land. First deterministically (a create or a rename whose check before the
/// lock saw nothing in the way, as one that lost a race does), then with racing requests.
async fn overlapping_writes_under_the_lock(b: Backend) {
    use contextq_server::store::memory_stores as door;
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = t.client.clone();
    let st = store(&api, "overlap").await;
    let ws = door::workspace_of(&st).unwrap().to_string();
    let actor = contextq_server::store::Actor::operator(&t.tenant_id);
    let the_store = door::get_store(&s.db, &t.tenant_id, &ws)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(create(&api, &st, "/a", "file").await.status, StatusCode::OK);
    assert_eq!(
        create(&api, &st, "/d/e.md", "below").await.status,
        StatusCode::OK
    );
    for path in ["/a/b.md", "/a/b/c.md", "/d"] {
        // `None`: what a check before the lock saw when the other write had not yet committed.
        match door::create_memory(&s.db, actor, (&the_store, None), path, "late").await {
            Err(door::Refusal::Path(c)) => assert!(c.path == "/a" || c.path == "/d/e.md", "{c:?}"),
            other => panic!("{path}: {other:?}"),
        }
    }
    let m = create(&api, &st, "/m.md", "moving").await;
    let m_id = m.body["id"].as_str().unwrap().to_string();
    let current = door::store_and_memory(&s.db, &t.tenant_id, (&ws, &m_id["mem_".len()..]), false)
        .await
        .unwrap()
        .and_then(|(_, m)| m)
        .unwrap();
    let change = door::MemoryChange {
        path: Some("/a/moved.md"),
        ..Default::default()
    };
    match door::update_memory(&s.db, actor, &the_store, current, change).await {
        Err(door::Refusal::Path(c)) => assert_eq!(c.path, "/a"),
        other => panic!("{other:?}"),
    }
    // Nothing landed: the three memories and nothing else.
    let (items, _) = walk(&api, &format!("{STORES}/{st}/memories")).await;
    let mut paths: Vec<&str> = items.iter().map(|m| m["path"].as_str().unwrap()).collect();
    paths.sort();
    assert_eq!(paths, ["/a", "/d/e.md", "/m.md"]);

    // Racing requests: in each round a file and a file below it, at once; never both.
    for round in 0..10 {
        let mut tasks = Vec::new();
        for path in [
            format!("/r{round}"),
            format!("/r{round}/x.md"),
            format!("/r{round}/x.md/y"),
        ] {
            let (api, st) = (api.clone(), st.clone());
            tasks.push(tokio::spawn(async move {
                create(&api, &st, &path, "racing").await
            }));
        }
        let mut created = 0;
        for task in tasks {
            let r = task.await.unwrap();
            if r.status == StatusCode::OK {
                created += 1;
            } else {
                anthropic_error(&r, 409, "memory_path_conflict_error");
            }
        }
        assert!(created >= 1, "round {round}: nothing was created");
        let (items, _) = walk(
            &api,
            &format!("{STORES}/{st}/memories?path_prefix=/r{round}/"),
        )
        .await;
        let top = walk(&api, &format!("{STORES}/{st}/memories?path_prefix=/"))
            .await
            .0;
        let at_top = top.iter().any(|m| m["path"] == format!("/r{round}"));
        assert!(
            items.len() + usize::from(at_top) == 1,
            "round {round}: overlapping memories {items:?}, /r{round}: {at_top}"
        );
    }
    s.stop_consistent().await;
}

/// Stores created again and again (what an attacker's loop, or a program's bug, sends ten
/// thousand times) stop at the plan's cap on workspaces: 402 with a message that says what to
/// do, nothing kept past it; `/api/workspaces` is held to the same cap; deleting a store makes
/// room. Another tenant is not affected.
async fn stores_stop_at_the_plans_cap(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let api = &t.client;
    let cap = Plan::Free.workspace_cap().unwrap() as usize;
    // The tenant's first workspace (`ws`) is one.
    let mut made = vec![];
    for i in 0..cap - 1 {
        made.push(store(api, &format!("loop {i}")).await);
    }
    for _ in 0..20 {
        let r = api.post(STORES, json!({ "name": "one more" })).await;
        assert_eq!(r.status.as_u16(), 402, "{:?}", r.body);
        assert_eq!(r.body["type"], "error");
        let msg = r.body["error"]["message"].as_str().unwrap();
        assert!(msg.contains("allows 10 workspaces"), "{msg}");
    }
    let r = api
        .post(
            "/api/workspaces",
            json!({ "slug": "by-api", "name": "by api" }),
        )
        .await;
    assert_eq!(r.status.as_u16(), 402, "{:?}", r.body);
    let (all, _) = walk(api, &format!("{STORES}?limit=100")).await;
    assert_eq!(all.len(), cap, "{all:?}");
    // Room again after a delete.
    let r = api.delete(&format!("{STORES}/{}", made[0]), None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    store(api, "one more").await;
    // Another tenant creates as it pleases.
    let other = s.tenant(Plan::Free, ALL).await;
    store(&other.client, "theirs").await;
    s.stop_consistent().await;
}

/// A store of 2,500 memories, archived, deleted in one request: a transaction for each 1,000
/// memories and one for the workspace, every memory a `delete` in the audit log; another
/// store's memories are left alone.
async fn a_large_store_deleted_in_few_transactions(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    let api = &t.client;
    let st = store(api, "big").await;
    let slug = api.get("/api/workspaces").await.body["workspaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["slug"].as_str().unwrap().starts_with("big"))
        .unwrap()["slug"]
        .as_str()
        .unwrap()
        .to_string();
    for chunk in 0..25 {
        let items: Vec<Value> = (0..100)
            .map(|i| json!({"externalId": format!("mem-tool:{slug}/d{chunk}/m{i}.md"), "workspace": slug, "type": "reference", "content": format!("memory {chunk} {i}")}))
            .collect();
        let r = api
            .post("/api/contexts/bulk-upsert", json!({ "contexts": items }))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    let keep = store(api, "kept").await;
    assert_eq!(
        create(api, &keep, "/stays.md", "stays").await.status,
        StatusCode::OK
    );
    let r = api.post(&format!("{STORES}/{st}/archive"), json!({})).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let before = s.db.commits();
    let r = api.delete(&format!("{STORES}/{st}"), None).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        s.db.commits() - before,
        4,
        "3 sweeps of at most 1,000 and the workspace"
    );
    let r = api.get(&format!("{STORES}/{st}")).await;
    anthropic_error(&r, 404, "not_found_error");
    let deletes = common::scalar(
        &s.db,
        &format!(
            "SELECT COUNT(*) FROM activity_logs WHERE tenant_id = '{}' AND action = 'context.delete'",
            t.tenant_id
        ),
    )
    .await;
    assert_eq!(deletes, 2500);
    let (left, _) = walk(api, &format!("{STORES}/{keep}/memories")).await;
    assert_eq!(left.len(), 1);
    s.stop_consistent().await;
}

/// An update of both content and path is one write: one `modified` version holding the new
/// content at the new path, the old content kept as the version before; under a precondition
/// that no longer holds nothing moves.
async fn content_and_path_in_one_version(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = &t.client;
    let st = store(api, "both").await;
    let m = create(api, &st, "/old.md", "first").await;
    let mem = m.body["id"].as_str().unwrap().to_string();
    let url = format!("{STORES}/{st}/memories/{mem}");
    let before = s.db.commits();
    let r = api
        .post(
            &url,
            json!({"path": "/new/name.md", "content": "second", "precondition": {"type": "content_sha256", "content_sha256": sha("first")}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(s.db.commits() - before, 1);
    assert_eq!(r.body["path"], "/new/name.md");
    assert_eq!(r.body["content_sha256"], sha("second"));
    let got = api.get(&format!("{url}?view=full")).await;
    assert_eq!(got.body["content"], "second");
    let (versions, _) = walk(
        api,
        &format!("{STORES}/{st}/memory_versions?memory_id={mem}&view=full"),
    )
    .await;
    let ops: Vec<(&str, &str, &str)> = versions
        .iter()
        .map(|v| {
            (
                v["operation"].as_str().unwrap(),
                v["path"].as_str().unwrap(),
                v["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("modified", "/new/name.md", "second"),
            ("created", "/old.md", "first")
        ]
    );
    // A stale precondition: refused, nothing moved.
    let r = api
        .post(
            &url,
            json!({"path": "/elsewhere.md", "content": "third", "precondition": {"type": "content_sha256", "content_sha256": sha("first")}}),
        )
        .await;
    anthropic_error(&r, 409, "memory_precondition_failed_error");
    let got = api.get(&format!("{url}?view=full")).await;
    assert_eq!(got.body["path"], "/new/name.md");
    assert_eq!(got.body["content"], "second");
    s.stop_consistent().await;
}

/// A create reads nothing before its write once the store is known (docs/costs.md); what it
/// kept may be out of date, and the write checks it under its lock: a store whose workspace was
/// deleted through `/api` and made again with the same slug is another store, so a create with
/// the old id is 404 and lands in neither; one archived through `/api` refuses creates.
async fn a_known_store_checked_again_by_the_write(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = &t.client;
    let old = store(api, "Reused Name").await;
    assert_eq!(
        create(api, &old, "/one.md", "1").await.status,
        StatusCode::OK
    );
    assert_eq!(
        create(api, &old, "/two.md", "2").await.status,
        StatusCode::OK
    );
    // Its memories and workspace deleted behind the door's back.
    let r = api
        .post(
            "/api/contexts/by-prefix/delete",
            json!({"prefix": "mem-tool:reused-name/"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = api.delete("/api/workspaces/reused-name", None).await;
    assert!(r.status.is_success(), "{:?}", r.body);
    let new = store(api, "Reused Name").await;
    assert_ne!(new, old);
    let r = create(api, &old, "/three.md", "3").await;
    anthropic_error(&r, 404, "not_found_error");
    let (items, _) = walk(api, &format!("{STORES}/{new}/memories")).await;
    assert!(items.is_empty(), "{items:?}");
    // Known, then archived through /api: refused by the write.
    let a = create(api, &new, "/a.md", "a").await;
    assert_eq!(a.status, StatusCode::OK);
    // A memory of one known store is not found through another known store's id.
    let other = store(api, "Other").await;
    assert_eq!(
        create(api, &other, "/o.md", "o").await.status,
        StatusCode::OK
    );
    let a_id = a.body["id"].as_str().unwrap();
    let r = api
        .post(
            &format!("{STORES}/{other}/memories/{a_id}"),
            json!({"content": "moved in"}),
        )
        .await;
    anthropic_error(&r, 404, "not_found_error");
    let got = api
        .get(&format!("{STORES}/{new}/memories/{a_id}?view=full"))
        .await;
    assert_eq!(got.body["content"], "a");
    let r = api
        .post("/api/workspaces/reused-name/archive", json!({}))
        .await;
    assert!(r.status.is_success(), "{:?}", r.body);
    let r = create(api, &new, "/b.md", "b").await;
    anthropic_error(&r, 409, "conflict_error");
    s.stop_consistent().await;
}

/// Paging while others write: every memory that existed throughout is listed exactly once.
async fn paging_while_others_write(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = t.client.clone();
    let st = store(&api, "pages").await;
    let mut kept = HashSet::new();
    for i in 0..60 {
        let path = format!("/k/{i:03}.md");
        assert_eq!(create(&api, &st, &path, "k").await.status, StatusCode::OK);
        kept.insert(path);
    }
    let writer = {
        let (api, st) = (api.clone(), st.clone());
        tokio::spawn(async move {
            for i in 0..60 {
                create(&api, &st, &format!("/k/{i:03}x.md"), "new").await;
            }
        })
    };
    let first = format!("{STORES}/{st}/memories?path_prefix=/k/&limit=7");
    let (items, pages) = walk(&api, &first).await;
    writer.await.unwrap();
    let paths: Vec<String> = items
        .iter()
        .map(|i| i["path"].as_str().unwrap().to_string())
        .collect();
    let unique: HashSet<&String> = paths.iter().collect();
    assert_eq!(unique.len(), paths.len(), "a memory listed twice");
    for k in &kept {
        assert!(unique.contains(k), "{k} skipped");
    }
    assert!(pages >= 9, "{pages}");
    s.stop_consistent().await;
}

/// Another tenant's ids are 404 on every method, a key limited to a workspace sees only its
/// store, a read-only key cannot write (403), a revoked key is 401; page tokens are bound to
/// their tenant and query; `X-Api-Key` works as the bearer key does; every error is
/// Anthropic's envelope.
async fn the_attackers_requests(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = &t.client;
    let st = store(api, "mine").await;
    let m = create(api, &st, "/secret.md", "secret").await;
    let mem = m.body["id"].as_str().unwrap().to_string();
    let ver = m.body["memory_version_id"].as_str().unwrap().to_string();
    assert_eq!(
        api.post(
            &format!("{STORES}/{st}/memories/{mem}"),
            json!({"content": "newer"})
        )
        .await
        .status,
        StatusCode::OK
    );
    let other = s.tenant(Plan::Pro, ALL).await;
    let theirs = &other.client;
    let their_store = store(theirs, "theirs").await;
    for (method, path) in [
        ("GET", format!("{STORES}/{st}")),
        ("POST", format!("{STORES}/{st}")),
        ("DELETE", format!("{STORES}/{st}")),
        ("POST", format!("{STORES}/{st}/archive")),
        ("GET", format!("{STORES}/{st}/memories")),
        ("POST", format!("{STORES}/{st}/memories")),
        ("GET", format!("{STORES}/{st}/memories/{mem}")),
        ("POST", format!("{STORES}/{st}/memories/{mem}")),
        ("DELETE", format!("{STORES}/{st}/memories/{mem}")),
        ("GET", format!("{STORES}/{st}/memory_versions")),
        ("GET", format!("{STORES}/{st}/memory_versions/{ver}")),
        (
            "POST",
            format!("{STORES}/{st}/memory_versions/{ver}/redact"),
        ),
        // Their own store with my memory's and version's ids.
        ("GET", format!("{STORES}/{their_store}/memories/{mem}")),
        ("POST", format!("{STORES}/{their_store}/memories/{mem}")),
        ("DELETE", format!("{STORES}/{their_store}/memories/{mem}")),
        (
            "GET",
            format!("{STORES}/{their_store}/memory_versions/{ver}"),
        ),
        (
            "POST",
            format!("{STORES}/{their_store}/memory_versions/{ver}/redact"),
        ),
    ] {
        // A body each endpoint takes, so that only the ids decide.
        let body = if method != "POST" || path.ends_with("/archive") || path.ends_with("/redact") {
            None
        } else if path.ends_with("/memories") {
            Some(json!({"path": "/x.md", "content": "x"}))
        } else if path.contains("/memories/") {
            Some(json!({"content": "stolen"}))
        } else {
            Some(json!({"name": "stolen"}))
        };
        let r = theirs
            .send(method.parse().unwrap(), &path, body, None)
            .await;
        anthropic_error(&r, 404, "not_found_error");
    }
    let (listed, _) = walk(theirs, STORES).await;
    assert!(listed.iter().all(|s| s["id"] != st.as_str()));
    let (versions, _) = walk(theirs, &format!("{STORES}/{their_store}/memory_versions")).await;
    assert!(versions.is_empty(), "{versions:?}");
    let got = api.get(&format!("{STORES}/{st}/memories/{mem}")).await;
    assert_eq!(got.body["content"], "newer", "nothing of theirs reached it");

    // A key limited to another workspace, a read-only key, a revoked key, X-Api-Key.
    let limited = s.limited_key(&t.tenant_id, ALL, &["ws"]).await;
    let lim = api.with_key(&limited.api_key);
    let (stores, _) = walk(&lim, STORES).await;
    assert_eq!(stores.len(), 1, "{stores:?}");
    assert_eq!(stores[0]["name"], "ws");
    anthropic_error(
        &lim.get(&format!("{STORES}/{st}")).await,
        404,
        "not_found_error",
    );
    anthropic_error(
        &lim.post(STORES, json!({"name": "escape"})).await,
        403,
        "permission_error",
    );
    // The store is known to the server (the full key's requests): a write through the door
    // that reads nothing first still holds the key to its workspaces.
    anthropic_error(
        &create(&lim, &st, "/through-the-cache.md", "x").await,
        404,
        "not_found_error",
    );
    anthropic_error(
        &lim.post(
            &format!("{STORES}/{st}/memories/{mem}"),
            json!({"content": "rewritten"}),
        )
        .await,
        404,
        "not_found_error",
    );
    let ro = contextq_server::admin::create_key(&s.db, &t.tenant_id, None, &[Scope::Read])
        .await
        .unwrap();
    let ro = api.with_key(&ro.api_key);
    assert_eq!(
        ro.get(&format!("{STORES}/{st}/memories/{mem}"))
            .await
            .status,
        StatusCode::OK
    );
    anthropic_error(
        &create(&ro, &st, "/ro.md", "x").await,
        403,
        "permission_error",
    );
    anthropic_error(
        &ro.send(
            reqwest::Method::DELETE,
            &format!("{STORES}/{st}/memories/{mem}"),
            None,
            None,
        )
        .await,
        403,
        "permission_error",
    );
    let rw = contextq_server::admin::create_key(&s.db, &t.tenant_id, None, RW)
        .await
        .unwrap();
    anthropic_error(
        &api.with_key(&rw.api_key)
            .post(STORES, json!({"name": "x"}))
            .await,
        403,
        "permission_error",
    );
    let revoked = contextq_server::admin::create_key(&s.db, &t.tenant_id, None, ALL)
        .await
        .unwrap();
    contextq_server::admin::revoke_key(&s.db, &revoked.key_id)
        .await
        .unwrap();
    anthropic_error(
        &api.with_key(&revoked.api_key).get(STORES).await,
        401,
        "authentication_error",
    );
    let http = reqwest::Client::new();
    let r = http
        .get(format!("{}{STORES}/{st}", s.url))
        .header("x-api-key", &t.client.key)
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "agent-memory-2026-07-22")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::OK);
    let r = http.get(format!("{}{STORES}", s.url)).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["type"], "authentication_error", "{body}");

    // Page tokens: forged, of another query, of another tenant.
    for i in 0..3 {
        create(api, &st, &format!("/p/{i}.md"), "p").await;
        create(theirs, &their_store, &format!("/p/{i}.md"), "p").await;
    }
    let page = api
        .get(&format!("{STORES}/{st}/memories?path_prefix=/p/&limit=1"))
        .await;
    let token = page.body["next_page"].as_str().unwrap().to_string();
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('0') { '1' } else { '0' });
    for url in [
        format!("{STORES}/{st}/memories?path_prefix=/p/&limit=1&page={forged}"),
        format!("{STORES}/{st}/memories?path_prefix=/&limit=1&page={token}"),
        format!("{STORES}/{st}/memories?path_prefix=/p/&depth=1&page={token}"),
        format!("{STORES}/{st}/memory_versions?page={token}"),
    ] {
        anthropic_error(&api.get(&url).await, 400, "invalid_request_error");
    }
    let stolen = theirs
        .get(&format!(
            "{STORES}/{their_store}/memories?path_prefix=/p/&limit=1&page={token}"
        ))
        .await;
    anthropic_error(&stolen, 400, "invalid_request_error");
    assert_eq!(
        api.get(&format!(
            "{STORES}/{st}/memories?path_prefix=/p/&limit=1&page={token}"
        ))
        .await
        .status,
        StatusCode::OK
    );

    // The framework's own refusals are Anthropic's too.
    anthropic_error(
        &api.get("/v1/memory_stores/x/nothing").await,
        404,
        "not_found_error",
    );
    anthropic_error(
        &api.post(&format!("{STORES}/{st}/memories"), json!({"path": 3}))
            .await,
        400,
        "invalid_request_error",
    );
    anthropic_error(
        &api.get(&format!("{STORES}/{st}/memories?limit=0")).await,
        400,
        "invalid_request_error",
    );
    s.stop_consistent().await;
}

/// A version redacted through the door is gone from every door: its content from the
/// contract's version reads and history, and the door's version answers null its content,
/// path, hash and size.
async fn redaction_reaches_every_door(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = &t.client;
    let st = api.get(STORES).await.body["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let m = create(api, &st, "/r.md", "the secret text").await;
    let (mem, ver) = (
        m.body["id"].as_str().unwrap().to_string(),
        m.body["memory_version_id"].as_str().unwrap().to_string(),
    );
    // The current version cannot be redacted.
    anthropic_error(
        &api.post(
            &format!("{STORES}/{st}/memory_versions/{ver}/redact"),
            json!({}),
        )
        .await,
        409,
        "conflict_error",
    );
    api.post(
        &format!("{STORES}/{st}/memories/{mem}"),
        json!({"content": "clean"}),
    )
    .await;
    let r = api
        .post(
            &format!("{STORES}/{st}/memory_versions/{ver}/redact"),
            json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    for field in ["content", "path", "content_sha256", "content_size_bytes"] {
        assert!(r.body[field].is_null(), "{field}: {:?}", r.body);
    }
    assert_eq!(r.body["redacted_by"]["api_key_id"], t.key_id.as_str());
    let full = api
        .get(&format!("{STORES}/{st}/memory_versions/{ver}?view=full"))
        .await;
    assert!(full.body["content"].is_null(), "{:?}", full.body);
    let (all, _) = walk(api, &format!("{STORES}/{st}/memory_versions?view=full")).await;
    assert!(
        !all.to_vec()
            .iter()
            .any(|v| v.to_string().contains("secret")),
        "{all:?}"
    );
    let history = api
        .get("/api/contexts/by-external/mem-tool:ws%2Fr.md/versions/1")
        .await;
    assert!(
        !history.body.to_string().contains("secret"),
        "{:?}",
        history.body
    );
    s.stop_consistent().await;
}

/// Archived stores: reads, version listing, redaction and memory deletion work; creating,
/// updating memories and changing the store are refused; the store can be deleted.
async fn archived_stores(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = &t.client;
    let st = store(api, "old").await;
    let a = create(api, &st, "/a.md", "a1").await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    let first = api.get(&format!("{STORES}/{st}/memories/{a}")).await.body["memory_version_id"]
        .as_str()
        .unwrap()
        .to_string();
    api.post(
        &format!("{STORES}/{st}/memories/{a}"),
        json!({"content": "a2"}),
    )
    .await;
    create(api, &st, "/b.md", "b").await;
    let r = api.post(&format!("{STORES}/{st}/archive"), json!({})).await;
    assert!(r.body["archived_at"].is_string(), "{:?}", r.body);
    anthropic_error(&create(api, &st, "/c.md", "c").await, 409, "conflict_error");
    anthropic_error(
        &api.post(
            &format!("{STORES}/{st}/memories/{a}"),
            json!({"content": "a3"}),
        )
        .await,
        409,
        "conflict_error",
    );
    anthropic_error(
        &api.post(&format!("{STORES}/{st}"), json!({"name": "n"}))
            .await,
        409,
        "conflict_error",
    );
    assert_eq!(
        api.get(&format!("{STORES}/{st}/memories/{a}")).await.body["content"],
        "a2"
    );
    assert_eq!(
        walk(api, &format!("{STORES}/{st}/memory_versions"))
            .await
            .0
            .len(),
        3
    );
    let r = api
        .post(
            &format!("{STORES}/{st}/memory_versions/{first}/redact"),
            json!({}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = api
        .send(
            reqwest::Method::DELETE,
            &format!("{STORES}/{st}/memories/{a}"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = api
        .send(
            reqwest::Method::DELETE,
            &format!("{STORES}/{st}"),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    anthropic_error(
        &api.get(&format!("{STORES}/{st}")).await,
        404,
        "not_found_error",
    );
    s.stop_consistent().await;
}

/// `depth=1` rolls each child directory into one `memory_prefix`, whatever it holds;
/// `path_prefix` matches whole segments.
async fn directories_at_depth_one(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Pro, ALL).await;
    let api = &t.client;
    let st = store(api, "dirs").await;
    for p in [
        "/notes/a.md",
        "/notes/deep/b.md",
        "/notes/deep/c/d.md",
        "/notes-archive/x.md",
        "/notes/z.md",
        "/top.md",
    ] {
        assert_eq!(create(api, &st, p, "x").await.status, StatusCode::OK, "{p}");
    }
    let (items, _) = walk(
        api,
        &format!("{STORES}/{st}/memories?path_prefix=/notes/&depth=1&limit=1"),
    )
    .await;
    let got: Vec<String> = items
        .iter()
        .map(|i| {
            format!(
                "{} {}",
                i["type"].as_str().unwrap(),
                i["path"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            "memory /notes/a.md",
            "memory_prefix /notes/deep/",
            "memory /notes/z.md"
        ]
    );
    let (items, _) = walk(api, &format!("{STORES}/{st}/memories?depth=1")).await;
    let got: Vec<&str> = items.iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert_eq!(got, ["/notes-archive/", "/notes/", "/top.md"]);
    let (items, _) = walk(api, &format!("{STORES}/{st}/memories?path_prefix=/notes/")).await;
    assert_eq!(items.len(), 4);
    s.stop_consistent().await;
}

contextq_server::database_tests!(
    official_sdks_drive_every_endpoint,
    one_memory_three_doors,
    concurrent_writers,
    overlapping_writes_under_the_lock,
    stores_stop_at_the_plans_cap,
    a_large_store_deleted_in_few_transactions,
    content_and_path_in_one_version,
    a_known_store_checked_again_by_the_write,
    paging_while_others_write,
    the_attackers_requests,
    redaction_reaches_every_door,
    archived_stores,
    directories_at_depth_one,
);
