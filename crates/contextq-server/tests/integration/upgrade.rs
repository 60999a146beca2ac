//! A database written by the previous release (0.1.0, one global audit chain) upgrades in place:
//! its data is intact, its audit rows stay verifiable, new writes go to per-tenant chains, and
//! tampering with old or new rows is still found. On SQLite and PostgreSQL, from dumps that the
//! released binary wrote (`tests/fixtures/make-release-fixtures.py`).

use crate::common;

use common::{Api, seg};
use contextq_server::admin::{self, TenantDeletion};
use contextq_server::testing::{ALL_SCOPES, TestDatabase};
use contextq_server::{AppState, Backend, Db, RunningServer};
use reqwest::StatusCode;
use serde_json::json;
use sqlx::Connection;

/// Loads the release's dump into a fresh database, on a connection of its own.
async fn release_database(b: Backend) -> TestDatabase {
    let database = TestDatabase::fresh(b).await;
    let (url, dump) = match b {
        Backend::Sqlite => (
            format!("{}?mode=rwc", database.url),
            include_str!("../fixtures/release-0.1.0.sqlite.sql"),
        ),
        Backend::Postgres => (
            database.url.clone(),
            include_str!("../fixtures/release-0.1.0.postgres.sql"),
        ),
    };
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&url).await.unwrap();
    if b == Backend::Sqlite {
        // The dump creates tables in name order, before the tables they reference.
        sqlx::raw_sql("PRAGMA foreign_keys = OFF")
            .execute(&mut conn)
            .await
            .unwrap();
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(dump))
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    database
}

async fn a_release_database_upgrades_in_place(b: Backend) {
    let database = release_database(b).await;
    // Connecting migrates it.
    let db = database.open(&Default::default()).await;
    assert_eq!(
        db.schema_version().await.unwrap(),
        contextq_server::db::latest_schema_version()
    );
    assert_eq!(contextq_server::db::latest_schema_version(), 19);
    if b == Backend::Sqlite {
        // Migration 17: the search index is merged between writes, never by one.
        let row = db
            .read_one(
                "SELECT v FROM context_fts_config WHERE k = 'automerge'",
                vec![],
            )
            .await
            .unwrap()
            .expect("the index's automerge is set");
        assert_eq!(row.try_get::<i64, _>("v").unwrap(), 0);
        // Migration 19: a bulk write's terms stay in memory up to 8 MiB, flushed once.
        let row = db
            .read_one(
                "SELECT v FROM context_fts_config WHERE k = 'hashsize'",
                vec![],
            )
            .await
            .unwrap()
            .expect("the index's hashsize is set");
        assert_eq!(row.try_get::<i64, _>("v").unwrap(), 8 << 20);
    }
    // Migration 6 counted what each tenant holds, as a write would have kept it.
    assert_eq!(admin::recount(&db).await.unwrap(), vec![]);
    let v = admin::verify_audit(&db, None).await.unwrap();
    assert!(v.ok(), "{v:?}");
    assert_eq!(v.rows, 12, "the release's rows, in its global chain");

    // The release's data is intact.
    let acme = admin::tenant_by_name(&db, "acme").await.unwrap().unwrap();
    let key = admin::create_key(&db, &acme, None, ALL_SCOPES)
        .await
        .unwrap();
    let server = RunningServer::bind("127.0.0.1:0", AppState::new(db.clone(), Default::default()))
        .await
        .unwrap();
    let api = Api::new(server.url(), &key.api_key);
    let f0 = api
        .get(&format!(
            "/api/contexts/by-external/{}",
            seg("mem-tool:notes/f0.md")
        ))
        .await;
    assert_eq!(f0.status, StatusCode::OK);
    assert_eq!(
        (f0.body["content"].as_str(), f0.body["version"].as_i64()),
        (Some("line 0, edited\n"), Some(2))
    );
    assert_eq!(
        api.get(&format!(
            "/api/contexts/by-external/{}",
            seg("mem-tool:notes/f4.md")
        ))
        .await
        .status,
        StatusCode::NOT_FOUND
    );

    // Migration 13 indexed the release's contexts for search.
    let r = api
        .get("/api/contexts/search?q=%22line%200%22%20edited")
        .await;
    assert_eq!(
        common::strings(&r.body["hits"], "externalId"),
        ["mem-tool:notes/f0.md"],
        "{:?}",
        r.body
    );

    // Migration 18: the release's workspace is a memory store, its files memories, their hashes
    // from the content where the release kept none.
    let stores = api.get("/v1/memory_stores").await;
    assert_eq!(stores.body["data"][0]["name"], "notes", "{:?}", stores.body);
    let store = stores.body["data"][0]["id"].as_str().unwrap().to_string();
    let listed = api
        .get(&format!("/v1/memory_stores/{store}/memories?view=full"))
        .await;
    let f0m = listed.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["path"] == "/f0.md")
        .unwrap_or_else(|| panic!("{:?}", listed.body))
        .clone();
    assert_eq!(f0m["content"], "line 0, edited\n");
    let version = f0m["memory_version_id"].as_str().unwrap();
    let v = api
        .get(&format!(
            "/v1/memory_stores/{store}/memory_versions/{version}"
        ))
        .await;
    assert_eq!(v.status, StatusCode::OK, "{:?}", v.body);
    assert_eq!(v.body["content_sha256"], f0m["content_sha256"]);

    // New writes go to acme's own chain; everything verifies.
    let id = f0.body["id"].as_str().unwrap().to_string();
    let r = api
        .put_content(&id, "line 0, edited again\n", Some(2))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    // Versions (migration 4): what the release stored is version 1, an update whose past is not
    // known; the write after the upgrade is version 2.
    let r = api
        .get(&format!(
            "/api/contexts/by-external/{}/versions",
            seg("mem-tool:notes/f0.md")
        ))
        .await;
    let got: Vec<(i64, &str, i64)> = r.body["versions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().unwrap(),
                v["action"].as_str().unwrap(),
                v["contextVersion"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [(2, "update", 3), (1, "update", 2)]);
    let r = api
        .get(&format!(
            "/api/contexts/by-external/{}/versions/1",
            seg("mem-tool:notes/f0.md")
        ))
        .await;
    assert_eq!(r.body["content"], "line 0, edited\n");
    let r = api
        .get("/api/history?at=2000-01-01T00:00:00Z&externalIdPrefix=mem-tool:notes/f0")
        .await;
    assert_eq!(r.body["paths"][0]["state"], "unknown", "{:?}", r.body);
    let r = api
        .post(
            "/api/contexts/bulk-upsert",
            json!({"contexts": [{"externalId": "new-after-upgrade", "workspace": "notes", "type": "note", "content": "n"}]}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{:?}", r.body);
    let v = admin::verify_audit(&db, None).await.unwrap();
    assert!(v.ok(), "{v:?}");
    assert_eq!(v.rows, 15);
    // The audit listing: the tenant's chain rows first (newest first), then its rows of the
    // frozen global chain; paging one row at a time walks across the boundary and ends.
    let all = contextq_server::store::activity::list(
        &db,
        &acme,
        &contextq_server::store::activity::AuditQuery {
            limit: 500,
            ..Default::default()
        },
    )
    .await
    .unwrap()
    .entries;
    let chain_rows = 3;
    assert!(all.len() > chain_rows, "{all:?}");
    let seqs: Vec<i64> = all.iter().map(|e| e.seq).collect();
    let mut legacy = seqs[chain_rows..].to_vec();
    legacy.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(&seqs[chain_rows..], &legacy[..], "legacy rows newest first");
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = contextq_server::store::activity::list(
            &db,
            &acme,
            &contextq_server::store::activity::AuditQuery {
                limit: 1,
                before,
                ..Default::default()
            },
        )
        .await
        .unwrap();
        paged.extend(page.entries.iter().map(|e| e.seq));
        match page.next_cursor {
            Some(c) => before = Some(contextq_server::store::activity::decode_cursor(&c).unwrap()),
            None => break,
        }
    }
    assert_eq!(paged, seqs);
    let v = admin::verify_audit(&db, Some(&acme)).await.unwrap();
    assert_eq!(
        (v.ok(), v.rows),
        (true, 3),
        "acme's chain: the key made after the upgrade and the two new rows"
    );

    // Keying the upgraded database: its rows so far stay hash-chained (the release's global
    // chain, acme's three rows), new ones carry MACs, and everything verifies with the key.
    server.stop().await.unwrap();
    db.close().await;
    let keyed = contextq_server::DbOptions::default()
        .audit_key(Some(contextq_server::audit::AuditKey::generate().unwrap()))
        .adopt_audit_key(true);
    let db = database.open(&keyed).await;
    admin::create_workspace(&db, &acme, "keyed", "")
        .await
        .unwrap();
    let v = admin::verify_audit(&db, None).await.unwrap();
    assert!(v.ok(), "{v:?}");
    assert_eq!((v.rows, v.keyed_rows), (16, 1));

    // The deletion rule still counts the old rows.
    let globex = admin::tenant_by_name(&db, "globex").await.unwrap().unwrap();
    assert!(matches!(
        admin::delete_tenant(&db, &globex).await.unwrap(),
        TenantDeletion::KeptForAudit { audit_rows } if audit_rows > 0
    ));

    // Tampering with an old row is found in the global chain; with a new one, in acme's.
    sqlx::query("UPDATE activity_logs SET detail = '{}' WHERE tenant_seq IS NULL AND seq = 5")
        .execute(db.pool())
        .await
        .unwrap();
    let bad = admin::verify_audit(&db, None)
        .await
        .unwrap()
        .first_bad
        .expect("the edit is found");
    assert_eq!((bad.tenant_id, bad.seq), (None, 5));
    sqlx::query("UPDATE activity_logs SET detail = '{}' WHERE tenant_id = $1 AND tenant_seq = 2")
        .bind(acme.clone())
        .execute(db.pool())
        .await
        .unwrap();
    let bad = admin::verify_audit(&db, Some(&acme))
        .await
        .unwrap()
        .first_bad
        .expect("the edit is found");
    assert_eq!((bad.tenant_id, bad.seq), (Some(acme), 2));
    db.close().await;
}

/// Replicas starting together on one database (docs/team.md): each connects, the migrations run
/// once under the lock (each version recorded once, the release's search index built once), and
/// every replica then writes and verifies the audit chain. On a fresh database and on the
/// release's.
async fn replicas_starting_together_migrate_once(b: Backend) {
    const REPLICAS: usize = 6;
    for release in [false, true] {
        let database = if release {
            release_database(b).await
        } else {
            TestDatabase::fresh(b).await
        };
        let starts = (0..REPLICAS).map(|_| {
            let url = database.url.clone();
            tokio::spawn(async move { Db::connect(&url, &Default::default()).await })
        });
        let mut replicas = Vec::new();
        for (i, start) in futures::future::join_all(starts)
            .await
            .into_iter()
            .enumerate()
        {
            match start.unwrap() {
                Ok(db) => replicas.push(db),
                Err(e) => panic!("release {release}: replica {i} did not start: {e}"),
            }
        }
        let db = &replicas[0];
        let latest = contextq_server::db::latest_schema_version();
        let (rows, versions): (i64, i64) =
            sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT version) FROM schema_migrations")
                .fetch_one(db.pool())
                .await
                .unwrap();
        assert_eq!((rows, versions), (latest, latest), "release {release}");
        for (i, db) in replicas.iter().enumerate() {
            assert_eq!(db.schema_version().await.unwrap(), latest);
            let tenant =
                admin::create_tenant(db, &format!("replica{i}"), contextq_server::Plan::Free)
                    .await
                    .unwrap();
            admin::create_workspace(db, &tenant, "ws", "ws")
                .await
                .unwrap();
        }
        // The search index holds each context once (the backfill ran once), the audit chain
        // verifies with every replica's writes in it.
        common::consistent(db).await;
        let v = admin::verify_audit(db, None).await.unwrap();
        assert!(v.ok(), "release {release}: {v:?}");
        for db in replicas {
            db.close().await;
        }
    }
}

contextq_server::database_tests!(
    a_release_database_upgrades_in_place,
    replicas_starting_together_migrate_once
);

/// A new SQLite database that another process is writing (as a second `contextq-memory` or
/// server migrating it at the same moment does): opening it waits for that write, never
/// "database is locked" (switching to write-ahead logging needs the file to itself, and SQLite
/// refuses at once, without its busy timeout, a connection that must wait for a writer).
#[tokio::test]
async fn a_new_sqlite_database_opens_while_another_process_writes_it() {
    let database = TestDatabase::fresh(Backend::Sqlite).await;
    let path = database.url.strip_prefix("sqlite:").unwrap().to_string();
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer
        .execute_batch(
            "CREATE TABLE elsewhere (x INTEGER); BEGIN IMMEDIATE; INSERT INTO elsewhere VALUES (1)",
        )
        .unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        writer.execute_batch("COMMIT").unwrap();
    });
    let db = database.open(&Default::default()).await;
    release.join().unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(db.pool())
        .await
        .unwrap();
    assert_eq!(mode, "wal");
    assert_eq!(
        db.schema_version().await.unwrap(),
        contextq_server::db::latest_schema_version()
    );
}
