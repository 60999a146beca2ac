//! The data operations behind the API, one function per operation, always scoped to a tenant.
//!
//! Every query names `tenant_id`, so a key never sees or changes another tenant's rows whatever
//! ids it guesses (another tenant's row is simply "not found"). Every write runs in one
//! transaction that first locks the audit chain head ([`Chain::lock`]), checks what the contract
//! says (archived workspace, `If-Match` version, `ifAbsent`, quota) in SQL inside that
//! transaction, and appends its audit rows before committing: a change and its record are
//! never apart.

use sqlx::any::AnyRow;
use sqlx::{AnyConnection, Row};

use crate::audit::{Chain, Record};
use crate::db::{Db, WriteTx};
use crate::error::ApiError;
use crate::model::{
    Context, ContextInput, ContextSummary, MAX_BULK_ITEMS, MAX_CONTENT_BYTES,
    MAX_EXTERNAL_ID_BYTES, MAX_PAGE, Plan, UpsertResult, Workspace, new_id, now, valid_slug,
};

type Result<T> = std::result::Result<T, ApiError>;

/// Who is acting: the tenant, and the key (recorded in the audit log).
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The tenant.
    pub tenant_id: &'a str,
    /// The API key, if the change came through the API.
    pub key_id: Option<&'a str>,
}

impl<'a> Actor<'a> {
    fn record(
        &self,
        action: &'a str,
        entity_type: &'a str,
        entity_id: &'a str,
        detail: serde_json::Value,
    ) -> Record<'a> {
        Record {
            tenant_id: self.tenant_id,
            api_key_id: self.key_id,
            action,
            entity_type,
            entity_id,
            detail: detail.to_string(),
        }
    }
}

async fn begin(db: &Db) -> Result<(WriteTx, Chain)> {
    let mut tx = db.begin_write().await?;
    let chain = Chain::lock(&mut tx).await?;
    Ok((tx, chain))
}

async fn commit(mut tx: WriteTx, chain: Chain) -> Result<()> {
    chain.finish(&mut tx).await?;
    tx.commit().await?;
    Ok(())
}

fn workspace_from_row(row: &AnyRow) -> Result<Workspace> {
    Ok(Workspace {
        id: row.try_get("id")?,
        slug: row.try_get("slug")?,
        name: row.try_get("name")?,
        archived: row.try_get::<i64, _>("archived")? != 0,
        created_at: row.try_get("created_at")?,
    })
}

fn tags_from(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

fn context_from_row(row: &AnyRow) -> Result<Context> {
    Ok(Context {
        id: row.try_get("id")?,
        external_id: row.try_get("external_id")?,
        workspace: row.try_get("workspace")?,
        kind: row.try_get("type")?,
        title: row.try_get("title")?,
        content: row.try_get("content")?,
        tags: tags_from(&row.try_get::<String, _>("tags")?),
        version: row.try_get("version")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
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
        size_bytes: row.try_get("size_bytes")?,
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

// ---------------------------------------------------------------------------------------------
// Workspaces

/// Every workspace of the tenant, archived ones included, by slug.
pub async fn list_workspaces(db: &Db, tenant_id: &str) -> Result<Vec<Workspace>> {
    let rows = sqlx::query(
        "SELECT id, slug, name, archived, created_at FROM workspaces WHERE tenant_id = $1 ORDER BY slug",
    )
    .bind(tenant_id.to_string())
    .fetch_all(db.pool())
    .await?;
    rows.iter().map(workspace_from_row).collect()
}

async fn workspace_in_tx(tx: &mut AnyConnection, tenant_id: &str, slug: &str) -> Result<Workspace> {
    let row = sqlx::query(
        "SELECT id, slug, name, archived, created_at FROM workspaces WHERE tenant_id = $1 AND slug = $2",
    )
    .bind(tenant_id.to_string())
    .bind(slug.to_string())
    .fetch_optional(&mut *tx)
    .await?
    .ok_or_else(|| ApiError::not_found(format!("workspace {slug:?} does not exist")))?;
    workspace_from_row(&row)
}

/// Creates a workspace (409 if the slug exists).
pub async fn create_workspace(
    db: &Db,
    actor: Actor<'_>,
    slug: &str,
    name: &str,
) -> Result<Workspace> {
    if !valid_slug(slug) {
        return Err(ApiError::validation(format!(
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
        return Err(ApiError::conflict(format!(
            "workspace {slug:?} already exists"
        )));
    }
    let ws = Workspace {
        id: new_id("ws"),
        slug: slug.to_string(),
        name: if name.is_empty() {
            slug.to_string()
        } else {
            name.to_string()
        },
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
pub async fn archive_workspace(db: &Db, actor: Actor<'_>, slug: &str) -> Result<Workspace> {
    let (mut tx, mut chain) = begin(db).await?;
    let mut ws = workspace_in_tx(&mut tx, actor.tenant_id, slug).await?;
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

/// Deletes an empty workspace (409 while it holds contexts).
pub async fn delete_workspace(db: &Db, actor: Actor<'_>, slug: &str) -> Result<()> {
    let (mut tx, mut chain) = begin(db).await?;
    let ws = workspace_in_tx(&mut tx, actor.tenant_id, slug).await?;
    let count: i64 = sqlx::query(
        "SELECT COUNT(*) AS n FROM contexts WHERE tenant_id = $1 AND workspace_id = $2",
    )
    .bind(actor.tenant_id.to_string())
    .bind(ws.id.clone())
    .fetch_one(&mut *tx)
    .await?
    .try_get("n")?;
    if count > 0 {
        return Err(ApiError::conflict(format!(
            "workspace {slug:?} still holds {count} contexts; delete them first"
        )));
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

// ---------------------------------------------------------------------------------------------
// Contexts: reads

const CONTEXT_COLUMNS: &str = "c.id, c.external_id, w.slug AS workspace, c.type, c.title, c.content, c.tags, c.version, c.created_at, c.updated_at";

/// A context by external id.
pub async fn get_by_external(
    db: &Db,
    tenant_id: &str,
    external_id: &str,
) -> Result<Option<Context>> {
    let row = sqlx::query(
        "SELECT c.id, c.external_id, w.slug AS workspace, c.type, c.title, c.content, c.tags, c.version, c.created_at, c.updated_at \
         FROM contexts c JOIN workspaces w ON w.id = c.workspace_id WHERE c.tenant_id = $1 AND c.external_id = $2",
    )
    .bind(tenant_id.to_string())
    .bind(external_id.to_string())
    .fetch_optional(db.pool())
    .await?;
    row.as_ref().map(context_from_row).transpose()
}

/// A context by id.
pub async fn get_by_id(db: &Db, tenant_id: &str, id: &str) -> Result<Option<Context>> {
    let row = sqlx::query(
        "SELECT c.id, c.external_id, w.slug AS workspace, c.type, c.title, c.content, c.tags, c.version, c.created_at, c.updated_at \
         FROM contexts c JOIN workspaces w ON w.id = c.workspace_id WHERE c.tenant_id = $1 AND c.id = $2",
    )
    .bind(tenant_id.to_string())
    .bind(id.to_string())
    .fetch_optional(db.pool())
    .await?;
    row.as_ref().map(context_from_row).transpose()
}

/// Filters and page of `GET /api/contexts`.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Workspace slug.
    pub workspace: Option<String>,
    /// Only contexts with this tag.
    pub tag: Option<String>,
    /// Only external ids starting with this (extension).
    pub external_id_prefix: Option<String>,
    /// Page size (1..=500).
    pub limit: i64,
    /// Start after this external id.
    pub after: Option<String>,
}

/// A page of summaries ordered by external id, and the last external id if more follow.
pub async fn list_contexts(
    db: &Db,
    tenant_id: &str,
    q: &ListQuery,
) -> Result<(Vec<ContextSummary>, Option<String>)> {
    enum Bind {
        S(String),
        I(i64),
    }
    let mut sql = String::from(
        "SELECT c.id, c.external_id, w.slug AS workspace, c.type, c.title, c.tags, c.version, c.size_bytes, c.created_at, c.updated_at \
         FROM contexts c JOIN workspaces w ON w.id = c.workspace_id WHERE c.tenant_id = $1",
    );
    let mut binds = vec![Bind::S(tenant_id.to_string())];
    let mut push = |sql: &mut String, fragment: &str, b: Bind| {
        binds.push(b);
        sql.push_str(&fragment.replace("$?", &format!("${}", binds.len())));
    };
    if let Some(slug) = &q.workspace {
        let row = sqlx::query("SELECT id FROM workspaces WHERE tenant_id = $1 AND slug = $2")
            .bind(tenant_id.to_string())
            .bind(slug.clone())
            .fetch_optional(db.pool())
            .await?
            .ok_or_else(|| ApiError::not_found(format!("workspace {slug:?} does not exist")))?;
        push(
            &mut sql,
            " AND c.workspace_id = $?",
            Bind::S(row.try_get("id")?),
        );
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
// Contexts: writes

fn check_content(content: &str) -> Result<()> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(ApiError::too_large(format!(
            "content is {} bytes; the limit is {MAX_CONTENT_BYTES} bytes (1 MiB)",
            content.len()
        )));
    }
    Ok(())
}

fn check_tags(tags: &[String]) -> Result<()> {
    if tags.len() > 32 || tags.iter().any(|t| t.is_empty() || t.len() > 64) {
        return Err(ApiError::validation("tags: at most 32, each 1 to 64 bytes"));
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
    let mut seen = std::collections::HashSet::new();
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
    plan.parse().map_err(|_| ApiError::internal())
}

/// `POST /api/contexts/bulk-upsert`: all or nothing.
pub async fn bulk_upsert(
    db: &Db,
    actor: Actor<'_>,
    items: &[ContextInput],
) -> Result<Vec<UpsertResult>> {
    if items.is_empty() || items.len() > MAX_BULK_ITEMS {
        return Err(ApiError::validation(format!(
            "contexts: give 1 to {MAX_BULK_ITEMS} items (got {})",
            items.len()
        )));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        if item.external_id.is_empty() || item.external_id.len() > MAX_EXTERNAL_ID_BYTES {
            return Err(ApiError::validation(format!(
                "contexts[{i}].externalId: 1 to {MAX_EXTERNAL_ID_BYTES} bytes"
            )));
        }
        if item.kind.is_empty() {
            return Err(ApiError::validation(format!(
                "contexts[{i}].type is required"
            )));
        }
        if !seen.insert(item.external_id.as_str()) {
            return Err(ApiError::validation(format!(
                "contexts[{i}].externalId {:?} appears twice in one request",
                item.external_id
            )));
        }
        check_content(&item.content)?;
        if let Some(tags) = &item.tags {
            check_tags(tags)?;
        }
    }

    let (mut tx, mut chain) = begin(db).await?;
    let mut workspaces: std::collections::HashMap<&str, Workspace> = Default::default();
    for item in items {
        if !workspaces.contains_key(item.workspace.as_str()) {
            let ws = workspace_in_tx(&mut tx, actor.tenant_id, &item.workspace).await?;
            if ws.archived {
                return Err(ApiError::conflict(format!(
                    "workspace {:?} is archived (read-only)",
                    ws.slug
                )));
            }
            workspaces.insert(&item.workspace, ws);
        }
    }

    let mut results = Vec::with_capacity(items.len());
    let mut creates = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let ws = &workspaces[item.workspace.as_str()];
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
            return Err(ApiError::conflict(format!(
                "externalId {:?} already exists",
                item.external_id
            )));
        }
        let id: String = row.try_get("id")?;
        let workspace_id: String = row.try_get("workspace_id")?;
        if workspace_id != ws.id {
            return Err(ApiError::conflict(format!(
                "externalId {:?} already exists in another workspace",
                item.external_id
            )));
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
            .bind(serde_json::to_string(&tags).unwrap_or_else(|_| "[]".into()))
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
                return Err(ApiError::quota(format!(
                    "plan {} allows {cap} contexts; the tenant has {count} and this request would create {}",
                    plan.as_str(),
                    creates.len()
                )));
            }
        }
    }
    for i in creates {
        let item = &items[i];
        let ws = &workspaces[item.workspace.as_str()];
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
        .bind(serde_json::to_string(&tags).unwrap_or_else(|_| "[]".into()))
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
    .ok_or_else(|| ApiError::not_found(format!("context {id:?} does not exist")))?;
    if row.try_get::<i64, _>("archived")? != 0 {
        return Err(ApiError::conflict(format!(
            "workspace {:?} is archived (read-only)",
            row.try_get::<String, _>("slug")?
        )));
    }
    let version: i64 = row.try_get("version")?;
    if let Some(want) = if_match
        && want != version
    {
        return Err(ApiError::precondition(format!(
            "context {id:?} is at version {version}, not {want}"
        )));
    }
    Ok((version, row.try_get("external_id")?))
}

/// `PUT /api/contexts/:id`.
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
        return Err(ApiError::precondition(format!(
            "context {id:?} changed concurrently"
        )));
    }
    if let Some(tags) = &tags {
        sqlx::query("UPDATE contexts SET tags = $1 WHERE id = $2 AND tenant_id = $3")
            .bind(serde_json::to_string(tags).unwrap_or_else(|_| "[]".into()))
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
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {CONTEXT_COLUMNS} FROM contexts c JOIN workspaces w ON w.id = c.workspace_id WHERE c.id = $1 AND c.tenant_id = $2"
    )))
    .bind(id.to_string())
    .bind(actor.tenant_id.to_string())
    .fetch_one(&mut *tx)
    .await?;
    let context = context_from_row(&row)?;
    commit(tx, chain).await?;
    Ok(context)
}

/// `DELETE /api/contexts/:id`.
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
        return Err(ApiError::precondition(format!(
            "context {id:?} changed concurrently"
        )));
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

/// Bounds for `limit`.
pub fn page_limit(limit: Option<&str>) -> Result<i64> {
    match limit {
        None | Some("") => Ok(MAX_PAGE),
        Some(s) => match s.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(n.min(MAX_PAGE)),
            _ => Err(ApiError::bad_request(format!(
                "limit must be an integer from 1 to {MAX_PAGE}, got {s:?}"
            ))),
        },
    }
}
