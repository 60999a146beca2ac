//! Directories: every context under an external-id prefix deleted, or moved under another
//! prefix, in one transaction (extension `by-prefix`), so that a memory directory's delete or
//! rename is all or nothing on this server (the TypeScript package's named non-atomic gaps close here); and a
//! directory read two levels deep with its sizes added up here (extension `tree`), so that a
//! `view` of a directory is one small answer however many files lie deeper.
//!
//! One write as every other (`store::write`): the read under the head lock takes the rows
//! under the prefix (at most [`MAX_PREFIX_CONTEXTS`] + 1: a larger directory is refused, 413,
//! and the client moves it file by file), their kept versions and, for a rename, whether
//! anything is at the destination; the batch changes each row, appends its audit rows and
//! versions, and moves the head. Nothing here scans more than the directory.

use contextq_api::Plan;
use std::collections::BTreeMap;

use contextq_api::bodies::{PrefixChange, PrefixChanges, Tree, TreeEntry};
use contextq_api::history::Action;
use contextq_api::limits::{MAX_PREFIX_CONTEXTS, MAX_PREFIX_RENAME_BYTES, MAX_TITLE_BYTES};
use serde::Deserialize;
use sqlx::Row as _;

use super::contexts::{Moving, Scope, push_move};
use super::history::{Change, Kept, Usage, Versions, usage_columns};
use super::{Actor, Error, Outcome, Result, decode, now, tags_from, write};
use crate::db::{Batch, Bind, Db, Row};

/// What a [`rename_prefix`] moves: every context under `from` to `to` + what follows, its
/// title rewritten by `retitle` when given.
#[derive(Debug, Clone, Copy)]
pub struct Move<'a> {
    /// The directory's prefix now, ending with `/`.
    pub from: &'a str,
    /// Its new prefix, ending with `/`.
    pub to: &'a str,
    /// How titles follow.
    pub retitle: Option<Retitle<'a>>,
}

/// Titles a rename rewrites: a title that starts with `from` starts with `to` instead (the
/// memory tool titles each file with its path).
#[derive(Debug, Clone, Copy)]
pub struct Retitle<'a> {
    /// The old start of a title.
    pub from: &'a str,
    /// Its replacement.
    pub to: &'a str,
}

/// A context under the prefix, as the read under the lock found it.
#[derive(Deserialize)]
struct Found {
    id: String,
    #[serde(rename = "e")]
    external_id: String,
    #[serde(rename = "wid")]
    workspace_id: String,
    #[serde(rename = "ws")]
    workspace: String,
    #[serde(rename = "ar")]
    archived: i64,
    #[serde(rename = "ty")]
    kind: String,
    #[serde(rename = "ti")]
    title: Option<String>,
    #[serde(rename = "tg")]
    tags: String,
    #[serde(rename = "ve")]
    version: i64,
    #[serde(rename = "co")]
    content: Option<String>,
    #[serde(rename = "mn")]
    kept_min: Option<i64>,
    #[serde(rename = "lv")]
    kept_last: Option<i64>,
    #[serde(rename = "tmn")]
    to_kept_min: Option<i64>,
    #[serde(rename = "tlv")]
    to_kept_last: Option<i64>,
}

/// `GET /api/contexts/tree?prefix=` (extension `tree`): the contexts under `prefix` within
/// `scope`, `depth` (1 or 2) levels deep, with each directory's files and bytes added up. The
/// database adds them up (one index range of the directory, grouped by the first two path
/// segments), so what comes back is one row per entry, not per file. A `scope.workspace` that
/// does not exist is "not found" (as for a listing). With `workspace_first`, a context counts
/// only when the first segment after the prefix is its own workspace's slug (the memory tool's
/// per-workspace layout, `<tag>:<workspace>/...`).
pub async fn tree(
    db: &Db,
    tenant_id: &str,
    prefix: &str,
    scope: Scope<'_>,
    options: TreeOptions<'_>,
) -> Result<Tree> {
    let TreeOptions {
        workspace_first,
        depth,
        within,
    } = options;
    if prefix.len() > MAX_TITLE_BYTES {
        return Err(Error::BadParameter(format!(
            "prefix: at most {MAX_TITLE_BYTES} bytes"
        )));
    }
    if !(1..=2).contains(&depth) {
        return Err(Error::BadParameter("depth: 1 or 2".into()));
    }
    let mut filter =
        String::from("c.tenant_id = $1 AND c.external_id >= $2 AND c.external_id < $3");
    let mut binds = vec![tenant_id.to_string(), prefix.to_string(), range_end(prefix)];
    // The workspace looked up in the same query (one trip to the database, not two); its
    // absence is told apart from an empty tree below.
    let workspace = scope.workspace.map(|slug| {
        binds.push(slug.to_string());
        let id = format!(
            "(SELECT id FROM workspaces WHERE tenant_id = $1 AND slug = ${})",
            binds.len()
        );
        filter.push_str(&format!(" AND c.workspace_id = {id}"));
        (slug, id)
    });
    if workspace_first {
        filter.push_str(&format!(
            " AND substr(c.external_id, {}, length(w.slug) + 1) = w.slug || '/'",
            prefix.chars().count() + 1
        ));
    }
    if let Some(slugs) = within {
        let start = binds.len() + 1;
        binds.extend(slugs.iter().cloned());
        let list: Vec<String> = (start..start + slugs.len())
            .map(|i| format!("${i}"))
            .collect();
        filter.push_str(&super::slug_in(&list));
    }
    let from = if workspace_first || within.is_some() {
        "contexts c JOIN workspaces w ON w.id = c.workspace_id"
    } else {
        "contexts c"
    };
    if let Some(tag) = scope.tag {
        binds.push(tag.to_string());
        filter.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM context_tags t WHERE t.context_id = c.id AND t.tag = ${})",
            binds.len()
        ));
    }
    // Each context's path after the prefix, size and time, as one row of JSON (one message from
    // sqlx's SQLite worker instead of one a row), cut into levels here: SQL's substr/instr
    // expressions for the same cost several times the scan.
    let sql = format!(
        "SELECT substr(c.external_id, {start}) AS rel, c.size_bytes AS sz, c.updated_at AS at \
         FROM {from} WHERE {filter}",
        start = prefix.chars().count() + 1,
    );
    let rows = db.dialect().json_rows(&sql, &["rel", "sz", "at"]);
    let ws = workspace.as_ref().map_or("''", |(_, id)| id.as_str());
    let sql = format!("SELECT {ws} AS ws, ({rows}) AS rows");
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for b in binds {
        query = query.bind(b);
    }
    let row = query.fetch_one(&mut *db.reader().await?).await?;
    if let Some((slug, _)) = workspace
        && row.try_get::<Option<String>, _>("ws")?.is_none()
    {
        return Err(Error::WorkspaceNotFound {
            slug: slug.to_string(),
        });
    }
    let json: String = row.try_get("rows")?;
    let rows: Vec<(String, i64, String)> = serde_json::from_str(&json)
        .map_err(|e| Error::Corrupt(format!("the tree's rows are not the JSON expected: {e}")))?;
    let mut tree = Tree::default();
    let mut entries: BTreeMap<String, TreeEntry> = BTreeMap::new();
    let mut add = |key: &str, bytes: u64, at: &str| {
        let e = match entries.get_mut(key) {
            Some(e) => e,
            None => entries.entry(key.to_string()).or_insert_with(|| TreeEntry {
                path: key.to_string(),
                files: 0,
                size_bytes: 0,
                updated_at: String::new(),
            }),
        };
        e.files += 1;
        e.size_bytes += bytes;
        if at > e.updated_at.as_str() {
            e.updated_at = at.to_string();
        }
    };
    for (rel, bytes, at) in &rows {
        let bytes = (*bytes).max(0) as u64;
        tree.files += 1;
        tree.size_bytes += bytes;
        if *at > tree.updated_at {
            tree.updated_at = at.clone();
        }
        // The first segment with its `/` (or the whole path of a file directly beneath), then,
        // two levels deep, the first two.
        let first = rel.find('/').map_or(rel.len(), |i| i + 1);
        if depth == 2 && first < rel.len() {
            let second = rel[first..].find('/').map_or(rel.len(), |i| first + i + 1);
            add(&rel[..second], bytes, at);
        }
        add(&rel[..first], bytes, at);
    }
    tree.entries = entries.into_values().collect();
    Ok(tree)
}

/// How [`tree`] reads: `depth` levels (1 or 2), with `workspace_first` (the per-workspace
/// layout's check), only `within` these workspaces (slugs; a key limited to them) when given.
#[derive(Debug, Clone, Copy)]
pub struct TreeOptions<'a> {
    /// Count a context only when the first segment after the prefix is its workspace's slug.
    pub workspace_first: bool,
    /// 1 or 2.
    pub depth: u8,
    /// Only these workspaces; `None`: every one.
    pub within: Option<&'a [String]>,
}

/// The end of a prefix's range of external ids (exclusive).
fn range_end(prefix: &str) -> String {
    format!("{prefix}\u{10FFFF}")
}

fn check_prefix(field: &str, prefix: &str) -> Result<()> {
    if prefix.len() < 2 || !prefix.ends_with('/') || prefix.len() > MAX_TITLE_BYTES {
        return Err(Error::Invalid(format!(
            "{field}: a directory's prefix, 2 to {MAX_TITLE_BYTES} bytes ending with '/'"
        )));
    }
    Ok(())
}

/// `POST /api/contexts/by-prefix/delete`: deletes every context under `prefix` within `scope`,
/// each with its `delete` version, in one transaction. "Not found" when there is none.
pub async fn delete_prefix(
    db: &Db,
    actor: Actor<'_>,
    prefix: &str,
    scope: Scope<'_>,
) -> Result<PrefixChanges> {
    delete_prefix_with(db, actor, prefix, scope, Reach::All).await
}

/// What a prefix delete takes of what it finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Everything under the prefix or nothing (more than the limit, or any in an archived
    /// workspace, is refused).
    All,
    /// The first [`MAX_PREFIX_CONTEXTS`] under the prefix, archived workspaces too (deleting a
    /// Memory Stores store: call again until "not found").
    Sweep,
}

/// [`delete_prefix`] reaching what `reach` says.
pub(crate) async fn delete_prefix_with(
    db: &Db,
    actor: Actor<'_>,
    prefix: &str,
    scope: Scope<'_>,
    reach: Reach,
) -> Result<PrefixChanges> {
    check_prefix("prefix", prefix)?;
    let read = read_prefix(db, actor, prefix, None);
    write(db, actor, prefix, read, |mut head, row| {
        let (rows, mut versions) = rows_in(db, actor, row, prefix, scope, reach)?;
        let at = now();
        let mut batch = Batch::default();
        let mut changed = Vec::with_capacity(rows.len());
        for r in &rows {
            let detail = serde_json::json!({"externalId": r.external_id, "version": r.version, "prefix": prefix});
            let seq = super::contexts::delete_row(&mut batch, &mut head, actor, &r.id, r.version, detail);
            let tags = tags_from(&r.tags);
            versions.push(
                &mut batch,
                change(Action::Delete, r, &r.external_id, r.version, &tags, None, seq, &at),
            );
            changed.push(PrefixChange {
                id: r.id.clone(),
                external_id: r.external_id.clone(),
                to: None,
                version: r.version,
            });
        }
        head.count(-(rows.len() as i64), 0);
        versions.finish(&mut batch, &mut head);
        Ok(Outcome::Write(head, batch, PrefixChanges { changed }))
    })
    .await
}

/// `POST /api/contexts/by-prefix/rename`: moves every context under `from` within `scope` to
/// `to` + what follows `from`, in one transaction, as [`super::contexts::rename`] moves one
/// (a `delete` version of the old id, a `create` version of the new one with `renamed_from`;
/// the row keeps its id and goes up one version). Refused, nothing changed, when anything is at
/// `to`, when `to` is beneath `from`, or when there is nothing to move.
pub async fn rename_prefix(
    db: &Db,
    actor: Actor<'_>,
    moved: Move<'_>,
    scope: Scope<'_>,
) -> Result<PrefixChanges> {
    let Move { from, to, retitle } = moved;
    check_prefix("from", from)?;
    check_prefix("to", to)?;
    if to.starts_with(from) {
        return Err(Error::Invalid(format!(
            "to: {to:?} is beneath {from:?}; a directory cannot move into itself"
        )));
    }
    let read = read_prefix(db, actor, from, Some(to));
    write(db, actor, from, read, |mut head, row| {
        let taken: i64 = row.try_get("to_taken")?;
        if taken > 0 {
            return Err(Error::ExternalIdExists {
                external_id: to.trim_end_matches('/').to_string(),
            });
        }
        let (rows, mut versions) = rows_in(db, actor, row, from, scope, Reach::All)?;
        let bytes: usize = rows
            .iter()
            .map(|r| r.content.as_deref().map_or(0, str::len))
            .sum();
        if bytes > MAX_PREFIX_RENAME_BYTES {
            return Err(Error::TooLarge {
                field: "the directory's content",
                bytes,
                limit: MAX_PREFIX_RENAME_BYTES,
            });
        }
        let at = now();
        let mut batch = Batch::default();
        let mut changed = Vec::with_capacity(rows.len());
        for r in &rows {
            let new_id = format!("{to}{}", &r.external_id[from.len()..]);
            versions.known(
                &new_id,
                Kept {
                    min: r.to_kept_min,
                    last: r.to_kept_last,
                },
            );
            let title = match (retitle, &r.title) {
                (Some(t), Some(old)) if old.starts_with(t.from) => {
                    let new = format!("{}{}", t.to, &old[t.from.len()..]);
                    (new.len() <= MAX_TITLE_BYTES)
                        .then_some(new)
                        .or(r.title.clone())
                }
                _ => r.title.clone(),
            };
            let tags = tags_from(&r.tags);
            push_move(
                &mut batch,
                &mut head,
                &mut versions,
                actor,
                Moving {
                    id: &r.id,
                    from: &r.external_id,
                    to: &new_id,
                    version: r.version,
                    old_title: r.title.as_deref(),
                    title: title.as_deref(),
                    workspace_id: &r.workspace_id,
                    kind: &r.kind,
                    tags: &tags,
                    content: r.content.as_deref().unwrap_or_default(),
                    rewritten: false,
                    at: &at,
                },
            );
            let version = r.version + 1;
            changed.push(PrefixChange {
                id: r.id.clone(),
                external_id: r.external_id.clone(),
                to: Some(new_id),
                version,
            });
        }
        versions.finish(&mut batch, &mut head);
        Ok(Outcome::Write(head, batch, PrefixChanges { changed }))
    })
    .await
}

/// One version of `r` (under `external_id`, at `context_version`).
#[allow(clippy::too_many_arguments)]
fn change<'a>(
    action: Action,
    r: &'a Found,
    external_id: &'a str,
    context_version: i64,
    tags: &'a [String],
    content: Option<&'a str>,
    seq: i64,
    at: &'a str,
) -> Change<'a> {
    Change {
        action,
        external_id,
        context_id: &r.id,
        context_version,
        workspace_id: &r.workspace_id,
        kind: &r.kind,
        title: r.title.as_deref(),
        tags,
        content,
        seq,
        at,
        renamed_from: None,
        restored_from: None,
    }
}

/// The read of a prefix write: the head, the tenant's counts, the rows under `prefix` (with
/// their content and the destination's kept versions when moving to `to`), and whether
/// anything is at `to`.
fn read_prefix(db: &Db, actor: Actor<'_>, prefix: &str, to: Option<&str>) -> (String, Vec<Bind>) {
    let rename = to.is_some();
    let mut fields = vec![
        ("id", "q.id"),
        ("e", "q.e"),
        ("wid", "q.wid"),
        ("ws", "q.ws"),
        ("ar", "q.ar"),
        ("ty", "q.ty"),
        ("ti", "q.ti"),
        ("tg", "q.tg"),
        ("ve", "q.ve"),
        ("mn", "q.mn"),
        ("lv", "q.lv"),
    ];
    if rename {
        fields.extend([("co", "q.co"), ("tmn", "q.tmn"), ("tlv", "q.tlv")]);
    }
    let rows_json = db.dialect().json_objects(&fields);
    // The destination of a row: `to` ($4) + what follows the prefix (characters, as substr
    // counts them; the rows start with the prefix, byte for byte).
    let dest = format!(
        "($4 || substr(c.external_id, {}))",
        prefix.chars().count() + 1
    );
    let moved = if rename {
        format!(
            ", c.content AS co, \
             (SELECT MIN(v.version) FROM context_versions v WHERE v.tenant_id = $1 AND v.external_id = {dest}) AS tmn, \
             (SELECT n.last_version FROM version_counters n WHERE n.tenant_id = $1 AND n.external_id = {dest}) AS tlv"
        )
    } else {
        String::new()
    };
    // Versions of the ids this write changes are pruned by their own retention, never by the
    // tenant's bound in the same batch.
    let changed = if rename {
        "SELECT x.external_id FROM context_versions x WHERE x.tenant_id = $1 \
         AND ((x.external_id >= $2 AND x.external_id < $3) OR (x.external_id >= $4 AND x.external_id < $6))"
    } else {
        "SELECT x.external_id FROM context_versions x WHERE x.tenant_id = $1 \
         AND x.external_id >= $2 AND x.external_id < $3"
    };
    let appends = MAX_PREFIX_CONTEXTS * if rename { 2 } else { 1 };
    let usage = usage_columns(db, appends, changed);
    let taken = if rename {
        ", (SELECT COUNT(*) FROM (SELECT 1 AS x FROM contexts d WHERE d.tenant_id = $1 \
           AND (d.external_id = $5 OR (d.external_id >= $4 AND d.external_id < $6)) LIMIT 1) q2) AS to_taken"
    } else {
        ""
    };
    let sql = format!(
        "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, h.mac AS head_mac, \
         {usage}, t.plan AS plan, \
         (SELECT {rows_json} FROM (SELECT c.id AS id, c.external_id AS e, c.workspace_id AS wid, \
            w.slug AS ws, w.archived AS ar, c.type AS ty, c.title AS ti, c.tags AS tg, c.version AS ve, \
            (SELECT MIN(v.version) FROM context_versions v WHERE v.tenant_id = $1 AND v.external_id = c.external_id) AS mn, \
            (SELECT n.last_version FROM version_counters n WHERE n.tenant_id = $1 AND n.external_id = c.external_id) AS lv \
            {moved} \
            FROM contexts c JOIN workspaces w ON w.id = c.workspace_id \
            WHERE c.tenant_id = $1 AND c.external_id >= $2 AND c.external_id < $3 \
            ORDER BY c.external_id LIMIT {limit}) q) AS rows{taken} \
         FROM audit_heads h JOIN tenants t ON t.id = h.tenant_id WHERE h.tenant_id = $1",
        limit = MAX_PREFIX_CONTEXTS + 1,
    );
    let mut binds = vec![
        Bind::Text(actor.tenant_id.to_string()),
        Bind::Text(prefix.to_string()),
        Bind::Text(range_end(prefix)),
    ];
    if let Some(to) = to {
        binds.extend([
            Bind::Text(to.to_string()),
            Bind::Text(to.trim_end_matches('/').to_string()),
            Bind::Text(range_end(to)),
        ]);
    }
    (sql, binds)
}

/// The rows under `prefix` within `scope`, checked (some, at most the limit, none archived),
/// and the versions their write records.
fn rows_in<'a>(
    db: &Db,
    actor: Actor<'a>,
    row: &Row,
    prefix: &str,
    scope: Scope<'_>,
    reach: Reach,
) -> Result<(Vec<Found>, Versions<'a>)> {
    let plan: String = row.try_get("plan")?;
    let plan: Plan = plan
        .parse()
        .map_err(|_| Error::Corrupt(format!("tenant {} has plan {plan:?}", actor.tenant_id)))?;
    let rows: Vec<Found> = decode(&row.try_get::<String, _>("rows")?, "contexts")?;
    if rows.len() > MAX_PREFIX_CONTEXTS && reach == Reach::All {
        return Err(Error::TooMany {
            what: "contexts under the prefix",
            limit: MAX_PREFIX_CONTEXTS,
        });
    }
    let mut rows: Vec<Found> = rows
        .into_iter()
        .filter(|r| scope.admits_parts(&tags_from(&r.tags), &r.workspace))
        .collect();
    rows.sort_by(|a, b| a.external_id.cmp(&b.external_id));
    // A sweep takes the first ones; the rest are the next sweep's.
    rows.truncate(MAX_PREFIX_CONTEXTS);
    if rows.is_empty() {
        return Err(Error::ContextNotFound {
            id: prefix.to_string(),
        });
    }
    if let Some(r) = rows.iter().find(|r| r.archived != 0 && reach == Reach::All) {
        return Err(Error::WorkspaceArchived {
            slug: r.workspace.clone(),
        });
    }
    let mut versions = Versions::of_write(db, actor, Usage::from_row(row)?, plan);
    for r in &rows {
        versions.known(
            &r.external_id,
            Kept {
                min: r.kept_min,
                last: r.kept_last,
            },
        );
    }
    Ok((rows, versions))
}
