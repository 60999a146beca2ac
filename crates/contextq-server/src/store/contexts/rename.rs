//! A context moved to another external id (extension `rename`), in one transaction, its
//! history kept under the new id and its old id's history closed with a delete.

use super::*;

/// What a [`rename`] moves: the context at `from` to `to`, retitled `title` when given.
#[derive(Debug, Clone, Copy)]
pub struct Rename<'a> {
    /// Its external id now.
    pub from: &'a str,
    /// Its new external id.
    pub to: &'a str,
    /// Its new title (`None`: kept).
    pub title: Option<&'a str>,
}

/// `POST /api/contexts/by-external/:id/rename` (extension `rename`): the context at `from`
/// moves to `to` in one transaction, with `title` when given. Refused (nothing changed) when
/// `to` is taken, by a context or as a directory (external ids below `to/`). The old id gets a
/// `delete` version and the new one a `create` version recording `renamed_from`; the row keeps
/// its id and tags, and its version goes up by one (a precondition read before no longer holds).
pub async fn rename(db: &Db, actor: Actor<'_>, r: Rename<'_>, scope: Scope<'_>) -> Result<Context> {
    rename_with(db, actor, r, scope, Also::default()).await
}

/// What a [`rename_with`] does besides a [`rename`] (the Memory Stores door's update of a
/// memory's path, and of its content with it).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Also<'a> {
    /// Checked under the lock (no memory overlaps the destination).
    pub guards: &'a [Guard],
    /// New content, written by the same move: one version at the new id.
    pub content: Option<&'a str>,
    /// Only from this version.
    pub if_match: Option<i64>,
}

/// [`rename`], doing what `also` says in the same transaction.
pub(crate) async fn rename_with(
    db: &Db,
    actor: Actor<'_>,
    r: Rename<'_>,
    scope: Scope<'_>,
    also: Also<'_>,
) -> Result<Context> {
    let Rename { from, to, title } = r;
    if let Some(content) = also.content {
        check_content(content)?;
    }
    if to.is_empty() || to.len() > MAX_EXTERNAL_ID_BYTES {
        return Err(Error::Invalid(format!(
            "to: 1 to {MAX_EXTERNAL_ID_BYTES} bytes"
        )));
    }
    if to == from {
        return Err(Error::ExternalIdExists {
            external_id: to.to_string(),
        });
    }
    check_title("title", title)?;
    let (sql, mut binds) = lock_context(db, actor.tenant_id, "c.external_id", from);
    // The destination, read under the same lock: taken by a context, or a directory, and its
    // kept versions (numbers go on from an earlier life of the same id).
    let n = binds.len();
    let extra = format!(
        "(SELECT COUNT(*) FROM contexts d WHERE d.tenant_id = $1 AND d.external_id = ${a}) AS to_taken, \
         (SELECT COUNT(*) FROM (SELECT 1 AS x FROM contexts d WHERE d.tenant_id = $1 \
            AND d.external_id >= ${b} AND d.external_id < ${c} LIMIT 1) q) AS to_dir, \
         (SELECT MIN(v.version) FROM context_versions v WHERE v.tenant_id = $1 AND v.external_id = ${a}) AS to_kept_min, \
         (SELECT n.last_version FROM version_counters n WHERE n.tenant_id = $1 AND n.external_id = ${a}) AS to_kept_last, ",
        a = n + 1,
        b = n + 2,
        c = n + 3,
    );
    let sql = sql.replacen("SELECT ", &format!("SELECT {extra}"), 1);
    binds.extend([
        Bind::Text(to.to_string()),
        Bind::Text(format!("{to}/")),
        Bind::Text(format!("{to}/\u{10FFFF}")),
    ]);
    write(db, actor, from, (sql, binds), |mut head, row| {
        let locked = Locked::from_row(row)?;
        let mut versions = locked.versions(db, actor);
        let workspace_id = locked.workspace_id.clone();
        let context = locked.context.filter(|(c, _)| scope.admits(c));
        let old = writable(context, from, also.if_match)?;
        let taken: i64 = row.try_get("to_taken")?;
        let dir: i64 = row.try_get("to_dir")?;
        if taken > 0 || dir > 0 {
            return Err(Error::ExternalIdExists {
                external_id: to.to_string(),
            });
        }
        versions.known(
            to,
            Kept {
                min: row.try_get("to_kept_min")?,
                last: row.try_get("to_kept_last")?,
            },
        );
        let new = Context {
            external_id: to.to_string(),
            title: title.map(str::to_string).or_else(|| old.title.clone()),
            content: also.content.unwrap_or(&old.content).to_string(),
            version: old.version + 1,
            updated_at: now(),
            ..old.clone()
        };
        let workspace_id = present(workspace_id)?;
        let mut batch = Batch::default();
        for g in also.guards {
            g.push(&mut batch);
        }
        push_move(
            &mut batch,
            &mut head,
            &mut versions,
            actor,
            Moving {
                id: &old.id,
                from,
                to,
                version: old.version,
                old_title: old.title.as_deref(),
                title: new.title.as_deref(),
                workspace_id: &workspace_id,
                kind: &old.kind,
                tags: &old.tags,
                content: &new.content,
                rewritten: new.content != old.content,
                at: &new.updated_at,
            },
        );
        versions.finish(&mut batch, &mut head);
        Ok(Outcome::Write(head, batch, new))
    })
    .await
}
