//! Anthropic's Memory Stores API over the same rows (extension `memory-stores`,
//! docs/memory-stores.md): a store is a workspace, a memory is the memory tool's file (the context
//! at `mem-tool:<slug><path>`), a version is a row of `context_versions`. Every write goes
//! through the same writes as the other doors (`contexts`, `workspaces`), so its versions, audit
//! rows and index are theirs; what is here is the mapping, the door's own checks (paths that
//! overlap, preconditions on content hashes) and its keyset-paged reads, none of which reads
//! more than the page it answers.

use std::collections::BTreeMap;

use contextq_api::ContextInput;
use contextq_api::memory_stores::{
    self as ms, Memory, MemoryListItem, MemoryPrefix, MemoryStore, MemoryVersion,
};

use super::contexts::{self, Rename, Scope};
use super::prefix::Reach;
use super::workspaces::{self, Profile};
use super::{Actor, Error, Outcome, Result, history::sha256_hex, now, write};
use crate::db::{Batch, Bind, Db, Row};

/// A store as its workspace row holds it.
#[derive(Debug, Clone)]
pub struct Store {
    /// The workspace's id.
    pub workspace_id: String,
    /// Its slug.
    pub slug: String,
    /// Its name.
    pub name: String,
    /// Archived (read-only but for deletes and redactions).
    pub archived: bool,
    /// When it was created (RFC 3339; the listing's order, with the id).
    pub created_at: String,
    description: Option<String>,
    metadata: Option<String>,
    updated_at: Option<String>,
    archived_at: Option<String>,
}

/// The columns of [`Store::from_row`], of `workspaces w`.
const STORE_COLUMNS: &str = "w.id, w.slug, w.name, w.archived, w.created_at, w.description, w.metadata, w.updated_at, w.archived_at";

impl Store {
    fn from_row(row: &Row) -> Result<Store> {
        Ok(Store {
            workspace_id: row.try_get("id")?,
            slug: row.try_get("slug")?,
            name: row.try_get("name")?,
            archived: row.try_get::<i64, _>("archived")? != 0,
            created_at: row.try_get("created_at")?,
            description: row.try_get("description")?,
            metadata: row.try_get("metadata")?,
            updated_at: row.try_get("updated_at")?,
            archived_at: row.try_get("archived_at")?,
        })
    }

    /// `memstore_<workspace id>`.
    pub fn id(&self) -> String {
        format!("{}{}", ms::STORE_ID_PREFIX, self.workspace_id)
    }

    fn metadata(&self) -> Result<BTreeMap<String, String>> {
        match &self.metadata {
            None => Ok(BTreeMap::new()),
            Some(m) => super::decode(m, "workspaces.metadata"),
        }
    }

    /// As the API shows it.
    pub fn to_api(&self) -> Result<MemoryStore> {
        let updated_at = self
            .updated_at
            .clone()
            .unwrap_or_else(|| self.created_at.clone());
        Ok(MemoryStore {
            id: self.id(),
            kind: "memory_store".into(),
            name: self.name.clone(),
            description: self.description.clone().unwrap_or_default(),
            metadata: self.metadata()?,
            created_at: self.created_at.clone(),
            archived_at: match (&self.archived_at, self.archived) {
                (Some(at), _) => Some(at.clone()),
                // Archived before the door recorded when: the last change is the best known.
                (None, true) => Some(updated_at.clone()),
                (None, false) => None,
            },
            updated_at,
        })
    }
}

/// The workspace id a store id names, if it has the store prefix.
pub fn workspace_of(store_id: &str) -> Option<&str> {
    store_id
        .strip_prefix(ms::STORE_ID_PREFIX)
        .filter(|s| !s.is_empty())
}

/// The store `workspace_id` of the tenant, if it exists.
pub async fn get_store(db: &Db, tenant_id: &str, workspace_id: &str) -> Result<Option<Store>> {
    let sql =
        format!("SELECT {STORE_COLUMNS} FROM workspaces w WHERE w.tenant_id = $1 AND w.id = $2");
    let binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(workspace_id.to_string()),
    ];
    db.read_all(&sql, binds)
        .await?
        .first()
        .map(Store::from_row)
        .transpose()
}

/// Filters and position of a store listing.
#[derive(Debug, Clone, Default)]
pub struct StoreQuery {
    /// Only these workspaces (a key limited to them).
    pub within: Option<Vec<String>>,
    /// Archived ones too.
    pub include_archived: bool,
    /// Created at or after (RFC 3339).
    pub created_gte: Option<String>,
    /// Created at or before (RFC 3339).
    pub created_lte: Option<String>,
    /// After this `(created_at, id)`.
    pub after: Option<(String, String)>,
    /// At most this many.
    pub limit: usize,
}

/// A page of the tenant's stores, oldest first, and whether more follow. Keyset on
/// `(created_at, id)`; reads the tenant's workspaces, never its contexts.
pub async fn list_stores(db: &Db, tenant_id: &str, q: &StoreQuery) -> Result<(Vec<Store>, bool)> {
    let mut sql = format!("SELECT {STORE_COLUMNS} FROM workspaces w WHERE w.tenant_id = $1");
    let mut binds = vec![Bind::Text(tenant_id.to_string())];
    let mut push = |sql: &mut String, fragment: &str, value: String| {
        binds.push(Bind::Text(value));
        sql.push_str(&fragment.replace("$?", &format!("${}", binds.len())));
    };
    if !q.include_archived {
        sql.push_str(" AND w.archived = 0");
    }
    if let Some(t) = &q.created_gte {
        push(&mut sql, " AND w.created_at >= $?", t.clone());
    }
    if let Some(t) = &q.created_lte {
        push(&mut sql, " AND w.created_at <= $?", t.clone());
    }
    if let Some((at, id)) = &q.after {
        push(&mut sql, " AND (w.created_at > $?", at.clone());
        push(&mut sql, " OR (w.created_at = $?", at.clone());
        push(&mut sql, " AND w.id > $?))", id.clone());
    }
    if let Some(slugs) = &q.within {
        if slugs.is_empty() {
            return Ok((Vec::new(), false));
        }
        sql.push_str(" AND w.slug IN (");
        for (i, slug) in slugs.iter().enumerate() {
            push(&mut sql, if i == 0 { "$?" } else { ", $?" }, slug.clone());
        }
        sql.push(')');
    }
    sql.push_str(&format!(
        " ORDER BY w.created_at, w.id LIMIT {}",
        q.limit + 1
    ));
    let rows = db.read_all(&sql, binds).await?;
    let mut stores = rows
        .iter()
        .map(Store::from_row)
        .collect::<Result<Vec<_>>>()?;
    let more = stores.len() > q.limit;
    stores.truncate(q.limit);
    Ok((stores, more))
}

/// Creates a store: a workspace whose slug is the name's ([`ms::slug_of_name`]), or that slug
/// with `-2`, `-3`... when taken.
pub async fn create_store(
    db: &Db,
    actor: Actor<'_>,
    name: &str,
    description: Option<&str>,
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Store> {
    let base = ms::slug_of_name(name);
    let metadata = metadata
        .filter(|m| !m.is_empty())
        .map(|m| serde_json::to_string(m).unwrap_or_default());
    let profile = Profile {
        description: description.filter(|d| !d.is_empty()),
        metadata: metadata.as_deref(),
    };
    // Ten tries by number, then a random tail: a name shared by thousands of stores does not
    // cost thousands of tries.
    for attempt in 0..12u32 {
        let slug = match attempt {
            0 => base.clone(),
            n if n < 10 => suffixed(&base, &(n + 1).to_string()),
            _ => suffixed(&base, &format!("{:08x}", fastrand::u32(..))),
        };
        match workspaces::create_with(db, actor, &slug, name, profile).await {
            Ok(ws) => {
                return get_store(db, actor.tenant_id, &ws.id)
                    .await?
                    .ok_or_else(|| Error::Corrupt("a store just created is gone".into()));
            }
            Err(Error::WorkspaceExists { .. }) => continue,
            Err(e) => return Err(e),
        }
    }
    Err(Error::Invalid(format!(
        "name: every slug made from {name:?} is taken; choose another name"
    )))
}

/// `base-tail`, within the slug's 63 characters.
fn suffixed(base: &str, tail: &str) -> String {
    let keep = contextq_api::slug::MAX_SLUG_BYTES - tail.len() - 1;
    let head = base[..base.len().min(keep)].trim_end_matches('-');
    format!("{head}-{tail}")
}

/// A store's change: a new name, description, or metadata patch (`None` values remove keys).
#[derive(Debug, Clone, Default)]
pub struct StoreChange<'a> {
    /// The new name.
    pub name: Option<&'a str>,
    /// The new description.
    pub description: Option<&'a str>,
    /// Keys set or removed.
    pub metadata: Option<&'a BTreeMap<String, Option<String>>>,
}

/// Changes a store's name, description or metadata in one audited write
/// (`workspace.update`); refused in an archived store. Nothing to change writes nothing.
pub async fn update_store(
    db: &Db,
    actor: Actor<'_>,
    workspace_id: &str,
    change: StoreChange<'_>,
) -> Result<Store> {
    let sql = format!(
        "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, h.mac AS head_mac, {STORE_COLUMNS} \
         FROM audit_heads h LEFT JOIN workspaces w ON w.tenant_id = h.tenant_id AND w.id = $2 WHERE h.tenant_id = $1"
    );
    let read = (
        sql,
        vec![
            Bind::Text(actor.tenant_id.to_string()),
            Bind::Text(workspace_id.to_string()),
        ],
    );
    write(db, actor, workspace_id, read, |mut head, row| {
        if row.try_get::<Option<String>, _>("id")?.is_none() {
            return Err(Error::WorkspaceNotFound {
                slug: workspace_id.to_string(),
            });
        }
        let mut store = Store::from_row(row)?;
        if store.archived {
            return Err(Error::WorkspaceArchived { slug: store.slug });
        }
        let mut metadata = store.metadata()?;
        for (k, v) in change.metadata.into_iter().flatten() {
            match v {
                Some(v) => metadata.insert(k.clone(), v.clone()),
                None => metadata.remove(k),
            };
        }
        ms::check_metadata(&metadata).map_err(Error::Invalid)?;
        let name = change.name.unwrap_or(&store.name).to_string();
        let description = change
            .description
            .map(str::to_string)
            .or_else(|| store.description.clone())
            .filter(|d| !d.is_empty());
        let metadata =
            (!metadata.is_empty()).then(|| serde_json::to_string(&metadata).unwrap_or_default());
        if name == store.name && description == store.description && metadata == store.metadata {
            return Ok(Outcome::Unchanged(store));
        }
        let at = now();
        let mut batch = Batch::default();
        batch.push(
            "UPDATE workspaces SET name = $1, description = $2, metadata = $3, updated_at = $4 \
             WHERE id = $5 AND tenant_id = $6 AND archived = 0",
            vec![
                Bind::Text(name.clone()),
                Bind::OptText(description.clone()),
                Bind::OptText(metadata.clone()),
                Bind::Text(at.clone()),
                Bind::Text(store.workspace_id.clone()),
                Bind::Text(actor.tenant_id.to_string()),
            ],
            Some(1),
        );
        head.append(actor.record(
            "workspace.update",
            "workspace",
            workspace_id,
            serde_json::json!({"slug": store.slug}),
        ));
        store.name = name;
        store.description = description;
        store.metadata = metadata;
        store.updated_at = Some(at);
        Ok(Outcome::Write(head, batch, store))
    })
    .await
}

/// Archives a store (its workspace): read-only from then on, but for deletes and redactions.
pub async fn archive_store(db: &Db, actor: Actor<'_>, store: &Store) -> Result<Store> {
    workspaces::archive(db, actor, &store.slug).await?;
    get_store(db, actor.tenant_id, &store.workspace_id)
        .await?
        .ok_or_else(|| Error::WorkspaceNotFound {
            slug: store.slug.clone(),
        })
}

/// Deletes a store: its memories (each a `delete` version, kept), a transaction for each 1,000
/// of them (a prefix delete that also reaches an archived workspace), then its workspace. A
/// workspace that also holds contexts other than memory-tool files is refused (409), with
/// the memories deleted so far deleted.
pub async fn delete_store(db: &Db, actor: Actor<'_>, store: &Store) -> Result<()> {
    let prefix = ms::external_prefix(&store.slug, "/");
    let scope = Scope {
        tag: None,
        workspace: Some(&store.slug),
    };
    loop {
        match super::prefix::delete_prefix_with(db, actor, &prefix, scope, Reach::Sweep).await {
            Ok(_) => {}
            Err(Error::ContextNotFound { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    workspaces::delete(db, actor, &store.slug).await
}

/// A memory as read, with its current version's sequence number and hash.
#[derive(Debug, Clone)]
pub struct MemoryRow {
    /// The context's id.
    pub context_id: String,
    /// Its external id.
    pub external_id: String,
    /// Its path in the store.
    pub path: String,
    /// The context's version (for conditional writes).
    pub version: i64,
    /// Its content, when read.
    pub content: Option<String>,
    /// SHA-256 of its content, hex.
    pub sha256: String,
    /// Its size in bytes.
    pub size: u64,
    /// The `seq` of its current version.
    pub version_seq: Option<i64>,
    created_at: String,
    updated_at: String,
}

impl MemoryRow {
    /// The memory a write just made of `c`, at `path`, its version `seq`: the answer made from
    /// what was written, without a read after the write.
    fn written(c: contextq_api::Context, path: String, seq: i64) -> MemoryRow {
        MemoryRow {
            context_id: c.id,
            external_id: c.external_id,
            path,
            version: c.version,
            sha256: sha256_hex(&c.content),
            size: c.content.len() as u64,
            version_seq: Some(seq),
            created_at: c.created_at,
            updated_at: c.updated_at,
            content: Some(c.content),
        }
    }
}

impl MemoryRow {
    /// As the API shows it, in `store`, with its content when `full`.
    pub fn to_api(&self, store: &Store, full: bool) -> Memory {
        Memory {
            id: format!("{}{}", ms::MEMORY_ID_PREFIX, self.context_id),
            kind: "memory".into(),
            memory_store_id: store.id(),
            memory_version_id: format!(
                "{}{}",
                ms::VERSION_ID_PREFIX,
                self.version_seq.unwrap_or(0)
            ),
            path: self.path.clone(),
            content: if full { self.content.clone() } else { None },
            content_sha256: self.sha256.clone(),
            content_size_bytes: self.size,
            created_at: self.created_at.clone(),
            updated_at: self.updated_at.clone(),
        }
    }
}

/// The columns of a memory, from `contexts c` with its current version (the version of its
/// external id with the highest number). The content is read when `content`, or when the
/// version has no hash (written before versions kept one).
fn memory_select(content: bool) -> String {
    format!("SELECT {} FROM contexts c ", memory_columns(content, ""))
}

/// The columns of [`memory_select`], named with `p` before each (a query that also selects
/// another table's `id`).
fn memory_columns(content: bool, p: &str) -> String {
    // Scalar subqueries, each an index seek backwards on `context_versions_by_external`: a join
    // on a correlated subquery lets PostgreSQL's planner compare every version of the tenant.
    let newest = |column: &str| {
        format!(
            "(SELECT x.{column} FROM context_versions x WHERE x.tenant_id = c.tenant_id \
             AND x.external_id = c.external_id ORDER BY x.version DESC LIMIT 1)"
        )
    };
    format!(
        "c.id AS {p}id, c.external_id AS {p}external_id, c.version AS {p}version, \
         c.created_at AS {p}created_at, c.updated_at AS {p}updated_at, c.size_bytes AS {p}size_bytes, \
         {} AS {p}content, {} AS {p}vseq, {} AS {p}vsha",
        if content {
            "c.content".to_string()
        } else {
            format!(
                "CASE WHEN {} IS NULL THEN c.content END",
                newest("content_sha256")
            )
        },
        newest("seq"),
        newest("content_sha256"),
    )
}

fn memory_from_row(row: &Row, slug: &str) -> Result<MemoryRow> {
    memory_from_columns(row, slug, "")
}

/// A memory from [`memory_columns`] named with `p`.
fn memory_from_columns(row: &Row, slug: &str, p: &str) -> Result<MemoryRow> {
    let col = |name: &str| format!("{p}{name}");
    let external_id: String = row.try_get(col("external_id").as_str())?;
    let content: Option<String> = row.try_get(col("content").as_str())?;
    let sha: Option<String> = row.try_get(col("vsha").as_str())?;
    let sha256 = match (sha, &content) {
        (Some(s), _) => s,
        (None, Some(c)) => sha256_hex(c),
        (None, None) => sha256_hex(""),
    };
    Ok(MemoryRow {
        context_id: row.try_get(col("id").as_str())?,
        path: ms::path_of(slug, &external_id).unwrap_or_default(),
        external_id,
        version: row.try_get(col("version").as_str())?,
        content,
        sha256,
        size: row.try_get::<i64, _>(col("size_bytes").as_str())?.max(0) as u64,
        version_seq: row.try_get(col("vseq").as_str())?,
        created_at: row.try_get(col("created_at").as_str())?,
        updated_at: row.try_get(col("updated_at").as_str())?,
    })
}

/// The store `workspace_id` and its memory `context_id` (when it is one of its), in one
/// statement: an update or a delete through the door reads once before its write.
pub async fn store_and_memory(
    db: &Db,
    tenant_id: &str,
    (workspace_id, context_id): (&str, &str),
    content: bool,
) -> Result<Option<(Store, Option<MemoryRow>)>> {
    let sql = format!(
        "SELECT {STORE_COLUMNS}, {} FROM workspaces w LEFT JOIN contexts c \
         ON c.tenant_id = w.tenant_id AND c.id = $3 AND c.workspace_id = w.id \
         WHERE w.tenant_id = $1 AND w.id = $2",
        memory_columns(content, "m_")
    );
    let binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(workspace_id.to_string()),
        Bind::Text(context_id.to_string()),
    ];
    let Some(row) = db.read_all(&sql, binds).await?.into_iter().next() else {
        return Ok(None);
    };
    let store = Store::from_row(&row)?;
    let memory = match row.try_get::<Option<String>, _>("m_id")? {
        None => None,
        Some(_) => {
            Some(memory_from_columns(&row, &store.slug, "m_")?).filter(|m| !m.path.is_empty())
        }
    };
    Ok(Some((store, memory)))
}

/// The memory `context_id` of `store`, if it is one of its (a context of its workspace at a
/// memory-tool external id of its slug).
pub async fn get_memory(
    db: &Db,
    tenant_id: &str,
    store: &Store,
    context_id: &str,
    content: bool,
) -> Result<Option<MemoryRow>> {
    let sql = format!(
        "{}WHERE c.tenant_id = $1 AND c.id = $2 AND c.workspace_id = $3",
        memory_select(content)
    );
    let binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(context_id.to_string()),
        Bind::Text(store.workspace_id.clone()),
    ];
    let rows = db.read_all(&sql, binds).await?;
    match rows.first() {
        Some(row) => {
            let m = memory_from_row(row, &store.slug)?;
            Ok((!m.path.is_empty()).then_some(m))
        }
        None => Ok(None),
    }
}

/// Up to `limit` memories of `store` under `prefix` (starting and ending with `/`) whose external
/// ids come after `after`, in path order: one index range.
async fn memory_rows(
    db: &Db,
    tenant_id: &str,
    store: &Store,
    prefix: &str,
    after: Option<&str>,
    limit: usize,
    content: bool,
) -> Result<Vec<MemoryRow>> {
    let lo = ms::external_prefix(&store.slug, prefix);
    let mut sql = format!(
        "{}WHERE c.tenant_id = $1 AND c.workspace_id = $2",
        memory_select(content)
    );
    let mut binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(store.workspace_id.clone()),
    ];
    for (op, value) in super::external_id_range(Some(&lo), after) {
        binds.push(Bind::Text(value));
        sql.push_str(&format!(" AND c.external_id {op} ${}", binds.len()));
    }
    sql.push_str(&format!(" ORDER BY c.external_id LIMIT {limit}"));
    let rows = db.read_all(&sql, binds).await?;
    rows.iter()
        .map(|r| memory_from_row(r, &store.slug))
        .filter(|m| m.as_ref().map_or(true, |m| !m.path.is_empty()))
        .collect()
}

/// One page of a memory listing: its items and the external id to continue after.
#[derive(Debug)]
pub struct MemoryPage {
    /// The items.
    pub items: Vec<MemoryListItem>,
    /// Where the next page starts (after this), when there is one.
    pub next: Option<String>,
}

/// A page of `store`'s memories under `prefix`, after `after`. With `depth1`, memories deeper
/// than the prefix's children are one `memory_prefix` item per child directory: each costs one
/// index seek past the directory, whatever it holds.
pub async fn list_memories(
    db: &Db,
    tenant_id: &str,
    store: &Store,
    (prefix, depth1): (&str, bool),
    after: Option<&str>,
    (limit, full): (usize, bool),
) -> Result<MemoryPage> {
    if !depth1 {
        let mut rows = memory_rows(db, tenant_id, store, prefix, after, limit + 1, full).await?;
        let more = rows.len() > limit;
        rows.truncate(limit);
        let next = more
            .then(|| rows.last().map(|m| m.external_id.clone()))
            .flatten();
        let items = rows
            .iter()
            .map(|m| MemoryListItem::Memory(m.to_api(store, full)))
            .collect();
        return Ok(MemoryPage { items, next });
    }
    // One statement walks the directory's entries: from each, the next external id past it,
    // or past everything under its child directory (an index seek each, whatever the
    // directory holds); a second reads the memories among them.
    let base = ms::external_prefix(&store.slug, prefix);
    let top = format!("{base}\u{10FFFF}");
    let (op, start) = match after {
        Some(a) if a >= base.as_str() => (">", a.to_string()),
        _ => (">=", base.clone()),
    };
    let pos = db.dialect().position_fn();
    let sql = format!(
        "WITH RECURSIVE walk(eid, n) AS (\
         SELECT (SELECT MIN(external_id) FROM contexts WHERE tenant_id = $1 AND external_id {op} $2 AND external_id < $3), 1 \
         UNION ALL \
         SELECT (SELECT MIN(c.external_id) FROM contexts c WHERE c.tenant_id = $1 AND c.external_id < $3 AND c.external_id > \
         CASE WHEN {pos}(substr(w.eid, CAST($4 AS INTEGER)), '/') > 0 \
         THEN substr(w.eid, 1, CAST($4 AS INTEGER) - 1 + {pos}(substr(w.eid, CAST($4 AS INTEGER)), '/')) || $5 \
         ELSE w.eid END), w.n + 1 \
         FROM walk w WHERE w.eid IS NOT NULL AND w.n < CAST($6 AS INTEGER)) \
         SELECT eid FROM walk WHERE eid IS NOT NULL"
    );
    let binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(start),
        Bind::Text(top),
        Bind::Int(base.chars().count() as i64 + 1),
        Bind::Text("\u{10FFFF}".to_string()),
        Bind::Int(limit as i64 + 1),
    ];
    let mut eids: Vec<String> = db
        .read_all(&sql, binds)
        .await?
        .iter()
        .map(|r| r.try_get("eid"))
        .collect::<std::result::Result<_, _>>()?;
    let more = eids.len() > limit;
    eids.truncate(limit);
    // The memories among them, in one read.
    let files: Vec<&String> = eids
        .iter()
        .filter(|e| !e[base.len()..].contains('/'))
        .collect();
    let mut rows: std::collections::HashMap<String, MemoryRow> = std::collections::HashMap::new();
    if !files.is_empty() {
        let mut binds = vec![
            Bind::Text(tenant_id.to_string()),
            Bind::Text(store.workspace_id.clone()),
        ];
        let mut list = String::new();
        for f in &files {
            binds.push(Bind::Text((*f).clone()));
            if !list.is_empty() {
                list.push_str(", ");
            }
            list.push_str(&format!("${}", binds.len()));
        }
        let sql = format!(
            "{}WHERE c.tenant_id = $1 AND c.workspace_id = $2 AND c.external_id IN ({list})",
            memory_select(full)
        );
        for r in db.read_all(&sql, binds).await? {
            let m = memory_from_row(&r, &store.slug)?;
            rows.insert(m.external_id.clone(), m);
        }
    }
    let mut items = Vec::with_capacity(eids.len());
    let mut last = None;
    for eid in &eids {
        let rest = &eid[base.len()..];
        match rest.find('/') {
            Some(i) => {
                items.push(MemoryListItem::Prefix(MemoryPrefix {
                    kind: "memory_prefix".into(),
                    path: format!("{prefix}{}/", &rest[..i]),
                }));
                // Past everything under the directory ([prefix, prefix + U+10FFFF) holds it).
                last = Some(format!("{base}{}/\u{10FFFF}", &rest[..i]));
            }
            None => {
                // A context at a memory's external id in another workspace is not this store's.
                if let Some(m) = rows.get(eid) {
                    items.push(MemoryListItem::Memory(m.to_api(store, full)));
                }
                last = Some(eid.clone());
            }
        }
    }
    Ok(MemoryPage {
        items,
        next: if more { last } else { None },
    })
}

/// The store `workspace_id` and, when there is one, the memory in the way of a memory at
/// `path` other than `except`: one at the same path, at a path that is a directory of it, or
/// below it. One statement, so that a create through the door reads once before its write: the
/// external ids are made in SQL from the store's slug (`'mem-tool:' || slug || path`), the path
/// and its ancestors each an index seek, the first memory below it a range seek.
pub async fn store_and_overlap(
    db: &Db,
    tenant_id: &str,
    workspace_id: &str,
    (path, except): (&str, Option<&str>),
) -> Result<Option<(Store, Option<(String, String)>)>> {
    let mut binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(workspace_id.to_string()),
        Bind::Text(except.unwrap_or_default().to_string()),
    ];
    let key = |binds: &mut Vec<Bind>, tail: String| {
        binds.push(Bind::Text(tail));
        format!("'{}:' || w.slug || ${}", ms::TOOL_TAG, binds.len())
    };
    let mut at = 0;
    let mut keys = Vec::new();
    while let Some(i) = path[at + 1..].find('/') {
        at += i + 1;
        keys.push(key(&mut binds, path[..at].to_string()));
    }
    keys.push(key(&mut binds, path.to_string()));
    let lo = key(&mut binds, format!("{path}/"));
    let hi = key(&mut binds, format!("{path}/\u{10FFFF}"));
    let sql = format!(
        "SELECT {STORE_COLUMNS}, \
         (SELECT c.id || ' ' || c.external_id FROM contexts c WHERE c.tenant_id = w.tenant_id \
          AND c.external_id IN ({}) AND c.id <> $3 ORDER BY c.external_id LIMIT 1) AS up, \
         (SELECT c.id || ' ' || c.external_id FROM contexts c WHERE c.tenant_id = w.tenant_id \
          AND c.external_id >= {lo} AND c.external_id < {hi} AND c.id <> $3 \
          ORDER BY c.external_id LIMIT 1) AS below \
         FROM workspaces w WHERE w.tenant_id = $1 AND w.id = $2",
        keys.join(", ")
    );
    let Some(row) = db.read_all(&sql, binds).await?.into_iter().next() else {
        return Ok(None);
    };
    let store = Store::from_row(&row)?;
    let up: Option<String> = row.try_get("up")?;
    let below: Option<String> = row.try_get("below")?;
    let blocking = up.or(below).and_then(|b| {
        let (id, external_id) = b.split_once(' ')?;
        let path = ms::path_of(&store.slug, external_id).unwrap_or_else(|| external_id.to_string());
        Some((id.to_string(), path))
    });
    Ok(Some((store, blocking)))
}

/// The check of [`store_and_overlap`] again, under the write's lock, as a statement of its batch
/// (a [`contexts::Guard`]): no memory other than `except` at `path`, at a directory of it, or
/// below it. Without it two writes at overlapping paths (`/a` and `/a/b.md`), each checked before
/// its lock, could both commit. It matches at most one row, found by index seeks (test
/// `the_overlap_check_seeks`), so a store of a million memories costs a few seeks.
fn overlap_guard(
    tenant_id: &str,
    store: &Store,
    path: &str,
    except: Option<&str>,
) -> contexts::Guard {
    let mut binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(except.unwrap_or_default().to_string()),
    ];
    let mut keys = Vec::new();
    let mut at = 0;
    while let Some(i) = path[at + 1..].find('/') {
        at += i + 1;
        binds.push(Bind::Text(ms::external_id(&store.slug, &path[..at])));
        keys.push(format!("${}", binds.len()));
    }
    binds.push(Bind::Text(ms::external_id(&store.slug, path)));
    keys.push(format!("${}", binds.len()));
    binds.push(Bind::Text(ms::external_id(
        &store.slug,
        &format!("{path}/"),
    )));
    binds.push(Bind::Text(ms::external_id(
        &store.slug,
        &format!("{path}/\u{10FFFF}"),
    )));
    let (lo, hi) = (binds.len() - 1, binds.len());
    // Two subqueries, each an index seek on (tenant_id, external_id): an `OR` of the key list
    // and the range in one `WHERE` is planned as a scan of the tenant's contexts.
    let sql = format!(
        "UPDATE contexts SET version = version WHERE id = COALESCE(\
         (SELECT c.id FROM contexts c WHERE c.tenant_id = $1 AND c.external_id IN ({}) \
          AND c.id <> $2 LIMIT 1), \
         (SELECT c.id FROM contexts c WHERE c.tenant_id = $1 AND c.external_id >= ${lo} \
          AND c.external_id < ${hi} AND c.id <> $2 ORDER BY c.external_id LIMIT 1))",
        keys.join(", ")
    );
    contexts::Guard { sql, binds }
}

/// The check, under the write's lock, that `store`'s slug is still its workspace's and not
/// another's (a store deleted and another made with its slug since `store` was read, perhaps
/// from [`KnownStores`]): a write by slug then lands where the door meant it to, or not at all.
fn slug_guard(tenant_id: &str, store: &Store) -> contexts::Guard {
    contexts::Guard {
        sql: "UPDATE workspaces SET slug = slug WHERE tenant_id = $1 AND slug = $2 AND id <> $3"
            .into(),
        binds: vec![
            Bind::Text(tenant_id.to_string()),
            Bind::Text(store.slug.clone()),
            Bind::Text(store.workspace_id.clone()),
        ],
    }
}

/// Stores read recently, by tenant and workspace id: what a create through the door needs
/// before its write (the slug its external ids are made of, and whether the key reaches it),
/// so that it reads nothing first. A store found here may be out of date; the write checks what
/// matters under its lock (the workspace by slug exists and is not archived, and the slug is still its own),
/// and a store deleted since is then "not found". At most [`KnownStores::MAX`] entries: past
/// it the map starts again empty.
#[derive(Debug, Default)]
pub struct KnownStores {
    map: std::sync::Mutex<std::collections::HashMap<(String, String), Store>>,
}

impl KnownStores {
    /// The most stores kept.
    pub const MAX: usize = 4_096;

    fn map(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<(String, String), Store>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store `workspace_id` of `tenant_id`, as last read.
    pub fn get(&self, tenant_id: &str, workspace_id: &str) -> Option<Store> {
        self.map()
            .get(&(tenant_id.to_string(), workspace_id.to_string()))
            .cloned()
    }

    /// Keeps `store` of `tenant_id`.
    pub fn put(&self, tenant_id: &str, store: &Store) {
        let mut map = self.map();
        if map.len() >= Self::MAX {
            map.clear();
        }
        map.insert(
            (tenant_id.to_string(), store.workspace_id.clone()),
            store.clone(),
        );
    }

    /// Forgets the store `workspace_id` of `tenant_id`.
    pub fn forget(&self, tenant_id: &str, workspace_id: &str) {
        self.map()
            .remove(&(tenant_id.to_string(), workspace_id.to_string()));
    }

    /// How many are kept.
    pub fn len(&self) -> usize {
        self.map().len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.map().is_empty()
    }
}

/// The memory in the way of a memory at `path` of `store` other than `except`
/// ([`store_and_overlap`]).
async fn blocking(
    db: &Db,
    tenant_id: &str,
    store: &Store,
    path: &str,
    except: Option<&str>,
) -> Result<Option<(String, String)>> {
    let found = store_and_overlap(db, tenant_id, &store.workspace_id, (path, except)).await?;
    Ok(found.and_then(|(_, blocking)| blocking))
}

/// A path taken: the memory in the way, by id and path.
#[derive(Debug, Clone)]
pub struct PathConflict {
    /// `mem_...` of the memory in the way.
    pub memory_id: String,
    /// Its path.
    pub path: String,
}

/// What a memory write through this door can refuse besides the store's errors.
#[derive(Debug)]
pub enum Refusal {
    /// The path overlaps another memory.
    Path(PathConflict),
    /// The precondition does not hold.
    Precondition(String),
    /// Any other refusal of the data layer.
    Store(Error),
}

impl From<Error> for Refusal {
    fn from(e: Error) -> Self {
        Refusal::Store(e)
    }
}

fn conflict((id, path): (String, String)) -> Refusal {
    Refusal::Path(PathConflict {
        memory_id: format!("{}{}", ms::MEMORY_ID_PREFIX, id),
        path,
    })
}

/// The memory-tool file a memory is: its input to a bulk upsert.
fn input(store: &Store, path: &str, content: &str, if_absent: bool) -> ContextInput {
    ContextInput {
        external_id: ms::external_id(&store.slug, path),
        workspace: store.slug.clone(),
        kind: "reference".into(),
        title: Some(format!("/memories{path}")),
        content: content.to_string(),
        tags: Some(vec![ms::TOOL_TAG.to_string()]),
        if_absent,
    }
}

/// Creates the memory at `path` of `store`, unless `blocked` names the memory in the way
/// ([`store_and_overlap`]); a create that loses a race to another is refused the same way.
pub async fn create_memory(
    db: &Db,
    actor: Actor<'_>,
    (store, blocked): (&Store, Option<(String, String)>),
    path: &str,
    content: &str,
) -> std::result::Result<MemoryRow, Refusal> {
    if store.archived {
        return Err(Error::WorkspaceArchived {
            slug: store.slug.clone(),
        }
        .into());
    }
    if let Some(b) = blocked {
        return Err(conflict(b));
    }
    let item = input(store, path, content, true);
    let guard = overlap_guard(actor.tenant_id, store, path, None);
    let guards = [guard, slug_guard(actor.tenant_id, store)];
    match contexts::bulk_upsert_with_seqs(db, actor, std::slice::from_ref(&item), &guards).await {
        // The answer is what was written: no read after the write.
        Ok(done) => {
            let id = done
                .results
                .first()
                .map(|r| r.id.clone())
                .ok_or_else(|| Error::Corrupt("a bulk upsert answered nothing".into()))?;
            Ok(MemoryRow {
                context_id: id,
                path: path.to_string(),
                version: 1,
                content: Some(content.to_string()),
                sha256: sha256_hex(content),
                size: content.len() as u64,
                version_seq: done.seqs.get(&item.external_id).copied(),
                created_at: done.at.clone(),
                updated_at: done.at,
                external_id: item.external_id,
            })
        }
        // Another create won the race (at this path, or at one that overlaps it: the guard):
        // name it.
        Err(
            Error::ExternalIdExists { .. }
            | Error::ExternalIdInOtherWorkspace { .. }
            | Error::ChangedConcurrently { .. },
        ) => match blocking(db, actor.tenant_id, store, path, None).await? {
            Some(b) => Err(conflict(b)),
            None => Err(Error::ChangedConcurrently {
                id: path.to_string(),
            }
            .into()),
        },
        Err(e) => Err(e.into()),
    }
}

/// An update of a memory: new content, a new path, a precondition on the current content's hash.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryChange<'a> {
    /// New content.
    pub content: Option<&'a str>,
    /// New path (a rename; the id is kept).
    pub path: Option<&'a str>,
    /// The current content's expected SHA-256.
    pub expect_sha256: Option<&'a str>,
}

/// A content update of the memory `context_id` of `store` (perhaps known from before,
/// [`KnownStores`]) that reads nothing before its write: under the write's lock the memory must
/// be one of the store's (its workspace and its external id), the precondition must hold, and
/// content already as asked writes nothing. `Ok(None)`: the door's other path decides (the
/// memory is not found here, is unchanged, or the store as known is out of date), reading first.
pub async fn update_content(
    db: &Db,
    actor: Actor<'_>,
    store: &Store,
    context_id: &str,
    (content, expect_sha256): (&str, Option<&str>),
) -> std::result::Result<Option<MemoryRow>, Refusal> {
    let mut stale = false;
    let check = |c: &contextq_api::Context, workspace_id: &str| {
        if workspace_id != store.workspace_id || ms::path_of(&store.slug, &c.external_id).is_none()
        {
            return Err(Error::ContextNotFound {
                id: context_id.to_string(),
            });
        }
        let same = c.content == content;
        match expect_sha256 {
            Some(expected) if expected != sha256_hex(&c.content) && !same => {
                stale = true;
                Err(Error::VersionMismatch {
                    id: context_id.to_string(),
                    stored: c.version,
                    expected: c.version,
                })
            }
            _ if same => Ok(contexts::Checked::Unchanged),
            _ => Ok(contexts::Checked::Write),
        }
    };
    match contexts::update_checked(db, actor, context_id, content, check).await {
        Ok(Some((c, seq))) => {
            Ok(ms::path_of(&store.slug, &c.external_id)
                .map(|path| MemoryRow::written(c, path, seq)))
        }
        Ok(None) => Ok(None),
        Err(Error::VersionMismatch { .. }) if stale => Err(Refusal::Precondition(format!(
            "the memory's content_sha256 is not {}: it changed since it was read; read it again and retry",
            expect_sha256.unwrap_or_default()
        ))),
        Err(Error::ContextNotFound { .. } | Error::ChangedConcurrently { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Updates the memory `current` of `store`. A precondition that does not hold refuses, unless
/// the memory already is what was asked (then nothing is written). One write, one version: the
/// content (conditionally on the version read, so that of concurrent conditional updates exactly
/// one wins), or a move to the new path carrying the new content when both change.
pub async fn update_memory(
    db: &Db,
    actor: Actor<'_>,
    store: &Store,
    current: MemoryRow,
    change: MemoryChange<'_>,
) -> std::result::Result<MemoryRow, Refusal> {
    // The current content's hash decides (the content itself is not read).
    let same_content = change
        .content
        .is_none_or(|c| c.len() as u64 == current.size && sha256_hex(c) == current.sha256);
    let same_path = change.path.is_none_or(|p| p == current.path);
    if let Some(expected) = change.expect_sha256
        && expected != current.sha256
    {
        if same_content && same_path {
            return Ok(current);
        }
        return Err(Refusal::Precondition(format!(
            "the memory's content_sha256 is not {expected}: it changed since it was read; read it again and retry"
        )));
    }
    if same_content && same_path {
        return Ok(current);
    }
    if store.archived {
        return Err(Error::WorkspaceArchived {
            slug: store.slug.clone(),
        }
        .into());
    }
    if let Some(to) = change.path.filter(|_| !same_path)
        && let Some(b) = blocking(db, actor.tenant_id, store, to, Some(&current.context_id)).await?
    {
        return Err(conflict(b));
    }
    let new_content = change.content.filter(|_| !same_content);
    let Some(to) = change.path.filter(|_| !same_path) else {
        // The content alone, conditionally on the version read (so that of concurrent
        // conditional updates exactly one wins).
        let content = new_content.unwrap_or_default();
        let if_match = Some(current.version);
        let id = &current.context_id;
        return match contexts::update_with_seq(db, actor, id, content, (None, None), if_match).await
        {
            Ok((c, seq)) => Ok(MemoryRow::written(c, current.path, seq)),
            Err(Error::VersionMismatch { .. } | Error::ChangedConcurrently { .. })
                if change.expect_sha256.is_some() =>
            {
                Err(changed_meanwhile())
            }
            Err(e) => Err(e.into()),
        };
    };
    // The path, and the content with it when it changes too: one move, one version.
    let to_id = ms::external_id(&store.slug, to);
    let title = format!("/memories{to}");
    let r = Rename {
        from: &current.external_id,
        to: &to_id,
        title: Some(&title),
    };
    let scope = Scope {
        tag: None,
        workspace: Some(&store.slug),
    };
    let guard = overlap_guard(actor.tenant_id, store, to, Some(&current.context_id));
    let guards = [guard, slug_guard(actor.tenant_id, store)];
    let also = contexts::Also {
        guards: &guards,
        content: new_content,
        if_match: (new_content.is_some() || change.expect_sha256.is_some())
            .then_some(current.version),
    };
    match contexts::rename_with(db, actor, r, scope, also).await {
        Ok(_) => {}
        Err(Error::ExternalIdExists { .. } | Error::ChangedConcurrently { .. }) => {
            return Err(
                match blocking(db, actor.tenant_id, store, to, Some(&current.context_id)).await? {
                    Some(b) => conflict(b),
                    None if change.expect_sha256.is_some() => changed_meanwhile(),
                    None => Error::ChangedConcurrently { id: to.to_string() }.into(),
                },
            );
        }
        Err(Error::VersionMismatch { .. }) if change.expect_sha256.is_some() => {
            return Err(changed_meanwhile());
        }
        Err(e) => return Err(e.into()),
    }
    // The move's version is read back.
    get_memory(db, actor.tenant_id, store, &current.context_id, true)
        .await?
        .ok_or_else(|| {
            Error::ContextNotFound {
                id: current.context_id.clone(),
            }
            .into()
        })
}

/// A conditional update that lost to a write made after its precondition was checked.
fn changed_meanwhile() -> Refusal {
    Refusal::Precondition(
        "the memory changed while this update was applied; read it again and retry".into(),
    )
}

/// Deletes the memory `current` (also in an archived store), only if its content's hash is
/// `expect_sha256` when given.
pub async fn delete_memory(
    db: &Db,
    actor: Actor<'_>,
    current: &MemoryRow,
    expect_sha256: Option<&str>,
) -> std::result::Result<(), Refusal> {
    if let Some(expected) = expect_sha256
        && expected != current.sha256
    {
        return Err(Refusal::Precondition(format!(
            "the memory's content_sha256 is not {expected}: nothing was deleted"
        )));
    }
    match contexts::delete_with(db, actor, &current.context_id, Some(current.version), true).await {
        Ok(()) => Ok(()),
        Err(Error::VersionMismatch { .. } | Error::ChangedConcurrently { .. })
            if expect_sha256.is_some() =>
        {
            Err(Refusal::Precondition(
                "the memory changed while it was deleted; nothing was deleted".into(),
            ))
        }
        // Unconditional: delete whatever is there now.
        Err(Error::VersionMismatch { .. }) => {
            Ok(contexts::delete_with(db, actor, &current.context_id, None, true).await?)
        }
        Err(e) => Err(e.into()),
    }
}

/// Filters and position of a version listing.
#[derive(Debug, Clone, Default)]
pub struct VersionQuery {
    /// Only this memory's (context id).
    pub context_id: Option<String>,
    /// Only this operation: `created`, `modified`, `deleted`.
    pub operation: Option<String>,
    /// Only versions written with this key id.
    pub api_key_id: Option<String>,
    /// Created at or after.
    pub created_gte: Option<String>,
    /// Created at or before.
    pub created_lte: Option<String>,
    /// Older than this `seq`.
    pub before: Option<i64>,
    /// At most this many.
    pub limit: usize,
    /// With content.
    pub full: bool,
}

/// The columns of a version `v`, with the version after it `nx` (a rename writes the `delete`
/// of the old path and then the `create` of the new one, which together are one `modified`).
fn version_select(full: bool) -> String {
    format!(
        "SELECT v.seq, v.external_id, v.context_id, v.action, v.renamed_from, v.created_at, \
         v.content_sha256, v.size_bytes, v.api_key_id, v.redacted_at, v.redacted_by, {} AS content \
         FROM context_versions v LEFT JOIN context_versions nx ON nx.tenant_id = v.tenant_id AND nx.seq = v.seq + 1 ",
        if full { "v.content" } else { "NULL" }
    )
}

/// Not the `delete` half of a rename.
const NOT_A_RENAMES_DELETE: &str = " AND NOT (v.action = 'delete' AND COALESCE(nx.context_id = v.context_id AND nx.renamed_from IS NOT NULL, 0 = 1))";

fn version_from_row(row: &Row, store: &Store) -> Result<MemoryVersion> {
    let seq: i64 = row.try_get("seq")?;
    let action: String = row.try_get("action")?;
    let renamed_from: Option<String> = row.try_get("renamed_from")?;
    let redacted_at: Option<String> = row.try_get("redacted_at")?;
    let external_id: String = row.try_get("external_id")?;
    let operation = match (action.as_str(), &renamed_from) {
        ("delete", _) => "deleted",
        ("create", None) => "created",
        _ => "modified",
    };
    let live = redacted_at.is_none() && operation != "deleted";
    let key: Option<String> = row.try_get("api_key_id")?;
    let redacted_by: Option<String> = row.try_get("redacted_by")?;
    let content: Option<String> = row.try_get("content")?;
    let sha: Option<String> = row.try_get("content_sha256")?;
    Ok(MemoryVersion {
        id: format!("{}{seq}", ms::VERSION_ID_PREFIX),
        kind: "memory_version".into(),
        memory_id: format!(
            "{}{}",
            ms::MEMORY_ID_PREFIX,
            row.try_get::<String, _>("context_id")?
        ),
        memory_store_id: store.id(),
        operation: operation.into(),
        created_at: row.try_get("created_at")?,
        content_sha256: if live {
            sha.or_else(|| content.as_deref().map(sha256_hex))
        } else {
            None
        },
        content: content.filter(|_| live),
        content_size_bytes: live
            .then(|| row.try_get::<i64, _>("size_bytes"))
            .transpose()?
            .map(|z| z.max(0) as u64),
        path: redacted_at
            .is_none()
            .then(|| ms::path_of(&store.slug, &external_id))
            .flatten(),
        created_by: key.as_deref().map(ms::Actor::api),
        redacted_by: redacted_at
            .as_ref()
            .and(redacted_by.as_deref())
            .map(ms::Actor::api),
        redacted_at,
    })
}

/// A page of `store`'s versions, newest first (keyset on `seq`, by the index
/// `context_versions_by_workspace`), and the `seq` to continue before.
pub async fn list_versions(
    db: &Db,
    tenant_id: &str,
    store: &Store,
    q: &VersionQuery,
) -> Result<(Vec<MemoryVersion>, Option<i64>)> {
    let lo = ms::external_prefix(&store.slug, "/");
    // The store's versions newest first are a range of `context_versions_by_workspace`; the
    // memory-tool prefix is a filter on the rows that range yields, never an index of its own
    // (`Dialect::filter_only`: SQLite read the prefix's whole range and sorted it, 100,000
    // versions for a page of 100; PostgreSQL, once analysed, took a hidden prefix for a rare
    // one and sorted the whole table: docs/benchmarks.md).
    let e = db.dialect().filter_only("v.external_id");
    let mut sql = format!(
        "{}WHERE v.tenant_id = $1 AND v.workspace_id = $2 AND {e} >= $3 AND {e} < $4{NOT_A_RENAMES_DELETE}",
        version_select(q.full)
    );
    let mut binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Text(store.workspace_id.clone()),
        Bind::Text(lo.clone()),
        Bind::Text(format!("{lo}\u{10FFFF}")),
    ];
    let mut push = |sql: &mut String, fragment: &str, b: Bind| {
        binds.push(b);
        sql.push_str(&fragment.replace("$?", &format!("${}", binds.len())));
    };
    if let Some(id) = &q.context_id {
        push(&mut sql, " AND v.context_id = $?", Bind::Text(id.clone()));
    }
    if let Some(seq) = q.before {
        push(&mut sql, " AND v.seq < $?", Bind::Int(seq));
    }
    if let Some(t) = &q.created_gte {
        push(&mut sql, " AND v.created_at >= $?", Bind::Text(t.clone()));
    }
    if let Some(t) = &q.created_lte {
        push(&mut sql, " AND v.created_at <= $?", Bind::Text(t.clone()));
    }
    if let Some(k) = &q.api_key_id {
        push(&mut sql, " AND v.api_key_id = $?", Bind::Text(k.clone()));
    }
    match q.operation.as_deref() {
        None => {}
        Some("created") => sql.push_str(" AND v.action = 'create' AND v.renamed_from IS NULL"),
        Some("deleted") => sql.push_str(" AND v.action = 'delete'"),
        Some("modified") => sql.push_str(
            " AND (v.action NOT IN ('create', 'delete') OR (v.action = 'create' AND v.renamed_from IS NOT NULL))",
        ),
        Some(other) => {
            return Err(Error::BadParameter(format!(
                "operation: one of created, modified, deleted, got {other:?}"
            )));
        }
    }
    sql.push_str(&format!(" ORDER BY v.seq DESC LIMIT {}", q.limit + 1));
    let rows = db.read_all(&sql, binds).await?;
    let more = rows.len() > q.limit;
    let mut out = Vec::with_capacity(q.limit);
    let mut last = None;
    for row in rows.iter().take(q.limit) {
        last = Some(row.try_get::<i64, _>("seq")?);
        out.push(version_from_row(row, store)?);
    }
    Ok((out, if more { last } else { None }))
}

/// The version `seq` of `store`, if it is one of its.
pub async fn get_version(
    db: &Db,
    tenant_id: &str,
    store: &Store,
    seq: i64,
    full: bool,
) -> Result<Option<MemoryVersion>> {
    let lo = ms::external_prefix(&store.slug, "/");
    let sql = format!(
        "{}WHERE v.tenant_id = $1 AND v.seq = $2 AND v.workspace_id = $3 AND v.external_id >= $4 AND v.external_id < $5{NOT_A_RENAMES_DELETE}",
        version_select(full)
    );
    let binds = vec![
        Bind::Text(tenant_id.to_string()),
        Bind::Int(seq),
        Bind::Text(store.workspace_id.clone()),
        Bind::Text(lo.clone()),
        Bind::Text(format!("{lo}\u{10FFFF}")),
    ];
    db.read_all(&sql, binds)
        .await?
        .first()
        .map(|r| version_from_row(r, store))
        .transpose()
}

/// Redacts the version `seq` of `store` (its content, path and hash gone from every answer);
/// the memory's current version is refused (change or delete the memory first).
pub async fn redact_version(
    db: &Db,
    actor: Actor<'_>,
    store: &Store,
    seq: i64,
) -> Result<Option<MemoryVersion>> {
    let sql = "SELECT external_id, version FROM context_versions WHERE tenant_id = $1 AND seq = $2 AND workspace_id = $3";
    let binds = vec![
        Bind::Text(actor.tenant_id.to_string()),
        Bind::Int(seq),
        Bind::Text(store.workspace_id.clone()),
    ];
    let Some(row) = db.read_all(sql, binds).await?.into_iter().next() else {
        return Ok(None);
    };
    let external_id: String = row.try_get("external_id")?;
    let version: i64 = row.try_get("version")?;
    if get_version(db, actor.tenant_id, store, seq, false)
        .await?
        .is_none()
    {
        return Ok(None);
    }
    let request = super::redact::Request {
        target: super::redact::Target::Version {
            external_id: &external_id,
            version,
        },
        workspace: Some(&store.slug),
        after_seq: None,
        dry_run: false,
    };
    super::redact::redact(db, actor, request).await?;
    get_version(db, actor.tenant_id, store, seq, false).await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The overlap check runs in every door write: on a database nobody analysed, SQLite must
    /// plan it as index seeks, never a scan of the tenant's contexts (an `OR` of the key list and
    /// the range in one `WHERE` was planned as one, 17 ms a create at 100,000 memories).
    #[tokio::test]
    async fn the_overlap_check_seeks() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite:{}", dir.path().join("plan.db").display());
        let db = Db::connect(&url, &crate::DbOptions::default())
            .await
            .unwrap();
        let store = Store {
            workspace_id: "ws_1".into(),
            slug: "team".into(),
            name: "team".into(),
            archived: false,
            created_at: now(),
            description: None,
            metadata: None,
            updated_at: None,
            archived_at: None,
        };
        for guard in [
            overlap_guard("t", &store, "/a/b/c.md", None),
            overlap_guard("t", &store, "/a", Some("ctx_1")),
            slug_guard("t", &store),
        ] {
            let rows = db
                .read_all(&format!("EXPLAIN QUERY PLAN {}", guard.sql), guard.binds)
                .await
                .unwrap();
            let plan: Vec<String> = rows
                .iter()
                .map(|r| r.try_get::<String, _>("detail").unwrap())
                .collect();
            // Every table read by a seek on a key, never a scan nor a range of the tenant's rows
            // alone (`SEARCH c USING INDEX ... (tenant_id=?)` reads every context it has).
            let keyed = |d: &String| {
                d.starts_with("SEARCH")
                    && ["(id=", "external_id", "slug="]
                        .iter()
                        .any(|k| d.contains(k))
            };
            assert!(
                plan.iter()
                    .filter(|d| d.starts_with("SCAN") || d.starts_with("SEARCH"))
                    .all(keyed),
                "{}: {plan:?}",
                guard.sql
            );
        }
        db.close().await;
    }
}
