//! Operator commands: tenants, users, keys, workspaces, tenant deletion, audit verification.
//!
//! They run directly against the database (the `contextq-server admin ...` subcommands, the
//! CLI's embedded default and its live e2e use them), on top of the data layer
//! ([`crate::store`], whose error type they return), so that no caller writes SQL of its own. Creating tenants, users and
//! keys is not an audited change in the contract; workspace changes are, as through the API.

pub mod text;

/// `admin backup` and `admin restore`: each database's own consistent copy (`db::backup`).
pub use crate::db::backup;

use contextq_api::{Plan, Scope, Workspace, valid_key_format, valid_slug};
use serde::Serialize;

use crate::auth::hash_key;
use crate::db::Db;
use crate::store::{Actor, Error, Result, tenants, workspaces};

pub use crate::audit::repair_keying as repair_audit_keying;
pub use crate::store::tenants::{
    KeyListing, NewKey, TenantDeletion, create_key, create_tenant, create_user, delete_key,
    delete_tenant, delete_user, list_keys, tenant_by_name,
};
pub use crate::store::workspaces::list as workspaces;

/// Why a tenant with audit rows is kept.
pub const CHAINED_AUDIT_REFUSAL: &str = "it has chained audit rows: they form the tenant's own hash chain, which the audit trail keeps (removing them would break its verification; the rows outlive the tenant's data on purpose)";

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

/// Mints a key of `tenant_id` with `scopes`, stopping `expires_in` from now when given,
/// reaching only `workspaces` (slugs) when given (enforced by the server on every request).
pub async fn create_key_limited(
    db: &Db,
    tenant_id: &str,
    scopes: &[Scope],
    expires_in: Option<std::time::Duration>,
    workspaces: Option<&[String]>,
) -> Result<NewKey> {
    create_key_named(db, tenant_id, scopes, expires_in, workspaces, None).await
}

/// [`create_key_limited`] with a name (shown by `list-keys` and in the audit log).
pub async fn create_key_named(
    db: &Db,
    tenant_id: &str,
    scopes: &[Scope],
    expires_in: Option<std::time::Duration>,
    workspaces: Option<&[String]>,
    name: Option<&str>,
) -> Result<NewKey> {
    let expires_at = match expires_in {
        Some(d) => Some(
            chrono::Duration::from_std(d)
                .ok()
                .and_then(|d| chrono::Utc::now().checked_add_signed(d))
                .ok_or_else(|| Error::Invalid(format!("an expiry {d:?} from now is too far")))?
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        ),
        None => None,
    };
    let spec = tenants::KeySpec {
        expires_at: expires_at.as_deref(),
        workspaces,
        name,
        ..tenants::KeySpec::new(tenant_id, scopes)
    };
    tenants::create_key_with(db, spec).await
}

/// Mints a key that stops working `expires_in` from now (checked on every request).
pub async fn create_expiring_key(
    db: &Db,
    tenant_id: &str,
    scopes: &[Scope],
    expires_in: std::time::Duration,
) -> Result<NewKey> {
    create_key_limited(db, tenant_id, scopes, Some(expires_in), None).await
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

/// The active key `key` (the key itself), if any: its id, tenant, scopes and workspaces.
pub async fn active_key(db: &Db, key: &str) -> Result<Option<crate::auth::KeyRecord>> {
    tenants::key_by_hash(db, &hash_key(key)).await
}

/// Creates a workspace for a tenant (audited, without a key).
pub async fn create_workspace(
    db: &Db,
    tenant_id: &str,
    slug: &str,
    name: &str,
) -> Result<Workspace> {
    let actor = Actor::operator(tenant_id);
    workspaces::create(db, actor, slug, name).await
}

/// Archives a workspace of a tenant (read-only from then on; audited).
pub async fn archive_workspace(db: &Db, tenant_id: &str, slug: &str) -> Result<Workspace> {
    workspaces::archive(db, Actor::operator(tenant_id), &slug.to_lowercase()).await
}

/// Deletes an empty workspace of a tenant (refused while it holds contexts; audited).
pub async fn delete_workspace(db: &Db, tenant_id: &str, slug: &str) -> Result<()> {
    workspaces::delete(db, Actor::operator(tenant_id), &slug.to_lowercase()).await
}

/// A tenant's workspaces, by slug.
pub async fn list_workspaces(db: &Db, tenant_id: &str) -> Result<Vec<Workspace>> {
    tenants::require_tenant(&mut *db.reader().await?, tenant_id).await?;
    workspaces::list(db, tenant_id).await
}

/// Every tenant, by name.
pub async fn list_tenants(db: &Db) -> Result<Vec<tenants::TenantListing>> {
    tenants::list_tenants(db).await
}

/// Changes a tenant's plan (audited).
pub async fn set_plan(db: &Db, tenant_id: &str, plan: Plan) -> Result<()> {
    tenants::set_plan(db, tenant_id, plan).await
}

/// Makes the key (its id, or the key itself) stop working `expires_in` from now, with the
/// sessions minted from it (audited); `Ok(false)` when no active key matched.
pub async fn expire_key(db: &Db, id_or_key: &str, expires_in: std::time::Duration) -> Result<bool> {
    let at = chrono::Duration::from_std(expires_in)
        .ok()
        .and_then(|d| chrono::Utc::now().checked_add_signed(d))
        .ok_or_else(|| Error::Invalid(format!("an expiry {expires_in:?} from now is too far")))?
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    if valid_key_format(id_or_key) {
        tenants::expire_key(db, None, Some(&hash_key(id_or_key)), &at).await
    } else {
        tenants::expire_key(db, Some(id_or_key), None, &at).await
    }
}

/// Tenant, owner user, key and workspace in one transaction: all of them, or (any failure, a
/// name taken) none.
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
    let made = tenants::bootstrap(
        db,
        name,
        plan,
        &format!("owner@{name}.invalid"),
        scopes,
        workspace,
    )
    .await?;
    Ok(Bootstrap {
        tenant_id: made.tenant_id,
        user_id: made.user_id,
        key: made.key,
        workspace: made.workspace.slug,
    })
}

/// Checks every tenant's kept counts (contexts, versions, prunable versions) against its rows
/// and sets right those that differ, which it returns ([`tenants::recount`]).
pub async fn recount(db: &Db) -> Result<Vec<tenants::Recounted>> {
    tenants::recount(db).await
}

/// Verifies the audit chains: every tenant's (and the global chain of rows written before
/// per-tenant chains), or only `tenant`'s.
pub async fn verify_audit(db: &Db, tenant: Option<&str>) -> Result<crate::audit::Verification> {
    Ok(crate::audit::verify(db, tenant).await?)
}
