//! Workspaces: list, create, archive, delete (each change audited).

use contextq_api::{Workspace, valid_slug};
use sqlx::Row;

use super::{
    Actor, Error, Result, finish, head_from, lock_head, new_id, no_head, now, workspace_from_row,
};
use crate::db::{Batch, Bind, Db, WriteTx};

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
    .fetch_all(db.pool())
    .await?;
    rows.iter().map(workspace_from_row).collect()
}

/// The id of the workspace `slug` of the tenant.
pub(crate) async fn id_of(db: &Db, tenant_id: &str, slug: &str) -> Result<String> {
    let row = sqlx::query("SELECT id FROM workspaces WHERE tenant_id = $1 AND slug = $2")
        .bind(tenant_id.to_string())
        .bind(slug.to_string())
        .fetch_optional(db.pool())
        .await?
        .ok_or_else(|| Error::WorkspaceNotFound {
            slug: slug.to_string(),
        })?;
    Ok(row.try_get("id")?)
}

/// Round trip 2 of a workspace write: the head lock, the workspace `slug`, and how many
/// contexts it holds.
async fn lock_workspace(
    tx: &mut WriteTx,
    db: &Db,
    tenant_id: &str,
    slug: &str,
) -> Result<(crate::audit::Head, Option<(Workspace, i64)>)> {
    let sql = format!(
        concat!(
            "SELECT h.seq AS head_seq, h.last_hash AS head_hash, w.id, w.slug, w.name, w.archived, w.created_at, ",
            "(SELECT COUNT(*) FROM contexts c WHERE c.tenant_id = h.tenant_id AND c.workspace_id = w.id) AS contexts ",
            "FROM audit_heads h LEFT JOIN workspaces w ON w.tenant_id = h.tenant_id AND w.slug = $2 ",
            "WHERE h.tenant_id = $1{}"
        ),
        lock_head(db)
    );
    let row = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(tenant_id.to_string())
        .bind(slug.to_string())
        .fetch_optional(&mut **tx)
        .await?
        .ok_or_else(|| no_head(tenant_id))?;
    let head = head_from(&row, tenant_id)?;
    let ws = match row.try_get::<Option<String>, _>("id")? {
        Some(_) => Some((workspace_from_row(&row)?, row.try_get("contexts")?)),
        None => None,
    };
    Ok((head, ws))
}

/// Creates a workspace (refused if the slug exists). An empty `name` becomes the slug.
pub async fn create(db: &Db, actor: Actor<'_>, slug: &str, name: &str) -> Result<Workspace> {
    if !valid_slug(slug) {
        return Err(Error::Invalid(format!(
            "invalid workspace slug {slug:?}: use 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit"
        )));
    }
    let mut tx = db.begin_write().await?;
    let (mut head, existing) = lock_workspace(&mut tx, db, actor.tenant_id, slug).await?;
    if existing.is_some() {
        return Err(Error::WorkspaceExists {
            slug: slug.to_string(),
        });
    }
    let ws = Workspace {
        id: new_id("ws"),
        slug: slug.to_string(),
        name: if name.is_empty() { slug } else { name }.to_string(),
        archived: false,
        created_at: now(),
    };
    let mut batch = Batch::default();
    batch.push(
        "INSERT INTO workspaces (id, tenant_id, slug, name, archived, created_at) VALUES ($1, $2, $3, $4, 0, $5)",
        vec![
            Bind::Text(ws.id.clone()),
            Bind::Text(actor.tenant_id.to_string()),
            Bind::Text(ws.slug.clone()),
            Bind::Text(ws.name.clone()),
            Bind::Text(ws.created_at.clone()),
        ],
        Some(1),
    );
    head.append(actor.record(
        "workspace.create",
        "workspace",
        &ws.id,
        serde_json::json!({"slug": slug}),
    ));
    finish(tx, head, batch, db, slug).await?;
    Ok(ws)
}

/// Archives a workspace: it becomes read-only.
pub async fn archive(db: &Db, actor: Actor<'_>, slug: &str) -> Result<Workspace> {
    let mut tx = db.begin_write().await?;
    let (mut head, existing) = lock_workspace(&mut tx, db, actor.tenant_id, slug).await?;
    let (mut ws, _) = existing.ok_or_else(|| Error::WorkspaceNotFound {
        slug: slug.to_string(),
    })?;
    if ws.archived {
        return Ok(ws);
    }
    let mut batch = Batch::default();
    batch.push(
        "UPDATE workspaces SET archived = 1 WHERE id = $1 AND tenant_id = $2 AND archived = 0",
        vec![
            Bind::Text(ws.id.clone()),
            Bind::Text(actor.tenant_id.to_string()),
        ],
        Some(1),
    );
    head.append(actor.record(
        "workspace.archive",
        "workspace",
        &ws.id,
        serde_json::json!({"slug": slug}),
    ));
    finish(tx, head, batch, db, slug).await?;
    ws.archived = true;
    Ok(ws)
}

/// Deletes an empty workspace (refused while it holds contexts).
pub async fn delete(db: &Db, actor: Actor<'_>, slug: &str) -> Result<()> {
    let mut tx = db.begin_write().await?;
    let (mut head, existing) = lock_workspace(&mut tx, db, actor.tenant_id, slug).await?;
    let (ws, contexts) = existing.ok_or_else(|| Error::WorkspaceNotFound {
        slug: slug.to_string(),
    })?;
    if contexts > 0 {
        return Err(Error::WorkspaceNotEmpty {
            slug: slug.to_string(),
            contexts,
        });
    }
    let mut batch = Batch::default();
    batch.push(
        "DELETE FROM workspaces WHERE id = $1 AND tenant_id = $2",
        vec![
            Bind::Text(ws.id.clone()),
            Bind::Text(actor.tenant_id.to_string()),
        ],
        Some(1),
    );
    head.append(actor.record(
        "workspace.delete",
        "workspace",
        &ws.id,
        serde_json::json!({"slug": slug}),
    ));
    finish(tx, head, batch, db, slug).await
}
