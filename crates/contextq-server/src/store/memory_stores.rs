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

mod memories;
mod stores;
mod versions;
mod writes;

pub use memories::{MemoryPage, MemoryRow, get_memory, list_memories, store_and_memory};
pub use stores::{
    KnownStores, StoreChange, StoreQuery, archive_store, create_store, delete_store, get_store,
    list_stores, update_store,
};
pub use versions::{VersionQuery, get_version, list_versions, redact_version};
pub use writes::{
    MemoryChange, PathConflict, Refusal, create_memory, delete_memory, store_and_overlap,
    update_content, update_memory,
};

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
