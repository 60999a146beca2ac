//! Contexts: read one, list a page, bulk upsert, update, text edit, delete (each change
//! audited).

mod bulk;
mod change;
mod rename;

use std::collections::{HashMap, HashSet};

use contextq_api::bodies::EditedContext;
use contextq_api::limits::{
    MAX_CONTENT_BYTES, MAX_EXTERNAL_ID_BYTES, MAX_LARGE_BULK_ITEMS, MAX_PAGE, MAX_TAG_BYTES,
    MAX_TAGS, MAX_TITLE_BYTES, MAX_TYPE_BYTES,
};
use contextq_api::{Context, ContextInput, ContextSummary, Plan, TextEdit, UpsertResult};
use sqlx::AnyConnection;

use super::decode;
use super::history::{Change, Kept, Usage, Versions, kept_columns, kept_from, usage_columns};
use super::search::{Indexed, Terms};
use super::{Actor, Error, Outcome, Result, new_id, now, tags_from, tags_text, workspaces, write};
use crate::audit::Head;
use crate::db::{Batch, Bind, Db, Row, placeholders};
use contextq_api::history::Action;

pub use bulk::bulk_upsert;
pub(crate) use bulk::bulk_upsert_with_seqs;
pub(crate) use change::{Checked, delete_with, update_checked, update_with_seq};
pub use change::{delete, delete_by_external, edit, update};
pub(crate) use rename::{Also, rename_with};
pub use rename::{Rename, rename};

/// A statement a write adds first to its batch that must change no row: a caller's invariant
/// (the Memory Stores door: no memory overlaps the one written) checked again under the write's
/// lock, so that two writes that each passed the caller's check before taking the lock cannot
/// both commit. One that changes a row rolls the write back as [`Error::ChangedConcurrently`].
/// Its SQL is an `UPDATE` that leaves the rows it matches as they were.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    /// The statement (`$1..$n` of its own).
    pub sql: String,
    /// Its values.
    pub binds: Vec<Bind>,
}

impl Guard {
    fn push(&self, batch: &mut Batch) {
        batch.push(self.sql.clone(), self.binds.clone(), Some(0));
    }
}

/// The columns of a summary (a context without its content), in one place; the joins give the
/// workspace's slug.
macro_rules! summary_columns {
    () => {
        "c.id, c.external_id, w.slug AS workspace, c.type, c.title, c.tags, c.version, c.size_bytes, c.created_at, c.updated_at"
    };
}

/// `FROM` with the join every read of contexts uses.
macro_rules! from_contexts {
    () => {
        " FROM contexts c JOIN workspaces w ON w.id = c.workspace_id "
    };
}

fn summary_from_row(row: &Row) -> Result<ContextSummary> {
    Ok(ContextSummary {
        id: row.try_get("id")?,
        external_id: row.try_get("external_id")?,
        workspace: row.try_get("workspace")?,
        kind: row.try_get("type")?,
        title: row.try_get("title")?,
        tags: tags_from(&row.try_get::<String, _>("tags")?),
        version: row.try_get("version")?,
        size_bytes: Some(row.try_get::<i64, _>("size_bytes")?.max(0) as u64),
        created_at: row.try_get("created_at")?,
        updated_at: row.try_get("updated_at")?,
    })
}

fn context_from_row(row: &Row) -> Result<Context> {
    let s = summary_from_row(row)?;
    Ok(Context {
        id: s.id,
        external_id: s.external_id,
        workspace: s.workspace,
        kind: s.kind,
        title: s.title,
        content: row.try_get("content")?,
        tags: s.tags,
        version: s.version,
        created_at: s.created_at,
        updated_at: s.updated_at,
    })
}

// ---------------------------------------------------------------------------------------------
// Reads

/// A context by external id.
pub async fn get_by_external(
    db: &Db,
    tenant_id: &str,
    external_id: &str,
) -> Result<Option<Context>> {
    let sql = concat!(
        "SELECT ",
        summary_columns!(),
        ", c.content",
        from_contexts!(),
        "WHERE c.tenant_id = $1 AND c.external_id = $2"
    );
    // A point read: on SQLite, on the direct connection when it is idle.
    let binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(external_id.to_string()),
    ];
    match db.read_one(sql, binds).await? {
        Some(row) => Ok(Some(context_from_row(&row)?)),
        None => Ok(None),
    }
}

/// A context by id.
pub async fn get(db: &Db, tenant_id: &str, id: &str) -> Result<Option<Context>> {
    get_in(&mut *db.reader().await?, tenant_id, id).await
}

async fn get_in(tx: &mut AnyConnection, tenant_id: &str, id: &str) -> Result<Option<Context>> {
    let sql = concat!(
        "SELECT ",
        summary_columns!(),
        ", c.content",
        from_contexts!(),
        "WHERE c.tenant_id = $1 AND c.id = $2"
    );
    one_context(tx, sql, tenant_id, id).await
}

/// The context `sql` selects with the tenant (`$1`) and one key (`$2`), if any.
async fn one_context(
    conn: &mut AnyConnection,
    sql: &'static str,
    tenant_id: &str,
    key: &str,
) -> Result<Option<Context>> {
    let row = sqlx::query(sql)
        .bind(tenant_id.to_string())
        .bind(key.to_string())
        .fetch_optional(&mut *conn)
        .await?;
    match row {
        Some(row) => Ok(Some(context_from_row(&Row::from_any(&row)?)?)),
        None => Ok(None),
    }
}

/// Filters and page of `GET /api/contexts`.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only this workspace (by slug).
    pub workspace: Option<String>,
    /// Only these workspaces (slugs; a key limited to them); `None`: every workspace.
    pub within: Option<Vec<String>>,
    /// Only contexts with this tag.
    pub tag: Option<String>,
    /// Only external ids starting with this (extension).
    pub external_id_prefix: Option<String>,
    /// Page size (1 to 500; see [`page_limit`]).
    pub limit: i64,
    /// Start after this external id (the decoded cursor).
    pub after: Option<String>,
}

/// `limit=` of `GET /api/contexts`: 500 when absent, at most 500.
pub fn page_limit(limit: Option<&str>) -> Result<i64> {
    match limit {
        None | Some("") => Ok(i64::from(MAX_PAGE)),
        Some(s) => match s.parse::<i64>() {
            Ok(n) if n >= 1 => Ok(n.min(i64::from(MAX_PAGE))),
            _ => Err(Error::BadParameter(format!(
                "limit must be an integer from 1 to {MAX_PAGE}, got {s:?}"
            ))),
        },
    }
}

/// A page of summaries ordered by external id, and the last external id if more follow.
pub async fn list(
    db: &Db,
    tenant_id: &str,
    q: &ListQuery,
) -> Result<(Vec<ContextSummary>, Option<String>)> {
    enum Bind {
        S(String),
        I(i64),
    }
    let mut sql = String::from(concat!(
        "SELECT ",
        summary_columns!(),
        from_contexts!(),
        "WHERE c.tenant_id = $1"
    ));
    let mut binds = vec![Bind::S(tenant_id.to_string())];
    let mut push = |sql: &mut String, fragment: &str, b: Bind| {
        binds.push(b);
        sql.push_str(&fragment.replace("$?", &format!("${}", binds.len())));
    };
    if let Some(slug) = &q.workspace {
        let id = workspaces::id_of(db, tenant_id, slug).await?;
        push(&mut sql, " AND c.workspace_id = $?", Bind::S(id));
    }
    if let Some(slugs) = &q.within {
        sql.push_str(" AND w.slug IN (");
        for (i, slug) in slugs.iter().enumerate() {
            push(
                &mut sql,
                if i == 0 { "$?" } else { ", $?" },
                Bind::S(slug.clone()),
            );
        }
        if slugs.is_empty() {
            sql.push_str("NULL");
        }
        sql.push(')');
    }
    for (op, bound) in super::external_id_range(q.external_id_prefix.as_deref(), q.after.as_deref())
    {
        push(
            &mut sql,
            &format!(" AND c.external_id {op} $?"),
            Bind::S(bound),
        );
    }
    if let Some(tag) = &q.tag {
        push(
            &mut sql,
            " AND EXISTS (SELECT 1 FROM context_tags t WHERE t.context_id = c.id AND t.tag = $?)",
            Bind::S(tag.clone()),
        );
    }
    push(
        &mut sql,
        " ORDER BY c.external_id LIMIT $?",
        Bind::I(q.limit + 1),
    );
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql));
    for b in binds {
        query = match b {
            Bind::S(s) => query.bind(s),
            Bind::I(i) => query.bind(i),
        };
    }
    let rows = query.fetch_all(&mut *db.reader().await?).await?;
    let mut items: Vec<ContextSummary> = Row::from_any_rows(&rows)?
        .iter()
        .map(summary_from_row)
        .collect::<Result<_>>()?;
    let next = if items.len() as i64 > q.limit {
        items.truncate(q.limit as usize);
        items.last().map(|c| c.external_id.clone())
    } else {
        None
    };
    Ok((items, next))
}

// ---------------------------------------------------------------------------------------------
// Writes: two round trips each on PostgreSQL (BEGIN with the read under the head lock; one
// batch with COMMIT); see the module docs of `crate::store`.

fn check_content(content: &str) -> Result<()> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(Error::TooLarge {
            field: "content",
            bytes: content.len(),
            limit: MAX_CONTENT_BYTES,
        });
    }
    Ok(())
}

fn check_title(field: &str, title: Option<&str>) -> Result<()> {
    match title {
        Some(t) if t.len() > MAX_TITLE_BYTES => Err(Error::Invalid(format!(
            "{field}: at most {MAX_TITLE_BYTES} bytes (got {})",
            t.len()
        ))),
        _ => Ok(()),
    }
}

fn check_tags(tags: &[String]) -> Result<()> {
    if tags.len() > MAX_TAGS || tags.iter().any(|t| t.is_empty() || t.len() > MAX_TAG_BYTES) {
        return Err(Error::Invalid(format!(
            "tags: at most {MAX_TAGS}, each 1 to {MAX_TAG_BYTES} bytes"
        )));
    }
    Ok(())
}

/// Statements that make a context's tag rows `new` where they were `old`.
fn retag(batch: &mut Batch, tenant_id: &str, context_id: &str, old: &[String], new: &[String]) {
    if old.is_empty() && new.is_empty() {
        return;
    }
    let gone: Vec<&String> = old
        .iter()
        .filter(|t| !new.contains(t))
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    if !gone.is_empty() {
        let mut binds = vec![Bind::Text(context_id.to_string())];
        binds.extend(gone.iter().map(|t| Bind::Text(t.to_string())));
        batch.push(
            format!(
                "DELETE FROM context_tags WHERE context_id = $1 AND tag IN ({})",
                placeholders(2, gone.len())
            ),
            binds,
            None,
        );
    }
    let mut added: Vec<&String> = Vec::new();
    for t in new {
        if !old.contains(t) && !added.contains(&t) {
            added.push(t);
        }
    }
    if !added.is_empty() {
        let mut binds = Vec::new();
        let rows: Vec<String> = added
            .iter()
            .map(|t| {
                let at = binds.len() + 1;
                binds.push(Bind::Text(context_id.to_string()));
                binds.push(Bind::Text(tenant_id.to_string()));
                binds.push(Bind::Text(t.to_string()));
                format!("(${}, ${}, ${})", at, at + 1, at + 2)
            })
            .collect();
        batch.push(
            format!(
                "INSERT INTO context_tags (context_id, tenant_id, tag) VALUES {} ON CONFLICT DO NOTHING",
                rows.join(", ")
            ),
            binds,
            None,
        );
    }
}

/// A context with the state of its workspace (archived?), as a write by id (or external id)
/// reads it under the head lock (`None`: no such context).
struct Locked {
    context: Option<(Context, bool)>,
    /// The context's workspace id.
    workspace_id: Option<String>,
    /// The context's external id's kept versions.
    kept: Kept,
    /// The tenant's counts, as the write read them, and plan.
    usage: Usage,
    plan: Plan,
}

/// The read of a write on one context (under the head lock): the head and the context (by
/// `c.id` or `c.external_id`, per `key_column`).
fn lock_context(db: &Db, tenant_id: &str, key_column: &str, key: &str) -> (String, Vec<Bind>) {
    let sql = format!(
        concat!(
            "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, h.mac AS head_mac, w.archived AS ws_archived, ",
            "{}, t.plan AS plan, c.workspace_id AS workspace_id, {}, ",
            summary_columns!(),
            ", c.content FROM audit_heads h JOIN tenants t ON t.id = h.tenant_id ",
            "LEFT JOIN contexts c ON c.tenant_id = h.tenant_id AND {} = $2 ",
            "LEFT JOIN workspaces w ON w.id = c.workspace_id ",
            "WHERE h.tenant_id = $1"
        ),
        usage_columns(db, 1, "COALESCE(c.external_id, '')"),
        kept_columns("c.external_id"),
        key_column,
    );
    let binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(key.to_string()),
    ];
    (sql, binds)
}

impl Locked {
    /// What [`lock_context`]'s row says.
    fn from_row(row: &Row) -> Result<Locked> {
        let context = match row.try_get::<Option<String>, _>("id")? {
            Some(_) => Some((
                context_from_row(row)?,
                row.try_get::<i64, _>("ws_archived")? != 0,
            )),
            None => None,
        };
        let plan: String = row.try_get("plan")?;
        Ok(Locked {
            context,
            workspace_id: row.try_get("workspace_id")?,
            kept: kept_from(row)?,
            usage: Usage::from_row(row)?,
            plan: plan
                .parse()
                .map_err(|_| Error::Corrupt(format!("a tenant has plan {plan:?}")))?,
        })
    }

    /// The versions of a write on this context, by `actor`.
    fn versions<'a>(&self, db: &Db, actor: Actor<'a>) -> Versions<'a> {
        let mut versions = Versions::of_write(db, actor, self.usage.clone(), self.plan);
        if let Some((c, _)) = &self.context {
            versions.known(&c.external_id, self.kept);
        }
        versions
    }
}

/// The workspace id of a context found under the lock (a context always has one).
/// The context a write by id locked, writable at `if_match` (see [`writable`]), with its
/// workspace and the versions the write records.
fn locked_writable<'a>(
    row: &Row,
    db: &Db,
    actor: Actor<'a>,
    id: &str,
    if_match: Option<i64>,
) -> Result<(Context, String, Versions<'a>)> {
    let locked = Locked::from_row(row)?;
    let versions = locked.versions(db, actor);
    let workspace_id = locked.workspace_id.clone();
    let old = writable(locked.context, id, if_match)?;
    Ok((old, present(workspace_id)?, versions))
}

fn present(workspace_id: Option<String>) -> Result<String> {
    workspace_id.ok_or_else(|| Error::Corrupt("a context without a workspace".into()))
}

/// Records `new` (after `action`) as its external id's next version, with retention, and what
/// it changes in the tenant's counts on `head`.
fn record_version(
    batch: &mut Batch,
    head: &mut Head,
    mut versions: Versions<'_>,
    (action, restored_from): (Action, Option<i64>),
    workspace_id: &str,
    new: &Context,
    seq: i64,
) {
    versions.push(
        batch,
        Change {
            action,
            external_id: &new.external_id,
            context_id: &new.id,
            context_version: new.version,
            workspace_id,
            kind: &new.kind,
            title: new.title.as_deref(),
            tags: &new.tags,
            content: (action != Action::Delete).then_some(new.content.as_str()),
            seq,
            at: &new.updated_at,
            renamed_from: None,
            restored_from,
        },
    );
    if action == Action::Delete {
        head.count(-1, 0);
    }
    versions.finish(batch, head);
}

/// The conditions a text edit or a rename puts on its context: it carries `tag` and lives in
/// `workspace`, each when given. A context outside them is "not found", as if absent.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scope<'a> {
    /// The tag the context must carry (the memory tool's scope tag).
    pub tag: Option<&'a str>,
    /// The slug of the workspace the context must live in.
    pub workspace: Option<&'a str>,
}

impl<'a> From<&'a contextq_api::bodies::Within> for Scope<'a> {
    fn from(w: &'a contextq_api::bodies::Within) -> Self {
        Scope {
            tag: w.require_tag.as_deref(),
            workspace: w.workspace.as_deref(),
        }
    }
}

impl Scope<'_> {
    fn admits(&self, c: &Context) -> bool {
        self.admits_parts(&c.tags, &c.workspace)
    }

    /// Whether a context with `tags` in `workspace` is within the conditions.
    pub(super) fn admits_parts(&self, tags: &[String], workspace: &str) -> bool {
        self.tag.is_none_or(|t| tags.iter().any(|x| x == t))
            && self.workspace.is_none_or(|w| workspace == w)
    }
}

/// The context of a write: present, in a writable workspace, at `if_match` when given.
fn writable(locked: Option<(Context, bool)>, id: &str, if_match: Option<i64>) -> Result<Context> {
    let (context, archived) =
        locked.ok_or_else(|| Error::ContextNotFound { id: id.to_string() })?;
    if archived {
        return Err(Error::WorkspaceArchived {
            slug: context.workspace,
        });
    }
    if let Some(expected) = if_match
        && expected != context.version
    {
        return Err(Error::VersionMismatch {
            id: id.to_string(),
            stored: context.version,
            expected,
        });
    }
    Ok(context)
}

/// The statement that writes a context's new content (and title, tags) from its version.
fn rewrite(batch: &mut Batch, tenant_id: &str, old: &Context, new: &Context) {
    batch.push(
        "UPDATE contexts SET content = $1, size_bytes = $2, title = $3, tags = $4, version = $5, updated_at = $6 \
         WHERE id = $7 AND tenant_id = $8 AND version = $9",
        vec![
            Bind::Text(new.content.clone()),
            Bind::Int(new.content.len() as i64),
            Bind::OptText(new.title.clone()),
            Bind::Text(tags_text(&new.tags)),
            Bind::Int(new.version),
            Bind::Text(new.updated_at.clone()),
            Bind::Text(old.id.clone()),
            Bind::Text(tenant_id.to_string()),
            Bind::Int(old.version),
        ],
        Some(1),
    );
    if new.content != old.content || new.external_id != old.external_id {
        let terms = super::search::Terms::of(&new.external_id, &new.content);
        batch.push_dialects(super::search::put(tenant_id, &old.id, terms));
    }
}

/// The audit action and detail of a context written by `actor`: `plain` (`context.create`,
/// `context.update`), or `context.restore` naming the version a restore put back.
fn written(
    actor: Actor<'_>,
    plain: &'static str,
    external_id: &str,
    version: i64,
) -> (&'static str, serde_json::Value) {
    let mut detail = serde_json::json!({"externalId": external_id, "version": version});
    match actor.restored_from {
        Some(n) => {
            detail["restoredFrom"] = n.into();
            ("context.restore", detail)
        }
        None => (plain, detail),
    }
}

/// A row moving to another external id, keeping its id: what [`rename`] writes for its row
/// and `rename_prefix` for each row beneath the directory.
pub(super) struct Moving<'a> {
    /// The row's id.
    pub id: &'a str,
    /// The external id it leaves.
    pub from: &'a str,
    /// The external id it takes.
    pub to: &'a str,
    /// Its version before the move (it goes up one).
    pub version: i64,
    /// Its title before the move (the `delete` version's).
    pub old_title: Option<&'a str>,
    /// Its title after the move.
    pub title: Option<&'a str>,
    /// Its workspace's id.
    pub workspace_id: &'a str,
    /// Its `type`.
    pub kind: &'a str,
    /// Its tags.
    pub tags: &'a [String],
    /// Its content after the move.
    pub content: &'a str,
    /// Whether `content` is new (the move also rewrites it) or the stored one.
    pub rewritten: bool,
    /// When (RFC 3339).
    pub at: &'a str,
}

/// Pushes a move: the row's update and search document, a `delete` version of `from` and a
/// `create` version of `to` (with `renamed_from`), each with its `context.rename` audit row.
pub(super) fn push_move<'a>(
    batch: &mut Batch,
    head: &mut Head,
    versions: &mut Versions<'a>,
    actor: Actor<'a>,
    m: Moving<'_>,
) {
    let version = m.version + 1;
    let mut binds = vec![
        Bind::Text(m.to.to_string()),
        Bind::OptText(m.title.map(str::to_string)),
        Bind::Int(version),
        Bind::Text(m.at.to_string()),
        Bind::Text(m.id.to_string()),
        Bind::Text(actor.tenant_id.to_string()),
        Bind::Int(m.version),
    ];
    let sql = if m.rewritten {
        binds.extend([
            Bind::Text(m.content.to_string()),
            Bind::Int(m.content.len() as i64),
        ]);
        "UPDATE contexts SET external_id = $1, title = $2, version = $3, updated_at = $4, \
         content = $8, size_bytes = $9 WHERE id = $5 AND tenant_id = $6 AND version = $7"
    } else {
        "UPDATE contexts SET external_id = $1, title = $2, version = $3, updated_at = $4 \
         WHERE id = $5 AND tenant_id = $6 AND version = $7"
    };
    batch.push(sql, binds, Some(1));
    let terms = super::search::Terms::of(m.to, m.content);
    batch.push_dialects(super::search::put(actor.tenant_id, m.id, terms));
    let detail = serde_json::json!({"externalId": m.from, "to": m.to, "version": version});
    let gone = head.append(actor.record("context.rename", "context", m.id, detail));
    let change = |action, external_id, title, content, seq, renamed_from| Change {
        action,
        external_id,
        context_id: m.id,
        context_version: version,
        workspace_id: m.workspace_id,
        kind: m.kind,
        title,
        tags: m.tags,
        content,
        seq,
        at: m.at,
        renamed_from,
        restored_from: None,
    };
    versions.push(
        batch,
        change(Action::Delete, m.from, m.old_title, None, gone, None),
    );
    let detail = serde_json::json!({"externalId": m.to, "from": m.from, "version": version});
    let seq = head.append(actor.record("context.rename", "context", m.id, detail));
    versions.push(
        batch,
        change(
            Action::Create,
            m.to,
            m.title,
            Some(m.content),
            seq,
            Some(m.from),
        ),
    );
}

/// The statement that deletes the row `id` at `version`, and its audit row (`context.delete`
/// with `detail`); returns the audit row's sequence number (for the version it records).
pub(super) fn delete_row<'a>(
    batch: &mut Batch,
    head: &mut Head,
    actor: Actor<'a>,
    id: &'a str,
    version: i64,
    detail: serde_json::Value,
) -> i64 {
    batch.push(
        "DELETE FROM contexts WHERE id = $1 AND tenant_id = $2 AND version = $3",
        vec![
            Bind::Text(id.to_string()),
            Bind::Text(actor.tenant_id.to_string()),
            Bind::Int(version),
        ],
        Some(1),
    );
    batch.push_dialects(super::search::remove(id));
    head.append(actor.record("context.delete", "context", id, detail))
}
