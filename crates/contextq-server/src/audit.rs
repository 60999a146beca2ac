//! The activity log: one hash chain per tenant, appended in the same transaction as the change.
//!
//! Every write transaction first locks its tenant's head row in `audit_heads` (a statement of its
//! own just before the read of what the write needs, in the same round trip, see
//! [`crate::store`]): writes of one tenant are serialised, writes of different tenants never wait
//! for each other. Each change appends a row
//! numbered `tenant_seq` (1, 2, ... per tenant) whose `hash` is [`Hashed::chain_hash`] of the previous
//! row's hash and the row's canonical fields, and moves the head to it.
//!
//! Rows written before per-tenant chains (migration 2) form one global chain in `seq` order
//! ([`Hashed::legacy_hash`], `tenant_seq` NULL), frozen with its head in `audit_head`; [`verify`] checks
//! it too, so they stay verifiable. [`verify`] names the first row that was edited, removed or
//! relinked, chain by chain.
//!
//! With an [`AuditKey`] (a file outside the database) every row also carries an HMAC of its
//! chain hash and every head an HMAC of where it points and of the row its chain is keyed from
//! (`keyed_from`): someone who can write the database but not read the key cannot edit, remove,
//! re-chain or strip a keyed row, nor move a head, without [`verify`] seeing it. What remains
//! (replaying a whole older state, removing a whole tenant) is caught against a signed
//! [`checkpoint`] of every chain head. docs/schema.md lists exactly what is and is not detected.

pub mod checkpoint;
pub mod key;
mod verification;

pub use key::AuditKey;

use sha2::{Digest, Sha256};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::db::{Batch, Bind, Db, Dialect};
use crate::error::Error;

pub use verification::{BadRow, KeyingRepair, Verification, repair_keying, verify};

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

/// What a row's hash covers: its link to the previous row, its number and its content.
#[derive(Debug, Clone, Copy)]
pub struct Hashed<'a> {
    /// The previous row's hash (`None` for row 1).
    pub prev_hash: Option<&'a str>,
    /// The row's number in its chain (`tenant_seq`, or `seq` in the global chain).
    pub seq: i64,
    /// The tenant.
    pub tenant_id: &'a str,
    /// The key that made the change (`None`: an operator command).
    pub api_key_id: Option<&'a str>,
    /// What was done (`context.create`, ...).
    pub action: &'a str,
    /// `context` or `workspace`.
    pub entity_type: &'a str,
    /// The context's or workspace's id.
    pub entity_id: &'a str,
    /// The row's `detail` JSON, as stored.
    pub detail: &'a str,
    /// When, as stored.
    pub created_at: &'a str,
}

impl Hashed<'_> {
    /// The hash of a row of a tenant's chain (domain-separated from [`Hashed::legacy_hash`]).
    pub fn chain_hash(&self) -> String {
        self.hash(Some("contextq-audit/tenant-chain/1"))
    }

    /// The hash of a row of the global chain written before per-tenant chains.
    pub fn legacy_hash(&self) -> String {
        self.hash(None)
    }

    fn hash(&self, domain: Option<&str>) -> String {
        let seq = self.seq.to_string();
        let parts = [
            self.prev_hash.unwrap_or(""),
            &seq,
            self.tenant_id,
            self.api_key_id.unwrap_or(""),
            self.action,
            self.entity_type,
            self.entity_id,
            self.detail,
            self.created_at,
        ];
        match domain {
            Some(d) => hash_parts(&[&[d][..], &parts[..]].concat()),
            None => hash_parts(&parts),
        }
    }
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
    mac: Option<String>,
}

/// A tenant's chain head, locked for the rest of the transaction, and the rows to append.
#[derive(Debug)]
pub struct Head {
    tenant_id: String,
    read_seq: i64,
    seq: i64,
    last_hash: Option<String>,
    keyed_from: Option<i64>,
    key: Option<AuditKey>,
    appended: Vec<Appended>,
    /// What the write adds to the tenant's counts of contexts and versions, kept on the head
    /// row (`audit_heads.contexts`, `.versions`) so that no write counts rows.
    usage: (i64, i64),
}

/// Why a write refused to append to a head: its MAC does not verify with this server's key.
pub fn head_refusal(tenant_id: &str) -> String {
    format!(
        "the audit chain head of tenant {tenant_id} does not verify with this server's audit key \
         (tampered with, or moved by a server without the key): nothing was written; run \
         `contextq-server admin verify-audit`"
    )
}

impl Head {
    /// The head as read (and locked) by the transaction's read statement. With `key`, the
    /// head's MAC must verify (`Err` with [`head_refusal`]'s text otherwise): a write never
    /// extends a chain whose head was tampered with.
    pub fn new(
        tenant_id: &str,
        seq: i64,
        last_hash: Option<String>,
        keyed_from: Option<i64>,
        mac: Option<&str>,
        key: Option<&AuditKey>,
    ) -> std::result::Result<Head, String> {
        if let Some(key) = key {
            let ok = keyed_from.is_some_and(|from| {
                AuditKey::same(
                    mac,
                    &key.head_mac(tenant_id, seq, last_hash.as_deref(), from),
                )
            });
            if !ok {
                return Err(head_refusal(tenant_id));
            }
        } else if keyed_from.is_some() || mac.is_some() {
            // The log was keyed (perhaps by `init-audit-key` while this server ran): a row
            // without a MAC past `keyed_from` would break the chain for good.
            return Err(format!(
                "the audit log of tenant {tenant_id} is keyed but this server has no audit key \
                 (the log was keyed while it ran?): nothing was written; restart it with \
                 --audit-key-file (or CONTEXTQ_AUDIT_KEY_FILE)"
            ));
        }
        Ok(Head {
            tenant_id: tenant_id.to_string(),
            read_seq: seq,
            seq,
            last_hash,
            keyed_from,
            key: key.cloned(),
            appended: Vec::new(),
            usage: (0, 0),
        })
    }

    /// Appends `record` (in memory; `Head::write` adds the statements) and returns its
    /// sequence number in the tenant's chain.
    pub fn append(&mut self, record: Record<'_>) -> i64 {
        debug_assert_eq!(record.tenant_id, self.tenant_id);
        let tenant_seq = self.seq + 1;
        let created_at = crate::db::now();
        let hash = Hashed {
            prev_hash: self.last_hash.as_deref(),
            seq: tenant_seq,
            tenant_id: &self.tenant_id,
            api_key_id: record.api_key_id,
            action: record.action,
            entity_type: record.entity_type,
            entity_id: record.entity_id,
            detail: &record.detail,
            created_at: &created_at,
        }
        .chain_hash();
        let mac = self
            .key
            .as_ref()
            .map(|k| k.row_mac(&self.tenant_id, tenant_seq, &hash));
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
            mac,
        });
        self.seq = tenant_seq;
        self.last_hash = Some(hash);
        tenant_seq
    }

    /// Adds `contexts` and `versions` to the tenant's counts (negative: removes), written with
    /// the head's move. The head row is the one place for them: a PostgreSQL batch is one
    /// statement, which must not update a row twice.
    pub fn count(&mut self, contexts: i64, versions: i64) {
        self.usage.0 += contexts;
        self.usage.1 += versions;
    }

    /// Adds the appended rows and the head's move to `batch`. The head moves only from the
    /// sequence it was read at (the lock makes that certain; the check makes it visible).
    pub(crate) fn write(self, batch: &mut Batch, dialect: &dyn Dialect) {
        if self.appended.is_empty() && self.usage == (0, 0) {
            return;
        }
        // One statement per [`ROWS_PER_INSERT`] rows (a write of many files is one insert of
        // their audit rows, not one each).
        for rows in self.appended.chunks(ROWS_PER_INSERT) {
            let sql = match rows.len() {
                1 => dialect.insert_activity().to_string(),
                n => dialect.insert_activities(n),
            };
            let mut binds = Vec::with_capacity(rows.len() * 11);
            for row in rows {
                binds.extend([
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
                    Bind::OptText(row.mac.clone()),
                ]);
            }
            batch.push(sql, binds, Some(rows.len() as u64));
        }
        let mac = match (&self.key, self.keyed_from) {
            (Some(key), Some(from)) => {
                Some(key.head_mac(&self.tenant_id, self.seq, self.last_hash.as_deref(), from))
            }
            _ => None,
        };
        batch.push(
            "UPDATE audit_heads SET seq = $1, last_hash = $2, mac = $3, contexts = contexts + $6, versions = versions + $7 \
             WHERE tenant_id = $4 AND seq = $5",
            vec![
                Bind::Int(self.seq),
                Bind::OptText(self.last_hash),
                Bind::OptText(mac),
                Bind::Text(self.tenant_id),
                Bind::Int(self.read_seq),
                Bind::Int(self.usage.0),
                Bind::Int(self.usage.1),
            ],
            Some(1),
        );
    }
}

/// Audit rows one statement of `Head::write` inserts at most: 11,000 values, under SQLite's
/// 32,766.
pub const ROWS_PER_INSERT: usize = 1_000;

/// Checks the database's audit key against the one it is opened with ([`Db::audit_key`]):
/// a database keyed once (`audit_meta` names the key's fingerprint) is refused without its key
/// or with another; a database written without a key is refused with one unless `adopt` (or it
/// has no audit rows yet), and then keyed from each chain's next row on ([`adopt_key`]). A
/// command that changes nothing (`reads_only`: listings) reads a keyed log without its key.
pub async fn open(db: &Db, adopt: bool, inspect: bool, reads_only: bool) -> crate::Result<()> {
    let meta = sqlx::query("SELECT key_fingerprint, legacy_mac FROM audit_meta WHERE id = 1")
        .fetch_optional(db.pool())
        .await?;
    let legacy_anchored = match &meta {
        Some(m) => m.try_get::<Option<String>, _>("legacy_mac")?.is_some(),
        None => false,
    };
    let meta: Option<String> = meta.map(|m| m.try_get("key_fingerprint")).transpose()?;
    match (db.audit_key(), meta) {
        (None, None) => Ok(()),
        (None, Some(_)) if reads_only => Ok(()),
        (None, Some(fingerprint)) => Err(Error::Config(format!(
            "this database's audit log is keyed (key fingerprint {fingerprint}): give its key \
             with --audit-key-file or CONTEXTQ_AUDIT_KEY_FILE"
        ))),
        (Some(key), Some(fingerprint)) if key.fingerprint() == fingerprint => {
            if !legacy_anchored {
                // Keyed before the legacy chain was anchored (migration 5): anchor it now.
                let mut conn = db.pool().acquire().await?;
                anchor_legacy(&mut conn, key).await?;
                tracing::info!("anchored the frozen global audit chain under the audit key");
            }
            Ok(())
        }
        (Some(key), Some(fingerprint)) => Err(Error::Config(format!(
            "the audit key given (fingerprint {}) is not this database's (fingerprint \
             {fingerprint}): give the key file the database was keyed with",
            key.fingerprint()
        ))),
        (Some(key), None) => {
            let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM activity_logs")
                .fetch_one(db.pool())
                .await?;
            if rows > 0 && inspect {
                // verify-audit: open it to report (verify says the log carries no keying).
                return Ok(());
            }
            if rows > 0 && !adopt {
                return Err(Error::Config(format!(
                    "this database's audit log ({rows} rows) carries no audit key record although \
                     a key was given: either it was never keyed, or its keying was stripped (which \
                     is what someone who rewrote the log would do). If it was ever keyed, do NOT \
                     key it again: check it against your latest checkpoint (`verify-audit \
                     --checkpoint FILE`) and restore it from a backup. Only if you know it was \
                     never keyed: `contextq-server admin init-audit-key --never-keyed` (its rows \
                     so far stay hash-chained only)"
                )));
            }
            adopt_key(db, key).await
        }
    }
}

/// Whether the audit log's keying is the loaded key's (`/ready`): keyed with this key, or
/// unkeyed while no key is loaded. A keying changed or stripped under a running server is not.
pub async fn key_matches(db: &Db) -> crate::Result<bool> {
    let fingerprint: Option<String> =
        sqlx::query_scalar("SELECT key_fingerprint FROM audit_meta WHERE id = 1")
            .fetch_optional(db.pool())
            .await?
            .flatten();
    Ok(match (db.audit_key(), fingerprint) {
        (None, None) => true,
        (Some(key), Some(f)) => key.fingerprint() == f,
        _ => false,
    })
}

/// Keys the database with `key`: records its fingerprint, and keys every chain head that has
/// no MAC from its next row on (`keyed_from` = its seq + 1). Rows written before stay
/// hash-chained only; [`verify`] counts them apart.
pub async fn adopt_key(db: &Db, key: &AuditKey) -> crate::Result<()> {
    let mut tx = db.begin_write().await?;
    sqlx::query("INSERT INTO audit_meta (id, key_fingerprint, keyed_at) VALUES (1, $1, $2)")
        .bind(key.fingerprint())
        .bind(crate::db::now())
        .execute(&mut *tx)
        .await?;
    anchor_legacy(&mut tx, key).await?;
    let heads = sqlx::query(db.dialect().unsealed_heads())
        .fetch_all(&mut *tx)
        .await?;
    for head in heads {
        let tenant_id: String = head.try_get("tenant_id")?;
        let seq: i64 = head.try_get("seq")?;
        let last_hash: Option<String> = head.try_get("last_hash")?;
        sqlx::query(
            "UPDATE audit_heads SET keyed_from = $1, mac = $2 WHERE tenant_id = $3 AND seq = $4",
        )
        .bind(seq + 1)
        .bind(key.head_mac(&tenant_id, seq, last_hash.as_deref(), seq + 1))
        .bind(tenant_id)
        .bind(seq)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(())
}

/// Records the frozen global chain's head in `audit_meta` under the key's MAC.
async fn anchor_legacy(conn: &mut sqlx::AnyConnection, key: &AuditKey) -> crate::Result<()> {
    let (seq, hash) = legacy_head(conn).await?;
    sqlx::query(
        "UPDATE audit_meta SET legacy_seq = $1, legacy_hash = $2, legacy_mac = $3 WHERE id = 1",
    )
    .bind(seq)
    .bind(hash.clone())
    .bind(key.legacy_mac(seq, hash.as_deref()))
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The frozen global chain's head: (its last row, that row's hash); (0, None) without one.
async fn legacy_head(conn: &mut sqlx::AnyConnection) -> Result<(i64, Option<String>)> {
    let head = sqlx::query("SELECT seq, last_hash FROM audit_head WHERE id = 1")
        .fetch_optional(&mut *conn)
        .await?;
    Ok(match head {
        Some(h) => (h.try_get("seq")?, h.try_get("last_hash")?),
        None => (0, None),
    })
}

/// The statement values of a new tenant's head: `(keyed_from, mac)`, both `None` without a key.
pub fn new_head(key: Option<&AuditKey>, tenant_id: &str) -> (Option<i64>, Option<String>) {
    match key {
        Some(key) => (Some(1), Some(key.head_mac(tenant_id, 0, None, 1))),
        None => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_length_prefixed_and_domain_separated() {
        let row = |action, entity_type| Hashed {
            prev_hash: None,
            seq: 1,
            tenant_id: "t",
            api_key_id: None,
            action,
            entity_type,
            entity_id: "e",
            detail: "{}",
            created_at: "now",
        };
        let a = row("ab", "c").chain_hash();
        assert_ne!(a, row("a", "bc").chain_hash());
        assert_eq!(a, row("ab", "c").chain_hash());
        assert_ne!(a, row("ab", "c").legacy_hash());
    }

    /// Many rows are inserted a thousand to a statement, each row with its own values, and
    /// the head moves once after them.
    #[test]
    fn many_rows_are_inserted_a_thousand_at_a_time() {
        for backend in [crate::db::Backend::Sqlite, crate::db::Backend::Postgres] {
            let mut head = Head::new("t", 0, None, None, None, None).unwrap();
            for i in 0..2_500 {
                let id = format!("e{i}");
                head.append(Record {
                    tenant_id: "t",
                    api_key_id: None,
                    action: "context.create",
                    entity_type: "context",
                    entity_id: &id,
                    detail: "{}".into(),
                });
            }
            let mut batch = Batch::default();
            head.write(&mut batch, backend.dialect());
            let st = batch.statements();
            assert_eq!(
                st.len(),
                4,
                "{backend:?}: three inserts and the head's move"
            );
            let rows: Vec<Option<u64>> = st.iter().map(|s| s.2).collect();
            assert_eq!(rows, [Some(1000), Some(1000), Some(500), Some(1)]);
            assert_eq!(st[2].1.len(), 500 * 11);
            // The last row's values are the 2,500th row's: its number in the chain and entity.
            let last = &st[2].1[499 * 11..];
            assert_eq!(last[1], Bind::Int(2_500));
            assert_eq!(last[5], Bind::Text("e2499".into()));
            assert!(st[2].0.contains(&format!("${}", 500 * 11)), "{backend:?}");
            assert!(
                !st[2].0.contains(&format!("${}", 500 * 11 + 1)),
                "{backend:?}"
            );
        }
    }
}
