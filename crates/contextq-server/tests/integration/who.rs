//! Who did it: a key's name in `/api/audit` and in versions, a restore recorded as its own
//! action naming the version it came from (extension `restore-marks`), a malformed mark refused
//! with nothing changed, and a key row of another tenant, planted by someone who can write the
//! database, never lending its name to this tenant's rows.

use crate::common;

use common::{Api, TestServer};
use contextq_server::{Backend, Plan, Scope, admin};
use reqwest::StatusCode;
use serde_json::json;

async fn names_and_restores(b: Backend) {
    let s = TestServer::start(b).await;
    let a = s.tenant(Plan::Free, &[Scope::Read, Scope::Write]).await;
    let named = admin::create_key_named(
        &s.db,
        &a.tenant_id,
        &[Scope::Read, Scope::Write],
        None,
        None,
        Some("agent-billing"),
    )
    .await
    .unwrap();
    let api = Api::new(&s.url, &named.api_key);
    let up = |content: &str| json!({"contexts": [{"externalId": "f.md", "workspace": "ws", "type": "reference", "content": content}]});
    let r = api.post("/api/contexts/bulk-upsert", up("one")).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        api.put(
            &format!("/api/contexts/{id}"),
            json!({"content": "two"}),
            Some(1)
        )
        .await
        .status,
        StatusCode::OK
    );
    // A restore of version 1, marked.
    let restore = |mark: &str| {
        let (url, key, id, mark) = (
            s.url.clone(),
            named.api_key.clone(),
            id.clone(),
            mark.to_string(),
        );
        async move {
            reqwest::Client::new()
                .put(format!("{url}/api/contexts/{id}"))
                .bearer_auth(key)
                .header("if-match", "\"2\"")
                .header("contextq-restored-from", mark)
                .json(&json!({"content": "one"}))
                .send()
                .await
                .unwrap()
        }
    };
    for bad in ["x", "0", "-3", ""] {
        let r = restore(bad).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad:?}");
    }
    let r = restore("1").await;
    assert_eq!(r.status(), StatusCode::OK);
    let versions = api.get("/api/contexts/by-external/f.md/versions").await;
    let v = &versions.body["versions"];
    assert_eq!(v[0]["action"], "restore", "{v}");
    assert_eq!(v[0]["restoredFrom"], 1, "{v}");
    assert_eq!(v[0]["keyName"], "agent-billing", "{v}");
    assert_eq!(v[1]["action"], "update", "{v}");
    assert!(v[1].get("restoredFrom").is_none(), "{v}");
    let audit = api.get("/api/audit").await;
    let e = &audit.body["entries"];
    assert_eq!(e[0]["action"], "context.restore", "{e}");
    assert_eq!(e[0]["restoredFrom"], 1, "{e}");
    assert_eq!(e[0]["keyName"], "agent-billing", "{e}");
    assert_eq!(e[1]["action"], "context.update", "{e}");
    // Unnamed keys carry no name.
    let r = a
        .client
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [{"externalId": "g.md", "workspace": "ws", "type": "reference", "content": "g"}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let own = a.client.get("/api/audit").await;
    assert!(
        own.body["entries"][0].get("keyName").is_none(),
        "{}",
        own.body
    );

    // Someone who can write the database points A's rows at another tenant's named key: its
    // name (and last four characters) are not shown to A.
    let b_tenant = s.tenant(Plan::Free, &[Scope::Read, Scope::Write]).await;
    let secret = admin::create_key_named(
        &s.db,
        &b_tenant.tenant_id,
        &[Scope::Read],
        None,
        None,
        Some("b-secret-name"),
    )
    .await
    .unwrap();
    common::sql(
        &s.db,
        "UPDATE activity_logs SET api_key_id = $1 WHERE tenant_id = $2",
        &[&secret.key_id, &a.tenant_id],
    )
    .await;
    common::sql(
        &s.db,
        "UPDATE context_versions SET api_key_id = $1 WHERE tenant_id = $2",
        &[&secret.key_id, &a.tenant_id],
    )
    .await;
    let audit = api.get("/api/audit").await;
    let versions = api.get("/api/contexts/by-external/f.md/versions").await;
    let rows: Vec<&serde_json::Value> = audit.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .chain(versions.body["versions"].as_array().unwrap())
        .collect();
    assert!(rows.len() >= 5);
    for row in rows {
        assert!(row.get("keyName").is_none(), "{row}");
        assert!(row["keyLast4"].is_null(), "{row}");
    }
    s.stop().await;
}

contextq_server::database_tests!(names_and_restores);
