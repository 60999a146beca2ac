//! Workspaces: list, create, archive, delete (each change audited).

use contextq_api::{Workspace, valid_slug};
use sqlx::{AnyConnection, Row};

use super::{Actor, Error, Result, begin, commit, new_id, now, workspace_from_row};
use crate::db::Db;

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

/// The workspace `slug` of the tenant, inside a transaction.
pub(crate) async fn get_in(
    tx: &mut AnyConnection,
    tenant_id: &str,
    slug: &str,
) -> Result<Workspace> {
    let row = sqlx::query(concat!(
        "SELECT ",
        columns!(),
        " FROM workspaces WHERE tenant_id = $1 AND slug = $2"
    ))
    .bind(tenant_id.to_string())
    .bind(slug.to_string())
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| Error::WorkspaceNotFound {
        slug: slug.to_string(),
    })?;
    workspace_from_row(&row)
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

/// Creates a workspace (refused if the slug exists). An empty `name` becomes the slug.
pub async fn create(db: &Db, actor: Actor<'_>, slug: &str, name: &str) -> Result<Workspace> {
    if !valid_slug(slug) {
        return Err(Error::Invalid(format!(
            "invalid workspace slug {slug:?}: use 1 to 63 characters of a-z, 0-9 and '-', starting with a letter or digit"
        )));
    }
    let (mut tx, mut chain) = begin(db).await?;
    let exists = sqlx::query("SELECT id FROM workspaces WHERE tenant_id = $1 AND slug = $2")
        .bind(actor.tenant_id.to_string())
        .bind(slug.to_string())
        .fetch_optional(&mut *tx)
        .await?;
    if exists.is_some() {
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
    sqlx::query(
        "INSERT INTO workspaces (id, tenant_id, slug, name, archived, created_at) VALUES ($1, $2, $3, $4, 0, $5)",
    )
    .bind(ws.id.clone())
    .bind(actor.tenant_id.to_string())
    .bind(ws.slug.clone())
    .bind(ws.name.clone())
    .bind(ws.created_at.clone())
    .execute(&mut *tx)
    .await?;
    chain
        .append(
            &mut tx,
            actor.record(
                "workspace.create",
                "workspace",
                &ws.id,
                serde_json::json!({"slug": slug}),
            ),
        )
        .await?;
    commit(tx, chain).await?;
    Ok(ws)
}

/// Archives a workspace: it becomes read-only.
pub async fn archive(db: &Db, actor: Actor<'_>, slug: &str) -> Result<Workspace> {
    let (mut tx, mut chain) = begin(db).await?;
    let mut ws = get_in(&mut tx, actor.tenant_id, slug).await?;
    if !ws.archived {
        sqlx::query("UPDATE workspaces SET archived = 1 WHERE id = $1 AND tenant_id = $2")
            .bind(ws.id.clone())
            .bind(actor.tenant_id.to_string())
            .execute(&mut *tx)
            .await?;
        chain
            .append(
                &mut tx,
                actor.record(
                    "workspace.archive",
                    "workspace",
                    &ws.id,
                    serde_json::json!({"slug": slug}),
                ),
            )
            .await?;
        ws.archived = true;
    }
    commit(tx, chain).await?;
    Ok(ws)
}

/// Deletes an empty workspace (refused while it holds contexts).
pub async fn delete(db: &Db, actor: Actor<'_>, slug: &str) -> Result<()> {
    let (mut tx, mut chain) = begin(db).await?;
    let ws = get_in(&mut tx, actor.tenant_id, slug).await?;
    let count: i64 = sqlx::query(
        "SELECT COUNT(*) AS n FROM contexts WHERE tenant_id = $1 AND workspace_id = $2",
    )
    .bind(actor.tenant_id.to_string())
    .bind(ws.id.clone())
    .fetch_one(&mut *tx)
    .await?
    .try_get("n")?;
    if count > 0 {
        return Err(Error::WorkspaceNotEmpty {
            slug: slug.to_string(),
            contexts: count,
        });
    }
    sqlx::query("DELETE FROM workspaces WHERE id = $1 AND tenant_id = $2")
        .bind(ws.id.clone())
        .bind(actor.tenant_id.to_string())
        .execute(&mut *tx)
        .await?;
    chain
        .append(
            &mut tx,
            actor.record(
                "workspace.delete",
                "workspace",
                &ws.id,
                serde_json::json!({"slug": slug}),
            ),
        )
        .await?;
    commit(tx, chain).await
}
