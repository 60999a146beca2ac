//! The `redaction` extension through real HTTP on 127.0.0.1:0, on SQLite and (when
//! CONTEXTQ_TEST_DATABASE_URL is set) PostgreSQL: a redacted text is found nowhere the API
//! answers (versions, one version, the diff, the audit trail, listings, the point in time) nor
//! in the SQLite files while the server runs; refusals change nothing; scopes, workspace-limited
//! keys and tenants are kept apart; a match larger than one request is paged.

use crate::common;

use contextq_api::ErrorCode;

use common::{ALL, RW, TestServer, seg};
use contextq_server::{Backend, Plan, Scope};
use reqwest::StatusCode;
use serde_json::{Value, json};

const SECRET: &str = "hunter2-Zq8-vault-pass";

/// Every answer of the API a person could read the text in, as one string.
async fn everything(c: &common::Api, ext: &str) -> String {
    let mut all = String::new();
    let versions = c
        .get(&format!("/api/contexts/by-external/{}/versions", seg(ext)))
        .await;
    all.push_str(&versions.body.to_string());
    for v in versions.body["versions"].as_array().into_iter().flatten() {
        let n = v["version"].as_i64().unwrap();
        let one = c
            .get(&format!(
                "/api/contexts/by-external/{}/versions/{n}",
                seg(ext)
            ))
            .await;
        all.push_str(&one.body.to_string());
        let by_id = c
            .get(&format!(
                "/api/contexts/{}/versions/{}",
                v["contextId"].as_str().unwrap(),
                v["contextVersion"]
            ))
            .await;
        all.push_str(&by_id.body.to_string());
        for m in 1..=n {
            let diff = c
                .get(&format!(
                    "/api/contexts/by-external/{}/diff?from={m}&to={n}",
                    seg(ext)
                ))
                .await;
            all.push_str(&diff.body.to_string());
        }
    }
    for path in [
        "/api/audit".to_string(),
        "/api/contexts?includeContent=true".to_string(),
        "/api/contexts".to_string(),
        format!(
            "/api/history?at={}",
            chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        ),
        "/api/contexts/tree?prefix=mem-tool:ws/".to_string(),
    ] {
        all.push_str(&c.get(&path).await.body.to_string());
    }
    let current = c
        .get(&format!("/api/contexts/by-external/{}", seg(ext)))
        .await;
    all.push_str(&current.body.to_string());
    all
}

/// On SQLite: no byte of the database or its `-wal`/`-shm` files holds the secret.
fn no_secret_in_the_files(s: &TestServer, b: Backend) {
    if b == Backend::Sqlite {
        assert_eq!(
            common::sqlite_files_holding(&s.database_url, SECRET),
            Vec::<String>::new()
        );
    }
}

/// The `version` of each entry of a list of versions.
fn version_numbers(list: &Value) -> Vec<i64> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|v| v["version"].as_i64().unwrap())
        .collect()
}

async fn a_redacted_version_is_gone_everywhere(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    assert!(common::has_extension(&c.get("/health").await, "redaction"));
    let ext = "mem-tool:ws/notes/db.md";
    // Written with the secret, edited to remove it, written again with other text.
    let r = c
        .upsert(
            ext,
            &format!("db: prod\npassword: {SECRET}\n"),
            &["mem-tool"],
        )
        .await;
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    let r = c
        .edit(
            ext,
            json!({"edit": {"strReplace": {"oldStr": SECRET, "newStr": "(in the vault)"}}}),
            None,
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let r = c
        .put_content(
            &id,
            "db: prod\npassword: (in the vault)\nport: 5432\n",
            Some(2),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    // A file that held it and is deleted, and a pruned-by-nothing old version elsewhere.
    let gone = "mem-tool:ws/old.md";
    let r = c
        .upsert(gone, &format!("old {SECRET}\n"), &["mem-tool"])
        .await;
    let gone_id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(
        c.delete(&format!("/api/contexts/{gone_id}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let before = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions/1",
            seg(ext)
        ))
        .await;
    let sha = before.body["contentSha256"].as_str().unwrap().to_string();
    assert!(everything(c, ext).await.contains(SECRET));

    // The newest version of a live file is refused, nothing changed.
    let r = c
        .post("/api/redactions", json!({"externalId": ext, "version": 3}))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "conflict"),
        "{:?}",
        r.body
    );
    assert!(r.message().contains("current content"), "{}", r.message());
    // One version: redacted, with its audit row; the others stay.
    let r = c
        .post("/api/redactions", json!({"externalId": ext, "version": 1}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let done = &r.body["redacted"][0];
    assert_eq!(
        (
            done["version"].as_i64(),
            done["already"].as_bool(),
            done["contentSha256"].as_str()
        ),
        (Some(1), Some(false), Some(sha.as_str()))
    );
    assert_eq!(r.body["more"], false);
    assert_eq!(
        r.body["walTruncated"].as_bool(),
        (b == Backend::Sqlite).then_some(true)
    );
    // Again: already redacted, nothing written (no second audit row).
    let r = c
        .post("/api/redactions", json!({"externalId": ext, "version": 1}))
        .await;
    assert_eq!(r.body["redacted"][0]["already"], true, "{:?}", r.body);
    let v1 = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions/1",
            seg(ext)
        ))
        .await;
    assert_eq!(v1.status, StatusCode::OK);
    assert!(v1.body["content"].is_null());
    assert_eq!(v1.body["sizeBytes"], 0);
    assert_eq!(v1.body["contentSha256"], sha.as_str());
    assert_eq!(v1.body["action"], "create");
    assert!(v1.body["redactedAt"].is_string());
    let v2 = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions/2",
            seg(ext)
        ))
        .await;
    assert!(v2.body["redactedAt"].is_null() && v2.body["content"].is_string());
    // A diff with a redacted side is refused; between the others it works.
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/diff?from=1&to=3",
            seg(ext)
        ))
        .await;
    r.assert_error(ErrorCode::Conflict);
    assert!(r.message().contains("redacted"), "{}", r.message());
    let r = c
        .get(&format!(
            "/api/contexts/by-external/{}/diff?from=2&to=3",
            seg(ext)
        ))
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let audit = c.get("/api/audit?action=context.redact").await;
    let rows = audit.body["entries"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{:?}", audit.body);
    assert_eq!(
        (
            rows[0]["externalId"].as_str(),
            rows[0]["version"].as_i64(),
            rows[0]["keyId"].as_str()
        ),
        (Some(ext), Some(1), Some(t.key_id.as_str()))
    );

    // The deleted file's version: by matching over the whole tenant, in a dry run first.
    let r = c
        .post(
            "/api/redactions",
            json!({"matching": SECRET, "dryRun": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["dryRun"], true);
    let planned: Vec<(String, i64)> = r.body["redacted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["externalId"].as_str().unwrap().to_string(),
                v["version"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(planned, [(gone.to_string(), 1)]);
    assert!(
        everything(c, gone).await.contains(SECRET),
        "a dry run changes nothing"
    );
    let r = c.post("/api/redactions", json!({"matching": SECRET})).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["redacted"].as_array().unwrap().len(), 1);
    // Nothing of it is left in any answer, nor in the SQLite files while the server runs.
    assert!(!everything(c, ext).await.contains(SECRET));
    assert!(!everything(c, gone).await.contains(SECRET));
    let r = c
        .post(
            "/api/redactions",
            json!({"matching": SECRET, "dryRun": true}),
        )
        .await;
    assert_eq!(r.body["redacted"], json!([]));
    no_secret_in_the_files(&s, b);
    // The history still lists every version, in order.
    let r = c
        .get(&format!("/api/contexts/by-external/{}/versions", seg(ext)))
        .await;
    let numbers = version_numbers(&r.body["versions"]);
    assert_eq!(numbers, [3, 2, 1]);
    s.stop_consistent().await;
}

async fn refusals_change_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let other = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let ext = "mem-tool:ws/a.md";
    let r = c.upsert(ext, &format!("{SECRET}\n"), &["mem-tool"]).await;
    let id = r.body["results"][0]["id"].as_str().unwrap().to_string();
    c.put_content(&id, &format!("{SECRET} and more\n"), Some(1))
        .await;
    let gone = c.upsert("mem-tool:ws/b.md", "bye\n", &["mem-tool"]).await;
    let gone_id = gone.body["results"][0]["id"].as_str().unwrap().to_string();
    c.delete(&format!("/api/contexts/{gone_id}"), None).await;
    let redact = |body: Value| async move { c.post("/api/redactions", body).await };
    // A matching text the live file holds: refused whole, version 1 keeps its content.
    let r = redact(json!({"matching": SECRET, "externalIdPrefix": "mem-tool:ws/"})).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "conflict"),
        "{:?}",
        r.body
    );
    assert!(r.message().contains("mem-tool:ws/a.md"), "{}", r.message());
    for (body, status, code) in [
        (
            json!({"externalId": "mem-tool:ws/b.md", "version": 2}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            json!({"externalId": ext, "version": 9}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            json!({"externalId": ext, "version": 0}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            json!({"version": 1}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json!({"externalId": ext}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json!({"externalId": ext, "version": 1, "matching": "x"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json!({"matching": "x", "externalId": ext, "externalIdPrefix": "mem-tool:"}),
            StatusCode::BAD_REQUEST,
            "bad_request",
        ),
        (
            json!({"matching": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            json!({"matching": "x".repeat(4097)}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            json!({"matching": "x", "workspace": "nope"}),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
    ] {
        let r = redact(body.clone()).await;
        assert_eq!((r.status, r.code()), (status, code), "{body}: {:?}", r.body);
    }
    // Another tenant cannot reach it (its own versions only: none), a key without admin is
    // refused, as is an admin key limited to workspaces.
    let r = other
        .client
        .post("/api/redactions", json!({"externalId": ext, "version": 1}))
        .await;
    r.assert_error(ErrorCode::NotFound);
    let r = other
        .client
        .post("/api/redactions", json!({"matching": SECRET}))
        .await;
    assert_eq!(
        (r.status, r.body["redacted"].clone()),
        (StatusCode::OK, json!([]))
    );
    let rw = contextq_server::admin::create_key(&s.db, &t.tenant_id, None, RW)
        .await
        .unwrap();
    let r = c
        .with_key(&rw.api_key)
        .post("/api/redactions", json!({"externalId": ext, "version": 1}))
        .await;
    r.assert_error(ErrorCode::Forbidden);
    let limited = s
        .limited_key(
            &t.tenant_id,
            &[Scope::Read, Scope::Write, Scope::Admin],
            &["ws"],
        )
        .await;
    let r = c
        .with_key(&limited.api_key)
        .post(
            "/api/redactions",
            json!({"externalId": ext, "version": 1, "workspace": "ws"}),
        )
        .await;
    r.assert_error(ErrorCode::Forbidden);
    // Nothing was redacted by any of them.
    let v1 = c
        .get(&format!(
            "/api/contexts/by-external/{}/versions/1",
            seg(ext)
        ))
        .await;
    assert_eq!(v1.body["content"], format!("{SECRET}\n"));
    let audit = c.get("/api/audit?action=context.redact").await;
    assert_eq!(audit.body["entries"], json!([]));
    s.stop().await;
}

/// A file deleted and created again: the old life's versions are history (redactable), the new
/// life's current version is not; numbering goes on across both.
async fn a_deleted_and_recreated_file(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let ext = "mem-tool:ws/again.md";
    let r = c
        .upsert(ext, &format!("old {SECRET}\n"), &["mem-tool"])
        .await;
    let old = r.body["results"][0]["id"].as_str().unwrap().to_string();
    c.delete(&format!("/api/contexts/{old}"), None).await;
    let r = c
        .upsert(ext, &format!("new {SECRET}\n"), &["mem-tool"])
        .await;
    let new = r.body["results"][0]["id"].as_str().unwrap().to_string();
    assert_ne!(old, new);
    assert_eq!(r.body["results"][0]["version"], 1);
    let redact = |body: Value| async move { c.post("/api/redactions", body).await };
    // Version 3 is the new life's current state (its own version 1): refused.
    let r = redact(json!({"externalId": ext, "version": 3})).await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::CONFLICT, "conflict"),
        "{:?}",
        r.body
    );
    // The text is live: a matching redaction is refused whole, version 1 keeps its content.
    let r = redact(json!({"matching": SECRET, "externalId": ext})).await;
    assert_eq!(r.status, StatusCode::CONFLICT, "{:?}", r.body);
    // The old life's version 1 is history: redacted.
    let r = redact(json!({"externalId": ext, "version": 1})).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(r.body["redacted"][0]["contextId"], old.as_str());
    // Once the new life no longer holds it, the rest goes by matching: version 3 only.
    c.put_content(&new, "new, clean\n", Some(1)).await;
    let r = redact(json!({"matching": SECRET, "externalId": ext})).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let taken = version_numbers(&r.body["redacted"]);
    assert_eq!(taken, [3]);
    assert!(!everything(c, ext).await.contains(SECRET));
    no_secret_in_the_files(&s, b);
    s.stop_consistent().await;
}

/// A version retention pruned is not found (404); eight redactions of one version at once, with
/// writers busy on another file, redact it once (one `already: false`, one audit row) and leave
/// the tenant's counts and audit chain exact.
async fn pruned_history_and_concurrent_redactions(b: Backend) {
    let s = TestServer::start_with_options(
        b,
        contextq_server::ServerConfig::default(),
        contextq_server::DbOptions::default().versions_kept(3),
    )
    .await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    let a = "mem-tool:ws/a.md";
    for text in [
        format!("1 {SECRET}\n"),
        format!("2 {SECRET}\n"),
        "3\n".into(),
        "4\n".into(),
    ] {
        assert_eq!(
            c.upsert(a, &text, &["mem-tool"]).await.status,
            StatusCode::OK
        );
    }
    let r = c
        .post("/api/redactions", json!({"externalId": a, "version": 1}))
        .await;
    assert_eq!(
        (r.status, r.code()),
        (StatusCode::NOT_FOUND, "not_found"),
        "{:?}",
        r.body
    );
    let r = c
        .post(
            "/api/redactions",
            json!({"matching": SECRET, "externalId": a}),
        )
        .await;
    assert_eq!(version_numbers(&r.body["redacted"]), [2]);

    let bfile = "mem-tool:ws/b.md";
    c.upsert(bfile, &format!("{SECRET}\n"), &["mem-tool"]).await;
    c.upsert(bfile, "clean\n", &["mem-tool"]).await;
    let redactions = (0..8).map(|_| {
        let c = c.clone();
        tokio::spawn(async move {
            c.post(
                "/api/redactions",
                json!({"externalId": bfile, "version": 1}),
            )
            .await
        })
    });
    let writers = (0..4).map(|w| {
        let c = c.clone();
        tokio::spawn(async move {
            for i in 0..10 {
                let r = c
                    .upsert(
                        &format!("mem-tool:ws/w{w}.md"),
                        &format!("{i}\n"),
                        &["mem-tool"],
                    )
                    .await;
                assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
            }
        })
    });
    let writers: Vec<_> = writers.collect();
    let mut fresh = 0;
    for r in futures::future::join_all(redactions).await {
        let r = r.unwrap();
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
        if r.body["redacted"][0]["already"] == false {
            fresh += 1;
        }
    }
    for w in futures::future::join_all(writers).await {
        w.unwrap();
    }
    assert_eq!(fresh, 1);
    let audit = c
        .get(&format!(
            "/api/audit?action=context.redact&externalIdPrefix={}",
            seg(bfile)
        ))
        .await;
    assert_eq!(audit.body["entries"].as_array().unwrap().len(), 1);
    no_secret_in_the_files(&s, b);
    s.stop_consistent().await;
}

/// More matching versions than one request takes: a dry run pages with `afterSeq`; the
/// redaction takes 1,000 a request and says there are more.
async fn a_large_match_is_paged(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    let c = &t.client;
    // 11 files x 100 versions holding the text (then a last one without it): 1,100.
    for round in 0..100 {
        let items: Vec<Value> = (0..11)
            .map(|f| {
                json!({"externalId": format!("mem-tool:ws/f{f:02}.md"), "type": "note", "workspace": "ws",
                       "content": format!("{SECRET} round {round}\n"), "tags": ["mem-tool"]})
            })
            .collect();
        let r = c
            .post("/api/contexts/bulk-upsert", json!({"contexts": items}))
            .await;
        assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    }
    let items: Vec<Value> = (0..11)
        .map(|f| {
            json!({"externalId": format!("mem-tool:ws/f{f:02}.md"), "type": "note", "workspace": "ws",
                   "content": "clean\n", "tags": ["mem-tool"]})
        })
        .collect();
    c.post("/api/contexts/bulk-upsert", json!({"contexts": items}))
        .await;
    // Retention keeps 100 a file: 99 with the text, 1 without.
    let body = json!({"matching": SECRET, "externalIdPrefix": "mem-tool:ws/", "dryRun": true});
    let r = c.post("/api/redactions", body.clone()).await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    assert_eq!(
        (
            r.body["redacted"].as_array().unwrap().len(),
            r.body["more"].as_bool()
        ),
        (1000, Some(true))
    );
    let last = r.body["redacted"][999]["seq"].as_i64().unwrap();
    let mut next = body.clone();
    next["afterSeq"] = json!(last);
    let r = c.post("/api/redactions", next).await;
    assert_eq!(
        (
            r.body["redacted"].as_array().unwrap().len(),
            r.body["more"].as_bool()
        ),
        (89, Some(false))
    );
    let body = json!({"matching": SECRET, "externalIdPrefix": "mem-tool:ws/"});
    let r = c.post("/api/redactions", body.clone()).await;
    assert_eq!(
        (
            r.body["redacted"].as_array().unwrap().len(),
            r.body["more"].as_bool()
        ),
        (1000, Some(true))
    );
    let r = c.post("/api/redactions", body.clone()).await;
    assert_eq!(
        (
            r.body["redacted"].as_array().unwrap().len(),
            r.body["more"].as_bool()
        ),
        (89, Some(false))
    );
    let r = c.post("/api/redactions", body).await;
    assert_eq!(r.body["redacted"], json!([]));
    let audit = c.get("/api/audit?action=context.redact&limit=500").await;
    assert_eq!(audit.body["entries"].as_array().unwrap().len(), 500);
    no_secret_in_the_files(&s, b);
    s.stop_consistent().await;
}

contextq_server::database_tests!(
    a_redacted_version_is_gone_everywhere,
    refusals_change_nothing,
    a_deleted_and_recreated_file,
    pruned_history_and_concurrent_redactions,
    a_large_match_is_paged,
);
