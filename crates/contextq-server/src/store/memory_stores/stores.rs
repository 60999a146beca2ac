//! Stores: read, listed, created, changed, archived and deleted (each a workspace of the
//! tenant), and the stores a server process has read recently ([`KnownStores`]).

use super::*;

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
        match crate::store::prefix::delete_prefix_with(db, actor, &prefix, scope, Reach::Sweep)
            .await
        {
            Ok(_) => {}
            Err(Error::ContextNotFound { .. }) => break,
            Err(e) => return Err(e),
        }
    }
    workspaces::delete(db, actor, &store.slug).await
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
