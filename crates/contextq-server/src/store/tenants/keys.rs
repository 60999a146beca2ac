//! API keys: minted (with scopes, an expiry, workspaces and a name), looked up by hash with
//! their tenant's plan, revoked, expired, deleted (every server told at once), listed, and
//! their last use recorded at most once a minute.

use super::*;

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
    pub(super) fn as_str(self) -> &'static str {
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
pub(super) fn lock_head(tenant_id: &str) -> (String, Vec<Bind>) {
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
pub(super) async fn check_key(
    conn: &mut AnyConnection,
    spec: &KeySpec<'_>,
) -> Result<Option<Vec<String>>> {
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
pub(super) fn insert_key_statement(
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
pub(super) async fn insert_key(conn: &mut AnyConnection, spec: KeySpec<'_>) -> Result<NewKey> {
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
pub(super) async fn active_key(
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
pub(super) async fn change_key(
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
pub(super) async fn announce_revocation(db: &Db) {
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
pub(super) async fn notify_revocation(db: &Db, tx: &mut sqlx::AnyConnection) -> Result<()> {
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
pub(super) fn earliest(a: Option<String>, b: Option<String>) -> Option<String> {
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
pub(super) fn workspaces_from(text: Option<String>) -> Result<Option<Vec<String>>> {
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
