//! The activity log: one hash chain per tenant, appended in the same transaction as the change.
//!
//! Every write transaction first locks its tenant's head row in `audit_heads` (a statement of its
//! own just before the read of what the write needs, in the same round trip, see
//! [`crate::store`]): writes of one tenant are serialised, writes of different tenants never wait
//! for each other. Each change appends a row
//! numbered `tenant_seq` (1, 2, ... per tenant) whose `hash` is [`chain_hash`] of the previous
//! row's hash and the row's canonical fields, and moves the head to it.
//!
//! Rows written before per-tenant chains (migration 2) form one global chain in `seq` order
//! ([`legacy_hash`], `tenant_seq` NULL), frozen with its head in `audit_head`; [`verify`] checks
//! it too, so they stay verifiable. [`verify`] names the first row that was edited, removed or
//! relinked, chain by chain.

use sha2::{Digest, Sha256};
use sqlx::Row;

use crate::db::{Backend, Batch, Bind, Db};

type Result<T> = std::result::Result<T, sqlx::Error>;

/// One change to record.
#[derive(Debug, Clone)]
pub struct Record<'a> {
    /// Whose change.
    pub tenant_id: &'a str,
    /// The key that made it (none for admin commands).
    pub api_key_id: Option<&'a str>,
    /// `context.create`, `context.update`, `context.delete`, `workspace.create`, ...
    pub action: &'a str,
    /// `context` or `workspace`.
    pub entity_type: &'a str,
    /// The entity's id.
    pub entity_id: &'a str,
    /// JSON with the facts worth keeping (external id, version, ...).
    pub detail: String,
}

/// Hashes length-prefixed parts, so that no two different rows hash the same bytes.
fn hash_parts(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    for part in parts {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

/// The hash of a row of a tenant's chain (domain-separated from [`legacy_hash`]).
#[allow(clippy::too_many_arguments)]
pub fn chain_hash(
    prev_hash: Option<&str>,
    tenant_seq: i64,
    tenant_id: &str,
    api_key_id: Option<&str>,
    action: &str,
    entity_type: &str,
    entity_id: &str,
    detail: &str,
    created_at: &str,
) -> String {
    hash_parts(&[
        "contextq-audit/tenant-chain/1",
        prev_hash.unwrap_or(""),
        &tenant_seq.to_string(),
        tenant_id,
        api_key_id.unwrap_or(""),
        action,
        entity_type,
        entity_id,
        detail,
        created_at,
    ])
}

/// The hash of a row of the global chain written before per-tenant chains.
#[allow(clippy::too_many_arguments)]
pub fn legacy_hash(
    prev_hash: Option<&str>,
    seq: i64,
    tenant_id: &str,
    api_key_id: Option<&str>,
    action: &str,
    entity_type: &str,
    entity_id: &str,
    detail: &str,
    created_at: &str,
) -> String {
    hash_parts(&[
        prev_hash.unwrap_or(""),
        &seq.to_string(),
        tenant_id,
        api_key_id.unwrap_or(""),
        action,
        entity_type,
        entity_id,
        detail,
        created_at,
    ])
}

/// A row to append.
#[derive(Debug, Clone)]
struct Appended {
    tenant_seq: i64,
    api_key_id: Option<String>,
    action: String,
    entity_type: String,
    entity_id: String,
    detail: String,
    created_at: String,
    prev_hash: Option<String>,
    hash: String,
}

/// A tenant's chain head, locked for the rest of the transaction, and the rows to append.
#[derive(Debug)]
pub struct Head {
    tenant_id: String,
    read_seq: i64,
    seq: i64,
    last_hash: Option<String>,
    appended: Vec<Appended>,
}

impl Head {
    /// The head as read (and locked) by the transaction's read statement.
    pub fn new(tenant_id: &str, seq: i64, last_hash: Option<String>) -> Head {
        Head {
            tenant_id: tenant_id.to_string(),
            read_seq: seq,
            seq,
            last_hash,
            appended: Vec::new(),
        }
    }

    /// Appends `record` (in memory; [`Head::write`] adds the statements).
    pub fn append(&mut self, record: Record<'_>) {
        debug_assert_eq!(record.tenant_id, self.tenant_id);
        let tenant_seq = self.seq + 1;
        let created_at = crate::db::now();
        let hash = chain_hash(
            self.last_hash.as_deref(),
            tenant_seq,
            &self.tenant_id,
            record.api_key_id,
            record.action,
            record.entity_type,
            record.entity_id,
            &record.detail,
            &created_at,
        );
        self.appended.push(Appended {
            tenant_seq,
            api_key_id: record.api_key_id.map(str::to_string),
            action: record.action.to_string(),
            entity_type: record.entity_type.to_string(),
            entity_id: record.entity_id.to_string(),
            detail: record.detail,
            created_at,
            prev_hash: self.last_hash.take(),
            hash: hash.clone(),
        });
        self.seq = tenant_seq;
        self.last_hash = Some(hash);
    }

    /// Adds the appended rows and the head's move to `batch`. The head moves only from the
    /// sequence it was read at (the lock makes that certain; the check makes it visible).
    pub fn write(self, batch: &mut Batch, backend: Backend) {
        if self.appended.is_empty() {
            return;
        }
        for row in &self.appended {
            // PostgreSQL numbers rows with a sequence; SQLite (one writer) with the next value.
            let sql = match backend {
                Backend::Postgres => {
                    "INSERT INTO activity_logs (tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                }
                Backend::Sqlite => {
                    "INSERT INTO activity_logs (seq, tenant_id, tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash) \
                     VALUES ((SELECT COALESCE(MAX(seq), 0) + 1 FROM activity_logs), $1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
                }
            };
            batch.push(
                sql,
                vec![
                    Bind::Text(self.tenant_id.clone()),
                    Bind::Int(row.tenant_seq),
                    Bind::OptText(row.api_key_id.clone()),
                    Bind::Text(row.action.clone()),
                    Bind::Text(row.entity_type.clone()),
                    Bind::Text(row.entity_id.clone()),
                    Bind::Text(row.detail.clone()),
                    Bind::Text(row.created_at.clone()),
                    Bind::OptText(row.prev_hash.clone()),
                    Bind::Text(row.hash.clone()),
                ],
                Some(1),
            );
        }
        batch.push(
            "UPDATE audit_heads SET seq = $1, last_hash = $2 WHERE tenant_id = $3 AND seq = $4",
            vec![
                Bind::Int(self.seq),
                Bind::OptText(self.last_hash),
                Bind::Text(self.tenant_id),
                Bind::Int(self.read_seq),
            ],
            Some(1),
        );
    }
}

/// The first bad row [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow {
    /// The chain: a tenant's id, or `None` for the global chain of rows written before
    /// per-tenant chains.
    pub tenant_id: Option<String>,
    /// The row's number in its chain (`tenant_seq`, or `seq` in the global chain).
    pub seq: i64,
    /// What is wrong.
    pub why: String,
}

impl std::fmt::Display for BadRow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.tenant_id {
            Some(t) => write!(f, "tenant {t}, row {}: {}", self.seq, self.why),
            None => write!(f, "row {} of the global chain: {}", self.seq, self.why),
        }
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Rows checked.
    pub rows: u64,
    /// Chains checked (tenants, plus the global chain when it has rows).
    pub chains: u64,
    /// The first bad row, if any.
    pub first_bad: Option<BadRow>,
}

impl Verification {
    /// Whether every chain verified.
    pub fn ok(&self) -> bool {
        self.first_bad.is_none()
    }
}

/// Checks the global chain of rows written before per-tenant chains, then every tenant's
/// chain (or only `tenant`'s): order, links, hashes, and that each head points at its last
/// row.
pub async fn verify(db: &Db, tenant: Option<&str>) -> Result<Verification> {
    let mut v = Verification {
        rows: 0,
        chains: 0,
        first_bad: None,
    };
    if tenant.is_none() {
        v.first_bad = verify_legacy(db, &mut v).await?;
        if v.first_bad.is_some() {
            return Ok(v);
        }
    }
    let heads = match tenant {
        Some(t) => {
            sqlx::query("SELECT tenant_id, seq, last_hash FROM audit_heads WHERE tenant_id = $1")
                .bind(t.to_string())
                .fetch_all(db.pool())
                .await?
        }
        None => {
            sqlx::query("SELECT tenant_id, seq, last_hash FROM audit_heads ORDER BY tenant_id")
                .fetch_all(db.pool())
                .await?
        }
    };
    for head in heads {
        let tenant_id: String = head.try_get("tenant_id")?;
        let head_seq: i64 = head.try_get("seq")?;
        let head_hash: Option<String> = head.try_get("last_hash")?;
        v.chains += 1;
        if let Some(bad) = verify_tenant(db, &tenant_id, head_seq, head_hash, &mut v).await? {
            v.first_bad = Some(bad);
            return Ok(v);
        }
    }
    if tenant.is_none() {
        // Chained rows of a tenant without a head: the head was removed.
        let orphan = sqlx::query(
            "SELECT a.tenant_id, MIN(a.tenant_seq) AS s FROM activity_logs a LEFT JOIN audit_heads h ON h.tenant_id = a.tenant_id \
             WHERE a.tenant_seq IS NOT NULL AND h.tenant_id IS NULL GROUP BY a.tenant_id",
        )
        .fetch_optional(db.pool())
        .await?;
        if let Some(row) = orphan {
            v.first_bad = Some(BadRow {
                tenant_id: Some(row.try_get("tenant_id")?),
                seq: row.try_get("s")?,
                why: "its chain has no head (the head row was removed)".into(),
            });
        }
    }
    Ok(v)
}

async fn verify_legacy(db: &Db, v: &mut Verification) -> Result<Option<BadRow>> {
    const PAGE: i64 = 1000;
    let mut expected_seq = 1i64;
    let mut prev: Option<String> = None;
    let bad = |seq: i64, why: String| {
        Ok(Some(BadRow {
            tenant_id: None,
            seq,
            why,
        }))
    };
    loop {
        let page = sqlx::query(
            "SELECT seq, tenant_id, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash \
             FROM activity_logs WHERE tenant_seq IS NULL AND seq >= $1 ORDER BY seq LIMIT $2",
        )
        .bind(expected_seq)
        .bind(PAGE)
        .fetch_all(db.pool())
        .await?;
        let n = page.len();
        for row in page {
            let seq: i64 = row.try_get("seq")?;
            if seq != expected_seq {
                return bad(
                    expected_seq,
                    format!("row {expected_seq} is missing (next row is {seq})"),
                );
            }
            let prev_hash: Option<String> = row.try_get("prev_hash")?;
            if prev_hash != prev {
                return bad(
                    seq,
                    "its prev_hash does not match the previous row's hash".into(),
                );
            }
            let api_key_id: Option<String> = row.try_get("api_key_id")?;
            let computed = legacy_hash(
                prev_hash.as_deref(),
                seq,
                &row.try_get::<String, _>("tenant_id")?,
                api_key_id.as_deref(),
                &row.try_get::<String, _>("action")?,
                &row.try_get::<String, _>("entity_type")?,
                &row.try_get::<String, _>("entity_id")?,
                &row.try_get::<String, _>("detail")?,
                &row.try_get::<String, _>("created_at")?,
            );
            let stored: String = row.try_get("hash")?;
            if computed != stored {
                return bad(
                    seq,
                    "its contents do not match its hash (the row was edited)".into(),
                );
            }
            prev = Some(stored);
            expected_seq += 1;
            v.rows += 1;
        }
        if (n as i64) < PAGE {
            break;
        }
    }
    if expected_seq > 1 {
        v.chains += 1;
    }
    let head = sqlx::query("SELECT seq, last_hash FROM audit_head WHERE id = 1")
        .fetch_optional(db.pool())
        .await?;
    let (head_seq, head_hash): (i64, Option<String>) = match head {
        Some(h) => (h.try_get("seq")?, h.try_get("last_hash")?),
        None => (0, None),
    };
    if head_seq != expected_seq - 1 || head_hash != prev {
        return bad(
            expected_seq,
            format!(
                "the chain head points at row {head_seq} but the log ends at row {} (rows were removed from the end)",
                expected_seq - 1
            ),
        );
    }
    Ok(None)
}

async fn verify_tenant(
    db: &Db,
    tenant_id: &str,
    head_seq: i64,
    head_hash: Option<String>,
    v: &mut Verification,
) -> Result<Option<BadRow>> {
    const PAGE: i64 = 1000;
    let mut expected = 1i64;
    let mut prev: Option<String> = None;
    let bad = |seq: i64, why: String| {
        Ok(Some(BadRow {
            tenant_id: Some(tenant_id.to_string()),
            seq,
            why,
        }))
    };
    loop {
        let page = sqlx::query(
            "SELECT tenant_seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash \
             FROM activity_logs WHERE tenant_id = $1 AND tenant_seq >= $2 ORDER BY tenant_seq LIMIT $3",
        )
        .bind(tenant_id.to_string())
        .bind(expected)
        .bind(PAGE)
        .fetch_all(db.pool())
        .await?;
        let n = page.len();
        for row in page {
            let seq: i64 = row.try_get("tenant_seq")?;
            if seq != expected {
                return bad(
                    expected,
                    format!("row {expected} is missing (next row is {seq})"),
                );
            }
            let prev_hash: Option<String> = row.try_get("prev_hash")?;
            if prev_hash != prev {
                return bad(
                    seq,
                    "its prev_hash does not match the previous row's hash".into(),
                );
            }
            let api_key_id: Option<String> = row.try_get("api_key_id")?;
            let computed = chain_hash(
                prev_hash.as_deref(),
                seq,
                tenant_id,
                api_key_id.as_deref(),
                &row.try_get::<String, _>("action")?,
                &row.try_get::<String, _>("entity_type")?,
                &row.try_get::<String, _>("entity_id")?,
                &row.try_get::<String, _>("detail")?,
                &row.try_get::<String, _>("created_at")?,
            );
            let stored: String = row.try_get("hash")?;
            if computed != stored {
                return bad(
                    seq,
                    "its contents do not match its hash (the row was edited)".into(),
                );
            }
            prev = Some(stored);
            expected += 1;
            v.rows += 1;
        }
        if (n as i64) < PAGE {
            break;
        }
    }
    if head_seq != expected - 1 || head_hash != prev {
        return bad(
            expected,
            format!(
                "the chain head points at row {head_seq} but the chain ends at row {} (rows were removed from the end)",
                expected - 1
            ),
        );
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_length_prefixed_and_domain_separated() {
        let a = chain_hash(None, 1, "t", None, "ab", "c", "e", "{}", "now");
        let b = chain_hash(None, 1, "t", None, "a", "bc", "e", "{}", "now");
        assert_ne!(a, b);
        assert_eq!(
            a,
            chain_hash(None, 1, "t", None, "ab", "c", "e", "{}", "now")
        );
        assert_ne!(
            a,
            legacy_hash(None, 1, "t", None, "ab", "c", "e", "{}", "now")
        );
    }
}
