//! Keys limited to workspaces, enforced by the server: a key of workspace `a` sees only `a`
//! (other workspaces' rows are 404, as if absent), writes only in `a` (403 elsewhere, nothing
//! changed), and is refused what spans every workspace (the audit trail). Every endpoint that
//! reads or writes contexts, on SQLite and PostgreSQL.

use crate::common;

use common::{ALL, TestServer, seg};
use contextq_server::{Backend, Plan, Scope};
use reqwest::StatusCode;
use serde_json::{Value, json};

fn ids(body: &Value, field: &str) -> Vec<String> {
    let mut ids: Vec<String> = body[field]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|c| c["externalId"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    ids
}

async fn a_key_reaches_only_its_workspaces(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    s.workspace(&t.tenant_id, "a").await;
    s.workspace(&t.tenant_id, "b").await;
    let full = &t.client;
    let put = |ext: &str, ws: &str| json!({"externalId": ext, "workspace": ws, "type": "reference", "content": format!("{ext}\n"), "tags": ["m"]});
    let r = full
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [put("m:a/x.md", "a"), put("m:b/y.md", "b"), put("m:b/z.md", "b")]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let id_of = |i: usize| r.body["results"][i]["id"].as_str().unwrap().to_string();
    let (id_a, id_b) = (id_of(0), id_of(1));
    full.put_content(&id_b, "m:b/y.md, second\n", None).await;

    // A workspace that does not exist is refused, naming those that do; a slug in the other
    // case is the same workspace (as in paths).
    let e = contextq_server::admin::create_key_limited(
        &s.db,
        &t.tenant_id,
        &[Scope::Read],
        None,
        Some(&["biling".to_string()]),
    )
    .await
    .unwrap_err()
    .to_string();
    assert!(e.contains("\"biling\"") && e.contains("a, b"), "{e}");
    let key = s
        .limited_key(
            &t.tenant_id,
            &[Scope::Read, Scope::Write, Scope::Admin],
            &["A"],
        )
        .await;
    let c = full.with_key(&key.api_key);

    // Listings show only its workspaces.
    let r = c.get("/api/workspaces").await;
    let slugs = common::strings(&r.body["workspaces"], "slug");
    assert_eq!(slugs, ["a"]);
    assert_eq!(
        ids(&c.get("/api/contexts").await.body, "contexts"),
        ["m:a/x.md"]
    );
    assert_eq!(
        ids(
            &c.get("/api/contexts?externalIdPrefix=m%3A").await.body,
            "contexts"
        ),
        ["m:a/x.md"]
    );
    assert_eq!(
        c.get("/api/contexts?workspace=b").await.status,
        StatusCode::NOT_FOUND
    );
    let r = c.get("/api/contexts/tree?prefix=m%3A").await;
    assert_eq!(r.body["files"], 1, "{:?}", r.body);
    assert_eq!(
        c.get("/api/contexts/tree?prefix=m%3A&workspace=b")
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // Reads of other workspaces' rows are 404; its own are there.
    for path in [
        format!("/api/contexts/by-external/{}", seg("m:b/y.md")),
        format!("/api/contexts/{id_b}"),
        format!("/api/contexts/{id_b}/versions/1"),
        format!("/api/contexts/by-external/{}/versions/1", seg("m:b/y.md")),
        format!(
            "/api/contexts/by-external/{}/versions?workspace=b",
            seg("m:b/y.md")
        ),
        format!(
            "/api/contexts/by-external/{}/diff?from=1&to=2",
            seg("m:b/y.md")
        ),
        "/api/history?at=2100-01-01T00:00:00Z&workspace=b".to_string(),
    ] {
        let r = c.get(&path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {:?}", r.body);
        assert_eq!(full.get(&path).await.status, StatusCode::OK, "{path}");
    }
    // Another workspace's versions answer as an unknown id's do: the id's existence is not
    // revealed (the message names the id asked for, as for any id).
    let unknown_id = "ctx_0123456789abcdef";
    for (path, unknown, id) in [
        (
            format!("/api/contexts/{id_b}/versions"),
            format!("/api/contexts/{unknown_id}/versions"),
            id_b.as_str(),
        ),
        (
            format!("/api/contexts/by-external/{}/versions", seg("m:b/y.md")),
            format!(
                "/api/contexts/by-external/{}/versions",
                seg("m:b/nothing.md")
            ),
            "m:b/y.md",
        ),
    ] {
        let (r, u) = (c.get(&path).await, c.get(&unknown).await);
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {:?}", r.body);
        assert_eq!(u.status, StatusCode::NOT_FOUND, "{unknown}");
        let unknown_as_asked = u
            .body
            .to_string()
            .replace(unknown_id, id)
            .replace("m:b/nothing.md", id);
        assert_eq!(r.body.to_string(), unknown_as_asked, "{path}");
        assert_eq!(full.get(&path).await.status, StatusCode::OK, "{path}");
    }
    assert_eq!(
        c.get(&format!("/api/contexts/by-external/{}", seg("m:a/x.md")))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(
        c.get(&format!("/api/contexts/{id_a}/versions")).await.body["versions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // What spans every workspace is refused.
    for path in ["/api/audit", "/api/history?at=2100-01-01T00:00:00Z"] {
        let r = c.get(path).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{path}: {:?}", r.body);
        assert!(
            r.message().contains("limited to the workspaces a"),
            "{path}"
        );
    }

    // Writes elsewhere are 403 in the envelope, and change nothing.
    let refused = [
        c.post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [put("m:a/new.md", "a"), put("m:b/new.md", "b")]}),
        )
        .await,
        c.put_content(&id_b, "changed\n", None).await,
        c.delete(&format!("/api/contexts/{id_b}"), None).await,
        c.edit(
            "m:b/y.md",
            json!({"edit": {"insert": {"line": 0, "text": "x"}}, "workspace": "b"}),
            None,
            None,
        )
        .await,
        c.edit(
            "m:a/x.md",
            json!({"edit": {"insert": {"line": 0, "text": "x"}}}),
            None,
            None,
        )
        .await,
        c.post(
            &format!("/api/contexts/by-external/{}/rename", seg("m:b/y.md")),
            json!({"to": "m:b/moved.md", "workspace": "b"}),
        )
        .await,
        c.post(
            "/api/contexts/by-prefix/delete",
            json!({"prefix": "m:b/", "workspace": "b"}),
        )
        .await,
        c.post("/api/contexts/by-prefix/delete", json!({"prefix": "m:b/"}))
            .await,
        c.post(
            "/api/contexts/by-prefix/rename",
            json!({"from": "m:b/", "to": "m:c/", "workspace": "b"}),
        )
        .await,
        c.post("/api/workspaces", json!({"slug": "c"})).await,
        c.post("/api/workspaces/b/archive", json!({})).await,
        c.delete("/api/workspaces/b", None).await,
    ];
    for (i, r) in refused.iter().enumerate() {
        assert_eq!(r.status, StatusCode::FORBIDDEN, "write {i}: {:?}", r.body);
        assert_eq!(r.code(), "forbidden", "write {i}");
    }
    let r = full.get("/api/contexts").await;
    assert_eq!(
        ids(&r.body, "contexts"),
        ["m:a/x.md", "m:b/y.md", "m:b/z.md"],
        "nothing changed"
    );
    let r = full.get(&format!("/api/contexts/{id_b}")).await;
    assert_eq!(r.body["content"], "m:b/y.md, second\n");
    assert_eq!(
        full.get("/api/workspaces").await.body["workspaces"]
            .as_array()
            .unwrap()
            .len(),
        3
    );

    // Writes in its workspace work, and the audit log names the key.
    let r = c
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [put("m:a/new.md", "a")]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = c
        .edit(
            "m:a/x.md",
            json!({"edit": {"insert": {"line": 0, "text": "top"}}, "workspace": "a"}),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = c
        .post(
            "/api/contexts/by-prefix/rename",
            json!({"from": "m:a/", "to": "m:a2/", "workspace": "a"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = full.get("/api/audit?limit=3").await;
    assert!(
        r.body["entries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["keyId"] == key.key_id.as_str()),
        "{:?}",
        r.body
    );

    // The operator's listing shows the limit and (soon) the last use, never the key.
    let mut listed = Vec::new();
    for _ in 0..50 {
        listed = contextq_server::admin::list_keys(&s.db, &t.tenant_id)
            .await
            .unwrap();
        if listed
            .iter()
            .find(|k| k.key_id == key.key_id)
            .is_some_and(|k| k.last_used_at.is_some())
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let limited = listed.iter().find(|k| k.key_id == key.key_id).unwrap();
    assert_eq!(limited.workspaces, Some(vec!["a".to_string()]));
    assert!(limited.last_used_at.is_some(), "{limited:?}");
    assert_eq!(limited.scopes, "read,write,admin");
    let everything = serde_json::to_string(&listed).unwrap();
    assert!(!everything.contains(&key.api_key));
    assert_eq!(
        listed
            .iter()
            .find(|k| k.key_id == t.key_id)
            .unwrap()
            .workspaces,
        None
    );

    // A limit names real slugs, at least one.
    for bad in [vec![], vec!["Not A Slug".to_string()]] {
        assert!(
            contextq_server::admin::create_key_limited(
                &s.db,
                &t.tenant_id,
                &[Scope::Read],
                None,
                Some(&bad)
            )
            .await
            .is_err()
        );
    }
    s.stop().await;
}

contextq_server::database_tests!(a_key_reaches_only_its_workspaces);
