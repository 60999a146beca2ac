//! Operator commands: tenants, users, keys, workspaces, tenant deletion, audit verification.
//!
//! These run directly against the database (the `contextq-server admin ...` subcommands and the
//! CLI's embedded default use them). Creating tenants, users and keys is not an audited change in
//! the contract; workspace creation is, so it goes through [`crate::store`] like the API.

use serde::Serialize;
use sqlx::Row;

use crate::auth::{generate_key, hash_key, valid_key_format};
use crate::db::Db;
use crate::error::{ApiError, Error, Result};
use crate::model::{Plan, Scope, Workspace, format_scopes, new_id, now};
use crate::store::{self, Actor};

/// A new key, shown once.
#[derive(Clone, Serialize)]
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
            .field("api_key", &crate::auth::mask_key(&self.api_key))
            .finish()
    }
}

/// What `bootstrap` made.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The tenant.
    pub tenant_id: String,
    /// The key (shown once).
    #[serde(skip)]
    pub key: NewKey,
    /// The workspace slug.
    pub workspace: String,
}

impl Bootstrap {
    /// The one JSON line `admin bootstrap` prints: `{"tenantId","apiKey","workspace"}`.
    pub fn to_json_line(&self) -> String {
        serde_json::json!({
            "tenantId": self.tenant_id,
            "apiKey": self.key.api_key,
            "workspace": self.workspace,
        })
        .to_string()
    }
}

/// Creates a tenant.
pub async fn create_tenant(db: &Db, name: &str, plan: Plan) -> Result<String> {
    if name.trim().is_empty() {
        return Err(Error::Config("the tenant name must not be empty".into()));
    }
    let id = new_id("ten");
    let res =
        sqlx::query("INSERT INTO tenants (id, name, plan, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id.clone())
            .bind(name.to_string())
            .bind(plan.as_str().to_string())
            .bind(now())
            .execute(db.pool())
            .await;
    match res {
        Ok(_) => Ok(id),
        Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Err(Error::Config(format!(
            "a tenant named {name:?} already exists: choose another name"
        ))),
        Err(e) => Err(e.into()),
    }
}

/// The id of the tenant named `name`, if any.
pub async fn tenant_by_name(db: &Db, name: &str) -> Result<Option<String>> {
    let row = sqlx::query("SELECT id FROM tenants WHERE name = $1")
        .bind(name.to_string())
        .fetch_optional(db.pool())
        .await?;
    Ok(row.map(|r| r.try_get("id")).transpose()?)
}

/// Creates an owner user of a tenant.
pub async fn create_user(db: &Db, tenant_id: &str, email: &str) -> Result<String> {
    let id = new_id("usr");
    sqlx::query("INSERT INTO users (id, tenant_id, email, role, created_at) VALUES ($1, $2, $3, 'owner', $4)")
        .bind(id.clone())
        .bind(tenant_id.to_string())
        .bind(email.to_string())
        .bind(now())
        .execute(db.pool())
        .await?;
    Ok(id)
}

/// Mints a key for a tenant; the key is returned once and stored hashed.
pub async fn create_key(
    db: &Db,
    tenant_id: &str,
    user_id: Option<&str>,
    scopes: &[Scope],
) -> Result<NewKey> {
    let exists = sqlx::query("SELECT id FROM tenants WHERE id = $1")
        .bind(tenant_id.to_string())
        .fetch_optional(db.pool())
        .await?;
    if exists.is_none() {
        return Err(Error::Config(format!("no tenant with id {tenant_id:?}")));
    }
    let key = generate_key();
    let id = new_id("key");
    sqlx::query(
        "INSERT INTO api_keys (id, tenant_id, user_id, key_hash, key_last4, scopes, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
    )
    .bind(id.clone())
    .bind(tenant_id.to_string())
    .bind(user_id.map(str::to_string))
    .bind(hash_key(&key))
    .bind(key[key.len() - 4..].to_string())
    .bind(format_scopes(scopes))
    .bind(now())
    .execute(db.pool())
    .await?;
    Ok(NewKey {
        key_id: id,
        api_key: key,
    })
}

/// Revokes a key given its id or the key itself. Returns whether a key was revoked.
pub async fn revoke_key(db: &Db, id_or_key: &str) -> Result<bool> {
    let res = if valid_key_format(id_or_key) {
        sqlx::query(
            "UPDATE api_keys SET revoked_at = $1 WHERE key_hash = $2 AND revoked_at IS NULL",
        )
        .bind(now())
        .bind(hash_key(id_or_key))
        .execute(db.pool())
        .await?
    } else {
        sqlx::query("UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL")
            .bind(now())
            .bind(id_or_key.to_string())
            .execute(db.pool())
            .await?
    };
    Ok(res.rows_affected() > 0)
}

/// Creates a workspace for a tenant (audited, without a key).
pub async fn create_workspace(
    db: &Db,
    tenant_id: &str,
    slug: &str,
    name: &str,
) -> Result<Workspace> {
    let actor = Actor {
        tenant_id,
        key_id: None,
    };
    store::create_workspace(db, actor, slug, name)
        .await
        .map_err(Error::Api)
}

/// Tenant, owner user, key and workspace in one go.
pub async fn bootstrap(
    db: &Db,
    name: &str,
    plan: Plan,
    workspace: &str,
    scopes: &[Scope],
) -> Result<Bootstrap> {
    if !crate::model::valid_slug(workspace) {
        return Err(Error::Config(format!(
            "invalid workspace slug {workspace:?}: use a-z, 0-9 and '-', starting with a letter or digit"
        )));
    }
    let tenant_id = create_tenant(db, name, plan).await?;
    let user_id = create_user(db, &tenant_id, &format!("owner@{name}.invalid")).await?;
    let key = create_key(db, &tenant_id, Some(&user_id), scopes).await?;
    create_workspace(db, &tenant_id, workspace, workspace).await?;
    Ok(Bootstrap {
        tenant_id,
        key,
        workspace: workspace.to_string(),
    })
}

/// Why a tenant was not deleted.
pub const CHAINED_AUDIT_REFUSAL: &str = "it has chained audit rows: the activity log's hash chain is global, so removing them would break verification for every row written after them";

/// Deletes a tenant with its keys, users, workspaces and contexts, unless it has audit rows.
pub async fn delete_tenant(db: &Db, tenant_id: &str) -> Result<()> {
    let mut tx = db.begin_write().await?;
    let audit: i64 = sqlx::query("SELECT COUNT(*) AS n FROM activity_logs WHERE tenant_id = $1")
        .bind(tenant_id.to_string())
        .fetch_one(&mut *tx)
        .await?
        .try_get("n")?;
    if audit > 0 {
        return Err(Error::Api(ApiError::conflict(format!(
            "tenant {tenant_id} was not deleted: {CHAINED_AUDIT_REFUSAL} ({audit} rows)"
        ))));
    }
    for sql in [
        "DELETE FROM context_tags WHERE tenant_id = $1",
        "DELETE FROM contexts WHERE tenant_id = $1",
        "DELETE FROM workspaces WHERE tenant_id = $1",
        "DELETE FROM api_keys WHERE tenant_id = $1",
        "DELETE FROM users WHERE tenant_id = $1",
    ] {
        sqlx::query(sql)
            .bind(tenant_id.to_string())
            .execute(&mut *tx)
            .await?;
    }
    let gone = sqlx::query("DELETE FROM tenants WHERE id = $1")
        .bind(tenant_id.to_string())
        .execute(&mut *tx)
        .await?;
    if gone.rows_affected() == 0 {
        return Err(Error::Api(ApiError::not_found(format!(
            "no tenant with id {tenant_id:?}"
        ))));
    }
    tx.commit().await?;
    Ok(())
}

/// Verifies the audit chain.
pub async fn verify_audit(db: &Db) -> Result<crate::audit::Verification> {
    crate::audit::verify(db).await
}
