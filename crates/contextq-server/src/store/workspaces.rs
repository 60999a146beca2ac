//! Workspaces: list, create, archive, delete (each change audited).

use contextq_api::{Workspace, valid_slug};
use sqlx::Row as _;

use sqlx::AnyConnection;

use super::{Actor, Error, Outcome, Result, new_id, now, workspace_from_row, write};
use crate::audit::Head;
use crate::db::{Batch, BatchError, Bind, Db, Row};

/// The columns of a workspace row, in one place.
macro_rules! columns {
    () => {
        "id, slug, name, archived, created_at"
    };
}

/// Every workspace of the tenant, archived ones included, by slug.
pub async fn list(db: &Db, tenant_id: &str) -> Result<Vec<Workspace>> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        columns!(),
        " FROM workspaces WHERE tenant_id = $1 ORDER BY slug"
    ))
    .bind(tenant_id.to_string())
    .fetch_all(&mut *db.reader().await?)
    .await?;
    Row::from_any_rows(&rows)?
        .iter()
        .map(workspace_from_row)
        .collect()
}

/// The id of the workspace `slug` of the tenant.
pub(crate) async fn id_of(db: &Db, tenant_id: &str, slug: &str) -> Result<String> {
    let row = sqlx::query("SELECT id FROM workspaces WHERE tenant_id = $1 AND slug = $2")
        .bind(tenant_id.to_string())
        .bind(slug.to_string())
        .fetch_optional(&mut *db.reader().await?)
        .await?
        .ok_or_else(|| Error::WorkspaceNotFound {
            slug: slug.to_string(),
        })?;
    Ok(row.try_get("id")?)
}

/// The read of a workspace write (under the head lock): the workspace `slug`, and how many contexts
/// it holds.
fn lock_workspace(tenant_id: &str, slug: &str) -> (String, Vec<Bind>) {
    let sql = concat!(
        "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, h.mac AS head_mac, w.id, w.slug, w.name, w.archived, w.created_at, ",
        "(SELECT COUNT(*) FROM contexts c WHERE c.tenant_id = h.tenant_id AND c.workspace_id = w.id) AS contexts ",
        "FROM audit_heads h LEFT JOIN workspaces w ON w.tenant_id = h.tenant_id AND w.slug = $2 ",
        "WHERE h.tenant_id = $1"
    );
    (
        sql.to_string(),
        vec![
            Bind::Text(tenant_id.to_string()),
            Bind::Text(slug.to_string()),
        ],
    )
}

/// The workspace and its context count from [`lock_workspace`]'s row.
fn locked(row: &Row) -> Result<Option<(Workspace, i64)>> {
    Ok(match row.try_get::<Option<String>, _>("id")? {
        Some(_) => Some((workspace_from_row(row)?, row.try_get("contexts")?)),
        None => None,
    })
}

/// Refuses a slug or a name the contract does not allow.
pub(crate) fn check(slug: &str, name: &str) -> Result<()> {
    if !valid_slug(slug) {
        return Err(Error::Invalid(format!(
            "invalid workspace slug {slug:?}: use 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit"
        )));
    }
    if name.len() > contextq_api::limits::MAX_WORKSPACE_NAME_BYTES {
        return Err(Error::Invalid(format!(
            "workspace name: at most {} bytes (got {})",
            contextq_api::limits::MAX_WORKSPACE_NAME_BYTES,
            name.len()
        )));
    }
    Ok(())
}

/// A new workspace's row and its audit record, added to `batch` and `head`.
fn insert(
    actor: Actor<'_>,
    (slug, name): (&str, &str),
    profile: Profile<'_>,
    head: &mut Head,
    batch: &mut Batch,
) -> Workspace {
    let ws = Workspace {
        id: new_id("ws"),
        slug: slug.to_string(),
        name: if name.is_empty() { slug } else { name }.to_string(),
        archived: false,
        created_at: now(),
    };
    batch.push(
        "INSERT INTO workspaces (id, tenant_id, slug, name, archived, created_at, description, metadata) VALUES ($1, $2, $3, $4, 0, $5, $6, $7)",
        vec![
            Bind::Text(ws.id.clone()),
            Bind::Text(actor.tenant_id.to_string()),
            Bind::Text(ws.slug.clone()),
            Bind::Text(ws.name.clone()),
            Bind::Text(ws.created_at.clone()),
            Bind::OptText(profile.description.map(str::to_string)),
            Bind::OptText(profile.metadata.map(str::to_string)),
        ],
        Some(1),
    );
    head.append(actor.record(
        "workspace.create",
        "workspace",
        &ws.id,
        serde_json::json!({"slug": slug}),
    ));
    ws
}

/// What a memory store keeps besides a workspace's slug and name (extension `memory-stores`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Profile<'a> {
    /// Its description (`None`: empty).
    pub description: Option<&'a str>,
    /// Its metadata as a JSON object of strings (`None`: empty).
    pub metadata: Option<&'a str>,
}

/// Creates a workspace (refused if the slug exists). An empty `name` becomes the slug.
pub async fn create(db: &Db, actor: Actor<'_>, slug: &str, name: &str) -> Result<Workspace> {
    create_with(db, actor, slug, name, Profile::default()).await
}

/// [`create`] with a memory store's description and metadata.
pub(crate) async fn create_with(
    db: &Db,
    actor: Actor<'_>,
    slug: &str,
    name: &str,
    profile: Profile<'_>,
) -> Result<Workspace> {
    check(slug, name)?;
    let (sql, binds) = lock_workspace(actor.tenant_id, slug);
    // The tenant's workspaces, counted only as far as the largest cap needs (an index range of
    // at most that many entries, whatever the tenant holds), and its plan.
    let sql = sql.replacen(
        "SELECT ",
        &format!(
            "SELECT (SELECT COUNT(*) FROM (SELECT 1 AS x FROM workspaces n WHERE n.tenant_id = $1 LIMIT {}) q) AS ws_held, \
             (SELECT t.plan FROM tenants t WHERE t.id = $1) AS plan, ",
            contextq_api::Plan::MAX_WORKSPACE_CAP + 1
        ),
        1,
    );
    write(db, actor, slug, (sql, binds), |mut head, row| {
        if locked(row)?.is_some() {
            return Err(Error::WorkspaceExists {
                slug: slug.to_string(),
            });
        }
        let plan: String = row.try_get("plan")?;
        let plan: contextq_api::Plan = plan
            .parse()
            .map_err(|_| Error::Corrupt(format!("a tenant has plan {plan:?}")))?;
        let held: i64 = row.try_get("ws_held")?;
        if let Some(cap) = plan.workspace_cap()
            && held >= cap
        {
            return Err(Error::WorkspaceQuotaExceeded { plan, cap });
        }
        let mut batch = Batch::default();
        let ws = insert(actor, (slug, name), profile, &mut head, &mut batch);
        Ok(Outcome::Write(head, batch, ws))
    })
    .await
}

/// The first workspace of a tenant just created on `conn`, in the caller's transaction
/// ([`super::tenants::bootstrap`]): the first row of the tenant's fresh audit chain, by an
/// operator command.
pub(crate) async fn create_first(
    conn: &mut AnyConnection,
    db: &Db,
    tenant_id: &str,
    slug: &str,
) -> Result<Workspace> {
    check(slug, slug)?;
    let (keyed_from, mac) = crate::audit::new_head(db.audit_key(), tenant_id);
    let mut head = Head::new(
        tenant_id,
        0,
        None,
        keyed_from,
        mac.as_deref(),
        db.audit_key(),
    )
    .map_err(Error::Corrupt)?;
    let actor = Actor::operator(tenant_id);
    let mut batch = Batch::default();
    let ws = insert(
        actor,
        (slug, slug),
        Profile::default(),
        &mut head,
        &mut batch,
    );
    head.write(&mut batch, db.dialect());
    batch.run_in(conn).await.map_err(|e| match e {
        BatchError::Database(e) => Error::from(e),
        BatchError::Mismatch(_) => Error::ChangedConcurrently {
            id: slug.to_string(),
        },
    })?;
    Ok(ws)
}

/// The batch of a change to the workspace `ws` (`sql` with its id as `$1`, the tenant as `$2`
/// and `more` after them, changing its one row), and its audit record `action`.
fn change(
    actor: Actor<'_>,
    head: &mut Head,
    ws: &Workspace,
    (sql, more): (&str, Vec<Bind>),
    action: &'static str,
) -> Batch {
    let mut batch = Batch::default();
    let mut binds = vec![
        Bind::Text(ws.id.clone()),
        Bind::Text(actor.tenant_id.to_string()),
    ];
    binds.extend(more);
    batch.push(sql, binds, Some(1));
    head.append(actor.record(
        action,
        "workspace",
        &ws.id,
        serde_json::json!({"slug": ws.slug}),
    ));
    batch
}

/// Archives a workspace: it becomes read-only.
pub async fn archive(db: &Db, actor: Actor<'_>, slug: &str) -> Result<Workspace> {
    let read = lock_workspace(actor.tenant_id, slug);
    write(db, actor, slug, read, |mut head, row| {
        let (mut ws, _) = locked(row)?.ok_or_else(|| Error::WorkspaceNotFound {
            slug: slug.to_string(),
        })?;
        if ws.archived {
            return Ok(Outcome::Unchanged(ws));
        }
        let batch = change(
            actor,
            &mut head,
            &ws,
            (
                "UPDATE workspaces SET archived = 1, archived_at = $3, updated_at = $3 WHERE id = $1 AND tenant_id = $2 AND archived = 0",
                vec![Bind::Text(now())],
            ),
            "workspace.archive",
        );
        ws.archived = true;
        Ok(Outcome::Write(head, batch, ws))
    })
    .await
}

/// Deletes an empty workspace (refused while it holds contexts).
pub async fn delete(db: &Db, actor: Actor<'_>, slug: &str) -> Result<()> {
    let read = lock_workspace(actor.tenant_id, slug);
    write(db, actor, slug, read, |mut head, row| {
        let (ws, contexts) = locked(row)?.ok_or_else(|| Error::WorkspaceNotFound {
            slug: slug.to_string(),
        })?;
        if contexts > 0 {
            return Err(Error::WorkspaceNotEmpty {
                slug: slug.to_string(),
                contexts,
            });
        }
        let batch = change(
            actor,
            &mut head,
            &ws,
            (
                "DELETE FROM workspaces WHERE id = $1 AND tenant_id = $2",
                vec![],
            ),
            "workspace.delete",
        );
        Ok(Outcome::Write(head, batch, ()))
    })
    .await
}
