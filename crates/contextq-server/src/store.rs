//! The data layer: every operation of the contract as one function over the database, always
//! scoped to a tenant, returning this module's own [`Error`] (mapped to HTTP once, in
//! [`crate::api`]).
//!
//! Every query names `tenant_id`, so a key never sees or changes another tenant's rows whatever
//! ids it guesses (another tenant's row is simply "not found").
//!
//! Every write is one transaction of two round trips on PostgreSQL (docs/schema.md lists them
//! per operation): `BEGIN`, the lock of the tenant's audit chain head ([`crate::audit::Head`])
//! and one statement that reads everything the operation needs, in one query; then one statement that
//! makes every change, the audit rows and the head's move (a [`Batch`]: data-modifying CTEs),
//! with `COMMIT`. What the contract says (archived workspace, `If-Match` version, `ifAbsent`,
//! quota) is checked in between, in Rust, on what was read under the lock, and the writes still
//! check versions in SQL. A change and its audit record are never apart, and writes of
//! different tenants never wait for each other (SQLite has one writer anyway).
//!
//! - [`workspaces`]: list, create, archive, delete.
//! - [`contexts`]: read, list, bulk upsert, update, delete.
//! - [`activity`]: a tenant's own audit rows, read (`GET /api/audit`).
//! - [`prefix`]: a directory (every context under an external-id prefix) deleted or moved.
//! - [`history`]: versions of contexts (written by every change to one) and their reads.
//! - [`outcome`]: outcomes of keyed writes, recorded by the write and replayed to a repeat.
//! - [`tenants`]: tenants, users and API keys (operator commands and authentication).

use crate::audit::{Head, Record};
use crate::db::{Batch, BatchError, Bind, Db, Row, has_nul};
pub use crate::db::{new_id, now};

pub mod activity;
pub mod contexts;
pub mod history;
pub mod memory_stores;
pub mod outcome;
pub mod prefix;
pub mod redact;
pub mod search;
pub mod tenants;
pub mod workspaces;

/// What the data layer refuses, or a database failure. Each message is a sentence a client can
/// act on; [`crate::api`] maps every variant to the contract's status and code.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No workspace with this slug in the tenant.
    #[error("workspace {slug:?} does not exist")]
    WorkspaceNotFound {
        /// The slug asked for.
        slug: String,
    },
    /// No context with this id (or external id) in the tenant.
    #[error("context {id:?} does not exist")]
    ContextNotFound {
        /// The id or external id asked for.
        id: String,
    },
    /// No kept version with this number.
    #[error("{id:?} has no version {version} (never written, or pruned by retention)")]
    VersionNotFound {
        /// The external id or context id asked for.
        id: String,
        /// The version asked for.
        version: i64,
    },
    /// No tenant with this id.
    #[error("no tenant with id {id:?}")]
    TenantNotFound {
        /// The id asked for.
        id: String,
    },
    /// A tenant with this name exists.
    #[error("a tenant named {name:?} already exists: choose another name")]
    TenantExists {
        /// The name asked for.
        name: String,
    },
    /// A workspace with this slug exists.
    #[error("workspace {slug:?} already exists")]
    WorkspaceExists {
        /// The slug asked for.
        slug: String,
    },
    /// The workspace is archived: read-only.
    #[error("workspace {slug:?} is archived (read-only)")]
    WorkspaceArchived {
        /// Its slug.
        slug: String,
    },
    /// A workspace that still holds contexts cannot be deleted.
    #[error("workspace {slug:?} still holds {contexts} contexts; delete them first")]
    WorkspaceNotEmpty {
        /// Its slug.
        slug: String,
        /// How many contexts it holds.
        contexts: i64,
    },
    /// A create-only item (`ifAbsent`) found its external id taken.
    #[error("externalId {external_id:?} already exists")]
    ExternalIdExists {
        /// The external id.
        external_id: String,
    },
    /// An upsert named a workspace other than the one its external id lives in.
    #[error("externalId {external_id:?} already exists in another workspace")]
    ExternalIdInOtherWorkspace {
        /// The external id.
        external_id: String,
    },
    /// `If-Match` named another version; nothing was changed.
    #[error("context {id:?} is at version {stored}, not {expected}")]
    VersionMismatch {
        /// The context.
        id: String,
        /// Its version.
        stored: i64,
        /// The version the request named.
        expected: i64,
    },
    /// The row changed between the check and the write; nothing was changed.
    #[error("{id:?} changed concurrently")]
    ChangedConcurrently {
        /// The context or workspace.
        id: String,
    },
    /// A redaction would leave the text in a file's current content; nothing was changed.
    #[error(
        "{}; nothing was redacted",
        match version {
            Some(v) => format!("version {v} of {external_id:?} is its current content: change or delete it first (the version then becomes an older one), then redact it"),
            None => format!("the current content of {external_id:?} holds the text: edit or delete it first, then redact"),
        }
    )]
    LiveContent {
        /// The external id.
        external_id: String,
        /// The version asked for (`None`: a matching redaction).
        version: Option<i64>,
    },
    /// The content of a redacted version was asked for (a diff).
    #[error("version {version} of {id:?} was redacted: its content is gone")]
    Redacted {
        /// The external id.
        id: String,
        /// The version.
        version: i64,
    },
    /// A text edit cannot apply to the content (extension `text-edit`); nothing was changed.
    #[error("the edit cannot apply: {0}")]
    EditFailed(contextq_api::EditFailure),
    /// The plan's cap on contexts.
    #[error(
        "plan {plan} allows {cap} contexts; the tenant has {count} and this request would create {creating}"
    )]
    QuotaExceeded {
        /// The tenant's plan.
        plan: contextq_api::Plan,
        /// Its cap.
        cap: i64,
        /// Contexts the tenant holds.
        count: i64,
        /// Contexts the request would add.
        creating: usize,
    },
    /// The plan's cap on workspaces (a Memory Stores store is one).
    #[error(
        "plan {plan} allows {cap} workspaces and the tenant has them all: delete one it no longer needs (its memories first), or move the tenant to a larger plan"
    )]
    WorkspaceQuotaExceeded {
        /// The tenant's plan.
        plan: contextq_api::Plan,
        /// Its cap.
        cap: i64,
    },
    /// A field over its byte limit.
    #[error("{field} is {bytes} bytes; the limit is {limit} bytes")]
    TooLarge {
        /// Which field (`content`).
        field: &'static str,
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// More rows than one request may change; nothing was changed.
    #[error("more than {limit} {what}: too many for one request; nothing was changed")]
    TooMany {
        /// What there are too many of.
        what: &'static str,
        /// The most one request changes.
        limit: usize,
    },
    /// A value that breaks a rule of the contract (the message names the rule).
    #[error("{0}")]
    Invalid(String),
    /// A malformed request parameter (a cursor, a limit).
    #[error("{0}")]
    BadParameter(String),
    /// The tenant has its limit of searches in flight (`db::search::SearchLimits`).
    #[error("this tenant already has {limit} searches running; send this one again in a moment")]
    SearchBusy {
        /// The limit.
        limit: u32,
    },
    /// Every search connection stayed in use for the acquire timeout.
    #[error("every search connection of this server is in use; send this search again in a moment")]
    SearchesSaturated,
    /// A search ran out of its time budget and was stopped.
    #[error(
        "q: the search was stopped after {} ms, its time budget: the query is too broad. \
         Narrow it: add a word, write words that belong together as a \"phrase\", use a longer \
         prefix before a *, or search within a prefix, tag or workspace",
        budget.as_millis()
    )]
    SearchTooBroad {
        /// The budget.
        budget: std::time::Duration,
    },
    /// The database failed (the detail goes to the log, never to a client).
    #[error("database error: {}", crate::db::Described(.0))]
    Database(#[from] sqlx::Error),
    /// A repeat of a keyed write: the outcome its first run recorded, to be answered as it is
    /// (extension `idempotency`; nothing was applied again).
    #[error("the outcome recorded for this Idempotency-Key (status {})", .0.status)]
    Replayed(outcome::Recorded),
    /// A stored value the server cannot read (a damaged database).
    #[error("stored data is damaged: {0}")]
    Corrupt(String),
}

/// Shorthand for results of the data layer.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Who is acting: the tenant, and the key (recorded in the audit log).
#[derive(Debug, Clone, Copy)]
pub struct Actor<'a> {
    /// The tenant.
    pub tenant_id: &'a str,
    /// The API key, if the change came through the API (`None`: an operator command).
    pub key_id: Option<&'a str>,
    /// The request's `Idempotency-Key`, when it sent one: the write records its outcome, and
    /// a repeat gets that outcome ([`outcome`]).
    pub keyed: Option<&'a outcome::Keyed<'a>>,
    /// The write restores this version (`ContextQ-Restored-From`, extension `restore-marks`):
    /// the context it creates or updates is recorded as a `restore` naming it.
    pub restored_from: Option<i64>,
}

impl<'a> Actor<'a> {
    /// An operator of `tenant_id` (a command of the binary or of the library: no key, no
    /// `Idempotency-Key`).
    pub fn operator(tenant_id: &'a str) -> Actor<'a> {
        Actor {
            tenant_id,
            key_id: None,
            keyed: None,
            restored_from: None,
        }
    }

    /// An audit record of `action` on an entity, by this actor.
    fn record(
        &self,
        action: &'a str,
        entity_type: &'a str,
        entity_id: &'a str,
        detail: serde_json::Value,
    ) -> Record<'a> {
        Record {
            tenant_id: self.tenant_id,
            api_key_id: self.key_id,
            action,
            entity_type,
            entity_id,
            detail: detail.to_string(),
        }
    }
}

/// The locked head from a read statement's `head_seq`, `head_hash`, `head_keyed_from` and
/// `head_mac` columns; with an audit key its MAC must verify (a write never extends a chain
/// whose head was tampered with).
fn head_from(row: &Row, tenant_id: &str, key: Option<&crate::audit::AuditKey>) -> Result<Head> {
    let mac: Option<String> = row.try_get("head_mac")?;
    Head::new(
        tenant_id,
        row.try_get("head_seq")?,
        row.try_get("head_hash")?,
        row.try_get("head_keyed_from")?,
        mac.as_deref(),
        key,
    )
    .map_err(Error::Corrupt)
}

/// A tenant without a chain head (made by hand, not by [`tenants::create_tenant`]).
fn no_head(tenant_id: &str) -> Error {
    Error::Corrupt(format!("tenant {tenant_id} has no audit chain head"))
}

/// What a write decided from what it read under the lock.
// Made once per write and moved once: boxing the batch would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Outcome<T> {
    /// Commit `batch` (the head's move is added to it) and answer `T`.
    Write(Head, Batch, T),
    /// Nothing to change (an idempotent replay, an archive of an archived workspace).
    Unchanged(T),
}

/// One write transaction, two round trips on PostgreSQL (docs/schema.md):
/// `BEGIN`, the lock of the tenant's head (the dialect's `lock_head`) and `read` (what the write needs;
/// `$1` is the tenant) in one query; then `decide` runs on the row, in Rust; then the batch it
/// returns, the audit rows and the head's move, and `COMMIT`, in one query. A refusal from `decide` rolls back; a batch
/// statement that changed an unexpected number of rows rolls everything back
/// ([`Error::ChangedConcurrently`] on `entity`).
///
/// A keyed write (`actor.keyed`) reads its key's earlier outcome in the same statement: a
/// repeat is [`Error::Replayed`] with nothing applied; otherwise its outcome, success or
/// refusal, is recorded in the same transaction ([`outcome`]).
async fn write<T: 'static>(
    db: &Db,
    actor: Actor<'_>,
    entity: &str,
    read: (String, Vec<Bind>),
    decide: impl FnOnce(Head, &Row) -> Result<Outcome<T>>,
) -> Result<T> {
    let tenant_id = actor.tenant_id;
    let keyed = actor.keyed;
    let (sql, binds) = match keyed {
        Some(k) => outcome::with_prior(read, k.key),
        None => read,
    };
    let nul = || Error::Invalid("a value contains NUL (U+0000), which is not allowed".into());
    if has_nul(&binds) {
        return Err(nul());
    }
    let (tx, row) = db
        .begin_with_read(db.dialect().lock_head(), &sql, binds)
        .await?;
    let max_n = match (keyed, &row) {
        (Some(k), Some(row)) => match outcome::Prior::from_row(row).and_then(|p| p.replay(k)) {
            Ok(max_n) => Some(max_n),
            Err(e) => {
                tx.abort().await;
                return Err(e);
            }
        },
        _ => None,
    };
    let decided = match row {
        None => Err(no_head(tenant_id)),
        Some(row) => head_from(&row, tenant_id, db.audit_key()).and_then(|head| decide(head, &row)),
    };
    // What the key records, with the batch it goes into.
    let keep = |batch: &mut Batch, recorded: Option<outcome::Recorded>| {
        if let (Some(k), Some(max_n), Some(recorded)) = (keyed, max_n, recorded) {
            outcome::record(batch, tenant_id, k, &recorded, max_n);
        }
    };
    let (head, mut batch, out) = match decided {
        Ok(Outcome::Write(head, batch, out)) => (head, batch, out),
        Ok(Outcome::Unchanged(out)) => {
            let mut batch = Batch::default();
            keep(&mut batch, keyed.and_then(|k| (k.answer)(&out)));
            return finish(tx, batch, entity, out).await;
        }
        Err(e) => {
            let mut batch = Batch::default();
            keep(&mut batch, keyed.and_then(|k| (k.refusal)(&e)));
            return match finish(tx, batch, entity, ()).await {
                Ok(()) => Err(e),
                Err(failed) => Err(failed),
            };
        }
    };
    if batch.has_nul() {
        tx.abort().await;
        return Err(nul());
    }
    keep(&mut batch, keyed.and_then(|k| (k.answer)(&out)));
    head.write(&mut batch, db.dialect());
    finish(tx, batch, entity, out).await
}

/// Commits `batch` (nothing to commit: ends the transaction) and answers `out`.
async fn finish<T>(tx: crate::db::pool::Write, batch: Batch, entity: &str, out: T) -> Result<T> {
    if batch.is_empty() {
        tx.abort().await;
        return Ok(out);
    }
    match tx.commit(batch).await {
        Ok(()) => Ok(out),
        Err(BatchError::Database(e)) => Err(e.into()),
        Err(BatchError::Mismatch(m)) => {
            tracing::warn!(entity, mismatch = %m, "a write found its rows changed; rolled back");
            Err(Error::ChangedConcurrently {
                id: entity.to_string(),
            })
        }
    }
}

/// `json` (a column a read built with the dialect's `json_objects`) as `T`; `what` names it when it does not
/// decode (a corrupt row).
fn decode<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T> {
    serde_json::from_str(json).map_err(|e| Error::Corrupt(format!("{what}: {e}")))
}

/// ` AND w.slug IN (<params>)`: a key's workspaces (`workspace-keys`), none admitting nothing.
fn slug_in(params: &[String]) -> String {
    if params.is_empty() {
        " AND w.slug IN (NULL)".to_string()
    } else {
        format!(" AND w.slug IN ({})", params.join(", "))
    }
}

/// Tags as stored (a JSON array in the row).
fn tags_from(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}

fn tags_text(tags: &[String]) -> String {
    serde_json::to_string(tags).unwrap_or_else(|_| "[]".into())
}

fn workspace_from_row(row: &Row) -> Result<contextq_api::Workspace> {
    Ok(contextq_api::Workspace {
        id: row.try_get("id")?,
        slug: row.try_get("slug")?,
        name: row.try_get("name")?,
        archived: row.try_get::<i64, _>("archived")? != 0,
        created_at: row.try_get("created_at")?,
    })
}

/// The bounds of a page of external ids under `prefix` after the cursor `after`, as
/// `(operator, value)` conditions on `external_id`: one lower bound only, the later of the prefix
/// and the cursor (given both, SQLite seeks the index by one of them and may pick the prefix,
/// rescanning every earlier page), and the prefix's upper bound. Byte order (COLLATE "C" in
/// PostgreSQL, BINARY in SQLite): every string in [prefix, prefix + U+10FFFF) starts with prefix,
/// and the range is an index range.
pub(crate) fn external_id_range(
    prefix: Option<&str>,
    after: Option<&str>,
) -> Vec<(&'static str, String)> {
    let prefix = prefix.filter(|p| !p.is_empty());
    let mut bounds = Vec::new();
    match (prefix, after) {
        (Some(p), Some(after)) if after >= p => bounds.push((">", after.to_string())),
        (Some(p), _) => bounds.push((">=", p.to_string())),
        (None, Some(after)) => bounds.push((">", after.to_string())),
        (None, None) => {}
    }
    if let Some(p) = prefix {
        bounds.push(("<", format!("{p}\u{10FFFF}")));
    }
    bounds
}
