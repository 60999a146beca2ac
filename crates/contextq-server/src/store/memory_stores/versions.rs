//! A store's versions: listed newest first (a range of `context_versions_by_workspace`), one
//! read, one redacted.

use super::*;

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
    let request = crate::store::redact::Request {
        target: crate::store::redact::Target::Version {
            external_id: &external_id,
            version,
        },
        workspace: Some(&store.slug),
        after_seq: None,
        dry_run: false,
    };
    crate::store::redact::redact(db, actor, request).await?;
    get_version(db, actor.tenant_id, store, seq, false).await
}
