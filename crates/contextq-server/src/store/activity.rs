//! A tenant's own activity log, read (extension `audit-log`, `GET /api/audit`): the audit rows
//! the writes of [`crate::store`] append, newest first in the order of the tenant's chain (its
//! `tenant_seq`, which the hashes and MACs cover, never the global `seq`, which nothing covers),
//! then the tenant's rows of the frozen global chain written before per-tenant chains; only rows
//! inside a chain (`1..=` its head) are shown, so a row planted outside it never is. Paged, and
//! filtered by external id prefix (the memory path), key and action. Writing and verifying the
//! chain are [`crate::audit`]'s; this module only reads, always inside the caller's tenant.

use contextq_api::audit::{AuditEntry, AuditPage};
use sqlx::Row;

use super::Result;
use crate::db::{Bind, Db};

/// Filters and page of `GET /api/audit`.
#[derive(Debug, Clone, Default)]
pub struct AuditQuery {
    /// Page size (1 to 500).
    pub limit: i64,
    /// Only rows older than this position (the decoded cursor).
    pub before: Option<Position>,
    /// Only changes of contexts whose external id starts with this.
    pub external_id_prefix: Option<String>,
    /// Only changes made with this key (its id).
    pub key_id: Option<String>,
    /// Only this action (`context.update`, ...).
    pub action: Option<String>,
}

/// A row's place in the listing: in the tenant's chain, or in the frozen global chain (older
/// than every chain row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Position {
    /// `tenant_seq` in the tenant's chain.
    Chain(i64),
    /// `seq` in the global chain of rows written before migration 2.
    Legacy(i64),
}

/// A page cursor of the audit log: the position to continue below (`c<tenant_seq>` or
/// `s<seq>`).
pub fn decode_cursor(cursor: &str) -> Result<Position> {
    if cursor.starts_with('c') {
        super::history::decode_number_cursor('c', cursor).map(Position::Chain)
    } else {
        super::history::decode_number_cursor('s', cursor).map(Position::Legacy)
    }
}

/// The tenant's audit rows matching `q`, newest first: its chain's rows (an index range of
/// `(tenant_id, tenant_seq)`, read backwards), then, when the page has room, its rows of the
/// frozen global chain. Neither query sorts more than the page.
pub async fn list(db: &Db, tenant_id: &str, q: &AuditQuery) -> Result<AuditPage> {
    let want = q.limit + 1;
    let mut rows = Vec::new();
    if !matches!(q.before, Some(Position::Legacy(_))) {
        let before = match q.before {
            Some(Position::Chain(n)) => Some(n),
            _ => None,
        };
        rows = page(db, tenant_id, q, Chain::Tenant(before), want).await?;
    }
    if (rows.len() as i64) < want {
        let before = match q.before {
            Some(Position::Legacy(n)) => Some(n),
            _ => None,
        };
        let more = page(
            db,
            tenant_id,
            q,
            Chain::Legacy(before),
            want - rows.len() as i64,
        )
        .await?;
        rows.extend(more);
    }
    let mut entries = Vec::with_capacity(rows.len());
    let mut positions = Vec::with_capacity(rows.len());
    for row in &rows {
        positions.push(match row.try_get::<Option<i64>, _>("tenant_seq")? {
            Some(n) => Position::Chain(n),
            None => Position::Legacy(row.try_get("seq")?),
        });
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
            key_name: row.try_get("key_name")?,
            restored_from: detail["restoredFrom"].as_i64(),
            created_at: row.try_get("created_at")?,
        });
    }
    let next_cursor = if entries.len() as i64 > q.limit {
        entries.truncate(q.limit as usize);
        positions.get(entries.len() - 1).map(|p| match p {
            Position::Chain(n) => format!("c{n}"),
            Position::Legacy(n) => format!("s{n}"),
        })
    } else {
        None
    };
    Ok(AuditPage {
        entries,
        next_cursor,
    })
}

/// Which chain a page query reads, and below which position.
enum Chain {
    /// The tenant's chain, below this `tenant_seq` when given.
    Tenant(Option<i64>),
    /// The frozen global chain's rows of the tenant, below this `seq` when given.
    Legacy(Option<i64>),
}

/// One query of [`list`]: up to `limit` rows of one chain, newest first, within the chain's
/// head (a row planted outside it is never shown), filtered as `q` says.
async fn page(
    db: &Db,
    tenant_id: &str,
    q: &AuditQuery,
    chain: Chain,
    limit: i64,
) -> Result<Vec<sqlx::any::AnyRow>> {
    let external_id = db.dialect().detail_external_id();
    let mut binds = vec![Bind::Text(tenant_id.to_string())];
    let mut sql = String::from(
        "SELECT a.seq, a.tenant_seq, a.action, a.entity_type, a.entity_id, a.detail, a.api_key_id, k.key_last4, k.name AS key_name, a.created_at \
         FROM activity_logs a LEFT JOIN api_keys k ON k.id = a.api_key_id AND k.tenant_id = a.tenant_id WHERE a.tenant_id = $1",
    );
    let mut push = |sql: &mut String, fragment: String, bind: Option<Bind>| {
        if let Some(bind) = bind {
            binds.push(bind);
        }
        sql.push_str(&fragment.replace("$?", &format!("${}", binds.len())));
    };
    // Each chain: the rows within its head, the column that orders it, the page's cursor.
    let (within, column, before) = match chain {
        Chain::Tenant(before) => (
            " AND a.tenant_seq >= 1 AND a.tenant_seq <= (SELECT h.seq FROM audit_heads h WHERE h.tenant_id = $1)",
            "a.tenant_seq",
            before,
        ),
        Chain::Legacy(before) => (
            " AND a.tenant_seq IS NULL AND a.seq <= COALESCE((SELECT g.seq FROM audit_head g WHERE g.id = 1), 0)",
            "a.seq",
            before,
        ),
    };
    push(&mut sql, within.into(), None);
    if let Some(n) = before {
        push(&mut sql, format!(" AND {column} < $?"), Some(Bind::Int(n)));
    }
    if let Some(key) = &q.key_id {
        push(
            &mut sql,
            " AND a.api_key_id = $?".into(),
            Some(Bind::Text(key.clone())),
        );
    }
    if let Some(action) = &q.action {
        push(
            &mut sql,
            " AND a.action = $?".into(),
            Some(Bind::Text(action.clone())),
        );
    }
    if let Some(prefix) = q.external_id_prefix.as_ref().filter(|p| !p.is_empty()) {
        push(
            &mut sql,
            format!(" AND {external_id} >= $?"),
            Some(Bind::Text(prefix.clone())),
        );
        push(
            &mut sql,
            format!(" AND {external_id} < $?"),
            Some(Bind::Text(format!("{prefix}\u{10FFFF}"))),
        );
    }
    push(
        &mut sql,
        format!(" ORDER BY {column} DESC LIMIT $?"),
        Some(Bind::Int(limit)),
    );
    Ok(
        crate::db::bind_all(sqlx::query(sqlx::AssertSqlSafe(sql)), binds)
            .fetch_all(&mut *db.reader().await?)
            .await?,
    )
}
