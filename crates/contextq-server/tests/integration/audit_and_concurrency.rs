//! The audit chain (verified, tamper detected, tenant deletion guarded) and version-checked
//! concurrent writers, on SQLite and (when configured) PostgreSQL.

use crate::common;

use common::{ALL, TestServer};
use contextq_server::Backend;
use contextq_server::Plan;
use contextq_server::admin;
use contextq_server::admin::TenantDeletion;
use reqwest::StatusCode;

async fn audit_chain_verifies_and_detects_tampering(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    let c = &t.client;
    for i in 0..5 {
        assert_eq!(
            c.upsert(&format!("a{i}"), "x", &[]).await.status,
            StatusCode::OK
        );
    }
    let id = c.id_of("a0").await;
    assert_eq!(c.put_content(&id, "y", None).await.status, StatusCode::OK);
    assert_eq!(
        c.delete(&format!("/api/contexts/{id}"), None).await.status,
        StatusCode::NO_CONTENT
    );
    // A refused write leaves no audit row.
    assert_eq!(
        c.delete(&format!("/api/contexts/{id}"), None).await.status,
        StatusCode::NOT_FOUND
    );

    let v = admin::verify_audit(&s.db, None).await.unwrap();
    assert!(v.ok(), "{v:?}");
    assert_eq!(
        v.rows,
        1 + 1 + 5 + 1 + 1,
        "key.create + workspace.create + 5 creates + update + delete"
    );

    // Every row names the key that made the change (except admin-made ones).
    let keyed: i64 = sqlx::Row::try_get(
        &sqlx::query("SELECT COUNT(*) AS n FROM activity_logs WHERE api_key_id = $1")
            .bind(t.key_id.clone())
            .fetch_one(s.db.pool())
            .await
            .unwrap(),
        "n",
    )
    .unwrap();
    assert_eq!(keyed, 7);

    // Editing a row is detected, and named: the tenant's chain and the row's number in it.
    common::sql(
        &s.db,
        "UPDATE activity_logs SET detail = '{\"forged\":true}' WHERE tenant_id = $1 AND tenant_seq = 3",
        &[&t.tenant_id],
    )
    .await;
    let v = admin::verify_audit(&s.db, None).await.unwrap();
    let bad = v.first_bad.clone().expect("the edit is found");
    assert_eq!(
        (bad.tenant_id.as_deref(), bad.seq),
        (Some(t.tenant_id.as_str()), 3),
        "{v:?}"
    );
    assert_eq!(v.rows, 2);
    // Checking only another tenant's chain does not see it; checking this one does.
    let other = s.tenant(Plan::Free, ALL).await;
    assert!(
        admin::verify_audit(&s.db, Some(&other.tenant_id))
            .await
            .unwrap()
            .ok()
    );
    assert!(
        !admin::verify_audit(&s.db, Some(&t.tenant_id))
            .await
            .unwrap()
            .ok()
    );
    s.stop().await;

    // Removing a row in the middle, or at the end, is detected too.
    for (sql, bad_at) in [
        (
            "DELETE FROM activity_logs WHERE tenant_id = $1 AND tenant_seq = 4",
            4,
        ),
        (
            "DELETE FROM activity_logs WHERE tenant_id = $1 AND tenant_seq = 8",
            8,
        ),
    ] {
        let s = TestServer::start(b).await;
        let t = s.tenant(Plan::Free, ALL).await;
        for i in 0..7 {
            t.client.upsert(&format!("r{i}"), "x", &[]).await;
        }
        sqlx::query(sql)
            .bind(t.tenant_id.clone())
            .execute(s.db.pool())
            .await
            .unwrap();
        let v = admin::verify_audit(&s.db, None).await.unwrap();
        assert_eq!(
            v.first_bad.as_ref().map(|f| f.seq),
            Some(bad_at),
            "{sql}: {v:?}"
        );
        s.stop().await;
    }
}

async fn tenant_deletion_is_refused_with_chained_rows(b: Backend) {
    let s = TestServer::start(b).await;
    // A tenant that never held data can be deleted with its keys and users (the rows of its
    // key's creation go with it: they record an operator's commands, not data).
    let quiet = admin::create_tenant(&s.db, "quiet", Plan::Free)
        .await
        .unwrap();
    let user = admin::create_user(&s.db, &quiet, "o@quiet.invalid")
        .await
        .unwrap();
    admin::create_key(&s.db, &quiet, Some(&user), common::RW)
        .await
        .unwrap();
    assert_eq!(
        admin::delete_tenant(&s.db, &quiet).await.unwrap(),
        TenantDeletion::Deleted
    );
    assert!(
        admin::tenant_by_name(&s.db, "quiet")
            .await
            .unwrap()
            .is_none()
    );
    // One with rows of data (creating its workspace was audited) is kept, and says how many
    // rows its chain holds (its key's creation and the workspace's).
    let t = s.tenant(Plan::Free, ALL).await;
    assert_eq!(
        admin::delete_tenant(&s.db, &t.tenant_id).await.unwrap(),
        TenantDeletion::KeptForAudit { audit_rows: 2 }
    );
    assert!(
        admin::workspaces(&s.db, &t.tenant_id)
            .await
            .unwrap()
            .iter()
            .any(|w| w.slug == "ws"),
        "nothing of it was deleted"
    );
    t.client.upsert("kept.md", "x", &[]).await;
    let listed = admin::list_tenants(&s.db).await.unwrap();
    let kept: Vec<_> = listed
        .iter()
        .map(|l| (&l.tenant_id[..], l.contexts))
        .collect();
    assert_eq!(kept, [(&t.tenant_id[..], 1)], "the quiet tenant is gone");
    assert!(admin::verify_audit(&s.db, None).await.unwrap().ok());
    s.stop().await;
}

/// 8 clients × 50 version-checked read-modify-writes on one context: version 401, 400 edits.
async fn concurrent_version_checked_writers_lose_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Free, ALL).await;
    assert_eq!(
        t.client.upsert("counter", "", &[]).await.status,
        StatusCode::OK
    );
    let id = t.client.id_of("counter").await;
    let mut tasks = Vec::new();
    for client in 0..8 {
        let c = t.client.clone();
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let mut conflicts = 0;
            for edit in 0..50 {
                loop {
                    let cur = c.get(&format!("/api/contexts/{id}")).await;
                    let version: i64 = cur.etag.unwrap().trim_matches('"').parse().unwrap();
                    let content = format!(
                        "{}c{client}e{edit}\n",
                        cur.body["content"].as_str().unwrap()
                    );
                    let r = c.put_content(&id, &content, Some(version)).await;
                    match r.status {
                        StatusCode::OK => break,
                        StatusCode::PRECONDITION_FAILED => conflicts += 1,
                        other => panic!("unexpected {other}: {:?}", r.body),
                    }
                }
            }
            conflicts
        }));
    }
    let mut conflicts = 0;
    for task in tasks {
        conflicts += task.await.unwrap();
    }
    let end = t.client.get(&format!("/api/contexts/{id}")).await;
    assert_eq!(end.body["version"], 401, "{b:?}");
    let content = end.body["content"].as_str().unwrap();
    for client in 0..8 {
        for edit in 0..50 {
            assert!(
                content.contains(&format!("c{client}e{edit}\n")),
                "lost c{client}e{edit}"
            );
        }
    }
    assert_eq!(content.lines().count(), 400);
    eprintln!("{b:?}: 400 edits, {conflicts} conflicts retried");
    assert!(admin::verify_audit(&s.db, None).await.unwrap().ok());
    s.stop().await;
}

/// Two server processes' worth of state on one database: two app states, one PostgreSQL or
/// SQLite file, writers on both, versions still exact.
async fn two_servers_on_one_database(b: Backend) {
    let s1 = TestServer::start(b).await;
    let db2 = contextq_server::Db::connect(&s1.database_url, &Default::default())
        .await
        .unwrap();
    let server2 = contextq_server::RunningServer::bind(
        "127.0.0.1:0",
        contextq_server::AppState::new(db2, Default::default()),
    )
    .await
    .unwrap();
    let url2 = server2.url().to_string();
    let t = s1.tenant(Plan::Free, ALL).await;
    assert_eq!(
        t.client.upsert("shared", "", &[]).await.status,
        StatusCode::OK
    );
    let id = t.client.id_of("shared").await;
    let clients = [t.client.clone(), common::Api::new(&url2, &t.client.key)];
    let mut tasks = Vec::new();
    for (n, c) in clients.into_iter().enumerate() {
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            for edit in 0..25 {
                loop {
                    let cur = c.get(&format!("/api/contexts/{id}")).await;
                    let v: i64 = cur.body["version"].as_i64().unwrap();
                    let content = format!("{}s{n}e{edit}\n", cur.body["content"].as_str().unwrap());
                    let r = c.put_content(&id, &content, Some(v)).await;
                    match r.status {
                        StatusCode::OK => break,
                        // The other server's writer got there first: read again.
                        StatusCode::PRECONDITION_FAILED => continue,
                        other => panic!("unexpected {other}: {:?}", r.body),
                    }
                }
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let end = t.client.get(&format!("/api/contexts/{id}")).await;
    assert_eq!(end.body["version"], 51);
    assert_eq!(end.body["content"].as_str().unwrap().lines().count(), 50);
    assert!(admin::verify_audit(&s1.db, None).await.unwrap().ok());
    server2.stop().await.unwrap();
    s1.stop().await;
}

/// `admin::bootstrap` is one transaction: when its last step fails (a trigger refuses the
/// workspace), no tenant, user or key is left behind, and the name can be bootstrapped again.
async fn bootstrap_is_all_or_nothing(b: Backend) {
    let s = TestServer::start(b).await;
    let db = &s.db;
    let refuse = match b {
        Backend::Sqlite => vec![
            "CREATE TRIGGER refuse BEFORE INSERT ON workspaces BEGIN SELECT RAISE(ABORT, 'refused'); END",
        ],
        Backend::Postgres => vec![
            "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$ LANGUAGE plpgsql",
            "CREATE TRIGGER refuse BEFORE INSERT ON workspaces FOR EACH ROW EXECUTE FUNCTION refuse()",
        ],
    };
    for sql in &refuse {
        sqlx::raw_sql(sqlx::AssertSqlSafe(*sql))
            .execute(db.pool())
            .await
            .unwrap();
    }
    let count = |table: &'static str| async move {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT COUNT(*) AS n FROM {table}"
        )))
        .fetch_one(db.pool())
        .await
        .unwrap();
        sqlx::Row::try_get::<i64, _>(&row, "n").unwrap()
    };
    let tables = [
        "tenants",
        "users",
        "api_keys",
        "audit_heads",
        "activity_logs",
    ];
    let before: Vec<i64> = futures::future::join_all(tables.map(count)).await;
    let err = admin::bootstrap(db, "atomic", Plan::Free, "notes", ALL)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("refused"), "{err}");
    let after: Vec<i64> = futures::future::join_all(tables.map(count)).await;
    assert_eq!(before, after, "a failed bootstrap left rows behind");
    assert!(admin::tenant_by_name(db, "atomic").await.unwrap().is_none());
    sqlx::raw_sql("DROP TRIGGER refuse ON workspaces")
        .execute(db.pool())
        .await
        .or(sqlx::raw_sql("DROP TRIGGER refuse")
            .execute(db.pool())
            .await)
        .unwrap();
    let made = admin::bootstrap(db, "atomic", Plan::Free, "notes", ALL)
        .await
        .unwrap();
    assert_eq!(made.workspace, "notes");
    let v = admin::verify_audit(db, Some(&made.tenant_id))
        .await
        .unwrap();
    assert!(v.ok() && v.rows == 1, "{v:?}");
}

/// A bulk write's audit rows and first versions go in as multi-row inserts: every row still gets its own global number in the chain's order, after
/// another tenant's rows, and versions of files that had some (updated, or deleted and made
/// again) are numbered on from them.
async fn a_bulk_write_audits_and_versions_every_file(b: Backend) {
    use contextq_api::ContextInput;
    use contextq_server::store::{Actor, contexts};
    let s = TestServer::start(b).await;
    let (t, other) = (
        s.tenant(Plan::Unlimited, ALL).await,
        s.tenant(Plan::Unlimited, ALL).await,
    );
    let item = |ext: String, content: &str| ContextInput {
        external_id: ext,
        workspace: "ws".into(),
        kind: "reference".into(),
        title: None,
        content: content.to_string(),
        tags: None,
        if_absent: false,
    };
    let actor = Actor::operator(&t.tenant_id);
    let early: Vec<ContextInput> = (0..100).map(|i| item(format!("f{i}"), "one")).collect();
    contexts::bulk_upsert(&s.db, actor, &early).await.unwrap();
    assert_eq!(
        other.client.upsert("o1", "x", &[]).await.status,
        StatusCode::OK
    );
    assert_eq!(
        t.client.upsert("gone", "x", &[]).await.status,
        StatusCode::OK
    );
    let gone = t.client.id_of("gone").await;
    assert_eq!(
        t.client
            .delete(&format!("/api/contexts/{gone}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    // 100 updated, 899 created, one made again: the most one request may write.
    let mut many: Vec<ContextInput> = (0..999).map(|i| item(format!("f{i}"), "two")).collect();
    many.push(item("gone".into(), "back"));
    contexts::bulk_upsert(&s.db, actor, &many).await.unwrap();
    assert_eq!(
        other.client.upsert("o2", "x", &[]).await.status,
        StatusCode::OK
    );

    let v = admin::verify_audit(&s.db, None).await.unwrap();
    assert!(v.ok(), "{v:?}");
    // Global numbers follow each chain's order, one apart within the bulk write.
    let rows = sqlx::query("SELECT seq, tenant_id, tenant_seq FROM activity_logs ORDER BY seq")
        .fetch_all(s.db.pool())
        .await
        .unwrap();
    let mut last: std::collections::HashMap<String, i64> = Default::default();
    let mut ours = Vec::new();
    for r in &rows {
        let (seq, tenant, tseq): (i64, String, i64) = (
            sqlx::Row::get(r, "seq"),
            sqlx::Row::get(r, "tenant_id"),
            sqlx::Row::get(r, "tenant_seq"),
        );
        let prev = last.insert(tenant.clone(), tseq).unwrap_or(0);
        assert_eq!(
            tseq,
            prev + 1,
            "tenant {tenant}: global {seq} out of its chain's order"
        );
        if tenant == t.tenant_id {
            ours.push(seq);
        }
    }
    let bulk = &ours[ours.len() - 1000..];
    assert!(bulk.windows(2).all(|w| w[1] == w[0] + 1), "{bulk:?}");
    // Versions: first versions at 1, the updated files at 2 (1 superseded), the file made
    // again after its delete at 3.
    let versions = |ext: &str| {
        let ext = ext.to_string();
        let db = s.db.clone();
        let tenant = t.tenant_id.clone();
        async move {
            sqlx::query(
                "SELECT version, superseded FROM context_versions WHERE tenant_id = $1 AND external_id = $2 ORDER BY version",
            )
            .bind(tenant)
            .bind(ext)
            .fetch_all(db.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| (sqlx::Row::get::<i64, _>(r, "version"), sqlx::Row::get::<i64, _>(r, "superseded")))
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(versions("f7").await, vec![(1, 1), (2, 0)]);
    assert_eq!(versions("f998").await, vec![(1, 0)]);
    assert_eq!(versions("f100").await, vec![(1, 0)]);
    let back = versions("gone").await;
    assert_eq!(back.last(), Some(&(3, 0)), "{back:?}");
    let counted: i64 = sqlx::Row::get(
        &sqlx::query("SELECT COUNT(*) AS n FROM context_versions WHERE tenant_id = $1")
            .bind(t.tenant_id.clone())
            .fetch_one(s.db.pool())
            .await
            .unwrap(),
        "n",
    );
    assert_eq!(counted, 100 + 999 + back.len() as i64);
}

/// A file whose versions were all pruned keeps its counter: made again in a bulk write beside a
/// new file, it is numbered on from the counter (one by one), not given a first version with
/// the new file (the multi-row insert), whose numbers would restart.
async fn a_bulk_create_after_pruned_history_numbers_on(b: Backend) {
    use contextq_api::ContextInput;
    use contextq_server::store::{Actor, contexts};
    let s = TestServer::start(b).await;
    let t = s.tenant(Plan::Unlimited, ALL).await;
    let item = |ext: &str| ContextInput {
        external_id: ext.into(),
        workspace: "ws".into(),
        kind: "reference".into(),
        title: None,
        content: "x".into(),
        tags: None,
        if_absent: false,
    };
    let actor = Actor::operator(&t.tenant_id);
    contexts::bulk_upsert(&s.db, actor, &[item("p")])
        .await
        .unwrap();
    let id = t.client.id_of("p").await;
    assert_eq!(
        t.client
            .delete(&format!("/api/contexts/{id}"), None)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    // Pruned as the tenant's bound prunes: every version gone, the counter (at 2) kept.
    common::sql(
        &s.db,
        "DELETE FROM context_versions WHERE tenant_id = $1 AND external_id = 'p'",
        &[&t.tenant_id],
    )
    .await;
    contexts::bulk_upsert(&s.db, actor, &[item("p"), item("q")])
        .await
        .unwrap();
    let numbers = |ext: &'static str| {
        let (db, tenant) = (s.db.clone(), t.tenant_id.clone());
        async move {
            let versions: Vec<i64> = sqlx::query(
                "SELECT version FROM context_versions WHERE tenant_id = $1 AND external_id = $2 ORDER BY version",
            )
            .bind(tenant.clone())
            .bind(ext)
            .fetch_all(db.pool())
            .await
            .unwrap()
            .iter()
            .map(|r| sqlx::Row::get(r, "version"))
            .collect();
            let counter: i64 = sqlx::Row::get(
                &sqlx::query(
                    "SELECT last_version FROM version_counters WHERE tenant_id = $1 AND external_id = $2",
                )
                .bind(tenant)
                .bind(ext)
                .fetch_one(db.pool())
                .await
                .unwrap(),
                "last_version",
            );
            (versions, counter)
        }
    };
    assert_eq!(numbers("p").await, (vec![3], 3));
    assert_eq!(numbers("q").await, (vec![1], 1));
    assert!(admin::verify_audit(&s.db, None).await.unwrap().ok());
}

contextq_server::database_tests!(
    bootstrap_is_all_or_nothing,
    a_bulk_write_audits_and_versions_every_file,
    a_bulk_create_after_pruned_history_numbers_on,
    audit_chain_verifies_and_detects_tampering,
    tenant_deletion_is_refused_with_chained_rows,
    concurrent_version_checked_writers_lose_nothing,
    two_servers_on_one_database,
);
