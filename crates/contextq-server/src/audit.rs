//! The activity log: one global hash chain, appended in the same transaction as the change.
//!
//! Every write transaction first locks the single `audit_head` row ([`Chain::lock`]), which also
//! serialises writers across server processes; each change appends a row whose `hash` is
//! `sha256(prev_hash | seq | tenant | key | action | entity type | entity id | detail | time)`
//! and whose `prev_hash` is the previous row's hash (NULL for the very first row); committing
//! the head moves it to the new last row. [`verify`] walks the chain and names the first row
//! that was edited, removed or inserted out of order.

use sha2::{Digest, Sha256};
use sqlx::{AnyConnection, Row};

use crate::db::Db;

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
    /// `context`, `workspace`, `api_key`, `tenant`.
    pub entity_type: &'a str,
    /// The entity's id.
    pub entity_id: &'a str,
    /// JSON with the facts worth keeping (external id, version, ...).
    pub detail: String,
}

/// The locked head of the chain within one transaction.
#[derive(Debug)]
pub struct Chain {
    seq: i64,
    last_hash: Option<String>,
    changed: bool,
}

/// The canonical hash of a row.
#[allow(clippy::too_many_arguments)]
pub fn row_hash(
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
    let mut h = Sha256::new();
    for part in [
        prev_hash.unwrap_or(""),
        &seq.to_string(),
        tenant_id,
        api_key_id.unwrap_or(""),
        action,
        entity_type,
        entity_id,
        detail,
        created_at,
    ] {
        // Length-prefixed, so that no two different rows hash the same bytes.
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

impl Chain {
    /// Locks the head row for the rest of `tx` and reads it.
    pub async fn lock(tx: &mut AnyConnection) -> Result<Chain> {
        let row =
            sqlx::query("UPDATE audit_head SET seq = seq WHERE id = 1 RETURNING seq, last_hash")
                .fetch_one(&mut *tx)
                .await?;
        Ok(Chain {
            seq: row.try_get("seq")?,
            last_hash: row.try_get("last_hash")?,
            changed: false,
        })
    }

    /// Appends `record` to the chain.
    pub async fn append(&mut self, tx: &mut AnyConnection, record: Record<'_>) -> Result<()> {
        let seq = self.seq + 1;
        let created_at = crate::db::now();
        let hash = row_hash(
            self.last_hash.as_deref(),
            seq,
            record.tenant_id,
            record.api_key_id,
            record.action,
            record.entity_type,
            record.entity_id,
            &record.detail,
            &created_at,
        );
        sqlx::query(
            "INSERT INTO activity_logs (seq, tenant_id, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(seq)
        .bind(record.tenant_id.to_string())
        .bind(record.api_key_id.map(str::to_string))
        .bind(record.action.to_string())
        .bind(record.entity_type.to_string())
        .bind(record.entity_id.to_string())
        .bind(record.detail)
        .bind(created_at)
        .bind(self.last_hash.clone())
        .bind(hash.clone())
        .execute(&mut *tx)
        .await?;
        self.seq = seq;
        self.last_hash = Some(hash);
        self.changed = true;
        Ok(())
    }

    /// Moves the head to the last appended row (call before commit).
    pub async fn finish(self, tx: &mut AnyConnection) -> Result<()> {
        if self.changed {
            sqlx::query("UPDATE audit_head SET seq = $1, last_hash = $2 WHERE id = 1")
                .bind(self.seq)
                .bind(self.last_hash)
                .execute(&mut *tx)
                .await?;
        }
        Ok(())
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Rows checked.
    pub rows: u64,
    /// The first bad row and why, if any.
    pub first_bad: Option<(i64, String)>,
}

impl Verification {
    /// Whether the whole chain verified.
    pub fn ok(&self) -> bool {
        self.first_bad.is_none()
    }
}

/// Walks the whole chain in order, checking links, hashes, sequence and head.
pub async fn verify(db: &Db) -> Result<Verification> {
    const PAGE: i64 = 1000;
    let mut expected_seq = 1i64;
    let mut prev: Option<String> = None;
    let mut rows = 0u64;
    loop {
        let page = sqlx::query(
            "SELECT seq, tenant_id, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash \
             FROM activity_logs WHERE seq >= $1 ORDER BY seq LIMIT $2",
        )
        .bind(expected_seq)
        .bind(PAGE)
        .fetch_all(db.pool())
        .await?;
        let n = page.len();
        for row in page {
            let seq: i64 = row.try_get("seq")?;
            let bad = |why: &str| {
                Ok(Verification {
                    rows,
                    first_bad: Some((seq, why.to_string())),
                })
            };
            if seq != expected_seq {
                return Ok(Verification {
                    rows,
                    first_bad: Some((
                        expected_seq,
                        format!("row {expected_seq} is missing (next row is {seq})"),
                    )),
                });
            }
            let prev_hash: Option<String> = row.try_get("prev_hash")?;
            if prev_hash != prev {
                return bad("its prev_hash does not match the previous row's hash");
            }
            let api_key_id: Option<String> = row.try_get("api_key_id")?;
            let computed = row_hash(
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
                return bad("its contents do not match its hash (the row was edited)");
            }
            prev = Some(stored);
            expected_seq += 1;
            rows += 1;
        }
        if (n as i64) < PAGE {
            break;
        }
    }
    let head = sqlx::query("SELECT seq, last_hash FROM audit_head WHERE id = 1")
        .fetch_one(db.pool())
        .await?;
    let head_seq: i64 = head.try_get("seq")?;
    let head_hash: Option<String> = head.try_get("last_hash")?;
    if head_seq != expected_seq - 1 || head_hash != prev {
        return Ok(Verification {
            rows,
            first_bad: Some((
                expected_seq,
                format!(
                    "the chain head points at row {head_seq} but the log ends at row {} (rows were removed from the end)",
                    expected_seq - 1
                ),
            )),
        });
    }
    Ok(Verification {
        rows,
        first_bad: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_length_prefixed() {
        let a = row_hash(None, 1, "t", None, "ab", "c", "e", "{}", "now");
        let b = row_hash(None, 1, "t", None, "a", "bc", "e", "{}", "now");
        assert_ne!(a, b);
        assert_eq!(a, row_hash(None, 1, "t", None, "ab", "c", "e", "{}", "now"));
    }
}
