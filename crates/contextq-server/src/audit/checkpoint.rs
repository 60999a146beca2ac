//! Signed checkpoints of every chain head: anchors outside the database.
//!
//! A MAC on every row and head ([`super::AuditKey`]) stops forgery, but not the replay of a
//! whole older state (an older copy of the database, or a head saved earlier put back after
//! its later rows are removed) nor the removal of a whole tenant with its head. A checkpoint,
//! kept outside the database (`contextq-server admin audit-checkpoint > checkpoint.json`), names
//! every chain's head at a moment, signed with the audit key; [`verify_against`] then fails on
//! any chain that is gone, behind its checkpointed position, or no longer holds the checkpointed
//! row there, besides everything [`super::verify`] checks.

use serde::{Deserialize, Serialize};
use sqlx::Row;

use super::{AuditKey, BadRow, Verification, verify};
use crate::db::Db;
use crate::error::{Error, Result};

/// The `format` of this version of checkpoints: 2 records each chain's `keyed_from`, so that a
/// log stripped of its keying (or keyed again from a later row) is caught against it.
pub const FORMAT: &str = "contextq-audit-checkpoint/2";

/// The format of checkpoints before `keyed_from` was recorded; still verified.
pub const FORMAT_1: &str = "contextq-audit-checkpoint/1";

/// Where a chain's head was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Position {
    /// The tenant, or `None` for the global chain of rows written before per-tenant chains.
    pub tenant_id: Option<String>,
    /// The last row's number (0: no rows).
    pub seq: i64,
    /// The last row's hash.
    pub hash: Option<String>,
    /// The chain's first keyed row when the checkpoint was taken (format 2; `None` for the
    /// global chain and in format 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keyed_from: Option<i64>,
}

/// Every chain head at a moment, signed with the audit key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// [`FORMAT`].
    pub format: String,
    /// When it was taken (RFC 3339, UTC).
    pub created_at: String,
    /// The audit key's fingerprint.
    pub key_fingerprint: String,
    /// Every chain: the global one first (when it has rows), then each tenant's by id.
    pub chains: Vec<Position>,
    /// HMAC-SHA256 of all of the above with the audit key.
    pub mac: String,
}

fn signed_parts(c: &Checkpoint) -> Vec<String> {
    let mut parts = vec![
        "contextq-audit/checkpoint/1".to_string(),
        c.format.clone(),
        c.created_at.clone(),
        c.key_fingerprint.clone(),
        c.chains.len().to_string(),
    ];
    for p in &c.chains {
        parts.push(p.tenant_id.clone().unwrap_or_default());
        parts.push(p.seq.to_string());
        parts.push(p.hash.clone().unwrap_or_default());
        if c.format != FORMAT_1 {
            parts.push(p.keyed_from.map(|k| k.to_string()).unwrap_or_default());
        }
    }
    parts
}

fn sign(key: &AuditKey, c: &Checkpoint) -> String {
    let parts = signed_parts(c);
    key.mac(&parts.iter().map(String::as_str).collect::<Vec<_>>())
}

fn needs_key(db: &Db) -> Result<&AuditKey> {
    db.audit_key().ok_or_else(|| {
        Error::Config(
            "checkpoints are signed with the audit key: give it with --audit-key-file or \
             CONTEXTQ_AUDIT_KEY_FILE"
                .into(),
        )
    })
}

/// Verifies every chain, then records every head, signed. Refused (with the bad row named)
/// when the log does not verify: a checkpoint of a tampered log would vouch for it.
pub async fn take(db: &Db) -> Result<Checkpoint> {
    let key = needs_key(db)?;
    let v = verify(db, None).await?;
    if let Some(bad) = v.first_bad {
        return Err(Error::Config(format!(
            "the audit log does not verify ({bad}): no checkpoint taken"
        )));
    }
    let mut chains = Vec::new();
    if let Some(h) = sqlx::query("SELECT seq, last_hash FROM audit_head WHERE id = 1")
        .fetch_optional(db.pool())
        .await?
    {
        let seq: i64 = h.try_get("seq")?;
        if seq > 0 {
            chains.push(Position {
                tenant_id: None,
                seq,
                hash: h.try_get("last_hash")?,
                keyed_from: None,
            });
        }
    }
    for h in sqlx::query(
        "SELECT tenant_id, seq, last_hash, keyed_from FROM audit_heads ORDER BY tenant_id",
    )
    .fetch_all(db.pool())
    .await?
    {
        chains.push(Position {
            tenant_id: Some(h.try_get("tenant_id")?),
            seq: h.try_get("seq")?,
            hash: h.try_get("last_hash")?,
            keyed_from: h.try_get("keyed_from")?,
        });
    }
    let mut c = Checkpoint {
        format: FORMAT.to_string(),
        created_at: crate::db::now(),
        key_fingerprint: key.fingerprint(),
        chains,
        mac: String::new(),
    };
    c.mac = sign(key, &c);
    Ok(c)
}

fn bad(tenant_id: Option<&str>, seq: i64, why: String) -> Option<BadRow> {
    Some(BadRow {
        tenant_id: tenant_id.map(str::to_string),
        seq,
        why,
    })
}

/// [`verify`], and then, for every chain the checkpoint names: it still exists, its head is at
/// or past the checkpointed row, and that row is the one the checkpoint saw. The checkpoint's
/// own signature is checked first.
pub async fn verify_against(db: &Db, checkpoint: &Checkpoint) -> Result<Verification> {
    let key = needs_key(db)?;
    let mut v = Verification {
        rows: 0,
        keyed_rows: 0,
        macs_checked: true,
        chains: 0,
        first_bad: None,
    };
    if checkpoint.format != FORMAT && checkpoint.format != FORMAT_1 {
        return Err(Error::Config(format!(
            "not a checkpoint of this version: format {:?}, expected {FORMAT:?}",
            checkpoint.format
        )));
    }
    if checkpoint.key_fingerprint != key.fingerprint() {
        v.first_bad = bad(
            None,
            0,
            format!(
                "the checkpoint was signed with another audit key (fingerprint {}, this key {})",
                checkpoint.key_fingerprint,
                key.fingerprint()
            ),
        );
        return Ok(v);
    }
    if !AuditKey::same(Some(&checkpoint.mac), &sign(key, checkpoint)) {
        v.first_bad = bad(
            None,
            0,
            "the checkpoint's signature does not verify (the file was edited)".into(),
        );
        return Ok(v);
    }
    let v = verify(db, None).await?;
    if !v.ok() {
        return Ok(v);
    }
    let mut v = v;
    for p in &checkpoint.chains {
        v.first_bad = check_position(db, p).await?;
        if v.first_bad.is_some() {
            break;
        }
    }
    Ok(v)
}

async fn check_position(db: &Db, p: &Position) -> Result<Option<BadRow>> {
    let t = p.tenant_id.as_deref();
    // The global chain (before tenant chains) has one head and was never keyed.
    let mut head = sqlx::query(match t {
        Some(_) => "SELECT seq, keyed_from FROM audit_heads WHERE tenant_id = $1",
        None => "SELECT seq, CAST(NULL AS BIGINT) AS keyed_from FROM audit_head WHERE id = 1",
    });
    if let Some(t) = t {
        head = head.bind(t.to_string());
    }
    let head = head.fetch_optional(db.pool()).await?;
    let Some(head) = head else {
        return Ok(bad(
            t,
            p.seq,
            "the chain the checkpoint names is gone (its head was removed: the log was wiped \
             or the tenant removed)"
                .into(),
        ));
    };
    let head_seq: i64 = head.try_get("seq")?;
    let keyed_from: Option<i64> = head.try_get("keyed_from")?;
    if p.keyed_from.is_some() && keyed_from != p.keyed_from {
        return Ok(bad(
            t,
            p.seq,
            format!(
                "the chain's keying changed: it was keyed from row {} when checkpointed, and is now {} (stripped, or keyed again)",
                p.keyed_from.unwrap_or_default(),
                keyed_from.map_or("not keyed".to_string(), |k| format!("keyed from row {k}"))
            ),
        ));
    }
    if head_seq < p.seq {
        return Ok(bad(
            t,
            p.seq,
            format!(
                "the chain was rolled back: its head is at row {head_seq}, the checkpoint saw row {}",
                p.seq
            ),
        ));
    }
    if p.seq == 0 {
        return Ok(None);
    }
    let row = match t {
        Some(t) => {
            sqlx::query("SELECT hash FROM activity_logs WHERE tenant_id = $1 AND tenant_seq = $2")
                .bind(t.to_string())
                .bind(p.seq)
                .fetch_optional(db.pool())
                .await?
        }
        None => {
            sqlx::query("SELECT hash FROM activity_logs WHERE tenant_seq IS NULL AND seq = $1")
                .bind(p.seq)
                .fetch_optional(db.pool())
                .await?
        }
    };
    let hash: Option<String> = row.map(|r| r.try_get("hash")).transpose()?;
    Ok(match hash {
        None => bad(
            t,
            p.seq,
            "the row the checkpoint saw is gone (removed)".into(),
        ),
        Some(h) if Some(&h) != p.hash.as_ref() => bad(
            t,
            p.seq,
            "the row is not the one the checkpoint saw (the chain was re-written)".into(),
        ),
        Some(_) => None,
    })
}
