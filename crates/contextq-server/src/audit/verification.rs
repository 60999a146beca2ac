//! Verifying the log: every tenant's chain walked from its first row to its head (hashes,
//! links, the head, and with the key every MAC), the rows kept from before chains were
//! per tenant, and the recovery of a chain a server without the key extended.

use super::*;

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
pub(super) async fn verify_keying(db: &Db, key: &AuditKey) -> Result<Option<BadRow>> {
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
pub(super) enum Chain<'a> {
    Legacy,
    Tenant(&'a str),
}

/// Where a [`walk`] ended: at the chain's last row (`seq`, 0 for an empty chain, and its
/// hash), or at the first row that breaks it.
pub(super) enum Walked {
    End { seq: i64, hash: Option<String> },
    Bad { seq: i64, why: String },
}

/// The one walker of a hash chain: reads `chain` from row 1 in order, a page at a time, and
/// checks that rows are numbered without gaps, each links to the previous row's hash, and each
/// hashes to what it stores; `each` checks more of a row (its MAC) and may name why it is bad.
pub(super) async fn walk(
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

pub(super) async fn verify_legacy(db: &Db, v: &mut Verification) -> Result<Option<BadRow>> {
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
pub(super) struct TenantHead {
    seq: i64,
    hash: Option<String>,
    keyed_from: Option<i64>,
    mac: Option<String>,
}

pub(super) async fn verify_tenant(
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
