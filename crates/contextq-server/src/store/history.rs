//! Versions of contexts (extension `history`, docs/contextq-api.md "Versions"): what every
//! create, update and delete wrote, kept in `context_versions` after the context is gone, with
//! retention; and the reads of them (one external id's or one context's versions, one version
//! with its content, every external id under a prefix at a point in time).
//!
//! Versions are written by `Versions`, inside the write that makes the change (same
//! transaction, same batch), numbered per external id from what that write read under the
//! tenant's head lock. Retention is applied in the same batch: the last
//! [`crate::db::DbOptions::versions_kept`] versions of each external id; and, per tenant, at
//! most the plan's context cap times that many versions, pruning the tenant's oldest first
//! (never the newest version of an external id that is not deleted, never one of the external
//! ids the write changes). No write counts rows: the tenant's count of versions is kept on its
//! audit head (`audit_heads.versions`, moved by each write with the head), and the versions the
//! bound may prune are flagged (`superseded`: a delete, or a version with a newer one) and read
//! oldest first through a partial index, at most what the write adds plus [`CATCH_UP`]. An
//! external id's kept versions are one run `min..=max`: both rules prune from the oldest.

mod read;

use std::collections::HashMap;

use contextq_api::Plan;
use contextq_api::history::{
    Action, HistoryPage, PastState, PathAt, Version, VersionPage, VersionSummary,
};
use sqlx::Row as _;

use super::{Error, Result, tags_from, tags_text, workspaces};
use crate::audit::Head;
use crate::db::{Batch, Bind, Db, Row, placeholders, value_rows};

pub use read::{AtQuery, Subject, at, content_of, decode_version_cursor, get, list, parse_time};

/// An external id's versions, as a write reads them under the lock: the oldest kept number
/// (`None`: none kept) and the last number ever given (`version_counters`; `None`: never had
/// one), which stays when its versions are pruned so that numbers never restart.
#[derive(Debug, Clone, Copy, Default, serde::Deserialize)]
pub(super) struct Kept {
    pub min: Option<i64>,
    pub last: Option<i64>,
}

/// The state of a context a change wrote (what a version keeps).
pub(super) struct Change<'a> {
    pub action: Action,
    pub external_id: &'a str,
    pub context_id: &'a str,
    pub context_version: i64,
    pub workspace_id: &'a str,
    pub kind: &'a str,
    pub title: Option<&'a str>,
    pub tags: &'a [String],
    /// `None` for a delete.
    pub content: Option<&'a str>,
    /// The audit sequence number of the change ([`crate::audit::Head::append`]).
    pub seq: i64,
    /// A create by a rename: the external id it came from.
    pub renamed_from: Option<&'a str>,
    /// A create or update by a restore: the version it put back (stored beside the action,
    /// shown as `restore`).
    pub restored_from: Option<i64>,
    pub at: &'a str,
}

/// How many versions past the tenant's bound one write prunes beyond those it adds: a tenant over
/// its bound (a plan lowered, retention shortened) comes back under it by this many per write.
pub const CATCH_UP: usize = 16;

/// The columns of a write's read (`h` the tenant's head, `t` the tenant, `$1` the tenant id)
/// that give its [`Usage`]: `usage_contexts`, `usage_versions`, and `prunable`, the oldest
/// superseded versions (not of the external ids `changed`, an SQL list) when the write, adding
/// at most `appends` versions, could pass the plan's bound; else `NULL`.
pub(super) fn usage_columns(db: &Db, appends: usize, changed: &str) -> String {
    let kept = i64::from(db.versions_kept().max(1));
    let arms: String = [Plan::Free, Plan::Pro, Plan::Unlimited]
        .iter()
        .filter_map(|p| {
            p.context_cap()
                .map(|cap| format!(" WHEN '{}' THEN {}", p.as_str(), cap.saturating_mul(kept)))
        })
        .collect();
    let seqs = db.dialect().json_objects(&[("seq", "p.s")]);
    format!(
        "h.contexts AS usage_contexts, h.versions AS usage_versions, \
         CASE WHEN h.versions + {appends} > (CASE t.plan{arms} END) THEN \
           (SELECT {seqs} FROM (SELECT v.seq AS s FROM context_versions v \
            WHERE v.tenant_id = $1 AND v.superseded = 1 AND v.external_id NOT IN ({changed}) \
            ORDER BY v.seq LIMIT {limit}) p) END AS prunable",
        limit = appends + CATCH_UP,
    )
}

/// A tenant's counts as a write reads them under its head lock ([`usage_columns`]).
#[derive(Debug, Clone, Default)]
pub(super) struct Usage {
    /// Its contexts.
    pub contexts: i64,
    /// Its versions.
    pub versions: i64,
    /// Versions the tenant's bound may prune, oldest first (empty: the write cannot pass it).
    pub prunable: Vec<i64>,
}

impl Usage {
    /// The [`Usage`] of a row read with [`usage_columns`].
    pub fn from_row(row: &Row) -> Result<Usage> {
        #[derive(serde::Deserialize)]
        struct Seq {
            seq: i64,
        }
        let prunable: Option<String> = row.try_get("prunable")?;
        let prunable = match prunable {
            Some(json) => super::decode::<Vec<Seq>>(&json, "context_versions")?
                .into_iter()
                .map(|s| s.seq)
                .collect(),
            None => Vec::new(),
        };
        Ok(Usage {
            contexts: row.try_get("usage_contexts")?,
            versions: row.try_get("usage_versions")?,
            prunable,
        })
    }
}

/// The versions one write adds and the retention it applies.
pub(super) struct Versions<'a> {
    tenant_id: &'a str,
    key_id: Option<&'a str>,
    /// The tenant's versions before this write, and those its bound may prune.
    usage: Usage,
    /// At most this many versions per tenant (`None`: no bound but each external id's).
    tenant_cap: Option<i64>,
    kept: i64,
    paths: HashMap<String, Kept>,
    inserted: i64,
    pruned: i64,
}

impl<'a> Versions<'a> {
    /// Versions of a write by `key_id` in `tenant_id` (with `usage`, as the write read it),
    /// under `plan`, keeping `kept` per external id.
    pub fn new(
        tenant_id: &'a str,
        key_id: Option<&'a str>,
        usage: Usage,
        plan: Plan,
        kept: u32,
    ) -> Self {
        let kept = i64::from(kept.max(1));
        Versions {
            tenant_id,
            key_id,
            usage,
            tenant_cap: plan.context_cap().map(|cap| cap.saturating_mul(kept)),
            kept,
            paths: HashMap::new(),
            inserted: 0,
            pruned: 0,
        }
    }

    /// Versions of a write by `actor` on `db` (keeping what the server is configured to keep).
    pub fn of_write(db: &Db, actor: super::Actor<'a>, usage: Usage, plan: Plan) -> Self {
        Versions::new(
            actor.tenant_id,
            actor.key_id,
            usage,
            plan,
            db.versions_kept(),
        )
    }

    /// What the write read of `external_id`'s kept versions.
    pub fn known(&mut self, external_id: &str, kept: Kept) {
        self.paths.insert(external_id.to_string(), kept);
    }

    /// Adds `change` as the external id's next version (its kept versions must be
    /// [`known`](Self::known)), pruning what is past the external id's retention.
    pub fn push(&mut self, batch: &mut Batch, change: Change<'_>) {
        let kept = self
            .paths
            .entry(change.external_id.to_string())
            .or_default();
        let version = kept.last.unwrap_or(0) + 1;
        let min = kept.min.unwrap_or(version);
        if let (Some(_), Some(last)) = (kept.min, kept.last) {
            // The newest version so far is newest no more: the tenant's bound may prune it.
            batch.push(
                "UPDATE context_versions SET superseded = 1 \
                 WHERE tenant_id = $1 AND external_id = $2 AND version = $3 AND superseded = 0",
                vec![
                    Bind::Text(self.tenant_id.to_string()),
                    Bind::Text(change.external_id.to_string()),
                    Bind::Int(last),
                ],
                None,
            );
        }
        batch.push(
            format!("{COUNTERS_INSERT} ($1, $2, $3){COUNTERS_CONFLICT}"),
            counter_values(self.tenant_id, &change, version),
            Some(1),
        );
        batch.push(
            format!("{VERSIONS_INSERT} {}", value_rows(1, VERSION_COLUMNS)),
            version_values((self.tenant_id, self.key_id), &change, version),
            Some(1),
        );
        self.inserted += 1;
        // Keep versions newer than `version - kept`.
        let oldest_kept = version - self.kept + 1;
        let mut new_min = min;
        if min < oldest_kept {
            batch.push(
                "DELETE FROM context_versions WHERE tenant_id = $1 AND external_id = $2 AND version < $3",
                vec![
                    Bind::Text(self.tenant_id.to_string()),
                    Bind::Text(change.external_id.to_string()),
                    Bind::Int(oldest_kept),
                ],
                None,
            );
            self.pruned += oldest_kept - min;
            new_min = oldest_kept;
        }
        *kept = Kept {
            min: Some(new_min),
            last: Some(version),
        };
    }

    /// [`push`](Self::push) for each of `changes`, each of another external id: those of
    /// external ids that never had a version (first versions: nothing to supersede or prune)
    /// go in one multi-row insert of their counters and one of their versions, per
    /// [`ROWS_PER_INSERT`]; the others one by one. The rows are those `push` writes.
    pub fn push_many(&mut self, batch: &mut Batch, changes: Vec<Change<'_>>) {
        let (first, others): (Vec<Change<'_>>, Vec<Change<'_>>) =
            changes.into_iter().partition(|c| {
                self.paths
                    .get(c.external_id)
                    .is_none_or(|k| k.min.is_none() && k.last.is_none())
            });
        for change in others {
            self.push(batch, change);
        }
        for chunk in first.chunks(ROWS_PER_INSERT) {
            let n = chunk.len();
            let (mut counters, mut versions) = (Vec::new(), Vec::new());
            for change in chunk {
                counters.extend(counter_values(self.tenant_id, change, 1));
                versions.extend(version_values((self.tenant_id, self.key_id), change, 1));
                self.paths.insert(
                    change.external_id.to_string(),
                    Kept {
                        min: Some(1),
                        last: Some(1),
                    },
                );
            }
            batch.push(
                format!(
                    "{COUNTERS_INSERT} {}{COUNTERS_CONFLICT}",
                    value_rows(n, COUNTER_COLUMNS)
                ),
                counters,
                Some(n as u64),
            );
            batch.push(
                format!("{VERSIONS_INSERT} {}", value_rows(n, VERSION_COLUMNS)),
                versions,
                Some(n as u64),
            );
            self.inserted += n as i64;
        }
    }

    /// Applies the tenant's bound, pruning its oldest superseded versions (read with the write:
    /// never the newest of an external id that is not deleted, never one of the external ids
    /// this write changes), and adds the versions this write made and pruned to `head`'s count.
    pub fn finish(mut self, batch: &mut Batch, head: &mut Head) {
        if let Some(cap) = self.tenant_cap {
            let rows = self.usage.versions + self.inserted - self.pruned;
            let over = usize::try_from(rows - cap)
                .unwrap_or(0)
                .min(self.usage.prunable.len());
            if over > 0 {
                let mut binds = vec![Bind::Text(self.tenant_id.to_string())];
                binds.extend(self.usage.prunable[..over].iter().map(|&s| Bind::Int(s)));
                batch.push(
                    format!(
                        "DELETE FROM context_versions WHERE tenant_id = $1 AND superseded = 1 AND seq IN ({})",
                        placeholders(2, over)
                    ),
                    binds,
                    // Read under the head lock, which every writer of versions holds.
                    Some(over as u64),
                );
                self.pruned += over as i64;
            }
        }
        head.count(0, self.inserted - self.pruned);
    }
}

/// The values of `change`'s row in `version_counters`, at `version`.
fn counter_values(tenant_id: &str, change: &Change<'_>, version: i64) -> Vec<Bind> {
    vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(change.external_id.to_string()),
        Bind::Int(version),
    ]
}

/// The values of `change`'s row in `context_versions`, as `version`.
fn version_values(
    (tenant_id, key_id): (&str, Option<&str>),
    change: &Change<'_>,
    version: i64,
) -> Vec<Bind> {
    vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Int(change.seq),
        Bind::Text(change.external_id.to_string()),
        Bind::Int(version),
        Bind::Text(change.context_id.to_string()),
        Bind::Int(change.context_version),
        Bind::Text(change.workspace_id.to_string()),
        Bind::Text(change.action.as_str().to_string()),
        Bind::Text(change.kind.to_string()),
        Bind::OptText(change.title.map(str::to_string)),
        Bind::Text(tags_text(change.tags)),
        Bind::OptText(change.content.map(str::to_string)),
        Bind::Int(change.content.map_or(0, |c| c.len() as i64)),
        Bind::OptText(key_id.map(str::to_string)),
        Bind::Text(change.at.to_string()),
        Bind::OptText(change.content.map(sha256_hex)),
        // A delete is never the version the bound must keep.
        Bind::Int(i64::from(change.action == Action::Delete)),
        Bind::OptText(change.renamed_from.map(str::to_string)),
        Bind::OptInt(change.restored_from),
    ]
}

/// Rows of one multi-row insert of `Versions::push_many`: 19,000 values at most, under
/// SQLite's 32,766.
pub const ROWS_PER_INSERT: usize = 1_000;

const COUNTERS_INSERT: &str =
    "INSERT INTO version_counters (tenant_id, external_id, last_version) VALUES";
const COUNTERS_CONFLICT: &str =
    " ON CONFLICT (tenant_id, external_id) DO UPDATE SET last_version = excluded.last_version";
const COUNTER_COLUMNS: usize = 3;
const VERSIONS_INSERT: &str = "INSERT INTO context_versions (tenant_id, seq, external_id, version, context_id, context_version, workspace_id, action, type, title, tags, content, size_bytes, api_key_id, created_at, content_sha256, superseded, renamed_from, restored_from) VALUES";
const VERSION_COLUMNS: usize = 19;

/// Lowercase hex SHA-256 of `content`, to compare versions without their content.
pub fn sha256_hex(content: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(content.as_bytes()))
}

/// The columns that give a [`Kept`] of `external_id_expr` (in the tenant `$1`) in a write's
/// read, named `kept_min` and `kept_last`.
pub(super) fn kept_columns(external_id_expr: &str) -> String {
    format!(
        "(SELECT MIN(v.version) FROM context_versions v WHERE v.tenant_id = $1 AND v.external_id = {external_id_expr}) AS kept_min, \
         (SELECT n.last_version FROM version_counters n WHERE n.tenant_id = $1 AND n.external_id = {external_id_expr}) AS kept_last"
    )
}

/// The [`Kept`] of a row read with [`kept_columns`].
pub(super) fn kept_from(row: &Row) -> Result<Kept> {
    Ok(Kept {
        min: row.try_get("kept_min")?,
        last: row.try_get("kept_last")?,
    })
}

/// A cursor that is `tag` followed by a positive number (versions: `v`, audit rows: `s`).
pub(super) fn decode_number_cursor(tag: char, cursor: &str) -> Result<i64> {
    cursor
        .strip_prefix(tag)
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| Error::BadParameter("invalid cursor: pass nextCursor back unchanged".into()))
}

#[cfg(test)]
mod tests {
    use super::read::encode_version_cursor;
    use super::*;

    #[test]
    fn cursors_and_times() {
        assert_eq!(
            decode_version_cursor(&encode_version_cursor(42)).unwrap(),
            42
        );
        assert!(decode_version_cursor("42").is_err());
        assert!(decode_version_cursor("v0").is_err());
        assert_eq!(
            parse_time("2026-12-03T11:00:00+01:00").unwrap(),
            "2026-12-03T10:00:00.000Z"
        );
        assert!(parse_time("yesterday").is_err());
    }

    fn change(external_id: &str) -> Change<'_> {
        Change {
            action: Action::Update,
            external_id,
            context_id: "c",
            context_version: 4,
            workspace_id: "w",
            kind: "note",
            title: None,
            tags: &[],
            content: Some("x"),
            seq: 9,
            at: "now",
            renamed_from: None,
            restored_from: None,
        }
    }

    /// The SQL of a write of `a` kept as `kept`, under a retention of 3 versions.
    fn write_of_a(kept: Kept) -> (Versions<'static>, String) {
        let mut v = Versions::new("t", None, Usage::default(), Plan::Free, 3);
        v.known("a", kept);
        let mut batch = Batch::default();
        v.push(&mut batch, change("a"));
        (v, sqlite_text(batch))
    }

    /// The statements of `batch` with their values inlined as SQLite literals, to read in
    /// assertions.
    fn sqlite_text(batch: Batch) -> String {
        batch
            .statements()
            .iter()
            .map(|(sql, binds, _)| crate::db::inline(sql, binds, crate::db::Backend::Sqlite))
            .collect::<Vec<_>>()
            .join("; ")
    }

    #[test]
    fn retention_prunes_what_is_past_it() {
        let (v, sql) = write_of_a(Kept {
            min: Some(1),
            last: Some(3),
        });
        // Version 4 inserted; version 3 superseded; versions below 2 pruned; far from the
        // tenant's bound.
        assert!(sql.contains("VALUES ('t', 9, 'a', 4,"), "{sql}");
        assert!(sql.contains("SET superseded = 1"), "{sql}");
        assert!(sql.contains("external_id = 'a' AND version = 3"), "{sql}");
        assert!(sql.contains("external_id = 'a' AND version < 2"), "{sql}");
        assert_eq!(v.pruned, 1);
        let mut batch = Batch::default();
        let mut head = fresh_head();
        v.finish(&mut batch, &mut head);
        assert!(batch.is_empty());
        // One version in, one out: nothing to add to the tenant's count.
        head.write(&mut batch, crate::db::Backend::Sqlite.dialect());
        assert!(batch.is_empty());
    }

    fn fresh_head() -> Head {
        Head::new("t", 0, None, None, None, None).unwrap()
    }

    #[test]
    fn numbers_go_on_from_the_counter_when_every_version_was_pruned() {
        let (_, sql) = write_of_a(Kept {
            min: None,
            last: Some(7),
        });
        assert!(sql.contains("VALUES ('t', 9, 'a', 8,"), "{sql}");
        assert!(sql.contains("version_counters"), "{sql}");
        assert!(!sql.contains("DELETE"), "{sql}");
    }

    /// The SQL of a write of one version of a new external id, keeping 2 per id, by a tenant
    /// with `usage` on `plan`.
    fn one_version_written(usage: Usage, plan: Plan) -> String {
        let mut v = Versions::new("t", None, usage, plan, 2);
        v.known("new", Kept::default());
        let mut batch = Batch::default();
        let mut head = fresh_head();
        v.push(&mut batch, change("new"));
        v.finish(&mut batch, &mut head);
        head.write(&mut batch, crate::db::Backend::Sqlite.dialect());
        sqlite_text(batch)
    }

    #[test]
    fn the_tenant_bound_prunes_what_the_write_read_as_prunable() {
        // Free: 100 contexts x 2 versions = 200 at most; 200 kept, one more inserted: the
        // oldest prunable version read with the write (seq 5) goes, and no other.
        let usage = Usage {
            contexts: 100,
            versions: 200,
            prunable: vec![5, 8],
        };
        let sql = one_version_written(usage, Plan::Free);
        assert!(sql.contains("superseded = 1 AND seq IN (5)"), "{sql}");
        assert!(!sql.contains("audit_heads"), "one in, one out: {sql}");
        // Unlimited: no tenant bound.
        let usage = Usage {
            contexts: 0,
            versions: 1_000_000,
            prunable: vec![5],
        };
        let sql = one_version_written(usage, Plan::Unlimited);
        assert!(!sql.contains("seq IN"), "{sql}");
        assert!(sql.contains("versions = versions + 1"), "{sql}");
    }
}
