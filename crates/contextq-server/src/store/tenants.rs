//! Tenants, their users and their API keys: what operator commands provision and what
//! authentication looks up. (None of this is an audited change in the contract.)

mod keys;

use contextq_api::{Plan, Scope};
use sqlx::{AnyConnection, Row};

use super::{Actor, Error, Outcome, Result, new_id, now, write};
use crate::auth::{KeyRecord, generate_key, hash_key};
use crate::db::Db;
use crate::db::{Batch, Bind};

pub use keys::{
    KeyKind, KeyListing, KeySpec, LAST_USE_RESOLUTION, create_key, create_key_with,
    create_session_key, delete_key, expire_key, key_by_hash, last_use_due, list_keys, refused_key,
    revoke_key, touch_key,
};
use keys::{insert_key, notify_revocation};

/// A key just minted: its id and the key itself, which is never stored and shown only once.
#[derive(Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NewKey {
    /// The key's id (for revocation).
    pub key_id: String,
    /// The key itself: `sk_live_` + 40 hex.
    pub api_key: String,
}

impl std::fmt::Debug for NewKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewKey")
            .field("key_id", &self.key_id)
            .field("api_key", &contextq_api::mask_secret(&self.api_key))
            .finish()
    }
}

/// What [`delete_tenant`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TenantDeletion {
    /// The tenant and everything it held are gone.
    Deleted,
    /// Refused: the tenant has rows in the audit hash chain, which must stay verifiable; its
    /// row was left in place (with its workspaces, users and keys).
    KeptForAudit {
        /// How many chained audit rows it has.
        audit_rows: i64,
    },
}

/// Creates a tenant and the head of its audit chain; returns its id.
pub async fn create_tenant(db: &Db, name: &str, plan: Plan) -> Result<String> {
    let mut tx = db.begin_write().await?;
    let id = insert_tenant(&mut tx, db, name, plan).await?;
    tx.commit().await?;
    Ok(id)
}

/// [`create_tenant`] on `conn`, in the caller's transaction.
async fn insert_tenant(
    conn: &mut AnyConnection,
    db: &Db,
    name: &str,
    plan: Plan,
) -> Result<String> {
    if name.trim().is_empty() {
        return Err(Error::Invalid("the tenant name must not be empty".into()));
    }
    let id = new_id("ten");
    let res =
        sqlx::query("INSERT INTO tenants (id, name, plan, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id.clone())
            .bind(name.to_string())
            .bind(plan.as_str().to_string())
            .bind(now())
            .execute(&mut *conn)
            .await;
    match res {
        Ok(_) => {}
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => {
            return Err(Error::TenantExists {
                name: name.to_string(),
            });
        }
        Err(e) => return Err(e.into()),
    }
    let (keyed_from, mac) = crate::audit::new_head(db.audit_key(), &id);
    sqlx::query(
        "INSERT INTO audit_heads (tenant_id, seq, last_hash, keyed_from, mac) VALUES ($1, 0, NULL, $2, $3)",
    )
    .bind(id.clone())
    .bind(keyed_from)
    .bind(mac)
    .execute(&mut *conn)
    .await?;
    Ok(id)
}

/// What [`bootstrap`] made.
#[derive(Debug, Clone)]
pub struct Bootstrapped {
    /// The new tenant's id.
    pub tenant_id: String,
    /// Its owner user's id.
    pub user_id: String,
    /// The owner's key (shown once).
    pub key: NewKey,
    /// Its first workspace.
    pub workspace: contextq_api::Workspace,
}

/// A tenant, its owner user (`email`), the owner's key and a first workspace (audited, as
/// through the API), in one transaction: all of it or, on any failure, nothing.
pub async fn bootstrap(
    db: &Db,
    name: &str,
    plan: Plan,
    email: &str,
    scopes: &[Scope],
    workspace: &str,
) -> Result<Bootstrapped> {
    super::workspaces::check(workspace, workspace)?;
    let mut tx = db.begin_write().await?;
    let tenant_id = insert_tenant(&mut tx, db, name, plan).await?;
    let user_id = insert_user(&mut tx, &tenant_id, email).await?;
    let spec = KeySpec {
        user_id: Some(&user_id),
        ..KeySpec::new(&tenant_id, scopes)
    };
    let key = insert_key(&mut tx, spec).await?;
    let workspace = super::workspaces::create_first(&mut tx, db, &tenant_id, workspace).await?;
    tx.commit().await?;
    Ok(Bootstrapped {
        tenant_id,
        user_id,
        key,
        workspace,
    })
}

/// The id of the tenant named `name`, if any.
pub async fn tenant_by_name(db: &Db, name: &str) -> Result<Option<String>> {
    let row = sqlx::query("SELECT id FROM tenants WHERE name = $1")
        .bind(name.to_string())
        .fetch_optional(db.pool())
        .await?;
    Ok(row.map(|r| r.try_get("id")).transpose()?)
}

pub(crate) async fn require_tenant(conn: &mut AnyConnection, tenant_id: &str) -> Result<()> {
    let exists = sqlx::query("SELECT id FROM tenants WHERE id = $1")
        .bind(tenant_id.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    match exists {
        Some(_) => Ok(()),
        None => Err(Error::TenantNotFound {
            id: tenant_id.to_string(),
        }),
    }
}

/// Creates an owner user of a tenant; returns its id.
pub async fn create_user(db: &Db, tenant_id: &str, email: &str) -> Result<String> {
    insert_user(&mut *db.pool().acquire().await?, tenant_id, email).await
}

async fn insert_user(conn: &mut AnyConnection, tenant_id: &str, email: &str) -> Result<String> {
    require_tenant(conn, tenant_id).await?;
    let id = new_id("usr");
    sqlx::query("INSERT INTO users (id, tenant_id, email, role, created_at) VALUES ($1, $2, $3, 'owner', $4)")
        .bind(id.clone())
        .bind(tenant_id.to_string())
        .bind(email.to_string())
        .bind(now())
        .execute(&mut *conn)
        .await?;
    Ok(id)
}

/// Deletes a user (its keys must be deleted first); returns whether one was deleted.
pub async fn delete_user(db: &Db, user_id: &str) -> Result<bool> {
    let gone = sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(user_id.to_string())
        .execute(db.pool())
        .await?;
    Ok(gone.rows_affected() > 0)
}

/// What an operator sees of a tenant.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TenantListing {
    /// Its id (`tenantId`).
    pub tenant_id: String,
    /// Its name.
    pub name: String,
    /// Its plan.
    pub plan: String,
    /// Contexts it holds now (the count writes keep on its audit head).
    pub contexts: i64,
    /// When it was made.
    pub created_at: String,
}

/// Every tenant, by name.
pub async fn list_tenants(db: &Db) -> Result<Vec<TenantListing>> {
    let rows: Vec<(String, String, String, i64, String)> = sqlx::query_as(
        "SELECT t.id, t.name, t.plan, COALESCE(h.contexts, 0), t.created_at \
         FROM tenants t LEFT JOIN audit_heads h ON h.tenant_id = t.id ORDER BY t.name",
    )
    .fetch_all(&mut *db.reader().await?)
    .await?;
    let listing = |(tenant_id, name, plan, contexts, created_at)| TenantListing {
        tenant_id,
        name,
        plan,
        contexts,
        created_at,
    };
    Ok(rows.into_iter().map(listing).collect())
}

/// Changes a tenant's plan, recorded in its audit log (`tenant.plan`, with the old and new
/// plan). A lower cap than it holds refuses new contexts only: updates and deletes go on.
pub async fn set_plan(db: &Db, tenant_id: &str, plan: Plan) -> Result<()> {
    require_tenant(&mut *db.reader().await?, tenant_id).await?;
    let actor = Actor::operator(tenant_id);
    let read = (
        "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, \
         h.mac AS head_mac, t.plan AS plan FROM audit_heads h JOIN tenants t ON t.id = h.tenant_id \
         WHERE h.tenant_id = $1"
            .to_string(),
        vec![Bind::Text(tenant_id.to_string())],
    );
    write(db, actor, tenant_id, read, |mut head, row| {
        let old: String = row.try_get("plan")?;
        if old == plan.as_str() {
            return Ok(Outcome::Unchanged(()));
        }
        let mut batch = Batch::default();
        batch.push(
            "UPDATE tenants SET plan = $1 WHERE id = $2",
            vec![
                Bind::Text(plan.as_str().to_string()),
                Bind::Text(tenant_id.to_string()),
            ],
            Some(1),
        );
        head.append(actor.record(
            "tenant.plan",
            "tenant",
            tenant_id,
            serde_json::json!({"from": old, "to": plan.as_str()}),
        ));
        Ok(Outcome::Write(head, batch, ()))
    })
    .await
}

/// Deletes a tenant with its contexts, workspaces, keys and users, unless it has chained audit
/// rows (then nothing is deleted: [`TenantDeletion::KeptForAudit`]).
pub async fn delete_tenant(db: &Db, tenant_id: &str) -> Result<TenantDeletion> {
    // Rows of key and plan actions alone do not keep a tenant: they record an operator's
    // commands on a tenant that never held data. Its chain must verify (a data row re-labelled
    // as a key action would not), and then goes with it.
    let counted = sqlx::query(
        "SELECT COUNT(*) AS n, COALESCE(SUM(CASE WHEN action LIKE 'key.%' OR action = 'tenant.plan' \
         THEN 0 ELSE 1 END), 0) AS data FROM activity_logs WHERE tenant_id = $1",
    )
    .bind(tenant_id.to_string())
    .fetch_one(&mut *db.reader().await?)
    .await?;
    let audit_rows: i64 = counted.try_get("n")?;
    let data_rows: i64 = counted.try_get("data")?;
    if data_rows > 0 {
        return Ok(TenantDeletion::KeptForAudit { audit_rows });
    }
    if audit_rows > 0 {
        let v = crate::audit::verify(db, Some(tenant_id)).await?;
        if !v.ok() {
            return Err(Error::Corrupt(format!(
                "the audit chain of tenant {tenant_id} does not verify: nothing was deleted; run verify-audit"
            )));
        }
    }
    let mut tx = db.begin_write().await?;
    // No rows: true only if the head agrees (and, with a key, verifies). Removing a tenant's
    // rows and resetting, or removing, its head must not make it deletable: every tenant has a
    // head from its creation (migration 2 gave one to those before it).
    let head =
        sqlx::query("SELECT seq, last_hash, keyed_from, mac FROM audit_heads WHERE tenant_id = $1")
            .bind(tenant_id.to_string())
            .fetch_optional(&mut *tx)
            .await?;
    let tenant_exists = sqlx::query("SELECT id FROM tenants WHERE id = $1")
        .bind(tenant_id.to_string())
        .fetch_optional(&mut *tx)
        .await?
        .is_some();
    if head.is_none() && tenant_exists {
        return Err(Error::Corrupt(format!(
            "tenant {tenant_id} has no audit chain head (it was removed: the log was tampered \
             with): nothing was deleted; run verify-audit"
        )));
    }
    if let Some(head) = head {
        let seq: i64 = head.try_get("seq")?;
        let last_hash: Option<String> = head.try_get("last_hash")?;
        let keyed_from: Option<i64> = head.try_get("keyed_from")?;
        let mac: Option<String> = head.try_get("mac")?;
        crate::audit::Head::new(
            tenant_id,
            seq,
            last_hash,
            keyed_from,
            mac.as_deref(),
            db.audit_key(),
        )
        .map_err(Error::Corrupt)?;
        if seq != audit_rows {
            return Err(Error::Corrupt(format!(
                "the audit chain head of tenant {tenant_id} counts {seq} rows but {audit_rows} are \
                 left (the log was tampered with): nothing was deleted"
            )));
        }
    }
    super::search::remove_tenant(&mut tx, db.dialect(), tenant_id).await?;
    for sql in [
        "DELETE FROM activity_logs WHERE tenant_id = $1",
        "DELETE FROM context_tags WHERE tenant_id = $1",
        "DELETE FROM context_versions WHERE tenant_id = $1",
        "DELETE FROM version_counters WHERE tenant_id = $1",
        "DELETE FROM contexts WHERE tenant_id = $1",
        "DELETE FROM workspaces WHERE tenant_id = $1",
        "DELETE FROM api_keys WHERE tenant_id = $1",
        "DELETE FROM users WHERE tenant_id = $1",
        "DELETE FROM write_outcomes WHERE tenant_id = $1",
        "DELETE FROM audit_heads WHERE tenant_id = $1",
    ] {
        sqlx::query(sql)
            .bind(tenant_id.to_string())
            .execute(&mut *tx)
            .await?;
    }
    notify_revocation(db, &mut tx).await?;
    let gone = sqlx::query("DELETE FROM tenants WHERE id = $1")
        .bind(tenant_id.to_string())
        .execute(&mut *tx)
        .await?;
    if gone.rows_affected() == 0 {
        return Err(Error::TenantNotFound {
            id: tenant_id.to_string(),
        });
    }
    tx.commit().await?;
    crate::auth::signal_revocation(db);
    Ok(TenantDeletion::Deleted)
}

/// A tenant whose kept counts [`recount`] found wrong (and set right).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recounted {
    /// The tenant's id.
    pub tenant_id: String,
    /// Contexts: as kept, as counted.
    pub contexts: (i64, i64),
    /// Versions: as kept, as counted.
    pub versions: (i64, i64),
    /// Versions whose `superseded` flag (prunable by the tenant's bound) was wrong.
    pub flags: i64,
}

/// Counts every tenant's contexts and versions, and checks which versions its bound may prune,
/// against what writes keep on its audit head ([`crate::audit::Head::count`]); sets right what
/// differs and returns those tenants. Writes keep these exact; what differs was written around
/// the server (a hand edit, a restore of some tables). Scans everything: an admin command, never
/// on a request's path. Holds every tenant's head lock while it runs.
pub async fn recount(db: &Db) -> Result<Vec<Recounted>> {
    let mut tx = db.begin_write().await?;
    let lock = db.dialect().lock_rows_of("h");
    const PRUNABLE: &str = "CASE WHEN v.action = 'delete' OR v.version < (SELECT n.last_version \
         FROM version_counters n WHERE n.tenant_id = v.tenant_id AND n.external_id = v.external_id) \
         THEN 1 ELSE 0 END";
    let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT h.tenant_id, h.contexts, h.versions, \
         (SELECT COUNT(*) FROM contexts c WHERE c.tenant_id = h.tenant_id) AS counted_contexts, \
         (SELECT COUNT(*) FROM context_versions v WHERE v.tenant_id = h.tenant_id) AS counted_versions, \
         (SELECT COUNT(*) FROM context_versions v WHERE v.tenant_id = h.tenant_id AND v.superseded <> {PRUNABLE}) AS flags \
         FROM audit_heads h ORDER BY h.tenant_id{lock}"
    )))
    .fetch_all(&mut *tx)
    .await?;
    let mut wrong = Vec::new();
    for row in rows {
        let r = Recounted {
            tenant_id: row.try_get("tenant_id")?,
            contexts: (row.try_get("contexts")?, row.try_get("counted_contexts")?),
            versions: (row.try_get("versions")?, row.try_get("counted_versions")?),
            flags: row.try_get("flags")?,
        };
        if r.contexts.0 == r.contexts.1 && r.versions.0 == r.versions.1 && r.flags == 0 {
            continue;
        }
        sqlx::query("UPDATE audit_heads SET contexts = $1, versions = $2 WHERE tenant_id = $3")
            .bind(r.contexts.1)
            .bind(r.versions.1)
            .bind(r.tenant_id.clone())
            .execute(&mut *tx)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "UPDATE context_versions SET superseded = (SELECT {PRUNABLE} FROM context_versions v \
             WHERE v.tenant_id = context_versions.tenant_id AND v.seq = context_versions.seq) \
             WHERE tenant_id = $1"
        )))
        .bind(r.tenant_id.clone())
        .execute(&mut *tx)
        .await?;
        wrong.push(r);
    }
    tx.commit().await?;
    Ok(wrong)
}

#[cfg(test)]
mod last_use {
    use super::last_use_due;

    #[test]
    fn recorded_at_most_once_a_minute() {
        let at = |secs: i64| {
            (chrono::Utc::now() - chrono::Duration::seconds(secs))
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        };
        assert!(last_use_due(None));
        assert!(!last_use_due(Some(&at(1))));
        assert!(!last_use_due(Some(&at(50))));
        assert!(last_use_due(Some(&at(61))));
    }
}
