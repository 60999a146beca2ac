//! Operator commands: tenants, users, keys, workspaces, tenant deletion, audit verification.
//!
//! They run directly against the database (the `contextq-server admin ...` subcommands, the
//! CLI's embedded default and its live e2e use them), on top of the data layer
//! ([`crate::store`], whose error type they return), so that no caller writes SQL of its own. Creating tenants, users and
//! keys is not an audited change in the contract; workspace changes are, as through the API.

use contextq_api::{Plan, Scope, Workspace, valid_key_format, valid_slug};
use serde::Serialize;

use crate::auth::hash_key;
use crate::db::Db;
use crate::store::{Actor, Error, Result, tenants, workspaces};

pub use crate::store::tenants::{NewKey, TenantDeletion};

/// What [`bootstrap`] made.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Bootstrap {
    /// The new tenant's id.
    pub tenant_id: String,
    /// Its owner user's id.
    #[serde(skip)]
    pub user_id: String,
    /// The owner's key (shown once).
    #[serde(skip)]
    pub key: NewKey,
    /// The slug of its first workspace.
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

/// Creates a tenant; returns its id.
pub async fn create_tenant(db: &Db, name: &str, plan: Plan) -> Result<String> {
    tenants::create_tenant(db, name, plan).await
}

/// The id of the tenant named `name`, if any.
pub async fn tenant_by_name(db: &Db, name: &str) -> Result<Option<String>> {
    tenants::tenant_by_name(db, name).await
}

/// Creates an owner user of a tenant; returns its id.
pub async fn create_user(db: &Db, tenant_id: &str, email: &str) -> Result<String> {
    tenants::create_user(db, tenant_id, email).await
}

/// Deletes a user (delete its keys first); returns whether one was deleted.
pub async fn delete_user(db: &Db, user_id: &str) -> Result<bool> {
    tenants::delete_user(db, user_id).await
}

/// Mints a key for a tenant (optionally owned by a user); returned once, stored hashed.
pub async fn create_key(
    db: &Db,
    tenant_id: &str,
    user_id: Option<&str>,
    scopes: &[Scope],
) -> Result<NewKey> {
    tenants::create_key(db, tenant_id, user_id, scopes).await
}

/// Mints a key that stops working `expires_in` from now (checked on every request).
pub async fn create_expiring_key(
    db: &Db,
    tenant_id: &str,
    scopes: &[Scope],
    expires_in: std::time::Duration,
) -> Result<NewKey> {
    let expires_at = chrono::Duration::from_std(expires_in)
        .ok()
        .and_then(|d| chrono::Utc::now().checked_add_signed(d))
        .ok_or_else(|| Error::Invalid(format!("an expiry {expires_in:?} from now is too far")))?
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    tenants::create_key_with(
        db,
        tenant_id,
        None,
        scopes,
        Some(&expires_at),
        tenants::KeyKind::Key,
    )
    .await
}

/// Revokes a key given its id or the key itself; returns whether an active key was revoked.
pub async fn revoke_key(db: &Db, id_or_key: &str) -> Result<bool> {
    let revoked = if valid_key_format(id_or_key) {
        tenants::revoke_key(db, None, Some(&hash_key(id_or_key))).await?
    } else {
        tenants::revoke_key(db, Some(id_or_key), None).await?
    };
    Ok(revoked)
}

/// Deletes a key's row; returns whether one was deleted.
pub async fn delete_key(db: &Db, key_id: &str) -> Result<bool> {
    tenants::delete_key(db, key_id).await
}

/// Every workspace of a tenant, by slug.
pub async fn workspaces(db: &Db, tenant_id: &str) -> Result<Vec<Workspace>> {
    workspaces::list(db, tenant_id).await
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
    workspaces::create(db, actor, slug, name).await
}

/// Tenant, owner user, key and workspace in one go.
pub async fn bootstrap(
    db: &Db,
    name: &str,
    plan: Plan,
    workspace: &str,
    scopes: &[Scope],
) -> Result<Bootstrap> {
    if !valid_slug(workspace) {
        return Err(Error::Invalid(format!(
            "invalid workspace slug {workspace:?}: use a-z, 0-9 and '-', starting with a letter or digit"
        )));
    }
    let tenant_id = create_tenant(db, name, plan).await?;
    let user_id = create_user(db, &tenant_id, &format!("owner@{name}.invalid")).await?;
    let key = create_key(db, &tenant_id, Some(&user_id), scopes).await?;
    create_workspace(db, &tenant_id, workspace, workspace).await?;
    Ok(Bootstrap {
        tenant_id,
        user_id,
        key,
        workspace: workspace.to_string(),
    })
}

/// Why a tenant with audit rows is kept.
pub const CHAINED_AUDIT_REFUSAL: &str = "it has chained audit rows: they form the tenant's own hash chain, which the audit trail keeps (removing them would break its verification; the rows outlive the tenant's data on purpose)";

/// Deletes a tenant with its keys, users, workspaces and contexts, unless it has chained audit
/// rows: then nothing is deleted and the outcome says so ([`TenantDeletion::KeptForAudit`]).
pub async fn delete_tenant(db: &Db, tenant_id: &str) -> Result<TenantDeletion> {
    tenants::delete_tenant(db, tenant_id).await
}

/// Keys a tenant's chain again after a server without the key extended it (see
/// [`crate::audit::repair_keying`]).
pub async fn repair_audit_keying(
    db: &Db,
    tenant_id: &str,
) -> std::result::Result<crate::audit::KeyingRepair, crate::Error> {
    crate::audit::repair_keying(db, tenant_id).await
}

/// Verifies the audit chains: every tenant's (and the global chain of rows written before
/// per-tenant chains), or only `tenant`'s.
pub async fn verify_audit(db: &Db, tenant: Option<&str>) -> Result<crate::audit::Verification> {
    Ok(crate::audit::verify(db, tenant).await?)
}
