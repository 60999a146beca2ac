//! `POST /api/contexts/bulk-upsert`: every item checked first, then the three steps of every
//! write (read what the items need under the head lock, decide, one batch), all or nothing.

use super::*;

/// Checks every item of a bulk upsert before anything is read or written: 1 to
/// [`MAX_LARGE_BULK_ITEMS`] (extension `large-bulk`; the contract's own limit is 100).
pub(super) fn check_items(items: &[ContextInput]) -> Result<()> {
    if items.is_empty() || items.len() > MAX_LARGE_BULK_ITEMS {
        return Err(Error::Invalid(format!(
            "contexts: give 1 to {MAX_LARGE_BULK_ITEMS} items (got {})",
            items.len()
        )));
    }
    let mut seen = HashSet::new();
    for (i, item) in items.iter().enumerate() {
        if item.external_id.is_empty() || item.external_id.len() > MAX_EXTERNAL_ID_BYTES {
            return Err(Error::Invalid(format!(
                "contexts[{i}].externalId: 1 to {MAX_EXTERNAL_ID_BYTES} bytes"
            )));
        }
        if item.kind.is_empty() || item.kind.len() > MAX_TYPE_BYTES {
            return Err(Error::Invalid(format!(
                "contexts[{i}].type: 1 to {MAX_TYPE_BYTES} bytes (got {})",
                item.kind.len()
            )));
        }
        check_title(&format!("contexts[{i}].title"), item.title.as_deref())?;
        if !seen.insert(item.external_id.as_str()) {
            return Err(Error::Invalid(format!(
                "contexts[{i}].externalId {:?} appears twice in one request",
                item.external_id
            )));
        }
        check_content(&item.content)?;
        if let Some(tags) = &item.tags {
            check_tags(tags)?;
        }
    }
    Ok(())
}

/// A workspace as a bulk upsert reads it.
#[derive(serde::Deserialize)]
pub(super) struct TargetWorkspace {
    id: String,
    slug: String,
    archived: i64,
}

/// A context as a bulk upsert reads it.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct Stored {
    id: String,
    external_id: String,
    workspace_id: String,
    kind: String,
    title: Option<String>,
    content: String,
    tags: String,
    version: i64,
}

/// An external id's kept versions as a bulk upsert reads them.
#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct KeptOf {
    external_id: String,
    #[serde(flatten)]
    kept: Kept,
}

/// `POST /api/contexts/bulk-upsert`: all or nothing, in the three steps of every write: read
/// (`bulk_read`: the tenant's head, plan and usage, the target workspaces, the contexts and
/// kept versions at the items' external ids), decide (refusals first, then one update per
/// changed item, `Upserting::update`, and one insert of the new ones,
/// `Upserting::insert`), write (the batch, in one transaction).
pub async fn bulk_upsert(
    db: &Db,
    actor: Actor<'_>,
    items: &[ContextInput],
) -> Result<Vec<UpsertResult>> {
    upsert(db, actor, items, None, &[]).await
}

/// What [`bulk_upsert_with_seqs`] wrote.
#[derive(Debug)]
pub(crate) struct Upserted {
    /// One per item, in order.
    pub results: Vec<UpsertResult>,
    /// The `seq` of each version written, by external id.
    pub seqs: HashMap<String, i64>,
    /// The time written (the rows' `createdAt`/`updatedAt`).
    pub at: String,
}

/// [`bulk_upsert`], also answering each version's `seq` and the time written (the Memory
/// Stores door's answer, without a read after the write), with `guards` checked under the lock.
pub(crate) async fn bulk_upsert_with_seqs(
    db: &Db,
    actor: Actor<'_>,
    items: &[ContextInput],
    guards: &[Guard],
) -> Result<Upserted> {
    let mut written = None;
    let results = upsert(db, actor, items, Some(&mut written), guards).await?;
    let (seqs, at) = written.unwrap_or_default();
    Ok(Upserted { results, seqs, at })
}

/// The seqs and time of a write, as [`bulk_upsert_with_seqs`] answers them.
type SeqsAndTime = (HashMap<String, i64>, String);

/// [`bulk_upsert`], telling `written` what it wrote when asked. The write's own answer stays a
/// `Vec<UpsertResult>`: a keyed request's recorded outcome is that type's (`api::keyed`).
async fn upsert(
    db: &Db,
    actor: Actor<'_>,
    items: &[ContextInput],
    written: Option<&mut Option<SeqsAndTime>>,
    guards: &[Guard],
) -> Result<Vec<UpsertResult>> {
    check_items(items)?;
    let slugs: Vec<&str> = items
        .iter()
        .map(|i| i.workspace.as_str())
        .collect::<HashSet<_>>()
        .into_iter()
        .collect();
    let read = bulk_read(db, actor.tenant_id, items, &slugs);
    // Tokenized, and the index's values made, before the write lock is taken (search::Terms).
    let terms: Vec<Indexed> = items
        .iter()
        .map(|i| Terms::of(&i.external_id, &i.content).made_for(db, actor.tenant_id))
        .collect();
    write(db, actor, &items[0].external_id, read, |head, row| {
        let found = Found::from_row(row, actor.tenant_id)?;
        let targets = found.targets(&slugs)?;
        let stored: HashMap<&str, &Stored> = found
            .stored
            .iter()
            .map(|c| (c.external_id.as_str(), c))
            .collect();
        let mut w = Upserting::new(db, actor, head, &found);
        for g in guards {
            g.push(&mut w.batch);
        }
        let mut results = Vec::with_capacity(items.len());
        let mut creates: Vec<(&ContextInput, String, Indexed)> = Vec::new();
        for (item, terms) in items.iter().zip(terms) {
            let ws = targets[item.workspace.as_str()];
            let Some(old) = stored.get(item.external_id.as_str()) else {
                let id = new_id("ctx");
                results.push(upserted(&id, item, "created", 1));
                creates.push((item, id, terms));
                continue;
            };
            let version = w.update(item, terms, old, ws)?;
            results.push(upserted(&old.id, item, "updated", version));
        }
        let created = creates.len();
        if !creates.is_empty() {
            found.check_quota(created)?;
            w.insert(creates, &targets);
        }
        let (outcome, seqs, at) = w.finish(created, results);
        if let Some(written) = written {
            *written = Some((seqs, at));
        }
        Ok(outcome)
    })
    .await
}

/// The read of a bulk upsert: one statement for everything the decision needs.
pub(super) fn bulk_read(
    db: &Db,
    tenant_id: &str,
    items: &[ContextInput],
    slugs: &[&str],
) -> (String, Vec<Bind>) {
    let workspaces_json = db.dialect().json_objects(&[
        ("id", "w.id"),
        ("slug", "w.slug"),
        ("archived", "w.archived"),
    ]);
    let existing_json = db.dialect().json_objects(&[
        ("id", "c.id"),
        ("externalId", "c.external_id"),
        ("workspaceId", "c.workspace_id"),
        ("kind", "c.type"),
        ("title", "c.title"),
        ("content", "c.content"),
        ("tags", "c.tags"),
        ("version", "c.version"),
    ]);
    let kept_json =
        db.dialect()
            .json_objects(&[("externalId", "v.e"), ("min", "v.mn"), ("last", "v.lv")]);
    let ids = placeholders(2 + slugs.len(), items.len());
    let usage = usage_columns(db, items.len(), &ids);
    let sql = format!(
        "SELECT h.seq AS head_seq, h.last_hash AS head_hash, h.keyed_from AS head_keyed_from, h.mac AS head_mac, \
         {usage}, t.plan AS plan, \
         (SELECT {workspaces_json} FROM workspaces w WHERE w.tenant_id = $1 AND w.slug IN ({})) AS workspaces, \
         (SELECT {existing_json} FROM contexts c WHERE c.tenant_id = $1 AND c.external_id IN ({ids})) AS existing, \
         (SELECT {kept_json} FROM (SELECT n.external_id AS e, n.last_version AS lv, \
            (SELECT MIN(x.version) FROM context_versions x WHERE x.tenant_id = $1 AND x.external_id = n.external_id) AS mn \
            FROM version_counters n WHERE n.tenant_id = $1 AND n.external_id IN ({ids})) v) AS kept \
         FROM audit_heads h JOIN tenants t ON t.id = h.tenant_id WHERE h.tenant_id = $1",
        placeholders(2, slugs.len()),
    );
    let mut binds = vec![Bind::Text(tenant_id.to_string())];
    binds.extend(slugs.iter().map(|s| Bind::Text(s.to_string())));
    binds.extend(items.iter().map(|i| Bind::Text(i.external_id.clone())));
    (sql, binds)
}

/// What [`bulk_read`] found.
pub(super) struct Found {
    plan: Plan,
    usage: Usage,
    targets: Vec<TargetWorkspace>,
    stored: Vec<Stored>,
    kept: Vec<KeptOf>,
}

impl Found {
    pub(super) fn from_row(row: &Row, tenant_id: &str) -> Result<Found> {
        let plan: String = row.try_get("plan")?;
        let plan: Plan = plan
            .parse()
            .map_err(|_| Error::Corrupt(format!("tenant {tenant_id} has plan {plan:?}")))?;
        Ok(Found {
            plan,
            usage: Usage::from_row(row)?,
            targets: decode(&row.try_get::<String, _>("workspaces")?, "workspaces")?,
            stored: decode(&row.try_get::<String, _>("existing")?, "contexts")?,
            kept: decode(&row.try_get::<String, _>("kept")?, "context_versions")?,
        })
    }

    /// The workspaces the items name, by slug; refused when one is missing or archived.
    pub(super) fn targets(&self, slugs: &[&str]) -> Result<HashMap<&str, &TargetWorkspace>> {
        let targets: HashMap<&str, &TargetWorkspace> =
            self.targets.iter().map(|w| (w.slug.as_str(), w)).collect();
        for slug in slugs {
            let ws = targets.get(slug).ok_or_else(|| Error::WorkspaceNotFound {
                slug: slug.to_string(),
            })?;
            if ws.archived != 0 {
                return Err(Error::WorkspaceArchived {
                    slug: slug.to_string(),
                });
            }
        }
        Ok(targets)
    }

    /// Refused when `creating` more contexts would pass the plan's cap.
    pub(super) fn check_quota(&self, creating: usize) -> Result<()> {
        let count = self.usage.contexts;
        match self.plan.context_cap() {
            Some(cap) if count + creating as i64 > cap => Err(Error::QuotaExceeded {
                plan: self.plan,
                cap,
                count,
                creating,
            }),
            _ => Ok(()),
        }
    }
}

pub(super) fn upserted(id: &str, item: &ContextInput, status: &str, version: i64) -> UpsertResult {
    UpsertResult {
        id: id.to_string(),
        external_id: item.external_id.clone(),
        status: status.into(),
        version,
    }
}

/// One context as a bulk upsert writes it.
pub(super) struct Written<'b> {
    id: &'b str,
    version: i64,
    workspace_id: &'b str,
    title: Option<&'b str>,
    tags: &'b [String],
}

/// The version `item`'s change records, written as `row` with audit number `seq`, at `at`
/// (restoring `restored_from`, if the write restores).
fn change<'b>(
    action: Action,
    item: &'b ContextInput,
    row: Written<'b>,
    seq: i64,
    (at, restored_from): (&'b str, Option<i64>),
) -> Change<'b> {
    Change {
        action,
        external_id: &item.external_id,
        context_id: row.id,
        context_version: row.version,
        workspace_id: row.workspace_id,
        kind: &item.kind,
        title: row.title,
        tags: row.tags,
        content: Some(&item.content),
        seq,
        at,
        renamed_from: None,
        restored_from,
    }
}

/// The write a bulk upsert decides, as it goes: the batch, the audit head, the versions.
pub(super) struct Upserting<'a> {
    actor: Actor<'a>,
    at: String,
    batch: Batch,
    head: Head,
    versions: Versions<'a>,
    seqs: HashMap<String, i64>,
}

impl<'a> Upserting<'a> {
    pub(super) fn new(db: &Db, actor: Actor<'a>, head: Head, found: &Found) -> Self {
        let mut versions = Versions::of_write(db, actor, found.usage.clone(), found.plan);
        for k in &found.kept {
            versions.known(&k.external_id, k.kept);
        }
        Upserting {
            actor,
            at: now(),
            batch: Batch::default(),
            head,
            versions,
            seqs: HashMap::new(),
        }
    }

    /// `item` over the context `old` (in the workspace `ws`): its version after, unchanged when
    /// nothing differs. Absent title and tags keep the stored ones (as in PUT).
    pub(super) fn update(
        &mut self,
        item: &ContextInput,
        terms: Indexed,
        old: &Stored,
        ws: &TargetWorkspace,
    ) -> Result<i64> {
        if item.if_absent {
            return Err(Error::ExternalIdExists {
                external_id: item.external_id.clone(),
            });
        }
        if old.workspace_id != ws.id {
            return Err(Error::ExternalIdInOtherWorkspace {
                external_id: item.external_id.clone(),
            });
        }
        let old_tags = tags_from(&old.tags);
        let tags = item.tags.clone().unwrap_or_else(|| old_tags.clone());
        let title = item.title.clone().or_else(|| old.title.clone());
        if old.content == item.content
            && old.kind == item.kind
            && title == old.title
            && tags == old_tags
        {
            return Ok(old.version);
        }
        let (tenant_id, version) = (self.actor.tenant_id, old.version + 1);
        self.batch.push(
            "UPDATE contexts SET type = $1, title = $2, content = $3, tags = $4, size_bytes = $5, version = $6, updated_at = $7 \
             WHERE id = $8 AND tenant_id = $9 AND version = $10",
            vec![
                Bind::Text(item.kind.clone()),
                Bind::OptText(title.clone()),
                Bind::Text(item.content.clone()),
                Bind::Text(tags_text(&tags)),
                Bind::Int(item.content.len() as i64),
                Bind::Int(version),
                Bind::Text(self.at.clone()),
                Bind::Text(old.id.clone()),
                Bind::Text(tenant_id.to_string()),
                Bind::Int(old.version),
            ],
            Some(1),
        );
        if old.content != item.content {
            self.batch
                .push_dialects(crate::store::search::put(tenant_id, &old.id, terms));
        }
        if item.tags.is_some() {
            retag(&mut self.batch, tenant_id, &old.id, &old_tags, &tags);
        }
        let row = Written {
            id: &old.id,
            version,
            workspace_id: &old.workspace_id,
            title: title.as_deref(),
            tags: &tags,
        };
        self.record(Action::Update, item, row);
        Ok(version)
    }

    /// The new contexts `creates` (each with its new id), in one statement.
    pub(super) fn insert(
        &mut self,
        creates: Vec<(&ContextInput, String, Indexed)>,
        targets: &HashMap<&str, &TargetWorkspace>,
    ) {
        let tenant_id = self.actor.tenant_id;
        use std::fmt::Write as _;
        let mut binds = Vec::with_capacity(creates.len() * 10);
        let mut rows = String::with_capacity(creates.len() * 64);
        for (item, id, _) in &creates {
            let n = binds.len();
            let sep = if n == 0 { "" } else { ", " };
            let _ = write!(rows, "{sep}(");
            for k in 1..=9 {
                let _ = write!(rows, "${}, ", n + k);
            }
            // `version` is 1; `created_at` and `updated_at` are the same value.
            let _ = write!(rows, "1, ${}, ${})", n + 10, n + 10);
            binds.extend([
                Bind::Text(id.clone()),
                Bind::Text(tenant_id.to_string()),
                Bind::Text(targets[item.workspace.as_str()].id.clone()),
                Bind::Text(item.external_id.clone()),
                Bind::Text(item.kind.clone()),
                Bind::OptText(item.title.clone()),
                Bind::Text(item.content.clone()),
                Bind::Text(tags_text(item.tags.as_deref().unwrap_or_default())),
                Bind::Int(item.content.len() as i64),
                Bind::Text(self.at.clone()),
            ]);
        }
        self.batch.push(
            format!(
                "INSERT INTO contexts (id, tenant_id, workspace_id, external_id, type, title, content, tags, size_bytes, version, created_at, updated_at) VALUES {rows}"
            ),
            binds,
            Some(creates.len() as u64),
        );
        let mut made = Vec::with_capacity(creates.len());
        for (item, id, terms) in creates {
            let tags = item.tags.as_deref().unwrap_or_default();
            self.batch
                .push_dialects(crate::store::search::put_new(tenant_id, &id, terms));
            retag(&mut self.batch, tenant_id, &id, &[], tags);
            let seq = self.audit(Action::Create, item, &id, 1);
            made.push((item, id, seq));
        }
        // Their first versions together: one insert of their counters, one of their rows.
        let changes = made
            .iter()
            .map(|(item, id, seq)| {
                let row = Written {
                    id,
                    version: 1,
                    workspace_id: &targets[item.workspace.as_str()].id,
                    title: item.title.as_deref(),
                    tags: item.tags.as_deref().unwrap_or_default(),
                };
                change(
                    Action::Create,
                    item,
                    row,
                    *seq,
                    (&self.at, self.actor.restored_from),
                )
            })
            .collect();
        self.versions.push_many(&mut self.batch, changes);
    }

    /// The audit entry of one item's change (of context `id`, now at `version`): its sequence
    /// number in the tenant's chain.
    fn audit(&mut self, action: Action, item: &ContextInput, id: &str, version: i64) -> i64 {
        let plain = match action {
            Action::Create => "context.create",
            _ => "context.update",
        };
        let (name, detail) = written(self.actor, plain, &item.external_id, version);
        let seq = self
            .head
            .append(self.actor.record(name, "context", id, detail));
        self.seqs.insert(item.external_id.clone(), seq);
        seq
    }

    /// The audit entry and the version of one item's change, written as `row`.
    pub(super) fn record(&mut self, action: Action, item: &ContextInput, row: Written<'_>) {
        let seq = self.audit(action, item, row.id, row.version);
        let change = change(action, item, row, seq, (&self.at, self.actor.restored_from));
        self.versions.push(&mut self.batch, change);
    }

    /// The write: `created` new contexts counted, the versions' retention applied.
    pub(super) fn finish(
        mut self,
        created: usize,
        results: Vec<UpsertResult>,
    ) -> (Outcome<Vec<UpsertResult>>, HashMap<String, i64>, String) {
        self.head.count(created as i64, 0);
        self.versions.finish(&mut self.batch, &mut self.head);
        let outcome = Outcome::Write(self.head, self.batch, results);
        (outcome, self.seqs, self.at)
    }
}
