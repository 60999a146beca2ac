//! Memories written: created, updated (content, path, or both in one move) and deleted, with
//! the door's own checks (paths that overlap, content-hash preconditions) made before the write
//! to name what is in the way and again under the write's lock ([`contexts::Guard`]).

use super::*;

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

#[cfg(test)]
mod tests {
    use super::*;

    /// A store of workspace `id` with `slug`, as its row would hold it.
    fn a_store(id: &str, slug: &str) -> Store {
        Store {
            workspace_id: id.into(),
            slug: slug.into(),
            name: slug.into(),
            archived: false,
            created_at: now(),
            description: None,
            metadata: None,
            updated_at: None,
            archived_at: None,
        }
    }

    /// What the server keeps of stores is bounded whatever is sent: past [`KnownStores::MAX`]
    /// the map starts again, and a tenant's entry is never another's.
    #[test]
    fn known_stores_stay_bounded_and_per_tenant() {
        let known = KnownStores::default();
        let store = |n: usize| a_store(&format!("ws_{n}"), &format!("s{n}"));
        for n in 0..10_000 {
            known.put("t1", &store(n));
            assert!(known.len() <= KnownStores::MAX);
        }
        known.put("t1", &store(1));
        assert!(known.get("t1", "ws_1").is_some());
        assert!(known.get("t2", "ws_1").is_none());
        known.forget("t1", "ws_1");
        assert!(known.get("t1", "ws_1").is_none());
    }

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
        let store = a_store("ws_1", "team");
        for guard in [
            overlap_guard("t", &store, "/a/b/c.md", None),
            overlap_guard("t", &store, "/a", Some("ctx_1")),
            slug_guard("t", &store),
        ] {
            let plan = db.plan(&guard.sql, guard.binds).await;
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
