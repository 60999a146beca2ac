//! Memories read: one, a page in path order, a `depth=1` page of memories and directories; each
//! a keyset range or index seeks, never more than the page it answers.

use super::*;

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
    pub(super) created_at: String,
    pub(super) updated_at: String,
}

impl MemoryRow {
    /// The memory a write just made of `c`, at `path`, its version `seq`: the answer made from
    /// what was written, without a read after the write.
    pub(super) fn written(c: contextq_api::Context, path: String, seq: i64) -> MemoryRow {
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
    for (op, value) in crate::store::external_id_range(Some(&lo), after) {
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
