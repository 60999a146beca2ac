//! On PostgreSQL every write transaction takes two round trips to the database (`BEGIN` with
//! one read under the tenant's head lock; one batch of every change with `COMMIT`) once its
//! statements are prepared on the connection, one more for each statement the first time, and
//! nothing after the answer, counted by a TCP proxy between the data layer and PostgreSQL. The
//! figures are those of docs/schema.md.

use std::time::Duration;

use contextq_api::{ContextInput, TextEdit};
use contextq_server::store::{Actor, contexts, workspaces};
use contextq_server::testing::{TcpProxy, TestDatabase};
use contextq_server::{Backend, Db, DbOptions, Plan, admin};

fn item(ext: &str, content: &str) -> ContextInput {
    ContextInput {
        external_id: ext.to_string(),
        workspace: "ws".into(),
        kind: "reference".into(),
        title: None,
        content: content.to_string(),
        tags: Some(vec!["mem-tool".into()]),
        if_absent: false,
    }
}

#[tokio::test(flavor = "current_thread")]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
async fn postgres_writes_take_two_round_trips() {
    let database = TestDatabase::fresh(Backend::Postgres).await;
    let (proxy, url) = TcpProxy::in_front_of(&database.url, Duration::ZERO).await;
    let db = Db::connect(&url, &DbOptions::default().max_connections(1))
        .await
        .unwrap();
    let tenant = admin::create_tenant(&db, "rt", Plan::Unlimited)
        .await
        .unwrap();
    admin::create_workspace(&db, &tenant, "ws", "ws")
        .await
        .unwrap();
    let actor = Actor::operator(&tenant);
    let many: Vec<ContextInput> = (0..100).map(|i| item(&format!("m{i}"), "x")).collect();
    contexts::bulk_upsert(&db, actor, &many[..50])
        .await
        .unwrap();

    // (name, round trips until the answer, round trips including any after it).
    let mut counted = Vec::new();
    let settle = || tokio::time::sleep(Duration::from_millis(100));
    macro_rules! count {
        ($name:expr, $op:expr) => {{
            settle().await;
            let before = proxy.round_trips();
            let out = $op.await.unwrap();
            // On this one-thread runtime nothing else ran since the answer: not even a ping
            // that a pool might spawn when the connection goes back to it.
            let answered = proxy.round_trips() - before;
            settle().await;
            counted.push(($name, answered, proxy.round_trips() - before));
            out
        }};
    }
    // Twice: the first time each statement is prepared on the connection, the second it is not.
    for pass in 0..2 {
        let one = format!("one{pass}");
        let created = count!(
            "create (bulk-upsert, 1 item)",
            contexts::bulk_upsert(&db, actor, &[item(&one, "one\n")])
        );
        count!(
            "bulk-upsert, 100 items (50 created, 50 updated)",
            contexts::bulk_upsert(
                &db,
                actor,
                &many
                    .iter()
                    .map(|i| item(&i.external_id, &format!("changed {pass}")))
                    .collect::<Vec<_>>()
            )
        );
        let id = created[0].id.clone();
        count!(
            "update (PUT, with If-Match and tags)",
            contexts::update(
                &db,
                actor,
                &id,
                "two\n",
                None,
                Some(vec!["mem-tool".into(), "x".into()]),
                Some(1)
            )
        );
        let answer = |_: &dyn std::any::Any| {
            Some(contextq_server::store::outcome::Recorded {
                status: 200,
                body: serde_json::json!({}),
                etag: None,
            })
        };
        let key = format!("key-{pass}");
        let keyed = contextq_server::store::outcome::Keyed {
            key: &key,
            request_sha256: "sha",
            answer: &answer,
            refusal: &|_| None,
        };
        count!(
            "text edit (str_replace, with Idempotency-Key)",
            contexts::edit(
                &db,
                Actor {
                    keyed: Some(&keyed),
                    ..actor
                },
                &one,
                &TextEdit::StrReplace {
                    old_str: "two".into(),
                    new_str: "2".into()
                },
                contexts::Scope {
                    tag: Some("mem-tool"),
                    workspace: Some("ws"),
                },
                None,
            )
        );
        count!(
            "delete (with If-Match)",
            contexts::delete(&db, actor, &id, Some(3))
        );
        let other = format!("other{pass}");
        count!(
            "workspace create",
            workspaces::create(&db, actor, &other, "")
        );
        count!("workspace archive", workspaces::archive(&db, actor, &other));
        count!("workspace delete", workspaces::delete(&db, actor, &other));
    }
    let (cold, warm) = counted.split_at(counted.len() / 2);
    for (name, answered, total) in cold {
        eprintln!("first time: {answered} round trips until the answer, {total} in all: {name}");
    }
    for (name, answered, total) in warm {
        eprintln!("prepared: {answered} round trips until the answer, {total} in all: {name}");
    }
    for (name, answered, _) in warm {
        assert_eq!(
            *answered, 2,
            "{name}: {answered} round trips in the transaction once prepared"
        );
    }
    for (name, answered, total) in counted.iter() {
        assert!(
            (2..=4).contains(answered),
            "{name}: {answered} round trips, the first time at most two more (two statements)"
        );
        assert_eq!(answered, total, "{name}: round trips after the answer");
    }
    assert!(admin::verify_audit(&db, None).await.unwrap().ok());
}

/// A write locks only its own tenant's chain head: while another session holds tenant A's head
/// (as a long write of A would), a write of tenant B completes, and a write of A waits for the
/// lock and then completes. (Correctness of the lock scope, not a timing: A's write is checked
/// to be still pending while the lock is held, then to finish once it is released.)
#[tokio::test]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
async fn postgres_writes_of_different_tenants_never_wait_for_each_other() {
    use sqlx::Connection as _;
    let database = TestDatabase::fresh(Backend::Postgres).await;
    let db = database.open(&DbOptions::default()).await;
    let mut tenants = Vec::new();
    for name in ["a", "b"] {
        let id = admin::create_tenant(&db, name, Plan::Unlimited)
            .await
            .unwrap();
        admin::create_workspace(&db, &id, "ws", "ws").await.unwrap();
        tenants.push(id);
    }
    let (a, b) = (tenants[0].clone(), tenants[1].clone());
    // Another session takes A's head lock and keeps it.
    let mut holder = sqlx::AnyConnection::connect(&database.url).await.unwrap();
    sqlx::raw_sql("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query("SELECT seq FROM audit_heads WHERE tenant_id = $1 FOR UPDATE")
        .bind(a.clone())
        .fetch_one(&mut holder)
        .await
        .unwrap();

    let write = |tenant: String, ext: &'static str| {
        let db = db.clone();
        tokio::spawn(async move {
            let actor = Actor::operator(&tenant);
            contexts::bulk_upsert(&db, actor, &[item(ext, "x")])
                .await
                .unwrap();
        })
    };
    let of_a = write(a.clone(), "of-a");
    let of_b = write(b.clone(), "of-b");
    tokio::time::timeout(Duration::from_secs(30), of_b)
        .await
        .expect("B's write is not held up by A's lock")
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!of_a.is_finished(), "A's write waits for A's head lock");
    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();
    tokio::time::timeout(Duration::from_secs(30), of_a)
        .await
        .expect("A's write goes on once the lock is released")
        .unwrap();
    assert!(admin::verify_audit(&db, None).await.unwrap().ok());
}

/// A fresh PostgreSQL database, a `Db` of one connection (of each kind) on it, and a tenant
/// `name` with a workspace `ws`.
async fn one_connection(name: &str) -> (TestDatabase, Db, String) {
    let database = TestDatabase::fresh(Backend::Postgres).await;
    let db = database
        .open(&DbOptions::default().max_connections(1))
        .await;
    let tenant = admin::create_tenant(&db, name, Plan::Unlimited)
        .await
        .unwrap();
    admin::create_workspace(&db, &tenant, "ws", "ws")
        .await
        .unwrap();
    (database, db, tenant)
}

/// Prepared statements outlive a schema change made by another process (a newer replica's
/// migration adding columns during a rolling upgrade): PostgreSQL plans them again, and they
/// still run, because a write's statements name their columns (a `SELECT t.*` of a table that
/// gained a column fails on the connection that prepared it: "cached plan must not change
/// result type"). Keyed writes too, whose read wraps the write's read (`outcome::with_prior`).
#[tokio::test(flavor = "current_thread")]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
async fn postgres_writes_survive_a_column_added_under_them() {
    let (database, db, tenant) = one_connection("schema").await;
    let actor = Actor::operator(&tenant);
    for round in 0..2 {
        contexts::bulk_upsert(&db, actor, &[item(&format!("a{round}"), "x")])
            .await
            .unwrap();
        let answer = |_: &dyn std::any::Any| None;
        let key = format!("k{round}");
        let keyed = contextq_server::store::outcome::Keyed {
            key: &key,
            request_sha256: "sha",
            answer: &answer,
            refusal: &|_| None,
        };
        contexts::edit(
            &db,
            Actor {
                keyed: Some(&keyed),
                ..actor
            },
            &format!("a{round}"),
            &TextEdit::StrReplace {
                old_str: "x".into(),
                new_str: "y".into(),
            },
            contexts::Scope::default(),
            None,
        )
        .await
        .unwrap();
        // What another process's migration would do.
        let other = database.open(&DbOptions::default()).await;
        for table in [
            "contexts",
            "audit_heads",
            "write_outcomes",
            "context_versions",
        ] {
            sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                "ALTER TABLE {table} ADD COLUMN added_{round} TEXT"
            )))
            .execute(other.pool())
            .await
            .unwrap();
        }
        other.close().await;
    }
    let last = contexts::bulk_upsert(&db, actor, &[item("last", "z")]).await;
    assert!(last.is_ok(), "{last:?}");
    assert!(admin::verify_audit(&db, None).await.unwrap().ok());
}

/// What a client can make the server keep: every bulk upsert size from 1 to the most items a
/// request may hold is a statement shape of its own, and a connection keeps at most
/// `PREPARED_PER_CONNECTION` of them (the least recently used deallocated); the writes all
/// succeed.
#[tokio::test(flavor = "current_thread")]
#[cfg_attr(
    not(contextq_postgres),
    ignore = "built without CONTEXTQ_TEST_DATABASE_URL (a PostgreSQL admin URL)"
)]
async fn postgres_keeps_a_bounded_number_of_prepared_statements() {
    use contextq_server::db::PREPARED_PER_CONNECTION;
    let (_database, db, tenant) = one_connection("shapes").await;
    let actor = Actor::operator(&tenant);
    for round in 0..2 {
        for size in 1..=contextq_api::limits::MAX_BULK_ITEMS {
            let items: Vec<ContextInput> = (0..size)
                .map(|i| item(&format!("r{round}/s{size}/f{i}"), "x"))
                .collect();
            let done = contexts::bulk_upsert(&db, actor, &items).await.unwrap();
            assert_eq!(done.len(), size);
        }
        let kept = db.prepared_per_write_connection();
        assert_eq!(kept.len(), 1, "one write connection");
        assert!(
            kept[0] <= PREPARED_PER_CONNECTION,
            "{} statements kept",
            kept[0]
        );
        assert!(
            kept[0] >= PREPARED_PER_CONNECTION / 2,
            "{kept:?}: hardly any prepared"
        );
    }
    assert!(admin::verify_audit(&db, None).await.unwrap().ok());
}
