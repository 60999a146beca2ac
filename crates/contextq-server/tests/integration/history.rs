//! The `history` extension through real HTTP on 127.0.0.1:0, on SQLite and (when
//! CONTEXTQ_TEST_DATABASE_URL is set) PostgreSQL: every change keeps a version (deleted contexts'
//! too), the reads by external id and by id, one version's content, paging, the state at a point
//! in time, retention, scopes and tenant isolation.

use crate::common;

use contextq_api::ErrorCode;

use common::{ALL, TestServer, seg};
use contextq_server::{Backend, DbOptions, Plan, Scope, ServerConfig};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// The versions of a page as `"5 create, 4 delete, ..."`.
fn actions(page: &Value) -> String {
    let versions = page["versions"].as_array().unwrap();
    let each = versions
        .iter()
        .map(|v| format!("{} {}", v["version"], v["action"].as_str().unwrap()));
    each.collect::<Vec<_>>().join(", ")
}

/// A moment between two changes (the stored times have milliseconds).
async fn moment() -> String {
    tokio::time::sleep(std::time::Duration::from_millis(15)).await;
    let t = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    tokio::time::sleep(std::time::Duration::from_millis(15)).await;
    t
}

async fn every_change_keeps_a_version(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let ext = "mem-tool:ws/notes/a.md";
    let versions = format!("/api/contexts/by-external/{}/versions", seg(ext));
    assert!(
        c.get("/health").await.headers["contextq-extensions"]
            .to_str()
            .unwrap()
            .contains("history")
    );
    // Nothing yet: 404 in the envelope.
    let r = c.get(&versions).await;
    r.assert_error(ErrorCode::NotFound);

    let before_all = moment().await;
    let r = c.upsert(ext, "one\n", &["mem-tool"]).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    let after_create = moment().await;
    let r = c.put_content(&id, "two\n", Some(1)).await;
    assert_eq!(r.status, StatusCode::OK);
    let r = c
        .edit(
            ext,
            json!({"edit": {"strReplace": {"oldStr": "two", "newStr": "three"}}}),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    // Unchanged upserts write no version.
    assert_eq!(
        c.upsert(ext, "three\n", &["mem-tool"]).await.status,
        StatusCode::OK
    );
    let after_edit = moment().await;
    assert_eq!(
        c.delete(&format!("/api/contexts/{id}"), None).await.status,
        StatusCode::NO_CONTENT
    );
    let after_delete = moment().await;
    // Created again: a new context, the external id's numbering goes on.
    let r = c.upsert(ext, "again\n", &["mem-tool"]).await;
    let id2 = r.body["results"][0]["id"].as_str().unwrap().to_string();
    assert_ne!(id, id2);
    assert_eq!(r.body["results"][0]["version"], 1);

    let r = c.get(&versions).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        actions(&r.body),
        "5 create, 4 delete, 3 update, 2 update, 1 create"
    );
    let newest = &r.body["versions"][0];
    assert_eq!(newest["contextId"], id2.as_str());
    assert_eq!(newest["contextVersion"], 1);
    assert_eq!(newest["workspace"], "ws");
    assert_eq!(newest["sizeBytes"], 6);
    assert_eq!(newest["keyId"], t.key_id.as_str());
    assert_eq!(
        newest["keyLast4"].as_str().unwrap(),
        &t.client.key[t.client.key.len() - 4..]
    );
    assert_eq!(r.body["versions"][1]["sizeBytes"], 0);
    assert!(r.body["versions"][0].get("content").is_none());

    // One version's content; a delete has none.
    let r = c.get(&format!("{versions}/3")).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.body["content"], "three\n");
    assert_eq!(r.body["contextVersion"], 3);
    let r = c.get(&format!("{versions}/4")).await;
    assert_eq!(r.body["action"], "delete");
    assert!(r.body["content"].is_null());
    for (bad, status) in [
        ("9", StatusCode::NOT_FOUND),
        ("0", StatusCode::BAD_REQUEST),
        ("x", StatusCode::BAD_REQUEST),
    ] {
        let r = c.get(&format!("{versions}/{bad}")).await;
        assert_eq!(r.status, status, "{bad}: {:?}", r.body);
        assert!(r.body["error"]["message"].is_string());
    }

    // By id: the deleted context's versions are still there.
    let r = c.get(&format!("/api/contexts/{id}/versions")).await;
    assert_eq!(actions(&r.body), "4 delete, 3 update, 2 update, 1 create");
    let r = c.get(&format!("/api/contexts/{id}/versions/2")).await;
    assert_eq!(r.body["content"], "two\n");
    let r = c.get(&format!("/api/contexts/{id2}/versions/2")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // Pages, newest first.
    let r = c.get(&format!("{versions}?limit=2")).await;
    assert_eq!(r.body["versions"].as_array().unwrap().len(), 2);
    let cursor = r.body["nextCursor"].as_str().unwrap().to_string();
    let r = c.get(&format!("{versions}?limit=2&cursor={cursor}")).await;
    assert_eq!(actions(&r.body), "3 update, 2 update");
    let cursor = r.body["nextCursor"].as_str().unwrap().to_string();
    let r = c.get(&format!("{versions}?limit=2&cursor={cursor}")).await;
    assert_eq!(actions(&r.body), "1 create");
    assert!(r.body["nextCursor"].is_null());
    let r = c.get(&format!("{versions}?cursor=nope")).await;
    r.assert_error(ErrorCode::BadRequest);

    // Workspace filter: the versions were written in ws; another workspace has none.
    s.workspace(&t.tenant_id, "other").await;
    let r = c.get(&format!("{versions}?workspace=ws")).await;
    assert_eq!(r.body["versions"].as_array().unwrap().len(), 5);
    let r = c.get(&format!("{versions}?workspace=other")).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);

    // Points in time.
    let at = |t: &str| {
        format!(
            "/api/history?at={}&externalIdPrefix={}",
            seg(t),
            seg("mem-tool:ws/")
        )
    };
    let state = |r: &common::Reply| {
        let p = &r.body["paths"][0];
        (
            p["state"].as_str().unwrap().to_string(),
            p["version"]["version"].as_i64(),
            p["latest"]["version"].as_i64().unwrap(),
        )
    };
    let r = c.get(&at(&before_all)).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(state(&r), ("absent".to_string(), None, 5));
    assert_eq!(
        state(&c.get(&at(&after_create)).await),
        ("present".to_string(), Some(1), 5)
    );
    assert_eq!(
        state(&c.get(&at(&after_edit)).await),
        ("present".to_string(), Some(3), 5)
    );
    assert_eq!(
        state(&c.get(&at(&after_delete)).await),
        ("deleted".to_string(), Some(4), 5)
    );
    let r = c.get("/api/history").await;
    r.assert_error(ErrorCode::BadRequest);
    let r = c.get("/api/history?at=yesterday").await;
    r.assert_error(ErrorCode::BadRequest);
    assert!(r.message().contains("RFC 3339"), "{}", r.message());
    s.stop().await;
}

async fn history_is_tenant_isolated_and_read_scoped(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s.tenant(Plan::Free, ALL).await;
    let other = s.tenant(Plan::Free, ALL).await;
    let r = a.client.upsert("secret", "mine\n", &[]).await;
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    // The same external id in the other tenant: its own history only.
    other.client.upsert("secret", "theirs\n", &[]).await;
    let r = other
        .client
        .get("/api/contexts/by-external/secret/versions/1")
        .await;
    assert_eq!(r.body["content"], "theirs\n");
    for path in [
        format!("/api/contexts/{id}/versions"),
        format!("/api/contexts/{id}/versions/1"),
    ] {
        let r = other.client.get(&path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {:?}", r.body);
    }
    let r = other
        .client
        .get("/api/history?at=2100-01-01T00:00:00Z")
        .await;
    let ids: Vec<&str> = r.body["paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["latest"]["contextId"].as_str().unwrap())
        .collect();
    assert!(!ids.contains(&id.as_str()));
    assert_eq!(ids.len(), 1);
    // A key without read scope.
    let key = contextq_server::admin::create_key(&s.db, &a.tenant_id, None, &[Scope::Write])
        .await
        .unwrap();
    let w = a.client.with_key(&key.api_key);
    for path in [
        format!("/api/contexts/{id}/versions"),
        "/api/contexts/by-external/secret/versions/1".to_string(),
        "/api/history?at=2100-01-01T00:00:00Z".to_string(),
    ] {
        let r = w.get(&path).await;
        assert_eq!(
            (r.status, r.code()),
            (StatusCode::FORBIDDEN, "forbidden"),
            "{path}"
        );
    }
    let r = a
        .client
        .with_key("sk_live_nope")
        .get(&format!("/api/contexts/{id}/versions"))
        .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    s.stop().await;
}

async fn count_versions(s: &TestServer, tenant_id: &str) -> i64 {
    sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM context_versions WHERE tenant_id = $1")
        .bind(tenant_id.to_string())
        .fetch_one(s.db.pool())
        .await
        .unwrap()
}

async fn retention_per_path_and_per_tenant(b: Backend) {
    let options = DbOptions::default().versions_kept(3);
    let s = TestServer::start_with_options(b, ServerConfig::default(), options).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let start = moment().await;
    for i in 0..6 {
        c.upsert("p", &format!("v{i}\n"), &[]).await;
    }
    let r = c.get("/api/contexts/by-external/p/versions").await;
    assert_eq!(actions(&r.body), "6 update, 5 update, 4 update");
    let r = c.get("/api/contexts/by-external/p/versions/1").await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert!(r.message().contains("pruned"), "{}", r.message());
    // Before its first kept version: not known.
    let r = c.get(&format!("/api/history?at={}", seg(&start))).await;
    assert_eq!(r.body["paths"][0]["state"], "unknown");

    // Per tenant: Free (100 contexts) x 3 = 300 versions at most, held by every write. Three
    // rounds of 100 files created then deleted (600 versions), then 100 live files.
    let id = c.get("/api/contexts/by-external/p").await.body["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.delete(&format!("/api/contexts/{id}"), None).await;
    let create = |round: usize| {
        let items: Vec<Value> = (0..100)
            .map(|i| json!({"externalId": format!("r{round}-{i:03}"), "workspace": "ws", "type": "note", "content": format!("{round}\n")}))
            .collect();
        c.post("/api/contexts/bulk-upsert", json!({"contexts": items}))
    };
    let mut inside_round_0 = String::new();
    for round in 0..3 {
        let r = create(round).await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        if round == 0 {
            inside_round_0 = moment().await;
        }
        for item in r.body["results"].as_array().unwrap() {
            let id = item["id"].as_str().unwrap();
            let r = c.delete(&format!("/api/contexts/{id}"), None).await;
            assert_eq!(r.status, StatusCode::NO_CONTENT);
        }
    }
    assert_eq!(create(3).await.status, StatusCode::OK);
    // Exactly the bound: each write prunes what it passes it by.
    assert_eq!(count_versions(&s, &t.tenant_id).await, 300);
    assert_eq!(
        contextq_server::admin::recount(&s.db).await.unwrap(),
        vec![]
    );
    // The oldest went first: p and round 0 entirely; every live file keeps its version.
    for gone in ["p", "r0-000", "r0-099"] {
        let r = c
            .get(&format!("/api/contexts/by-external/{gone}/versions"))
            .await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{gone}: {:?}", r.body);
    }
    for live in ["r3-000", "r3-050", "r3-099"] {
        let r = c
            .get(&format!("/api/contexts/by-external/{live}/versions"))
            .await;
        assert_eq!(actions(&r.body), "1 create", "{live}");
    }
    // The newest deleted paths keep their history.
    let r = c.get("/api/contexts/by-external/r2-099/versions").await;
    assert_eq!(actions(&r.body), "2 delete, 1 create");
    // Created again after every version was pruned: the numbers go on (p had 1 to 7, r0-000 1
    // and 2), and a time inside the pruned life is "unknown", never "absent". (Two files of
    // round 3 make room under the plan's cap.)
    for path in ["r3-098", "r3-099"] {
        let id = c
            .get(&format!("/api/contexts/by-external/{path}"))
            .await
            .body["id"]
            .as_str()
            .unwrap()
            .to_string();
        c.delete(&format!("/api/contexts/{id}"), None).await;
    }
    for (path, next) in [("p", 8), ("r0-000", 3)] {
        assert_eq!(c.upsert(path, "again\n", &[]).await.status, StatusCode::OK);
        let r = c
            .get(&format!("/api/contexts/by-external/{path}/versions"))
            .await;
        assert_eq!(actions(&r.body), format!("{next} create"), "{path}");
    }
    for (at, path) in [(&start, "p"), (&inside_round_0, "r0-000")] {
        let r = c
            .get(&format!("/api/history?at={}&prefix={path}", seg(at)))
            .await;
        let state = r.body["paths"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["externalId"] == path)
            .map(|p| p["state"].clone());
        assert_eq!(
            state,
            Some(json!("unknown")),
            "{path} at {at}: {:?}",
            r.body
        );
    }
    assert!(
        contextq_server::admin::verify_audit(&s.db, None)
            .await
            .unwrap()
            .ok()
    );
    assert_eq!(
        contextq_server::admin::recount(&s.db).await.unwrap(),
        vec![]
    );
    s.stop().await;
}

/// The counts writes keep instead of counting rows (contexts for the plan's cap, versions and
/// the prunable flag for retention) stay exact through every kind of write, concurrent writers
/// and the tenant's bound; an edit around the server is found and set right by `recount`.
async fn kept_counts_stay_exact(b: Backend) {
    let options = DbOptions::default().versions_kept(2);
    let s = TestServer::start_with_options(b, ServerConfig::default(), options).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let other = s.tenant(Plan::Free, ALL).await;
    // Free: 100 contexts, 200 versions. Four writers, each on paths of its own and a shared
    // few, mixing bulk creates and updates, replacements, text edits, deletes and re-creates,
    // directories moved and deleted whole.
    let writers = (0..4u64).map(|w| {
        let c = t.client.clone();
        tokio::spawn(async move {
            let mut rng = fastrand::Rng::with_seed(w);
            for step in 0..120 {
                let path = |i: u64| {
                    if i < 3 {
                        format!("shared-{i}")
                    } else {
                        format!("w{w}/{i}")
                    }
                };
                let i = rng.u64(0..60);
                match rng.u8(0..7) {
                    0 => {
                        let items: Vec<Value> = (0..rng.u64(1..6))
                            .map(|k| json!({"externalId": path((i + k) % 60), "workspace": "ws", "type": "note", "content": format!("{step}\n")}))
                            .collect();
                        let r = c.post("/api/contexts/bulk-upsert", json!({"contexts": items})).await;
                        // 402: the plan's cap (100 contexts across the writers).
                        assert!(matches!(r.status.as_u16(), 200 | 402 | 409), "{:?}", r.body);
                    }
                    1 => {
                        c.upsert(&path(i), &format!("a\nb{step}\n"), &["mem-tool"]).await;
                    }
                    2 => {
                        let body = json!({"edit": {"strReplace": {"oldStr": "a\n", "newStr": format!("a{step}\n")}}, "workspace": "ws"});
                        c.edit(&path(i), body, None, None).await;
                    }
                    // A directory moved away whole, and one deleted whole (extension by-prefix).
                    5 => {
                        let body = json!({"from": format!("w{w}/"), "to": format!("m{w}/")});
                        let r = c.post("/api/contexts/by-prefix/rename", body).await;
                        assert!(matches!(r.status.as_u16(), 200 | 404 | 409), "{:?}", r.body);
                    }
                    6 => {
                        let body = json!({"prefix": format!("m{w}/")});
                        let r = c.post("/api/contexts/by-prefix/delete", body).await;
                        assert!(matches!(r.status.as_u16(), 200 | 404), "{:?}", r.body);
                    }
                    _ => {
                        let r = c.get(&format!("/api/contexts/by-external/{}", seg(&path(i)))).await;
                        if let Some(id) = r.body["id"].as_str() {
                            c.delete(&format!("/api/contexts/{id}"), None).await;
                        }
                    }
                }
            }
        })
    });
    for w in writers.collect::<Vec<_>>() {
        w.await.unwrap();
    }
    other.client.upsert("x", "other tenant\n", &[]).await;
    assert_eq!(
        contextq_server::admin::recount(&s.db).await.unwrap(),
        vec![]
    );
    // The paths (231) are more than the bound holds: it pruned, to exactly the bound.
    assert_eq!(count_versions(&s, &t.tenant_id).await, 200);

    // Someone edits the database around the server: recount finds it and sets it right.
    common::sql(
        &s.db,
        "UPDATE audit_heads SET contexts = 0, versions = 7 WHERE tenant_id = $1",
        &[&t.tenant_id],
    )
    .await;
    common::sql(
        &s.db,
        "UPDATE context_versions SET superseded = 1 - superseded WHERE tenant_id = $1",
        &[&t.tenant_id],
    )
    .await;
    let wrong = contextq_server::admin::recount(&s.db).await.unwrap();
    assert_eq!(wrong.len(), 1, "{wrong:?}");
    assert_eq!(wrong[0].tenant_id, t.tenant_id);
    assert_eq!(wrong[0].contexts.0, 0);
    assert_eq!(
        wrong[0].versions,
        (7, count_versions(&s, &t.tenant_id).await)
    );
    assert!(wrong[0].flags > 0);
    assert_eq!(
        contextq_server::admin::recount(&s.db).await.unwrap(),
        vec![]
    );
    s.stop().await;
}

async fn the_audit_trail_is_the_tenants_paged_and_filtered(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let other = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let second =
        contextq_server::admin::create_key(&s.db, &t.tenant_id, None, &[Scope::Read, Scope::Write])
            .await
            .unwrap();
    let c2 = c.with_key(&second.api_key);
    c.upsert("mem-tool:ws/a.md", "1\n", &["mem-tool"]).await;
    c.upsert("mem-tool:ws/a.md", "2\n", &["mem-tool"]).await;
    c2.upsert("mem-tool:ws/b/c.md", "x\n", &["mem-tool"]).await;
    c.upsert("notes/other", "y\n", &[]).await;
    other
        .client
        .upsert("mem-tool:ws/a.md", "theirs\n", &[])
        .await;

    let entries = |r: &common::Reply| -> Vec<(String, String)> {
        r.body["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                (
                    e["action"].as_str().unwrap().to_string(),
                    e["externalId"].as_str().unwrap_or("").to_string(),
                )
            })
            .collect()
    };
    let r = c.get("/api/audit").await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        entries(&r),
        [
            ("context.create".to_string(), "notes/other".to_string()),
            ("context.create".into(), "mem-tool:ws/b/c.md".into()),
            ("context.update".into(), "mem-tool:ws/a.md".into()),
            ("context.create".into(), "mem-tool:ws/a.md".into()),
            // The second key's creation, the workspace's, the first key's: operator commands.
            ("key.create".into(), "".into()),
            ("workspace.create".into(), "".into()),
            ("key.create".into(), "".into()),
        ]
    );
    assert_eq!(r.body["entries"][5]["slug"], "ws");
    assert!(
        r.body["entries"][4]["keyId"].is_null(),
        "an operator command"
    );
    assert!(
        r.body["entries"][5]["keyId"].is_null(),
        "an operator command"
    );
    let newest = &r.body["entries"][1];
    assert_eq!(newest["keyId"], second.key_id.as_str());
    assert_eq!(newest["version"], 1);
    assert_eq!(
        newest["keyLast4"].as_str().unwrap(),
        &second.api_key[second.api_key.len() - 4..]
    );
    // By path (external id prefix), by key, by action.
    for (prefix, rows) in [("mem-tool:ws/", 3), ("mem-tool:ws/a.md", 2)] {
        let r = c
            .get(&format!("/api/audit?externalIdPrefix={}", seg(prefix)))
            .await;
        assert_eq!(entries(&r).len(), rows, "{prefix}");
    }
    let r = c.get(&format!("/api/audit?keyId={}", second.key_id)).await;
    assert_eq!(
        entries(&r),
        [(
            "context.create".to_string(),
            "mem-tool:ws/b/c.md".to_string()
        )]
    );
    let r = c.get("/api/audit?action=context.update").await;
    assert_eq!(entries(&r).len(), 1);
    // Pages, newest first.
    let r = c.get("/api/audit?limit=3").await;
    assert_eq!(entries(&r).len(), 3);
    let cursor = r.body["nextCursor"].as_str().unwrap().to_string();
    let r = c.get(&format!("/api/audit?limit=3&cursor={cursor}")).await;
    assert_eq!(
        entries(&r),
        [
            ("context.create".to_string(), "mem-tool:ws/a.md".to_string()),
            ("key.create".into(), "".into()),
            ("workspace.create".into(), "".into())
        ]
    );
    let cursor = r.body["nextCursor"].as_str().unwrap().to_string();
    let r = c.get(&format!("/api/audit?limit=3&cursor={cursor}")).await;
    assert_eq!(entries(&r), [("key.create".to_string(), "".to_string())]);
    assert!(r.body["nextCursor"].is_null());
    let r = c.get("/api/audit?cursor=x").await;
    r.assert_error(ErrorCode::BadRequest);
    // Another tenant sees only its own; a key without read scope sees nothing.
    let r = other.client.get("/api/audit").await;
    assert_eq!(
        entries(&r),
        [
            ("context.create".to_string(), "mem-tool:ws/a.md".to_string()),
            ("workspace.create".into(), "".into()),
            ("key.create".into(), "".into())
        ]
    );
    let w = contextq_server::admin::create_key(&s.db, &t.tenant_id, None, &[Scope::Write])
        .await
        .unwrap();
    let r = c.with_key(&w.api_key).get("/api/audit").await;
    r.assert_error(ErrorCode::Forbidden);
    s.stop().await;
}

contextq_server::database_tests!(
    the_audit_trail_is_the_tenants_paged_and_filtered,
    every_change_keeps_a_version,
    history_is_tenant_isolated_and_read_scoped,
    retention_per_path_and_per_tenant,
    kept_counts_stay_exact,
);
