//! A context changed in place (`PUT`, a text edit) or deleted (by id, or by external id with
//! extension `delete-by-external`).

use super::*;

/// A context changed in place (new content, title or tags; the same id and external id).
pub(super) struct Updated<'a> {
    old: &'a Context,
    new: &'a Context,
}

impl Updated<'_> {
    /// The change's writes: the row (and its search document), its audit record, its version;
    /// returns the version's `seq`.
    pub(super) fn write(
        &self,
        batch: &mut Batch,
        head: &mut Head,
        actor: Actor<'_>,
        versions: Versions<'_>,
        workspace_id: &str,
    ) -> i64 {
        let (old, new) = (self.old, self.new);
        rewrite(batch, actor.tenant_id, old, new);
        let (name, detail) = written(actor, "context.update", &old.external_id, new.version);
        let seq = head.append(actor.record(name, "context", &old.id, detail));
        record_version(
            batch,
            head,
            versions,
            (Action::Update, actor.restored_from),
            workspace_id,
            new,
            seq,
        );
        seq
    }
}

/// `PUT /api/contexts/:id`: new content; `title` absent keeps it, `Some(None)` clears it;
/// `tags` absent keeps them. With `if_match`, only from that version.
pub async fn update(
    db: &Db,
    actor: Actor<'_>,
    id: &str,
    content: &str,
    title: Option<Option<String>>,
    tags: Option<Vec<String>>,
    if_match: Option<i64>,
) -> Result<Context> {
    update_with_seq(db, actor, id, content, (title, tags), if_match)
        .await
        .map(|(c, _)| c)
}

/// [`update`], also answering the `seq` of the version it wrote (the Memory Stores door's
/// `memory_version_id`, without a read after the write).
pub(crate) async fn update_with_seq(
    db: &Db,
    actor: Actor<'_>,
    id: &str,
    content: &str,
    (title, tags): (Option<Option<String>>, Option<Vec<String>>),
    if_match: Option<i64>,
) -> Result<(Context, i64)> {
    check_content(content)?;
    // The write's own answer stays a `Context`: a keyed request's recorded outcome is that
    // type's (`api::keyed`); the seq comes out beside it.
    let mut seq_out = None;
    check_title("title", title.as_ref().and_then(|t| t.as_deref()))?;
    if let Some(tags) = &tags {
        check_tags(tags)?;
    }
    let read = lock_context(db, actor.tenant_id, "c.id", id);
    let context = write(db, actor, id, read, |mut head, row| {
        let (old, workspace_id, versions) = locked_writable(row, db, actor, id, if_match)?;
        let new = Context {
            content: content.to_string(),
            title: title.unwrap_or_else(|| old.title.clone()),
            tags: tags.clone().unwrap_or_else(|| old.tags.clone()),
            version: old.version + 1,
            updated_at: now(),
            ..old.clone()
        };
        let mut batch = Batch::default();
        if tags.is_some() {
            retag(&mut batch, actor.tenant_id, id, &old.tags, &new.tags);
        }
        let change = Updated {
            old: &old,
            new: &new,
        };
        seq_out = Some(change.write(&mut batch, &mut head, actor, versions, &workspace_id));
        Ok(Outcome::Write(head, batch, new))
    })
    .await?;
    let seq = seq_out.ok_or_else(|| Error::Corrupt("an update wrote no version".into()))?;
    Ok((context, seq))
}

/// What the check of an [`update_checked`] decided, under the lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Checked {
    /// Write the new content.
    Write,
    /// The context already is as asked: write nothing.
    Unchanged,
}

/// [`update_with_seq`] whose condition `check` decides under the lock, on the context as locked
/// and its workspace's id (a refusal it returns rolls back): the Memory Stores door's content
/// update, which then reads nothing before its write. `Ok(None)`: `check` said unchanged.
pub(crate) async fn update_checked(
    db: &Db,
    actor: Actor<'_>,
    id: &str,
    content: &str,
    check: impl FnOnce(&Context, &str) -> Result<Checked>,
) -> Result<Option<(Context, i64)>> {
    check_content(content)?;
    let read = lock_context(db, actor.tenant_id, "c.id", id);
    write(db, actor, id, read, |mut head, row| {
        let locked = Locked::from_row(row)?;
        let versions = locked.versions(db, actor);
        let Some((old, _)) = &locked.context else {
            return Err(Error::ContextNotFound { id: id.to_string() });
        };
        let workspace_id = present(locked.workspace_id.clone())?;
        if check(old, &workspace_id)? == Checked::Unchanged {
            return Ok(Outcome::Unchanged(None));
        }
        let old = writable(locked.context, id, None)?;
        let new = Context {
            content: content.to_string(),
            version: old.version + 1,
            updated_at: now(),
            ..old.clone()
        };
        let mut batch = Batch::default();
        let change = Updated {
            old: &old,
            new: &new,
        };
        let seq = change.write(&mut batch, &mut head, actor, versions, &workspace_id);
        Ok(Outcome::Write(head, batch, Some((new, seq))))
    })
    .await
}

/// `POST /api/contexts/by-external/:externalId/edit` (extension `text-edit`): applies `edit`
/// under the lock, so concurrent edits never conflict. The context must be within `scope` (else
/// it is "not found"), and be at `if_match` when given. Sent with an `Idempotency-Key`
/// (`actor.keyed`), a repeat is answered with the first outcome ([`crate::store::outcome`]).
pub async fn edit(
    db: &Db,
    actor: Actor<'_>,
    external_id: &str,
    edit: &TextEdit,
    scope: Scope<'_>,
    if_match: Option<i64>,
) -> Result<EditedContext> {
    let read = lock_context(db, actor.tenant_id, "c.external_id", external_id);
    write(db, actor, external_id, read, |mut head, row| {
        let locked = Locked::from_row(row)?;
        let versions = locked.versions(db, actor);
        let workspace_id = locked.workspace_id.clone();
        let Locked { context, .. } = locked;
        let context = context.filter(|(c, _)| scope.admits(c));
        let old = writable(context, external_id, if_match)?;
        let applied = contextq_api::edit::apply(&old.content, edit).map_err(Error::EditFailed)?;
        check_content(&applied.content)?;
        let new = Context {
            content: applied.content,
            version: old.version + 1,
            updated_at: now(),
            ..old.clone()
        };
        let mut batch = Batch::default();
        let workspace_id = present(workspace_id)?;
        let change = Updated {
            old: &old,
            new: &new,
        };
        change.write(&mut batch, &mut head, actor, versions, &workspace_id);
        Ok(Outcome::Write(
            head,
            batch,
            EditedContext {
                context: new,
                changed_line: applied.changed_line,
                replayed: false,
            },
        ))
    })
    .await
}

/// `DELETE /api/contexts/:id`; with `if_match`, only at that version. Its tag rows go with it.
pub async fn delete(db: &Db, actor: Actor<'_>, id: &str, if_match: Option<i64>) -> Result<()> {
    delete_with(db, actor, id, if_match, false).await
}

/// [`delete`], also in an archived workspace when `in_archive` (a memory store's memories may
/// be deleted after the store is archived: extension `memory-stores`).
pub(crate) async fn delete_with(
    db: &Db,
    actor: Actor<'_>,
    id: &str,
    if_match: Option<i64>,
    in_archive: bool,
) -> Result<()> {
    let read = lock_context(db, actor.tenant_id, "c.id", id);
    write(db, actor, id, read, |head, row| {
        let locked = Locked::from_row(row)?;
        let versions = locked.versions(db, actor);
        let workspace_id = locked.workspace_id.clone();
        let context = locked
            .context
            .map(|(c, archived)| (c, archived && !in_archive));
        let old = writable(context, id, if_match)?;
        Ok(deletion(
            head,
            actor,
            old,
            &present(workspace_id)?,
            versions,
        ))
    })
    .await
}

/// `DELETE /api/contexts/by-external/:externalId` (extension `delete-by-external`): the
/// context at `external_id` deleted in one transaction, if it is within `scope` (else it is
/// "not found") and, with `if_match`, at that version. The same `delete` version and audit row
/// as [`delete`].
pub async fn delete_by_external(
    db: &Db,
    actor: Actor<'_>,
    external_id: &str,
    scope: Scope<'_>,
    if_match: Option<i64>,
) -> Result<()> {
    let read = lock_context(db, actor.tenant_id, "c.external_id", external_id);
    write(db, actor, external_id, read, |head, row| {
        let locked = Locked::from_row(row)?;
        let versions = locked.versions(db, actor);
        let workspace_id = locked.workspace_id.clone();
        let context = locked.context.filter(|(c, _)| scope.admits(c));
        let old = writable(context, external_id, if_match)?;
        let workspace_id = present(workspace_id)?;
        Ok(deletion(head, actor, old, &workspace_id, versions))
    })
    .await
}

/// The writes of deleting `old`: the row, its audit row and its `delete` version.
pub(super) fn deletion(
    mut head: Head,
    actor: Actor<'_>,
    old: Context,
    workspace_id: &str,
    versions: Versions<'_>,
) -> Outcome<()> {
    let id = old.id.clone();
    let mut batch = Batch::default();
    let detail = serde_json::json!({"externalId": old.external_id, "version": old.version});
    let seq = delete_row(&mut batch, &mut head, actor, &id, old.version, detail);
    let gone = Context {
        updated_at: now(),
        ..old
    };
    record_version(
        &mut batch,
        &mut head,
        versions,
        (Action::Delete, None),
        workspace_id,
        &gone,
        seq,
    );
    Outcome::Write(head, batch, ())
}
