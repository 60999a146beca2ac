//! Redaction (extension `redaction`, docs/history.md "Redaction"): the content of one version,
//! or of every version holding a given text, removed for good, in one transaction with one
//! audit row per version (`context.redact`, never the text). The version keeps its row, number
//! and `content_sha256`; its content becomes `NULL`, its size 0, and `redacted_at` says when.
//!
//! A file's current content is never redacted behind its back: a version that is a live
//! context's current state, or (matching) a live context whose content holds the text, refuses
//! the whole request with nothing changed, so that the text is gone from everything the server
//! answers once a redaction succeeds. On SQLite the write-ahead log is then checkpointed and
//! truncated ([`Db::truncate_wal`]) after the search index is merged into one segment (no page
//! of it keeps a replaced file's terms); freed space is zeroed by `secure_delete`.
//!
//! Matching reads the content of the versions in range (an external id, a prefix, or the
//! tenant): the one request of the server that reads what a tenant holds, for an operator's
//! rare use, bounded by retention and by [`MAX_REDACTED_VERSIONS`] versions changed a request.

use contextq_api::history::{
    Action, MAX_MATCHING_BYTES, MAX_REDACTED_VERSIONS, RedactedVersion, Redaction,
};
use serde::Deserialize;

use super::{Actor, Error, Outcome, Result, decode, now, write};
use crate::db::{Batch, Bind, Db};

/// Which versions a redaction takes.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// One version of an external id.
    Version {
        /// The external id.
        external_id: &'a str,
        /// Its version number.
        version: i64,
    },
    /// Every version whose content holds `text`, within `within`.
    Matching {
        /// The text (exact, case-sensitive).
        text: &'a str,
        /// Where to look.
        within: Within<'a>,
    },
}

/// Where a matching redaction looks.
#[derive(Debug, Clone, Copy)]
pub enum Within<'a> {
    /// One external id's versions.
    ExternalId(&'a str),
    /// The versions of every external id starting with this.
    Prefix(&'a str),
    /// Every version of the tenant.
    Tenant,
}

/// A redaction request: its target, in one workspace's versions (slug) when given, after
/// `after_seq` (a dry run's paging), or only the plan (`dry_run`).
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Which versions.
    pub target: Target<'a>,
    /// Only versions written in this workspace (slug).
    pub workspace: Option<&'a str>,
    /// Only versions with a larger `seq`.
    pub after_seq: Option<i64>,
    /// Answer the plan, change nothing.
    pub dry_run: bool,
}

/// A version as the read under the lock found it.
#[derive(Deserialize)]
struct Found {
    s: i64,
    e: String,
    n: i64,
    c: String,
    a: String,
    t: String,
    z: i64,
    h: Option<String>,
    r: Option<String>,
    /// 1: it is the current state of a live context.
    l: i64,
}

#[derive(Deserialize)]
struct Live {
    e: String,
}

/// `POST /api/redactions`: redacts what `request` names in the actor's tenant (see the module
/// documentation); refused with nothing changed when that would leave the text in a file's
/// current content.
pub async fn redact(db: &Db, actor: Actor<'_>, request: Request<'_>) -> Result<Redaction> {
    let workspace_id = match request.workspace {
        Some(slug) => Some(super::workspaces::id_of(db, actor.tenant_id, slug).await?),
        None => None,
    };
    let (sql, binds) = read(db, actor.tenant_id, &request, workspace_id.as_deref())?;
    let entity = match request.target {
        Target::Version { external_id, .. } => external_id,
        Target::Matching { .. } => "redaction",
    };
    let out = write(db, actor, entity, (sql, binds), |mut head, row| {
        let rows: String = row.try_get("rows")?;
        let mut found: Vec<Found> = decode(&rows, "context_versions")?;
        // By `seq` whatever order the aggregate kept: `afterSeq` pages on the last one.
        found.sort_by_key(|v| v.s);
        let more = found.len() > MAX_REDACTED_VERSIONS;
        found.truncate(MAX_REDACTED_VERSIONS);
        match request.target {
            Target::Version {
                external_id,
                version,
            } => {
                let Some(v) = found.first() else {
                    return Err(Error::VersionNotFound {
                        id: external_id.to_string(),
                        version,
                    });
                };
                if v.a == Action::Delete.as_str() {
                    return Err(Error::Invalid(format!(
                        "version {version} of {external_id:?} is a delete: it holds no content to redact"
                    )));
                }
                if v.l == 1 {
                    return Err(Error::LiveContent {
                        external_id: external_id.to_string(),
                        version: Some(version),
                    });
                }
            }
            Target::Matching { .. } => {
                let live: Option<String> = row.try_get("live")?;
                let live: Vec<Live> = decode(live.as_deref().unwrap_or("[]"), "contexts")?;
                if let Some(first) = live.first() {
                    return Err(Error::LiveContent {
                        external_id: first.e.clone(),
                        version: None,
                    });
                }
            }
        }
        let at = now();
        let mut answer = Redaction {
            redacted: Vec::with_capacity(found.len()),
            more,
            dry_run: request.dry_run,
            wal_truncated: None,
        };
        let mut batch = Batch::default();
        for v in &found {
            let already = v.r.is_some();
            answer.redacted.push(RedactedVersion {
                external_id: v.e.clone(),
                version: v.n,
                seq: v.s,
                context_id: v.c.clone(),
                action: v.a.parse().map_err(|e| {
                    Error::Corrupt(format!("context_versions.action: {e}"))
                })?,
                created_at: v.t.clone(),
                size_bytes: v.z.max(0) as u64,
                content_sha256: v.h.clone(),
                redacted_at: match &v.r {
                    Some(r) => Some(r.clone()),
                    None if request.dry_run => None,
                    None => Some(at.clone()),
                },
                already,
            });
            if already || request.dry_run {
                continue;
            }
            batch.push(
                "UPDATE context_versions SET content = NULL, size_bytes = 0, redacted_at = $1, redacted_by = $4 \
                 WHERE tenant_id = $2 AND seq = $3 AND redacted_at IS NULL",
                vec![
                    Bind::Text(at.clone()),
                    Bind::Text(actor.tenant_id.to_string()),
                    Bind::Int(v.s),
                    Bind::OptText(actor.key_id.map(str::to_string)),
                ],
                Some(1),
            );
            head.append(actor.record(
                "context.redact",
                "context",
                &v.c,
                serde_json::json!({"externalId": v.e, "version": v.n, "versionSeq": v.s}),
            ));
        }
        if batch.is_empty() {
            return Ok(Outcome::Unchanged(answer));
        }
        Ok(Outcome::Write(head, batch, answer))
    })
    .await?;
    let changed = out.redacted.iter().any(|v| !v.already);
    if request.dry_run || !changed {
        return Ok(out);
    }
    // The search index holds current content only, but a page of it may still hold a replaced
    // file's terms as a separator (`context_fts_idx`) until its segment is merged: merged now.
    let wal_truncated = db
        .truncate_wal_after(Some(crate::db::MERGE_ALL))
        .await
        .unwrap_or_else(|e| {
            tracing::warn!(error = %e, "the write-ahead log was not truncated after a redaction");
            Some(false)
        });
    Ok(Redaction {
        wal_truncated,
        ..out
    })
}

/// The read under the lock: the head, the versions the request takes (at most one more than
/// a request changes, by `seq`), each with whether it is a live context's current state, and
/// for a matching request the live contexts whose content holds the text.
fn read(
    db: &Db,
    tenant_id: &str,
    request: &Request<'_>,
    workspace_id: Option<&str>,
) -> Result<(String, Vec<Bind>)> {
    let mut binds = vec![Bind::Text(tenant_id.to_string())];
    let arg = |binds: &mut Vec<Bind>, b: Bind| {
        binds.push(b);
        format!("${}", binds.len())
    };
    let find = db.dialect().position_fn();
    // Conditions on the versions (`v`) and, for matching, on the live contexts (`c`).
    let mut versions = String::new();
    let mut live = String::new();
    match request.target {
        Target::Version {
            external_id,
            version,
        } => {
            if version < 1 {
                return Err(Error::Invalid(format!(
                    "version: a number from 1, got {version}"
                )));
            }
            let e = arg(&mut binds, Bind::Text(external_id.to_string()));
            let n = arg(&mut binds, Bind::Int(version));
            versions.push_str(&format!(" AND v.external_id = {e} AND v.version = {n}"));
        }
        Target::Matching { text, within } => {
            if text.is_empty() || text.len() > MAX_MATCHING_BYTES {
                return Err(Error::Invalid(format!(
                    "matching: 1 to {MAX_MATCHING_BYTES} bytes of text"
                )));
            }
            let t = arg(&mut binds, Bind::Text(text.to_string()));
            versions.push_str(&format!(" AND {find}(v.content, {t}) > 0"));
            live.push_str(&format!(" AND {find}(c.content, {t}) > 0"));
            match within {
                Within::ExternalId(id) => {
                    let e = arg(&mut binds, Bind::Text(id.to_string()));
                    versions.push_str(&format!(" AND v.external_id = {e}"));
                    live.push_str(&format!(" AND c.external_id = {e}"));
                }
                Within::Prefix(prefix) => {
                    for (op, bound) in super::external_id_range(Some(prefix), None) {
                        let b = arg(&mut binds, Bind::Text(bound));
                        versions.push_str(&format!(" AND v.external_id {op} {b}"));
                        live.push_str(&format!(" AND c.external_id {op} {b}"));
                    }
                }
                Within::Tenant => {}
            }
        }
    }
    if let Some(id) = workspace_id {
        let w = arg(&mut binds, Bind::Text(id.to_string()));
        versions.push_str(&format!(" AND v.workspace_id = {w}"));
        live.push_str(&format!(" AND c.workspace_id = {w}"));
    }
    if let Some(after) = request.after_seq {
        let s = arg(&mut binds, Bind::Int(after));
        versions.push_str(&format!(" AND v.seq > {s}"));
    }
    let rows_json = db.dialect().json_objects(&[
        ("s", "q.s"),
        ("e", "q.e"),
        ("n", "q.n"),
        ("c", "q.c"),
        ("a", "q.a"),
        ("t", "q.t"),
        ("z", "q.z"),
        ("h", "q.h"),
        ("r", "q.r"),
        ("l", "q.l"),
    ]);
    let live_column = if matches!(request.target, Target::Matching { .. }) {
        format!(
            ", (SELECT {} FROM (SELECT c.external_id AS e FROM contexts c \
               WHERE c.tenant_id = $1{live} ORDER BY c.external_id LIMIT 5) q2) AS live",
            db.dialect().json_objects(&[("e", "q2.e")])
        )
    } else {
        String::new()
    };
    let sql = format!(
        "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, h.mac AS head_mac, \
         (SELECT {rows_json} FROM (SELECT v.seq AS s, v.external_id AS e, v.version AS n, v.context_id AS c, \
            v.action AS a, v.created_at AS t, v.size_bytes AS z, v.content_sha256 AS h, v.redacted_at AS r, \
            CASE WHEN v.action <> 'delete' AND EXISTS (SELECT 1 FROM contexts x WHERE x.tenant_id = $1 \
              AND x.id = v.context_id AND x.external_id = v.external_id AND x.version = v.context_version) \
            THEN 1 ELSE 0 END AS l \
            FROM context_versions v WHERE v.tenant_id = $1{versions} ORDER BY v.seq LIMIT {limit}) q) AS rows\
         {live_column} \
         FROM audit_heads h WHERE h.tenant_id = $1",
        limit = MAX_REDACTED_VERSIONS + 1,
    );
    Ok((sql, binds))
}
