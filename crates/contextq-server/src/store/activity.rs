//! A tenant's own activity log, read (extension `audit-log`, `GET /api/audit`): the audit rows
//! the writes of [`crate::store`] append, newest first, paged by their sequence number and
//! filtered by external id prefix (the memory path), key and action. Writing and verifying the
//! chain are [`crate::audit`]'s; this module only reads, always inside the caller's tenant.

use contextq_api::audit::{AuditEntry, AuditPage};
use sqlx::Row;

use super::Result;
use crate::db::{Backend, Bind, Db};

/// Filters and page of `GET /api/audit`.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Page size (1 to 500).
    pub limit: i64,
    /// Only rows older than this sequence number (the decoded cursor).
    pub before: Option<i64>,
    /// Only changes of contexts whose external id starts with this.
    pub external_id_prefix: Option<String>,
    /// Only changes made with this key (its id).
    pub key_id: Option<String>,
    /// Only this action (`context.update`, ...).
    pub action: Option<String>,
}

/// A page cursor of the audit log: the sequence number to continue below.
pub fn decode_cursor(cursor: &str) -> Result<i64> {
    super::history::decode_number_cursor('s', cursor)
}

/// The tenant's audit rows matching `q`, newest first.
pub async fn list(db: &Db, tenant_id: &str, q: &AuditQuery) -> Result<AuditPage> {
    let external_id = match db.backend() {
        Backend::Postgres => "((a.detail::json) ->> 'externalId') COLLATE \"C\"",
        Backend::Sqlite => "json_extract(a.detail, '$.externalId')",
    };
    let mut binds = vec![Bind::Text(tenant_id.to_string())];
    let mut sql = String::from(
        "SELECT a.seq, a.action, a.entity_type, a.entity_id, a.detail, a.api_key_id, k.key_last4, a.created_at \
         FROM activity_logs a LEFT JOIN api_keys k ON k.id = a.api_key_id WHERE a.tenant_id = $1",
    );
    let mut push = |sql: &mut String, fragment: String, bind: Bind| {
        binds.push(bind);
        sql.push_str(&fragment.replace("$?", &format!("${}", binds.len())));
    };
    if let Some(before) = q.before {
        push(&mut sql, " AND a.seq < $?".into(), Bind::Int(before));
    }
    if let Some(key) = &q.key_id {
        push(
            &mut sql,
            " AND a.api_key_id = $?".into(),
            Bind::Text(key.clone()),
        );
    }
    if let Some(action) = &q.action {
        push(
            &mut sql,
            " AND a.action = $?".into(),
            Bind::Text(action.clone()),
        );
    }
    if let Some(prefix) = q.external_id_prefix.as_ref().filter(|p| !p.is_empty()) {
        push(
            &mut sql,
            format!(" AND {external_id} >= $?"),
            Bind::Text(prefix.clone()),
        );
        push(
            &mut sql,
            format!(" AND {external_id} < $?"),
            Bind::Text(format!("{prefix}\u{10FFFF}")),
        );
    }
    push(
        &mut sql,
        " ORDER BY a.seq DESC LIMIT $?".into(),
        Bind::Int(q.limit + 1),
    );
    let rows = crate::db::bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
        .fetch_all(&mut *db.reader().await?)
        .await?;
    let mut entries = Vec::with_capacity(rows.len());
    for row in &rows {
        let detail: String = row.try_get("detail")?;
        let detail: serde_json::Value = serde_json::from_str(&detail).unwrap_or_default();
        entries.push(AuditEntry {
            seq: row.try_get("seq")?,
            action: row.try_get("action")?,
            entity_type: row.try_get("entity_type")?,
            entity_id: row.try_get("entity_id")?,
            external_id: detail["externalId"].as_str().map(str::to_string),
            slug: detail["slug"].as_str().map(str::to_string),
            version: detail["version"].as_i64(),
            key_id: row.try_get("api_key_id")?,
            key_last4: row.try_get("key_last4")?,
            created_at: row.try_get("created_at")?,
        });
    }
    let next_cursor = if entries.len() as i64 > q.limit {
        entries.truncate(q.limit as usize);
        entries.last().map(|e| format!("s{}", e.seq))
    } else {
        None
    };
    Ok(AuditPage {
        entries,
        next_cursor,
    })
}
