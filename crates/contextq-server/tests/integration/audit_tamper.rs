//! Someone who can write the database (but cannot read the audit key file) tampers with the
//! audit log directly in SQL, on SQLite and PostgreSQL; each tampering of the issue is detected
//! by `verify-audit` with the key, or (for what only an outside anchor can show) against a
//! signed checkpoint. The documented limits are pinned too: what passes without a checkpoint.

use crate::common;

use contextq_server::admin::{self, TenantDeletion};
use contextq_server::audit::checkpoint::{self, Checkpoint};
use contextq_server::audit::{AuditKey, Hashed, Verification};
use contextq_server::testing::TestDatabase;
use contextq_server::{Backend, Db, DbOptions, Plan};
use sqlx::Row;

struct Keyed {
    db: Db,
    a: String,
    b: String,
    _database: TestDatabase,
    _dir: tempfile::TempDir,
}

/// A fresh database keyed with a new key, and two tenants with `rows` audit rows each.
async fn keyed(backend: Backend, rows: usize) -> Keyed {
    let database = TestDatabase::fresh(backend).await;
    let dir = tempfile::tempdir().unwrap();
    let key = AuditKey::create(&dir.path().join("audit.key")).unwrap();
    let db = database
        .open(&DbOptions::default().audit_key(Some(key)))
        .await;
    let a = admin::create_tenant(&db, "a", Plan::Free).await.unwrap();
    let b = admin::create_tenant(&db, "b", Plan::Free).await.unwrap();
    let k = Keyed {
        db,
        a,
        b,
        _database: database,
        _dir: dir,
    };
    k.rows(rows).await;
    k
}

impl Keyed {
    /// `n` more audit rows for each tenant (workspace creations).
    async fn rows(&self, n: usize) {
        for t in [&self.a, &self.b] {
            for _ in 0..n {
                let slug = format!("w{:08x}", fastrand::u32(..));
                admin::create_workspace(&self.db, t, &slug, "")
                    .await
                    .unwrap();
            }
        }
    }

    async fn verify(&self) -> Verification {
        admin::verify_audit(&self.db, None).await.unwrap()
    }

    async fn against(&self, c: &Checkpoint) -> Verification {
        checkpoint::verify_against(&self.db, c).await.unwrap()
    }

    async fn exec(&self, sql: &'static str, tenant: &str) {
        sqlx::query(sql)
            .bind(tenant.to_string())
            .execute(self.db.pool())
            .await
            .unwrap();
    }

    /// The head row as stored: (seq, last_hash, keyed_from, mac).
    async fn head(&self, tenant: &str) -> (i64, Option<String>, Option<i64>, Option<String>) {
        let r = sqlx::query(
            "SELECT seq, last_hash, keyed_from, mac FROM audit_heads WHERE tenant_id = $1",
        )
        .bind(tenant.to_string())
        .fetch_one(self.db.pool())
        .await
        .unwrap();
        (
            r.get("seq"),
            r.get("last_hash"),
            r.get("keyed_from"),
            r.get("mac"),
        )
    }

    async fn set_head(
        &self,
        tenant: &str,
        head: (i64, Option<String>, Option<i64>, Option<String>),
    ) {
        sqlx::query(
            "UPDATE audit_heads SET seq = $1, last_hash = $2, keyed_from = $3, mac = $4 WHERE tenant_id = $5",
        )
        .bind(head.0)
        .bind(head.1)
        .bind(head.2)
        .bind(head.3)
        .bind(tenant.to_string())
        .execute(self.db.pool())
        .await
        .unwrap();
    }

    /// Recomputes every hash of `tenant`'s chain with the documented formula (what an attacker
    /// who read docs/schema.md does after editing a row) and points the head at the last row,
    /// keeping every MAC as it was (the attacker cannot compute one).
    async fn rechain(&self, tenant: &str) {
        let rows = sqlx::query(
            "SELECT tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at \
             FROM activity_logs WHERE tenant_id = $1 ORDER BY tenant_seq",
        )
        .bind(tenant.to_string())
        .fetch_all(self.db.pool())
        .await
        .unwrap();
        let mut prev: Option<String> = None;
        let mut last = 0;
        for (i, r) in rows.iter().enumerate() {
            let old_seq: i64 = r.get("tenant_seq");
            let seq = i as i64 + 1;
            let api_key_id: Option<String> = r.get("api_key_id");
            let hash = Hashed {
                prev_hash: prev.as_deref(),
                seq,
                tenant_id: tenant,
                api_key_id: api_key_id.as_deref(),
                action: r.get::<String, _>("action").as_str(),
                entity_type: r.get::<String, _>("entity_type").as_str(),
                entity_id: r.get::<String, _>("entity_id").as_str(),
                detail: r.get::<String, _>("detail").as_str(),
                created_at: r.get::<String, _>("created_at").as_str(),
            }
            .chain_hash();
            sqlx::query(
                "UPDATE activity_logs SET tenant_seq = $1, prev_hash = $2, hash = $3 \
                 WHERE tenant_id = $4 AND tenant_seq = $5",
            )
            .bind(seq)
            .bind(prev.clone())
            .bind(hash.clone())
            .bind(tenant.to_string())
            .bind(old_seq)
            .execute(self.db.pool())
            .await
            .unwrap();
            prev = Some(hash);
            last = seq;
        }
        sqlx::query("UPDATE audit_heads SET seq = $1, last_hash = $2 WHERE tenant_id = $3")
            .bind(last)
            .bind(prev)
            .bind(tenant.to_string())
            .execute(self.db.pool())
            .await
            .unwrap();
    }
}

fn broken(v: &Verification, tenant: &str, needle: &str) {
    let bad = v
        .first_bad
        .as_ref()
        .unwrap_or_else(|| panic!("tampering not detected: {v:?}"));
    assert_eq!(bad.tenant_id.as_deref(), Some(tenant), "{bad}");
    assert!(bad.why.contains(needle), "{bad}");
}

async fn an_untouched_keyed_log_verifies_with_and_against_a_checkpoint(b: Backend) {
    let k = keyed(b, 4).await;
    let v = k.verify().await;
    assert!(v.ok(), "{v:?}");
    assert_eq!((v.rows, v.keyed_rows, v.chains), (8, 8, 2));
    let c = checkpoint::take(&k.db).await.unwrap();
    k.rows(2).await;
    assert!(k.against(&c).await.ok());
    // The checkpoint survives a JSON round trip, and an edited one is refused.
    let c: Checkpoint = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
    assert!(k.against(&c).await.ok());
    let mut edited = c.clone();
    edited.chains[0].seq -= 1;
    let v = k.against(&edited).await;
    assert!(
        v.first_bad.unwrap().why.contains("signature"),
        "an edited checkpoint was accepted"
    );
    // Format 2 records each chain's keying, under the signature.
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["format"], checkpoint::FORMAT);
    assert_eq!(json["chains"][0]["keyedFrom"], 1, "{json}");
    let mut edited = c.clone();
    edited.chains[0].keyed_from = Some(2);
    assert!(
        k.against(&edited)
            .await
            .first_bad
            .unwrap()
            .why
            .contains("signature")
    );
}

/// Editing a past row and recomputing every later hash with the documented formula.
async fn an_edited_and_rechained_row_is_detected(b: Backend) {
    let k = keyed(b, 5).await;
    k.exec(
        "UPDATE activity_logs SET detail = '{\"slug\":\"forged\"}' WHERE tenant_id = $1 AND tenant_seq = 2",
        &k.a,
    )
    .await;
    k.rechain(&k.a).await;
    broken(&k.verify().await, &k.a, "MAC does not verify");
    assert_eq!(k.verify().await.first_bad.unwrap().seq, 2);
}

/// Deleting the last rows and moving the head back.
async fn a_truncated_chain_is_detected(b: Backend) {
    let k = keyed(b, 5).await;
    let c = checkpoint::take(&k.db).await.unwrap();
    k.exec(
        "DELETE FROM activity_logs WHERE tenant_id = $1 AND tenant_seq > 3",
        &k.a,
    )
    .await;
    k.rechain(&k.a).await;
    broken(&k.verify().await, &k.a, "head does not verify");
    broken(&k.against(&c).await, &k.a, "head does not verify");
    // And a write refuses to extend the tampered chain.
    let e = admin::create_workspace(&k.db, &k.a, "after", "")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("does not verify with this server's audit key"),
        "{e}"
    );
}

/// Truncating back to a head saved earlier (a replay, or a restored copy of the database): the
/// MACs all verify, so only a checkpoint taken after the removed rows shows it.
async fn a_rolled_back_chain_is_detected_against_a_checkpoint(b: Backend) {
    let k = keyed(b, 3).await;
    let saved = k.head(&k.a).await;
    k.rows(2).await;
    let c = checkpoint::take(&k.db).await.unwrap();
    k.exec(
        "DELETE FROM activity_logs WHERE tenant_id = $1 AND tenant_seq > 3",
        &k.a,
    )
    .await;
    k.set_head(&k.a, saved).await;
    assert!(
        k.verify().await.ok(),
        "documented limit: a replayed older state verifies without a checkpoint"
    );
    broken(&k.against(&c).await, &k.a, "rolled back");
}

/// Wiping the whole log and resetting every head.
async fn a_wiped_log_is_detected(b: Backend) {
    let k = keyed(b, 3).await;
    let c = checkpoint::take(&k.db).await.unwrap();
    sqlx::query("DELETE FROM activity_logs")
        .execute(k.db.pool())
        .await
        .unwrap();
    sqlx::query("UPDATE audit_heads SET seq = 0, last_hash = NULL")
        .execute(k.db.pool())
        .await
        .unwrap();
    let v = k.verify().await;
    assert!(
        v.first_bad
            .as_ref()
            .unwrap()
            .why
            .contains("head does not verify"),
        "{v:?}"
    );
    assert!(!k.against(&c).await.ok());
    // Heads removed too.
    sqlx::query("DELETE FROM audit_heads")
        .execute(k.db.pool())
        .await
        .unwrap();
    let v = k.verify().await;
    assert!(
        v.first_bad.as_ref().unwrap().why.contains("no chain head"),
        "{v:?}"
    );
    let v = k.against(&c).await;
    assert!(!v.ok(), "{v:?}");
}

/// Removing one tenant's rows and re-chaining: detected, and it does not make the tenant
/// deletable; removing the tenant altogether is seen against a checkpoint.
async fn a_removed_tenant_is_detected(b: Backend) {
    let k = keyed(b, 3).await;
    let c = checkpoint::take(&k.db).await.unwrap();
    k.exec("DELETE FROM activity_logs WHERE tenant_id = $1", &k.b)
        .await;
    k.rechain(&k.b).await;
    broken(&k.verify().await, &k.b, "head does not verify");
    let refused = admin::delete_tenant(&k.db, &k.b).await;
    assert!(
        !matches!(refused, Ok(TenantDeletion::Deleted)),
        "a tenant whose rows were removed became deletable: {refused:?}"
    );
    // The tenant and everything of it removed: nothing in the database points at it any more.
    for sql in [
        "DELETE FROM audit_heads WHERE tenant_id = $1",
        "DELETE FROM workspaces WHERE tenant_id = $1",
        "DELETE FROM api_keys WHERE tenant_id = $1",
        "DELETE FROM users WHERE tenant_id = $1",
        "DELETE FROM tenants WHERE id = $1",
    ] {
        k.exec(sql, &k.b).await;
    }
    assert!(
        k.verify().await.ok(),
        "documented limit: a tenant removed with its head leaves no trace without a checkpoint"
    );
    broken(&k.against(&c).await, &k.b, "is gone");
}

/// Stripping every MAC (pretending the log was never keyed).
async fn stripped_macs_are_detected(b: Backend) {
    let k = keyed(b, 3).await;
    sqlx::query("UPDATE activity_logs SET mac = NULL")
        .execute(k.db.pool())
        .await
        .unwrap();
    let v = k.verify().await;
    assert!(v.first_bad.unwrap().why.contains("MAC does not verify"));
    sqlx::query("UPDATE audit_heads SET mac = NULL, keyed_from = NULL")
        .execute(k.db.pool())
        .await
        .unwrap();
    let v = k.verify().await;
    assert!(v.first_bad.unwrap().why.contains("head does not verify"));
}

/// A keyed database is refused without its key, with another key, and a checkpoint needs one.
async fn a_keyed_database_needs_its_key(b: Backend) {
    let k = keyed(b, 1).await;
    let url = k._database.url.clone();
    let e = Db::connect(&url, &DbOptions::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("--audit-key-file"), "{e}");
    let other = DbOptions::default().audit_key(Some(AuditKey::generate().unwrap()));
    let e = Db::connect(&url, &other).await.unwrap_err().to_string();
    assert!(e.contains("is not this database's"), "{e}");
}

/// A database written without a key is refused with one until adopted; then it is keyed from
/// each chain's next row on, and the rows before count apart.
async fn an_unkeyed_database_is_adopted_explicitly(b: Backend) {
    let database = TestDatabase::fresh(b).await;
    let db = database.open(&DbOptions::default()).await;
    let t = admin::create_tenant(&db, "t", Plan::Free).await.unwrap();
    admin::create_workspace(&db, &t, "one", "").await.unwrap();
    db.close().await;
    let key = AuditKey::generate().unwrap();
    let mut options = DbOptions::default().audit_key(Some(key));
    let e = Db::connect(&database.url, &options)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("init-audit-key"), "{e}");
    options.adopt_audit_key = true;
    let db = database.open(&options).await;
    admin::create_workspace(&db, &t, "two", "").await.unwrap();
    let v = admin::verify_audit(&db, None).await.unwrap();
    assert!(v.ok(), "{v:?}");
    assert_eq!((v.rows, v.keyed_rows), (2, 1));
    db.close().await;
}

/// A row removed from the middle and the rest renumbered and re-chained; a forged row appended
/// with the head moved to it.
async fn removed_and_appended_rows_are_detected(b: Backend) {
    let k = keyed(b, 5).await;
    k.exec(
        "DELETE FROM activity_logs WHERE tenant_id = $1 AND tenant_seq = 2",
        &k.a,
    )
    .await;
    k.rechain(&k.a).await;
    broken(&k.verify().await, &k.a, "MAC does not verify");
    assert_eq!(k.verify().await.first_bad.unwrap().seq, 2);

    let k = keyed(b, 2).await;
    let (seq, last, _, _) = k.head(&k.b).await;
    common::append_chained_row(
        &k.db,
        &k.b,
        (seq, last),
        "ws_forged",
        Some("00".repeat(32)),
        false,
    )
    .await;
    broken(&k.verify().await, &k.b, "MAC does not verify");
}

/// The tenant's audit listing as `GET /api/audit` reads it: (tenant_seq or -seq, entity id).
async fn listing(k: &Keyed, tenant: &str) -> Vec<String> {
    let q = contextq_server::store::activity::AuditQuery {
        limit: 500,
        ..Default::default()
    };
    contextq_server::store::activity::list(&k.db, tenant, &q)
        .await
        .unwrap()
        .entries
        .into_iter()
        .map(|e| e.entity_id)
        .collect()
}

/// A row planted beside a chain (numbered 0 or below, in another tenant's name, without a
/// MAC) is detected, and never listed.
async fn a_row_outside_the_chain_is_detected_and_never_listed(b: Backend) {
    for planted_seq in [0i64, -5] {
        let k = keyed(b, 2).await;
        let c = checkpoint::take(&k.db).await.unwrap();
        let before = listing(&k, &k.a).await;
        let sql = match b {
            Backend::Sqlite => {
                "INSERT INTO activity_logs (seq, tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
                 VALUES ((SELECT MAX(seq) + 1 FROM activity_logs), $1, $2, NULL, 'workspace.delete', 'workspace', 'ws_planted', '{}', '2026-12-03T00:00:00.000Z', NULL, 'x', NULL)"
            }
            Backend::Postgres => {
                "INSERT INTO activity_logs (tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
                 VALUES ($1, $2, NULL, 'workspace.delete', 'workspace', 'ws_planted', '{}', '2026-12-03T00:00:00.000Z', NULL, 'x', NULL)"
            }
        };
        sqlx::query(sql)
            .bind(k.a.clone())
            .bind(planted_seq)
            .execute(k.db.pool())
            .await
            .unwrap();
        broken(&k.verify().await, &k.a, "outside the chain");
        broken(&k.against(&c).await, &k.a, "outside the chain");
        assert_eq!(listing(&k, &k.a).await, before, "seq {planted_seq}");
    }
}

/// The listing follows the chain, which the hashes and MACs cover, not the global `seq`, which
/// nothing covers: rows renumbered in `seq` keep their order.
async fn the_listing_follows_the_chain_not_the_global_seq(b: Backend) {
    let k = keyed(b, 3).await;
    let before = listing(&k, &k.a).await;
    assert_eq!(before.len(), 3);
    // Reverse the global numbers of tenant a's rows (moved far up to keep them unique).
    common::sql(
        &k.db,
        "UPDATE activity_logs SET seq = 1000000 - seq WHERE tenant_id = $1 AND tenant_seq IS NOT NULL",
        &[&k.a],
    )
    .await;
    assert_eq!(listing(&k, &k.a).await, before);
    // Paging goes through the chain too.
    let q = contextq_server::store::activity::AuditQuery {
        limit: 2,
        ..Default::default()
    };
    let page = contextq_server::store::activity::list(&k.db, &k.a, &q)
        .await
        .unwrap();
    let cursor = page.next_cursor.unwrap();
    let q = contextq_server::store::activity::AuditQuery {
        limit: 2,
        before: Some(contextq_server::store::activity::decode_cursor(&cursor).unwrap()),
        ..Default::default()
    };
    let rest = contextq_server::store::activity::list(&k.db, &k.a, &q)
        .await
        .unwrap();
    let paged: Vec<String> = page
        .entries
        .into_iter()
        .chain(rest.entries)
        .map(|e| e.entity_id)
        .collect();
    assert_eq!(paged, before);
}

/// A tenant whose rows and head were both removed is not deleted (which would launder the
/// tampering that verify-audit reports).
async fn a_tenant_without_its_head_is_not_deleted(b: Backend) {
    let k = keyed(b, 2).await;
    k.exec("DELETE FROM activity_logs WHERE tenant_id = $1", &k.b)
        .await;
    k.exec("DELETE FROM audit_heads WHERE tenant_id = $1", &k.b)
        .await;
    assert!(!k.verify().await.ok());
    let refused = admin::delete_tenant(&k.db, &k.b).await;
    let e = refused.expect_err("a tenant without its head was deleted");
    assert!(e.to_string().contains("no audit chain head"), "{e}");
    assert!(
        admin::tenant_by_name(&k.db, "b").await.unwrap().is_some(),
        "nothing was deleted"
    );
}

/// Rows renumbered in the global `seq` to make room for a forged row of the frozen global chain
/// (which carries no MAC) in a database created keyed, which never had one.
async fn a_forged_legacy_row_is_detected(b: Backend) {
    let k = keyed(b, 2).await;
    let c = checkpoint::take(&k.db).await.unwrap();
    sqlx::query("UPDATE activity_logs SET seq = seq + 1000")
        .execute(k.db.pool())
        .await
        .unwrap();
    let (detail, at) = (r#"{"slug":"forged"}"#, "2020-01-01T00:00:00.000Z");
    let hash = Hashed {
        prev_hash: None,
        seq: 1,
        tenant_id: &k.a,
        api_key_id: None,
        action: "workspace.delete",
        entity_type: "workspace",
        entity_id: "ws_forged",
        detail,
        created_at: at,
    }
    .legacy_hash();
    sqlx::query(
        "INSERT INTO activity_logs (seq, tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac) \
         VALUES (1, $1, NULL, NULL, 'workspace.delete', 'workspace', 'ws_forged', $2, $3, NULL, $4, NULL)",
    )
    .bind(k.a.clone())
    .bind(detail)
    .bind(at)
    .bind(hash.clone())
    .execute(k.db.pool())
    .await
    .unwrap();
    sqlx::query("UPDATE audit_head SET seq = 1, last_hash = $1 WHERE id = 1")
        .bind(hash)
        .execute(k.db.pool())
        .await
        .unwrap();
    let v = k.verify().await;
    let bad = v
        .first_bad
        .expect("a forged legacy row passed verify-audit");
    assert!(bad.why.contains("changed since the log was keyed"), "{bad}");
    assert!(!k.against(&c).await.ok());
}

/// The keying stripped (every MAC, `keyed_from`, `audit_meta`) and an edited row re-chained: the
/// log is never reported as merely "not keyed", and is not keyed again without being told it
/// never was.
async fn a_stripped_keying_is_never_blessed(b: Backend) {
    let k = keyed(b, 3).await;
    let c = checkpoint::take(&k.db).await.unwrap();
    for sql in [
        "UPDATE activity_logs SET mac = NULL",
        "UPDATE audit_heads SET mac = NULL, keyed_from = NULL",
        "DELETE FROM audit_meta",
    ] {
        sqlx::query(sql).execute(k.db.pool()).await.unwrap();
    }
    k.exec(
        "UPDATE activity_logs SET entity_id = 'ws_edited' WHERE tenant_id = $1 AND tenant_seq = 2",
        &k.a,
    )
    .await;
    k.rechain(&k.a).await;
    let v = k.verify().await;
    let bad = v.first_bad.expect("a stripped log passed verify-audit");
    assert!(bad.why.contains("stripped"), "{bad}");
    assert!(!k.against(&c).await.ok());
    // Opening it with the key (a server, or init-audit-key without --never-keyed) is refused,
    // saying why; only an explicit adoption keys it.
    let url = k._database.url.clone();
    let key = AuditKey::load(&k._dir.path().join("audit.key")).unwrap();
    let e = Db::connect(&url, &DbOptions::default().audit_key(Some(key)))
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("stripped") && e.contains("--never-keyed"), "{e}");
}

/// A log keyed before the global chain was anchored (migration 5 adds the anchor empty) is
/// anchored the first time it is opened with its key, and verifies.
async fn a_log_keyed_before_the_anchor_is_anchored_on_open(b: Backend) {
    let k = keyed(b, 1).await;
    sqlx::query("UPDATE audit_meta SET legacy_seq = NULL, legacy_hash = NULL, legacy_mac = NULL")
        .execute(k.db.pool())
        .await
        .unwrap();
    assert!(!k.verify().await.ok(), "an empty anchor must not verify");
    let key = AuditKey::load(&k._dir.path().join("audit.key")).unwrap();
    let db = Db::connect(&k._database.url, &DbOptions::default().audit_key(Some(key)))
        .await
        .unwrap();
    let v = admin::verify_audit(&db, None).await.unwrap();
    assert!(v.ok(), "{v:?}");
    db.close().await;
}

contextq_server::database_tests!(
    a_log_keyed_before_the_anchor_is_anchored_on_open,
    a_forged_legacy_row_is_detected,
    a_stripped_keying_is_never_blessed,
    a_row_outside_the_chain_is_detected_and_never_listed,
    the_listing_follows_the_chain_not_the_global_seq,
    a_tenant_without_its_head_is_not_deleted,
    removed_and_appended_rows_are_detected,
    an_untouched_keyed_log_verifies_with_and_against_a_checkpoint,
    an_edited_and_rechained_row_is_detected,
    a_truncated_chain_is_detected,
    a_rolled_back_chain_is_detected_against_a_checkpoint,
    a_wiped_log_is_detected,
    a_removed_tenant_is_detected,
    stripped_macs_are_detected,
    a_keyed_database_needs_its_key,
    an_unkeyed_database_is_adopted_explicitly,
);
