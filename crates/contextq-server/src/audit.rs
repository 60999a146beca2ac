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

pub mod key;

pub mod checkpoint;

pub use key::AuditKey;

use sha2::{Digest, Sha256};
use sqlx::Row;
use sqlx::any::AnyRow;

use crate::db::{Batch, Bind, Db, Dialect};
use crate::error::Error;

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

    /// Appends `record` (in memory; [`Head::write`] adds the statements) and returns its
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
        for row in &self.appended {
            let sql = dialect.insert_activity();
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
                    Bind::OptText(row.mac.clone()),
                ],
                Some(1),
            );
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
            // The checkpoint itself (see `checkpoint::verify_against`).
            None if self.seq == 0 => write!(f, "{}", self.why),
            None => write!(f, "row {} of the global chain: {}", self.seq, self.why),
        }
    }
}

/// What [`verify`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verification {
    /// Rows checked.
    pub rows: u64,
    /// Of them, rows whose MAC was checked (none without an audit key).
    pub keyed_rows: u64,
    /// Whether MACs were checked (the database was opened with its audit key).
    pub macs_checked: bool,
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
    let key = db.audit_key();
    let mut v = Verification {
        rows: 0,
        keyed_rows: 0,
        macs_checked: key.is_some(),
        chains: 0,
        first_bad: None,
    };
    if let Some(key) = key {
        v.first_bad = verify_keying(db, key).await?;
        if v.first_bad.is_some() {
            return Ok(v);
        }
    }
    if tenant.is_none() {
        v.first_bad = verify_legacy(db, &mut v).await?;
        if v.first_bad.is_some() {
            return Ok(v);
        }
    }
    // Chains number their rows from 1: a row numbered 0 or below was inserted beside a chain,
    // where no link or MAC covers it.
    let stray = sqlx::query(
        "SELECT tenant_id, MIN(tenant_seq) AS s FROM activity_logs \
         WHERE tenant_seq IS NOT NULL AND tenant_seq < 1 AND ($1 = '' OR tenant_id = $1) \
         GROUP BY tenant_id ORDER BY tenant_id",
    )
    .bind(tenant.unwrap_or("").to_string())
    .fetch_optional(db.pool())
    .await?;
    if let Some(row) = stray {
        let seq: i64 = row.try_get("s")?;
        v.first_bad = Some(BadRow {
            tenant_id: Some(row.try_get("tenant_id")?),
            seq,
            why: format!(
                "a row numbered {seq} lies outside the chain (rows are numbered from 1): it was inserted"
            ),
        });
        return Ok(v);
    }
    let mut heads = sqlx::query(match tenant {
        Some(_) => {
            "SELECT tenant_id, seq, last_hash, keyed_from, mac FROM audit_heads WHERE tenant_id = $1"
        }
        None => {
            "SELECT tenant_id, seq, last_hash, keyed_from, mac FROM audit_heads ORDER BY tenant_id"
        }
    });
    if let Some(t) = tenant {
        heads = heads.bind(t.to_string());
    }
    let heads = heads.fetch_all(db.pool()).await?;
    for head in heads {
        let tenant_id: String = head.try_get("tenant_id")?;
        v.chains += 1;
        let head = TenantHead {
            seq: head.try_get("seq")?,
            hash: head.try_get("last_hash")?,
            keyed_from: head.try_get("keyed_from")?,
            mac: head.try_get("mac")?,
        };
        if let Some(bad) = verify_tenant(db, key, &tenant_id, head, &mut v).await? {
            v.first_bad = Some(bad);
            return Ok(v);
        }
    }
    if tenant.is_none() && key.is_some() {
        // A keyed database gives every tenant a head when it is created.
        let headless = sqlx::query(
            "SELECT t.id FROM tenants t LEFT JOIN audit_heads h ON h.tenant_id = t.id \
             WHERE h.tenant_id IS NULL ORDER BY t.id",
        )
        .fetch_optional(db.pool())
        .await?;
        if let Some(row) = headless {
            v.first_bad = Some(BadRow {
                tenant_id: Some(row.try_get("id")?),
                seq: 0,
                why: "the tenant has no chain head (it was removed)".into(),
            });
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

/// With a key: the log carries its keying record (a log with rows but without one was never
/// keyed, or was stripped of it: both are reported, never assumed harmless), and the frozen global
/// chain's head is the one anchored under the key when the log was keyed.
async fn verify_keying(db: &Db, key: &AuditKey) -> Result<Option<BadRow>> {
    let bad = |why: String| {
        Ok(Some(BadRow {
            tenant_id: None,
            seq: 0,
            why,
        }))
    };
    let meta = sqlx::query(
        "SELECT key_fingerprint, legacy_seq, legacy_hash, legacy_mac FROM audit_meta WHERE id = 1",
    )
    .fetch_optional(db.pool())
    .await?;
    let Some(meta) = meta else {
        let rows: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM activity_logs")
            .fetch_one(db.pool())
            .await?;
        if rows == 0 {
            return Ok(None);
        }
        return bad(
            "the log carries no record of an audit key although one was given: it was never \
             keyed, or its keying was stripped (MACs, keyed_from and audit_meta removed: \
             tampering). Do not key it again unless you know it never was; compare it with \
             your latest checkpoint"
                .into(),
        );
    };
    if meta.try_get::<String, _>("key_fingerprint")? != key.fingerprint() {
        return bad("the log's keying record names another key".into());
    }
    let anchored_seq: Option<i64> = meta.try_get("legacy_seq")?;
    let anchored_hash: Option<String> = meta.try_get("legacy_hash")?;
    let anchored_mac: Option<String> = meta.try_get("legacy_mac")?;
    let (seq, hash) = legacy_head(&mut *db.pool().acquire().await?).await?;
    let expected = key.legacy_mac(seq, hash.as_deref());
    if anchored_seq != Some(seq)
        || anchored_hash != hash
        || !AuditKey::same(anchored_mac.as_deref(), &expected)
    {
        return bad(format!(
            "the frozen global chain (rows written before per-tenant chains) changed since the \
             log was keyed: its head is at row {seq}, not where it was anchored (rows were \
             forged into it, or removed)"
        ));
    }
    Ok(None)
}

/// The chain a [`walk`] reads: the frozen global chain (rows written before per-tenant chains),
/// or one tenant's.
#[derive(Clone, Copy)]
enum Chain<'a> {
    Legacy,
    Tenant(&'a str),
}

/// Where a [`walk`] ended: at the chain's last row (`seq`, 0 for an empty chain, and its
/// hash), or at the first row that breaks it.
enum Walked {
    End { seq: i64, hash: Option<String> },
    Bad { seq: i64, why: String },
}

/// The one walker of a hash chain: reads `chain` from row 1 in order, a page at a time, and
/// checks that rows are numbered without gaps, each links to the previous row's hash, and each
/// hashes to what it stores; `each` checks more of a row (its MAC) and may name why it is bad.
async fn walk(
    db: &Db,
    chain: Chain<'_>,
    v: &mut Verification,
    mut each: impl FnMut(i64, &AnyRow, &str) -> Result<Option<String>>,
) -> Result<Walked> {
    const PAGE: i64 = 1000;
    let mut expected = 1i64;
    let mut prev: Option<String> = None;
    loop {
        let page = match chain {
            Chain::Legacy => sqlx::query(
                "SELECT seq, tenant_id, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash \
                 FROM activity_logs WHERE tenant_seq IS NULL AND seq >= $1 ORDER BY seq LIMIT $2",
            )
            .bind(expected)
            .bind(PAGE),
            Chain::Tenant(tenant_id) => sqlx::query(
                "SELECT tenant_seq AS seq, api_key_id, action, entity_type, entity_id, detail, created_at, prev_hash, hash, mac \
                 FROM activity_logs WHERE tenant_id = $1 AND tenant_seq >= $2 ORDER BY tenant_seq LIMIT $3",
            )
            .bind(tenant_id.to_string())
            .bind(expected)
            .bind(PAGE),
        }
        .fetch_all(db.pool())
        .await?;
        let n = page.len();
        for row in page {
            let seq: i64 = row.try_get("seq")?;
            let bad = |seq: i64, why: String| Ok(Walked::Bad { seq, why });
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
            let field = |name: &str| row.try_get::<String, _>(name);
            let (action, entity_type, entity_id, detail, created_at) = (
                field("action")?,
                field("entity_type")?,
                field("entity_id")?,
                field("detail")?,
                field("created_at")?,
            );
            let tenant_id = match chain {
                Chain::Legacy => field("tenant_id")?,
                Chain::Tenant(tenant_id) => tenant_id.to_string(),
            };
            let hashed = Hashed {
                prev_hash: prev_hash.as_deref(),
                seq,
                tenant_id: &tenant_id,
                api_key_id: api_key_id.as_deref(),
                action: &action,
                entity_type: &entity_type,
                entity_id: &entity_id,
                detail: &detail,
                created_at: &created_at,
            };
            let computed = match chain {
                Chain::Legacy => hashed.legacy_hash(),
                Chain::Tenant(_) => hashed.chain_hash(),
            };
            let stored: String = row.try_get("hash")?;
            if computed != stored {
                return bad(
                    seq,
                    "its contents do not match its hash (the row was edited)".into(),
                );
            }
            if let Some(why) = each(seq, &row, &stored)? {
                return bad(seq, why);
            }
            prev = Some(stored);
            expected += 1;
            v.rows += 1;
        }
        if (n as i64) < PAGE {
            break;
        }
    }
    Ok(Walked::End {
        seq: expected - 1,
        hash: prev,
    })
}

async fn verify_legacy(db: &Db, v: &mut Verification) -> Result<Option<BadRow>> {
    let bad = |seq: i64, why: String| {
        Ok(Some(BadRow {
            tenant_id: None,
            seq,
            why,
        }))
    };
    let (last, prev) = match walk(db, Chain::Legacy, v, |_, _, _| Ok(None)).await? {
        Walked::Bad { seq, why } => return bad(seq, why),
        Walked::End { seq, hash } => (seq, hash),
    };
    if last > 0 {
        v.chains += 1;
    }
    let head = sqlx::query("SELECT seq, last_hash FROM audit_head WHERE id = 1")
        .fetch_optional(db.pool())
        .await?;
    let (head_seq, head_hash): (i64, Option<String>) = match head {
        Some(h) => (h.try_get("seq")?, h.try_get("last_hash")?),
        None => (0, None),
    };
    if head_seq != last || head_hash != prev {
        return bad(
            last + 1,
            format!(
                "the chain head points at row {head_seq} but the log ends at row {last} (rows were removed from the end)"
            ),
        );
    }
    Ok(None)
}

/// What [`repair_keying`] did to one tenant's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyingRepair {
    /// The tenant.
    pub tenant_id: String,
    /// The rows that carried (or should have carried) a MAC before, now hash-chained only:
    /// `first..=last`.
    pub first: i64,
    /// See `first`.
    pub last: i64,
}

/// Recovery for a chain that a server without the audit key extended after the log was keyed
/// (`init-audit-key` run while such a server was writing, before servers refused to): its
/// head's MAC no longer verifies and every write is refused. Only when the chain's hashes and
/// links verify (so the rows are in order and unedited since they were chained), keys the chain
/// again from its next row on: the rows since it was first keyed become hash-chained only, like
/// rows written before a log is keyed, and say so in the result. Refused for a head that
/// verifies, and for a chain that does not verify without MACs (that is tampering, not a race).
/// Run it only for a chain you know was extended that way: it cannot tell that from a log
/// whose MACs were stripped.
pub async fn repair_keying(db: &Db, tenant_id: &str) -> crate::Result<KeyingRepair> {
    let key = db.audit_key().ok_or_else(|| {
        Error::Config("repairing the keying needs the audit key: give --audit-key-file".into())
    })?;
    let head =
        sqlx::query("SELECT seq, last_hash, keyed_from, mac FROM audit_heads WHERE tenant_id = $1")
            .bind(tenant_id.to_string())
            .fetch_optional(db.pool())
            .await?
            .ok_or_else(|| Error::Config(format!("tenant {tenant_id} has no audit chain head")))?;
    let head = TenantHead {
        seq: head.try_get("seq")?,
        hash: head.try_get("last_hash")?,
        keyed_from: head.try_get("keyed_from")?,
        mac: head.try_get("mac")?,
    };
    if Head::new(
        tenant_id,
        head.seq,
        head.hash.clone(),
        head.keyed_from,
        head.mac.as_deref(),
        Some(key),
    )
    .is_ok()
    {
        return Err(Error::Config(format!(
            "the chain head of tenant {tenant_id} verifies: nothing to repair"
        )));
    }
    let (seq, hash, old_from) = (head.seq, head.hash.clone(), head.keyed_from);
    let mut v = Verification {
        rows: 0,
        keyed_rows: 0,
        macs_checked: false,
        chains: 0,
        first_bad: None,
    };
    if let Some(bad) = verify_tenant(db, None, tenant_id, head, &mut v).await? {
        return Err(Error::Config(format!(
            "the chain of tenant {tenant_id} does not verify even without MACs ({bad}): that is \
             tampering, not a keying race; nothing was repaired"
        )));
    }
    let from = seq + 1;
    let changed = sqlx::query(
        "UPDATE audit_heads SET keyed_from = $1, mac = $2 WHERE tenant_id = $3 AND seq = $4",
    )
    .bind(from)
    .bind(key.head_mac(tenant_id, seq, hash.as_deref(), from))
    .bind(tenant_id.to_string())
    .bind(seq)
    .execute(db.pool())
    .await?;
    if changed.rows_affected() != 1 {
        return Err(Error::Config(format!(
            "the chain of tenant {tenant_id} moved while it was being repaired: run it again"
        )));
    }
    Ok(KeyingRepair {
        tenant_id: tenant_id.to_string(),
        first: old_from.unwrap_or(1).min(from),
        last: seq,
    })
}

/// A tenant's chain head as stored.
struct TenantHead {
    seq: i64,
    hash: Option<String>,
    keyed_from: Option<i64>,
    mac: Option<String>,
}

async fn verify_tenant(
    db: &Db,
    key: Option<&AuditKey>,
    tenant_id: &str,
    head: TenantHead,
    v: &mut Verification,
) -> Result<Option<BadRow>> {
    let TenantHead {
        seq: head_seq,
        hash: head_hash,
        keyed_from,
        mac: head_mac,
    } = head;
    // Rows from here on must carry a MAC (with a key; without one, none is checked).
    let keyed_from = match key {
        Some(_) => keyed_from.unwrap_or(i64::MAX),
        None => i64::MAX,
    };
    let bad = |seq: i64, why: String| {
        Ok(Some(BadRow {
            tenant_id: Some(tenant_id.to_string()),
            seq,
            why,
        }))
    };
    let mut keyed_rows = 0;
    let walked = walk(db, Chain::Tenant(tenant_id), v, |seq, row, stored| {
        if let Some(key) = key
            && seq >= keyed_from
        {
            let mac: Option<String> = row.try_get("mac")?;
            if !AuditKey::same(mac.as_deref(), &key.row_mac(tenant_id, seq, stored)) {
                return Ok(Some(
                    "its MAC does not verify with the audit key (the row was edited, \
                     re-chained or written without the key)"
                        .into(),
                ));
            }
            keyed_rows += 1;
        }
        Ok(None)
    })
    .await?;
    v.keyed_rows += keyed_rows;
    let (last, prev) = match walked {
        Walked::Bad { seq, why } => return bad(seq, why),
        Walked::End { seq, hash } => (seq, hash),
    };
    if head_seq != last || head_hash != prev {
        return bad(
            last + 1,
            format!(
                "the chain head points at row {head_seq} but the chain ends at row {last} (rows were removed from the end)"
            ),
        );
    }
    if let Some(key) = key {
        let ok = keyed_from != i64::MAX
            && AuditKey::same(
                head_mac.as_deref(),
                &key.head_mac(tenant_id, head_seq, head_hash.as_deref(), keyed_from),
            );
        if !ok {
            return bad(
                head_seq,
                "the chain head does not verify with the audit key (it was moved, reset or \
                 stripped of its MAC)"
                    .into(),
            );
        }
    }
    Ok(None)
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
}
