//! Contexts: read one, list a page, bulk upsert, update, delete (each change audited).

use std::collections::{HashMap, HashSet};

use contextq_api::limits::{
    MAX_BULK_ITEMS, MAX_CONTENT_BYTES, MAX_EXTERNAL_ID_BYTES, MAX_PAGE, MAX_TAG_BYTES, MAX_TAGS,
};
use contextq_api::{Context, ContextInput, ContextSummary, Plan, UpsertResult, Workspace};
use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use super::{Actor, Error, Result, begin, commit, new_id, now, tags_from, tags_text, workspaces};
use crate::db::Db;

/// The columns of a summary (a context without its content), in one place; the joins give the
/// workspace's slug.
macro_rules! summary_columns {
    () => {
        "c.id, c.external_id, w.slug AS workspace, c.type, c.title, c.tags, c.version, c.size_bytes, c.created_at, c.updated_at"
    };
}

/// `FROM` with the join every read of contexts uses.
macro_rules! from_contexts {
    () => {
        " FROM contexts c JOIN workspaces w ON w.id = c.workspace_id "
    };
}

fn summary_from_row(row: &AnyRow) -> Result<ContextSummary> {
    Ok(ContextSummary {
        id: row.try_get("id")?,
        external_id: row.try_get("external_id")?,
        workspace: row.try_get("workspace")?,
        kind: row.try_get("type")?,
        title: row.try_get("title")?,
        tags: tags_from(&row.try_get::<String, _>("tags")?),
        version: row.try_get("version")?,
        size_bytes: Some(row.try_get::<i64, _>("size_bytes")?.max(0) as u64),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn context_from_row(row: &AnyRow) -> Result<Context> {
    let s = summary_from_row(row)?;
    Ok(Context {
        id: s.id,
        external_id: s.external_id,
        workspace: s.workspace,
        kind: s.kind,
        title: s.title,
        content: row.try_get("content")?,
        tags: s.tags,
        version: s.version,
        created_at: s.created_at,
        updated_at: s.updated_at,
    })
}

// ---------------------------------------------------------------------------------------------
// Reads

/// A context by external id.
pub async fn get_by_external(
    db: &Db,
    tenant_id: &str,
    external_id: &str,
) -> Result<Option<Context>> {
    let row = sqlx::query(concat!(
        "SELECT ",
        summary_columns!(),
        ", c.content",
        from_contexts!(),
        "WHERE c.tenant_id = $1 AND c.external_id = $2"
    ))
    .bind(tenant_id.to_string())
    .bind(external_id.to_string())
    .fetch_optional(db.pool())
    .await?;
    row.as_ref().map(context_from_row).transpose()
}

/// A context by id.
pub async fn get(db: &Db, tenant_id: &str, id: &str) -> Result<Option<Context>> {
    get_in(&mut *db.pool().acquire().await?, tenant_id, id).await
}

async fn get_in(tx: &mut AnyConnection, tenant_id: &str, id: &str) -> Result<Option<Context>> {
    let row = sqlx::query(concat!(
        "SELECT ",
        summary_columns!(),
        ", c.content",
        from_contexts!(),
        "WHERE c.tenant_id = $1 AND c.id = $2"
    ))
    .bind(tenant_id.to_string())
    .bind(id.to_string())
    .fetch_optional(&mut *tx)
    .await?;
    row.as_ref().map(context_from_row).transpose()
}

/// Filters and page of `GET /api/contexts`.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only this workspace (by slug).
    pub workspace: Option<String>,
    /// Only contexts with this tag.
    pub tag: Option<String>,
    /// Only external ids starting with this (extension).
    pub external_id_prefix: Option<String>,
    /// Page size (1 to 500; see [`page_limit`]).
    pub limit: i64,
    /// Start after this external id (the decoded cursor).
    pub after: Option<String>,
}

/// `limit=` of `GET /api/contexts`: 500 when absent, at most 500.
pub fn page_limit(limit: Option<&str>) -> Result<i64> {
    match limit {
        None | Some("") => Ok(i64::from(MAX_PAGE)),
        Some(s) => match s.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(n.min(i64::from(MAX_PAGE))),
            _ => Err(Error::BadParameter(format!(
                "limit must be an integer from 1 to {MAX_PAGE}, got {s:?}"
            ))),
        },
    }
}

/// A page of summaries ordered by external id, and the last external id if more follow.
pub async fn list(
    db: &Db,
    tenant_id: &str,
    q: &ListQuery,
) -> Result<(Vec<ContextSummary>, Option<String>)> {
    enum Bind {
        S(String),
        I(i64),
    }
    let mut sql = String::from(concat!(
        "SELECT ",
        summary_columns!(),
        from_contexts!(),
        "WHERE c.tenant_id = $1"
    ));
    let mut binds = vec![Bind::S(tenant_id.to_string())];
    let mut push = |sql: &mut String, fragment: &str, b: Bind| {
        binds.push(b);
        sql.push_str(&fragment.replace("$?", &format!("${}", binds.len())));
    };
    if let Some(slug) = &q.workspace {
        let id = workspaces::id_of(db, tenant_id, slug).await?;
        push(&mut sql, " AND c.workspace_id = $?", Bind::S(id));
    }
    // One lower bound only: the later of the prefix and the cursor. (Given both, SQLite seeks
    // the index by one of them and may pick the prefix, rescanning every earlier page.)
    // Byte order (COLLATE "C" in PostgreSQL, BINARY in SQLite): every string in
    // [prefix, prefix + U+10FFFF) starts with prefix, and the range is an index range.
    let prefix = q.external_id_prefix.as_ref().filter(|p| !p.is_empty());
    match (prefix, &q.after) {
        (Some(p), Some(after)) if after >= p => {
            push(&mut sql, " AND c.external_id > $?", Bind::S(after.clone()))
        }
        (Some(p), _) => push(&mut sql, " AND c.external_id >= $?", Bind::S(p.clone())),
        (None, Some(after)) => push(&mut sql, " AND c.external_id > $?", Bind::S(after.clone())),
        (None, None) => {}
    }
    if let Some(p) = prefix {
        push(
            &mut sql,
            " AND c.external_id < $?",
            Bind::S(format!("{p}\u{10FFFF}")),
        );
    }
    if let Some(tag) = &q.tag {
        push(
            &mut sql,
            " AND EXISTS (SELECT 1 FROM context_tags t WHERE t.context_id = c.id AND t.tag = $?)",
            Bind::S(tag.clone()),
        );
    }
    push(
        &mut sql,
        " ORDER BY c.external_id LIMIT $?",
        Bind::I(q.limit + 1),
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for b in binds {
        query = match b {
            Bind::S(s) => query.bind(s),
            Bind::I(i) => query.bind(i),
        };
    }
    let rows = query.fetch_all(db.pool()).await?;
    let mut items: Vec<ContextSummary> =
        rows.iter().map(summary_from_row).collect::<Result<_>>()?;
    let next = if items.len() as i64 > q.limit {
        items.truncate(q.limit as usize);
        items.last().map(|c| c.external_id.clone())
    } else {
        None
    };
    Ok((items, next))
}

// ---------------------------------------------------------------------------------------------
// Writes

fn check_content(content: &str) -> Result<()> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(Error::TooLarge {
            field: "content",
            bytes: content.len(),
            limit: MAX_CONTENT_BYTES,
        });
    }
    Ok(())
}

fn check_tags(tags: &[String]) -> Result<()> {
    if tags.len() > MAX_TAGS || tags.iter().any(|t| t.is_empty() || t.len() > MAX_TAG_BYTES) {
        return Err(Error::Invalid(format!(
            "tags: at most {MAX_TAGS}, each 1 to {MAX_TAG_BYTES} bytes"
        )));
    }
    Ok(())
}

async fn replace_tags(
    tx: &mut AnyConnection,
    tenant_id: &str,
    context_id: &str,
    tags: &[String],
) -> Result<()> {
    sqlx::query("DELETE FROM context_tags WHERE context_id = $1")
        .bind(context_id.to_string())
        .execute(&mut *tx)
        .await?;
    let mut seen = HashSet::new();
    for tag in tags.iter().filter(|t| seen.insert(t.as_str())) {
        sqlx::query("INSERT INTO context_tags (context_id, tenant_id, tag) VALUES ($1, $2, $3)")
            .bind(context_id.to_string())
            .bind(tenant_id.to_string())
            .bind(tag.clone())
            .execute(&mut *tx)
            .await?;
    }
    Ok(())
}

async fn plan_of(tx: &mut AnyConnection, tenant_id: &str) -> Result<Plan> {
    let plan: String = sqlx::query("SELECT plan FROM tenants WHERE id = $1")
        .bind(tenant_id.to_string())
        .fetch_one(&mut *tx)
        .await?
        .try_get("plan")?;
    plan.parse()
        .map_err(|_| Error::Corrupt(format!("tenant {tenant_id} has plan {plan:?}")))
}

/// Checks every item of a bulk upsert before anything is written.
fn check_items(items: &[ContextInput]) -> Result<()> {
    if items.is_empty() || items.len() > MAX_BULK_ITEMS {
        return Err(Error::Invalid(format!(
            "contexts: give 1 to {MAX_BULK_ITEMS} items (got {})",
            items.len()
        )));
    }
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        if item.external_id.is_empty() || item.external_id.len() > MAX_EXTERNAL_ID_BYTES {
            return Err(Error::Invalid(format!(
                "contexts[{i}].externalId: 1 to {MAX_EXTERNAL_ID_BYTES} bytes"
            )));
        }
        if item.kind.is_empty() {
            return Err(Error::Invalid(format!("contexts[{i}].type is required")));
        }
        if !seen.insert(item.external_id.as_str()) {
            return Err(Error::Invalid(format!(
                "contexts[{i}].externalId {:?} appears twice in one request",
                item.external_id
            )));
        }
        check_content(&item.content)?;
        if let Some(tags) = &item.tags {
            check_tags(tags)?;
        }
    }
    Ok(())
}

/// `POST /api/contexts/bulk-upsert`: all or nothing.
pub async fn bulk_upsert(
    db: &Db,
    actor: Actor<'_>,
    items: &[ContextInput],
) -> Result<Vec<UpsertResult>> {
    check_items(items)?;
    let (mut tx, mut chain) = begin(db).await?;
    let mut targets: HashMap<&str, Workspace> = HashMap::new();
    for item in items {
        if !targets.contains_key(item.workspace.as_str()) {
            let ws = workspaces::get_in(&mut tx, actor.tenant_id, &item.workspace).await?;
            if ws.archived {
                return Err(Error::WorkspaceArchived { slug: ws.slug });
            }
            targets.insert(&item.workspace, ws);
        }
    }

    let mut results = Vec::with_capacity(items.len());
    let mut creates = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ws = &targets[item.workspace.as_str()];
        let existing = sqlx::query(
            "SELECT id, workspace_id, type, title, content, tags, version FROM contexts WHERE tenant_id = $1 AND external_id = $2",
        )
        .bind(actor.tenant_id.to_string())
        .bind(item.external_id.clone())
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = existing else {
            creates.push(i);
            results.push(None);
            continue;
        };
        if item.if_absent {
            return Err(Error::ExternalIdExists {
                external_id: item.external_id.clone(),
            });
        }
        let id: String = row.try_get("id")?;
        let workspace_id: String = row.try_get("workspace_id")?;
        if workspace_id != ws.id {
            return Err(Error::ExternalIdInOtherWorkspace {
                external_id: item.external_id.clone(),
            });
        }
        let version: i64 = row.try_get("version")?;
        let old_tags = tags_from(&row.try_get::<String, _>("tags")?);
        let tags = item.tags.clone().unwrap_or(old_tags.clone());
        // Absent title and tags keep the stored ones (as in PUT).
        let old_title: Option<String> = row.try_get("title")?;
        let title = item.title.clone().or(old_title.clone());
        let unchanged = row.try_get::<String, _>("content")? == item.content
            && row.try_get::<String, _>("type")? == item.kind
            && title == old_title
            && tags == old_tags;
        let new_version = if unchanged {
            version
        } else {
            sqlx::query(
                "UPDATE contexts SET type = $1, title = $2, content = $3, tags = $4, size_bytes = $5, version = version + 1, updated_at = $6 \
                 WHERE id = $7 AND tenant_id = $8",
            )
            .bind(item.kind.clone())
            .bind(title)
            .bind(item.content.clone())
            .bind(tags_text(&tags))
            .bind(item.content.len() as i64)
            .bind(now())
            .bind(id.clone())
            .bind(actor.tenant_id.to_string())
            .execute(&mut *tx)
            .await?;
            if item.tags.is_some() {
                replace_tags(&mut tx, actor.tenant_id, &id, &tags).await?;
            }
            chain
                .append(
                    &mut tx,
                    actor.record(
                        "context.update",
                        "context",
                        &id,
                        serde_json::json!({"externalId": item.external_id, "version": version + 1}),
                    ),
                )
                .await?;
            version + 1
        };
        results.push(Some(UpsertResult {
            id,
            external_id: item.external_id.clone(),
            status: "updated".into(),
            version: new_version,
        }));
    }

    if !creates.is_empty() {
        let plan = plan_of(&mut tx, actor.tenant_id).await?;
        if let Some(cap) = plan.context_cap() {
            let count: i64 = sqlx::query("SELECT COUNT(*) AS n FROM contexts WHERE tenant_id = $1")
                .bind(actor.tenant_id.to_string())
                .fetch_one(&mut *tx)
                .await?
                .try_get("n")?;
            if count + creates.len() as i64 > cap {
                return Err(Error::QuotaExceeded {
                    plan,
                    cap,
                    count,
                    creating: creates.len(),
                });
            }
        }
    }
    for i in creates {
        let item = &items[i];
        let ws = &targets[item.workspace.as_str()];
        let id = new_id("ctx");
        let at = now();
        let tags = item.tags.clone().unwrap_or_default();
        sqlx::query(
            "INSERT INTO contexts (id, tenant_id, workspace_id, external_id, type, title, content, tags, size_bytes, version, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $10, $10)",
        )
        .bind(id.clone())
        .bind(actor.tenant_id.to_string())
        .bind(ws.id.clone())
        .bind(item.external_id.clone())
        .bind(item.kind.clone())
        .bind(item.title.clone())
        .bind(item.content.clone())
        .bind(tags_text(&tags))
        .bind(item.content.len() as i64)
        .bind(at)
        .execute(&mut *tx)
        .await?;
        replace_tags(&mut tx, actor.tenant_id, &id, &tags).await?;
        chain
            .append(
                &mut tx,
                actor.record(
                    "context.create",
                    "context",
                    &id,
                    serde_json::json!({"externalId": item.external_id, "version": 1}),
                ),
            )
            .await?;
        results[i] = Some(UpsertResult {
            id,
            external_id: item.external_id.clone(),
            status: "created".into(),
            version: 1,
        });
    }
    commit(tx, chain).await?;
    Ok(results.into_iter().flatten().collect())
}

/// Locks and checks a context for a change: exists, workspace writable, version matches.
/// Returns its version and external id.
async fn writable(
    tx: &mut AnyConnection,
    tenant_id: &str,
    id: &str,
    if_match: Option<i64>,
) -> Result<(i64, String)> {
    let row = sqlx::query(
        "SELECT c.version, c.external_id, w.archived, w.slug FROM contexts c JOIN workspaces w ON w.id = c.workspace_id \
         WHERE c.id = $1 AND c.tenant_id = $2",
    )
    .bind(id.to_string())
    .bind(tenant_id.to_string())
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| Error::ContextNotFound { id: id.to_string() })?;
    if row.try_get::<i64, _>("archived")? != 0 {
        return Err(Error::WorkspaceArchived {
            slug: row.try_get("slug")?,
        });
    }
    let version: i64 = row.try_get("version")?;
    if let Some(expected) = if_match
        && expected != version
    {
        return Err(Error::VersionMismatch {
            id: id.to_string(),
            stored: version,
            expected,
        });
    }
    Ok((version, row.try_get("external_id")?))
}

/// `PUT /api/contexts/:id`: new content; `title` absent keeps it, `Some(None)` clears it;
/// `tags` absent keeps them. With `if_match`, only from that version.
pub async fn update(
    db: &Db,
    actor: Actor<'_>,
    id: &str,
    content: &str,
    title: Option<Option<String>>,
    tags: Option<Vec<String>>,
    if_match: Option<i64>,
) -> Result<Context> {
    check_content(content)?;
    if let Some(tags) = &tags {
        check_tags(tags)?;
    }
    let (mut tx, mut chain) = begin(db).await?;
    let (version, external_id) = writable(&mut tx, actor.tenant_id, id, if_match).await?;
    // The version is checked again in SQL: the row changes only from the version just read.
    let changed = match &title {
        Some(title) => sqlx::query(
            "UPDATE contexts SET content = $1, size_bytes = $2, title = $3, version = version + 1, updated_at = $4 \
             WHERE id = $5 AND tenant_id = $6 AND version = $7",
        )
        .bind(content.to_string())
        .bind(content.len() as i64)
        .bind(title.clone())
        .bind(now())
        .bind(id.to_string())
        .bind(actor.tenant_id.to_string())
        .bind(version)
        .execute(&mut *tx)
        .await?,
        None => sqlx::query(
            "UPDATE contexts SET content = $1, size_bytes = $2, version = version + 1, updated_at = $3 \
             WHERE id = $4 AND tenant_id = $5 AND version = $6",
        )
        .bind(content.to_string())
        .bind(content.len() as i64)
        .bind(now())
        .bind(id.to_string())
        .bind(actor.tenant_id.to_string())
        .bind(version)
        .execute(&mut *tx)
        .await?,
    };
    if changed.rows_affected() != 1 {
        return Err(Error::ChangedConcurrently { id: id.to_string() });
    }
    if let Some(tags) = &tags {
        sqlx::query("UPDATE contexts SET tags = $1 WHERE id = $2 AND tenant_id = $3")
            .bind(tags_text(tags))
            .bind(id.to_string())
            .bind(actor.tenant_id.to_string())
            .execute(&mut *tx)
            .await?;
        replace_tags(&mut tx, actor.tenant_id, id, tags).await?;
    }
    chain
        .append(
            &mut tx,
            actor.record(
                "context.update",
                "context",
                id,
                serde_json::json!({"externalId": external_id, "version": version + 1}),
            ),
        )
        .await?;
    let context = get_in(&mut tx, actor.tenant_id, id)
        .await?
        .ok_or_else(|| Error::ContextNotFound { id: id.to_string() })?;
    commit(tx, chain).await?;
    Ok(context)
}

/// `DELETE /api/contexts/:id`; with `if_match`, only at that version.
pub async fn delete(db: &Db, actor: Actor<'_>, id: &str, if_match: Option<i64>) -> Result<()> {
    let (mut tx, mut chain) = begin(db).await?;
    let (version, external_id) = writable(&mut tx, actor.tenant_id, id, if_match).await?;
    sqlx::query("DELETE FROM context_tags WHERE context_id = $1")
        .bind(id.to_string())
        .execute(&mut *tx)
        .await?;
    let gone =
        sqlx::query("DELETE FROM contexts WHERE id = $1 AND tenant_id = $2 AND version = $3")
            .bind(id.to_string())
            .bind(actor.tenant_id.to_string())
            .bind(version)
            .execute(&mut *tx)
            .await?;
    if gone.rows_affected() != 1 {
        return Err(Error::ChangedConcurrently { id: id.to_string() });
    }
    chain
        .append(
            &mut tx,
            actor.record(
                "context.delete",
                "context",
                id,
                serde_json::json!({"externalId": external_id, "version": version}),
            ),
        )
        .await?;
    commit(tx, chain).await
}
