//! Tenants, their users and their API keys: what operator commands provision and what
//! authentication looks up. (None of this is an audited change in the contract.)

use contextq_api::{Plan, Scope};
use sqlx::{AnyConnection, Row};

use super::{Actor, Error, Outcome, Result, new_id, now, write};
use crate::auth::{KeyRecord, generate_key, hash_key};
use crate::db::Db;
use crate::db::{Batch, Bind};

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

/// Mints a key for a tenant (optionally owned by a user); stored hashed, returned once.
pub async fn create_key(
    db: &Db,
    tenant_id: &str,
    user_id: Option<&str>,
    scopes: &[Scope],
) -> Result<NewKey> {
    let spec = KeySpec {
        user_id,
        ..KeySpec::new(tenant_id, scopes)
    };
    create_key_with(db, spec).await
}

/// What a key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// A key an operator created.
    Key,
    /// A key the inspector's sign-in minted: it expires and Sign out revokes it.
    UiSession,
}

impl KeyKind {
    fn as_str(self) -> &'static str {
        match self {
            KeyKind::Key => "key",
            KeyKind::UiSession => "ui-session",
        }
    }
}

/// A key to mint ([`create_key_with`]).
#[derive(Debug, Clone, Copy)]
pub struct KeySpec<'a> {
    /// The tenant.
    pub tenant_id: &'a str,
    /// The user who owns it, if any.
    pub user_id: Option<&'a str>,
    /// What it may do.
    pub scopes: &'a [Scope],
    /// When it stops working (RFC 3339, as [`crate::db::now`] writes it); `None`: never.
    pub expires_at: Option<&'a str>,
    /// What it is for.
    pub kind: KeyKind,
    /// The workspaces (slugs) it reaches; `None`: every workspace of the tenant.
    pub workspaces: Option<&'a [String]>,
    /// The key a [`KeyKind::UiSession`] was minted from (required for one, refused for any
    /// other kind): the session works only while that key does.
    pub parent_key_id: Option<&'a str>,
    /// A name an operator gives it (at most 64 characters), shown by `list-keys` and in the
    /// audit rows of its actions.
    pub name: Option<&'a str>,
}

impl<'a> KeySpec<'a> {
    /// A key of `tenant_id` with `scopes`, owned by nobody, never expiring, reaching every
    /// workspace.
    pub fn new(tenant_id: &'a str, scopes: &'a [Scope]) -> Self {
        KeySpec {
            tenant_id,
            user_id: None,
            scopes,
            expires_at: None,
            kind: KeyKind::Key,
            workspaces: None,
            parent_key_id: None,
            name: None,
        }
    }
}

/// [`create_key`] of any [`KeySpec`] (an expiry, a kind, a name), recorded in the tenant's
/// audit log (`key.create`, with the key's id, name, kind, scopes, workspaces and expiry; never
/// the key).
pub async fn create_key_with(db: &Db, spec: KeySpec<'_>) -> Result<NewKey> {
    let checked = check_key(&mut *db.reader().await?, &spec).await?;
    let key = generate_key();
    let id = new_id("key");
    let actor = Actor::operator(spec.tenant_id);
    let read = lock_head(spec.tenant_id);
    write(db, actor, &id, read, |mut head, _row| {
        let mut batch = Batch::default();
        let (sql, binds) = insert_key_statement(&spec, &checked, &id, &key);
        batch.push(sql, binds, Some(1));
        head.append(actor.record(
            "key.create",
            "key",
            &id,
            serde_json::json!({
                "name": spec.name,
                "kind": spec.kind.as_str(),
                "scopes": Scope::format_list(spec.scopes),
                "workspaces": checked,
                "expiresAt": spec.expires_at,
            }),
        ));
        Ok(Outcome::Write(
            head,
            batch,
            NewKey {
                key_id: id.clone(),
                api_key: key.clone(),
            },
        ))
    })
    .await
}

/// The read of a write that needs the tenant's audit head only.
fn lock_head(tenant_id: &str) -> (String, Vec<Bind>) {
    (
        "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, \
         h.mac AS head_mac FROM audit_heads h WHERE h.tenant_id = $1"
            .to_string(),
        vec![Bind::Text(tenant_id.to_string())],
    )
}

/// Checks `spec` against what is stored: the tenant exists, a session names its parent and
/// only a session does, a name fits, and each workspace is the tenant's (either case, as paths
/// take them). The workspaces as stored (lower case).
async fn check_key(conn: &mut AnyConnection, spec: &KeySpec<'_>) -> Result<Option<Vec<String>>> {
    let KeySpec {
        tenant_id,
        kind,
        workspaces,
        parent_key_id,
        name,
        ..
    } = *spec;
    require_tenant(conn, tenant_id).await?;
    if (kind == KeyKind::UiSession) != parent_key_id.is_some() {
        return Err(Error::Invalid(
            "a sign-in session names the key it was minted from, and only a session does".into(),
        ));
    }
    if let Some(n) = name
        && (n.trim().is_empty() || n.chars().count() > 64 || n.chars().any(char::is_control))
    {
        return Err(Error::Invalid(format!(
            "{n:?} is not a key name: 1 to 64 characters, no control characters"
        )));
    }
    // Slugs as paths take them (either case), each a workspace of the tenant: a typo would
    // otherwise give an agent an empty memory.
    let slugs: Option<Vec<String>> =
        workspaces.map(|w| w.iter().map(|s| s.to_lowercase()).collect());
    if let Some(slugs) = &slugs {
        if slugs.is_empty() {
            return Err(Error::Invalid(
                "a key limited to workspaces names at least one".into(),
            ));
        }
        if let Some(bad) = slugs.iter().find(|s| !contextq_api::slug::valid_slug(s)) {
            return Err(Error::Invalid(format!(
                "{bad:?} is not a workspace slug ([a-z0-9][a-z0-9-]{{0,62}})"
            )));
        }
        if kind == KeyKind::Key {
            let rows =
                sqlx::query("SELECT slug FROM workspaces WHERE tenant_id = $1 ORDER BY slug")
                    .bind(tenant_id.to_string())
                    .fetch_all(&mut *conn)
                    .await?;
            let existing: Vec<String> = rows
                .iter()
                .map(|r| r.try_get::<String, _>("slug"))
                .collect::<std::result::Result<_, _>>()?;
            let unknown: Vec<&String> = slugs.iter().filter(|s| !existing.contains(s)).collect();
            if !unknown.is_empty() {
                return Err(Error::Invalid(format!(
                    "no workspace {} in this tenant; its workspaces: {}",
                    unknown
                        .iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    if existing.is_empty() {
                        "none yet (create one with admin create-workspace)".to_string()
                    } else {
                        existing.join(", ")
                    }
                )));
            }
        }
    }
    Ok(slugs)
}

/// The `INSERT` of a key: `spec`, its checked workspaces, its id and the key (stored hashed).
fn insert_key_statement(
    spec: &KeySpec<'_>,
    workspaces: &Option<Vec<String>>,
    id: &str,
    key: &str,
) -> (&'static str, Vec<Bind>) {
    (
        "INSERT INTO api_keys (id, tenant_id, user_id, key_hash, key_last4, scopes, created_at, expires_at, kind, workspaces, parent_key_id, name) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
        vec![
            Bind::Text(id.to_string()),
            Bind::Text(spec.tenant_id.to_string()),
            Bind::OptText(spec.user_id.map(str::to_string)),
            Bind::Text(hash_key(key)),
            Bind::Text(key[key.len() - 4..].to_string()),
            Bind::Text(Scope::format_list(spec.scopes)),
            Bind::Text(now()),
            Bind::OptText(spec.expires_at.map(str::to_string)),
            Bind::Text(spec.kind.as_str().to_string()),
            Bind::OptText(
                workspaces
                    .as_ref()
                    .map(|w| serde_json::to_string(w).unwrap_or_else(|_| "[]".into())),
            ),
            Bind::OptText(spec.parent_key_id.map(str::to_string)),
            Bind::OptText(spec.name.map(str::to_string)),
        ],
    )
}

/// Mints a key in the caller's transaction on `conn` (bootstrap: the tenant's first key, made
/// with its chain, whose first row records the workspace).
async fn insert_key(conn: &mut AnyConnection, spec: KeySpec<'_>) -> Result<NewKey> {
    let checked = check_key(conn, &spec).await?;
    let key = generate_key();
    let id = new_id("key");
    let (sql, binds) = insert_key_statement(&spec, &checked, &id, &key);
    crate::db::bind_all(sqlx::query(sql), binds)
        .execute(&mut *conn)
        .await?;
    Ok(NewKey {
        key_id: id,
        api_key: key,
    })
}

/// A key's id and tenant, by its id or hash, when it is active (`None`: no such key, or
/// revoked already).
async fn active_key(
    db: &Db,
    key_id: Option<&str>,
    key_hash: Option<&str>,
) -> Result<Option<(String, String)>> {
    let row = sqlx::query(
        "SELECT id, tenant_id FROM api_keys WHERE (id = $1 OR key_hash = $2) AND revoked_at IS NULL",
    )
    .bind(key_id.unwrap_or("").to_string())
    .bind(key_hash.unwrap_or("").to_string())
    .fetch_optional(&mut *db.reader().await?)
    .await?;
    row.map(|r| Ok((r.try_get("id")?, r.try_get("tenant_id")?)))
        .transpose()
}

/// One audited change to the key `id` of `tenant_id`: `statements` (each `$1` is `at`, `$2`
/// the key's id; the last must change one row), recorded as `action` with `detail`; then every
/// server hears of it (a revocation's notice). `Ok(false)`: another writer changed the key in
/// between (the last statement found no row to change), and nothing was written.
async fn change_key(
    db: &Db,
    tenant_id: &str,
    id: &str,
    at: &str,
    statements: &[(&'static str, Option<u64>)],
    action: &'static str,
    detail: serde_json::Value,
) -> Result<bool> {
    let actor = Actor::operator(tenant_id);
    let written = write(db, actor, id, lock_head(tenant_id), |mut head, _row| {
        let mut batch = Batch::default();
        for (sql, expected) in statements {
            batch.push(
                *sql,
                vec![Bind::Text(at.to_string()), Bind::Text(id.to_string())],
                *expected,
            );
        }
        head.append(actor.record(action, "key", id, detail.clone()));
        Ok(Outcome::Write(head, batch, ()))
    })
    .await;
    match written {
        Ok(()) => {
            announce_revocation(db).await;
            Ok(true)
        }
        Err(Error::ChangedConcurrently { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Revokes a key by its id or its hash, with the sign-in sessions minted from it, recorded in
/// its tenant's audit log (`key.revoke`); returns whether an active key was revoked.
pub async fn revoke_key(db: &Db, key_id: Option<&str>, key_hash: Option<&str>) -> Result<bool> {
    let Some((id, tenant_id)) = active_key(db, key_id, key_hash).await? else {
        return Ok(false);
    };
    let statements = [
        (
            "UPDATE api_keys SET revoked_at = $1 WHERE parent_key_id = $2 AND revoked_at IS NULL",
            None,
        ),
        (
            "UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL",
            Some(1),
        ),
    ];
    // `false` too when revoked by someone else in between.
    let detail = serde_json::json!({});
    change_key(
        db,
        &tenant_id,
        &id,
        &now(),
        &statements,
        "key.revoke",
        detail,
    )
    .await
}

/// Sets when the key `key_id` (with its sessions) stops working: `at` (RFC 3339 UTC, as
/// [`now`] writes it), recorded as `key.expire`; `Ok(false)` when no active key has that id.
pub async fn expire_key(
    db: &Db,
    key_id: Option<&str>,
    key_hash: Option<&str>,
    at: &str,
) -> Result<bool> {
    let Some((id, tenant_id)) = active_key(db, key_id, key_hash).await? else {
        return Ok(false);
    };
    let statements = [(
        "UPDATE api_keys SET expires_at = $1 WHERE id = $2 AND revoked_at IS NULL",
        Some(1),
    )];
    let detail = serde_json::json!({"expiresAt": at});
    change_key(db, &tenant_id, &id, at, &statements, "key.expire", detail).await
}

/// Deletes a key's row and those of the sign-in sessions minted from it, recorded as
/// `key.delete`; returns whether the key's row was deleted.
pub async fn delete_key(db: &Db, key_id: &str) -> Result<bool> {
    let row = sqlx::query("SELECT tenant_id FROM api_keys WHERE id = $1")
        .bind(key_id.to_string())
        .fetch_optional(&mut *db.reader().await?)
        .await?;
    let Some(tenant_id) = row
        .map(|r| r.try_get::<String, _>("tenant_id"))
        .transpose()?
    else {
        return Ok(false);
    };
    let statements = [
        (
            "DELETE FROM api_keys WHERE parent_key_id = $2 AND $1 <> ''",
            None,
        ),
        ("DELETE FROM api_keys WHERE id = $2 AND $1 <> ''", Some(1)),
    ];
    let detail = serde_json::json!({});
    change_key(
        db,
        &tenant_id,
        key_id,
        &now(),
        &statements,
        "key.delete",
        detail,
    )
    .await
}

/// Tells every server that keys were revoked, changed or removed, after the commit: PostgreSQL's
/// listeners by a notification, SQLite's by the signal file. Best effort: a server that misses
/// it still stops trusting its cache within [`crate::auth::KeyCache::TTL`].
async fn announce_revocation(db: &Db) {
    if let Some(notice) = db.dialect().revocation_notice()
        && let Err(e) = sqlx::query(notice)
            .bind(crate::auth::REVOCATIONS_CHANNEL)
            .execute(db.pool())
            .await
    {
        tracing::warn!(error = %e, "cannot announce a key revocation; other servers notice it within the key cache's TTL");
    }
    crate::auth::signal_revocation(db);
}

/// On PostgreSQL, tells every server listening ([`crate::auth::watch_revocations`]) that keys
/// were revoked or removed; the notification is delivered when `tx` commits. (On SQLite the
/// caller signals after committing: [`crate::auth::signal_revocation`].)
async fn notify_revocation(db: &Db, tx: &mut sqlx::AnyConnection) -> Result<()> {
    if let Some(notice) = db.dialect().revocation_notice() {
        sqlx::query(notice)
            .bind(crate::auth::REVOCATIONS_CHANNEL)
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

/// The active key with this hash, if any. A sign-in session is active only while the key it
/// was minted from is (not revoked, not deleted) and expires no later than that key.
pub async fn key_by_hash(db: &Db, key_hash: &str) -> Result<Option<KeyRecord>> {
    let row = sqlx::query(
        "SELECT k.id, k.tenant_id, k.scopes, k.expires_at, k.kind, k.workspaces, k.last_used_at, \
         k.parent_key_id, p.id AS parent_id, p.revoked_at AS parent_revoked_at, \
         p.expires_at AS parent_expires_at, p.tenant_id AS parent_tenant_id \
         FROM api_keys k LEFT JOIN api_keys p ON p.id = k.parent_key_id \
         WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
    )
    .bind(key_hash.to_string())
    .fetch_optional(&mut *db.reader().await?)
    .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let ui_session = row.try_get::<String, _>("kind")? == KeyKind::UiSession.as_str();
    let tenant_id: String = row.try_get("tenant_id")?;
    let mut expires_at: Option<String> = row.try_get("expires_at")?;
    if ui_session {
        // A session whose parent is unknown (minted before parents were recorded), gone,
        // revoked or of another tenant works no more.
        let parent: Option<String> = row.try_get("parent_id")?;
        let parent_revoked: Option<String> = row.try_get("parent_revoked_at")?;
        let parent_tenant: Option<String> = row.try_get("parent_tenant_id")?;
        if parent.is_none()
            || parent_revoked.is_some()
            || parent_tenant.as_deref() != Some(tenant_id.as_str())
        {
            return Ok(None);
        }
        expires_at = earliest(expires_at, row.try_get("parent_expires_at")?);
    }
    let scopes: String = row.try_get("scopes")?;
    let scopes = Scope::parse_list(&scopes)
        .map_err(|e| Error::Corrupt(format!("a key's scopes {scopes:?}: {e}")))?;
    Ok(Some(KeyRecord {
        key_id: row.try_get("id")?,
        tenant_id,
        scopes,
        expires_at,
        ui_session,
        workspaces: workspaces_from(row.try_get("workspaces")?)?,
        last_used_at: row.try_get("last_used_at")?,
    }))
}

/// Why a key that [`key_by_hash`] refused was refused, when it is a key this database knows: its
/// id and `revoked` (revoked) or `session_revoked` (an inspector session whose key is gone or
/// revoked). `None`: no key has this hash. Asked only after a refusal, for the request log.
pub async fn refused_key(db: &Db, key_hash: &str) -> Result<Option<(String, &'static str)>> {
    let row = sqlx::query("SELECT id, revoked_at FROM api_keys WHERE key_hash = $1")
        .bind(key_hash.to_string())
        .fetch_optional(&mut *db.reader().await?)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let revoked: Option<String> = row.try_get("revoked_at")?;
    let reason = if revoked.is_some() {
        "revoked"
    } else {
        "session_revoked"
    };
    Ok(Some((row.try_get("id")?, reason)))
}

/// The earlier of two expiry times (RFC 3339 UTC as stored, which sort as text); `None` is never.
fn earliest(a: Option<String>, b: Option<String>) -> Option<String> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Mints an inspector sign-in session from `parent` (an active key): same tenant, scopes and
/// workspaces, expiring after `ttl` or when `parent` does, whichever comes first, and ending
/// when `parent` is revoked or deleted. Returns the key and its expiry.
pub async fn create_session_key(
    db: &Db,
    parent: &KeyRecord,
    ttl: std::time::Duration,
) -> Result<(NewKey, String)> {
    if parent.ui_session {
        return Err(Error::Invalid(
            "a sign-in session cannot mint another session".into(),
        ));
    }
    let own = chrono::Duration::from_std(ttl)
        .ok()
        .and_then(|d| chrono::Utc::now().checked_add_signed(d))
        .ok_or_else(|| Error::Invalid(format!("a session of {ttl:?} is too long")))?
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let expires_at = earliest(Some(own), parent.expires_at.clone()).unwrap_or_default();
    let spec = KeySpec {
        expires_at: Some(&expires_at),
        kind: KeyKind::UiSession,
        workspaces: parent.workspaces.as_deref(),
        parent_key_id: Some(&parent.key_id),
        ..KeySpec::new(&parent.tenant_id, &parent.scopes)
    };
    Ok((create_key_with(db, spec).await?, expires_at))
}

/// A key's workspaces as stored (a JSON array of slugs; NULL: every workspace).
fn workspaces_from(text: Option<String>) -> Result<Option<Vec<String>>> {
    text.map(|t| {
        serde_json::from_str::<Vec<String>>(&t)
            .map_err(|e| Error::Corrupt(format!("a key's workspaces {t:?}: {e}")))
    })
    .transpose()
}

/// How stale a key's recorded last use may be before a request records it again.
pub const LAST_USE_RESOLUTION: std::time::Duration = std::time::Duration::from_secs(60);

/// Whether a key last recorded as used at `last_used_at` should be recorded again now: never
/// more than once per [`LAST_USE_RESOLUTION`], so that lookups that miss the cache (all of them,
/// while it is not trusted) do not turn every request into a write.
pub fn last_use_due(last_used_at: Option<&str>) -> bool {
    let cutoff = (chrono::Utc::now()
        - chrono::Duration::from_std(LAST_USE_RESOLUTION).expect("a minute fits"))
    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    last_used_at.is_none_or(|at| at < cutoff.as_str())
}

/// Records that the key `key_id` was used now (best effort, when [`last_use_due`]).
pub async fn touch_key(db: &Db, key_id: &str) -> Result<()> {
    sqlx::query("UPDATE api_keys SET last_used_at = $1 WHERE id = $2")
        .bind(now())
        .bind(key_id.to_string())
        .execute(db.pool())
        .await?;
    Ok(())
}

/// What an operator sees of a key (never the key or its hash).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KeyListing {
    /// The key's id.
    pub key_id: String,
    /// Its name (`create-key --name`); `None`: unnamed.
    pub name: Option<String>,
    /// Its last four characters.
    pub last4: String,
    /// Its scopes, comma-separated (`read,write`).
    pub scopes: String,
    /// The workspaces it reaches; `None`: every workspace.
    pub workspaces: Option<Vec<String>>,
    /// `key` or `ui-session`.
    pub kind: String,
    /// When it was made.
    pub created_at: String,
    /// When it stops working; `None`: never.
    pub expires_at: Option<String>,
    /// When it was last used (to within the key cache's lifetime); `None`: never.
    pub last_used_at: Option<String>,
    /// When it was revoked; `None`: active.
    pub revoked_at: Option<String>,
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

/// Every key of `tenant_id`, oldest first.
pub async fn list_keys(db: &Db, tenant_id: &str) -> Result<Vec<KeyListing>> {
    require_tenant(&mut *db.reader().await?, tenant_id).await?;
    let rows = sqlx::query(
        "SELECT id, name, key_last4, scopes, workspaces, kind, created_at, expires_at, last_used_at, revoked_at \
         FROM api_keys WHERE tenant_id = $1 ORDER BY created_at, id",
    )
    .bind(tenant_id.to_string())
    .fetch_all(&mut *db.reader().await?)
    .await?;
    rows.iter()
        .map(|row| {
            Ok(KeyListing {
                key_id: row.try_get("id")?,
                name: row.try_get("name")?,
                last4: row.try_get("key_last4")?,
                scopes: row.try_get("scopes")?,
                workspaces: workspaces_from(row.try_get("workspaces")?)?,
                kind: row.try_get("kind")?,
                created_at: row.try_get("created_at")?,
                expires_at: row.try_get("expires_at")?,
                last_used_at: row.try_get("last_used_at")?,
                revoked_at: row.try_get("revoked_at")?,
            })
        })
        .collect()
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
