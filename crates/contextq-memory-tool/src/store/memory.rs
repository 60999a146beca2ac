//! `MemoryStore`: files in a map inside this process, for tests, examples and ephemeral agents.
//!
//! Directories are derived from file paths, as in ContextQ, so this store also exercises the
//! tool's derived-directory rendering. Versions are a counter per store, so conditional writes
//! are exact. Nothing survives the process.

use std::collections::BTreeMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{Entry, FileMeta, Listing, PutMode, Store, Version};
use crate::error::{Error, Result};
use crate::path::MemoryPath;

/// An in-process [`Store`]. Cheap to create; clone an `Arc` of it to share.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    files: BTreeMap<MemoryPath, (String, u64)>,
    next_version: u64,
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the map half-updated (every change is a
        // single insert or remove), so a poisoned lock is still consistent.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Inner {
    fn bump(&mut self) -> u64 {
        self.next_version += 1;
        self.next_version
    }
}

#[async_trait]
impl Store for MemoryStore {
    /// No index here: search reads every file ([`super::steps::search`]).
    fn scans(&self) -> bool {
        true
    }

    async fn get(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        Ok(self.lock().files.get(path).map(|(content, v)| Entry {
            content: content.clone(),
            version: Some(Version::new(*v)),
            id: None,
        }))
    }

    async fn list(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        let inner = self.lock();
        let files: Vec<FileMeta> = inner
            .files
            .range(dir.clone()..)
            .take_while(|(p, _)| p.starts_with(dir))
            .filter(|(p, _)| *p != dir)
            .map(|(p, (content, v))| FileMeta {
                path: p.clone(),
                size: Some(content.len() as u64),
                version: Some(Version::new(*v)),
                modified: None,
            })
            .collect();
        if files.is_empty() && !dir.is_root() {
            return Ok(None);
        }
        Ok(Some(Listing {
            files,
            ..Listing::default()
        }))
    }

    async fn put(&self, path: &MemoryPath, text: &str, mode: PutMode) -> Result<Option<Version>> {
        let mut inner = self.lock();
        let current = inner.files.get(path).map(|(_, v)| *v);
        match (mode, current) {
            (PutMode::Create, Some(_)) => {
                return Err(Error::AlreadyExists {
                    path: path.normalized(),
                });
            }
            (PutMode::Update(_), None) => {
                return Err(Error::NotFound {
                    path: path.normalized(),
                });
            }
            (PutMode::Update(want), Some(have)) if want.number() != have => {
                return Err(Error::Precondition {
                    path: path.normalized(),
                });
            }
            _ => {}
        }
        // A file cannot be created where a directory is (files exist beneath it).
        if current.is_none() {
            let has_children = inner
                .files
                .range(path.clone()..)
                .take_while(|(p, _)| p.starts_with(path))
                .any(|(p, _)| p != path);
            if has_children {
                return Err(Error::AlreadyExists {
                    path: path.normalized(),
                });
            }
        }
        let v = inner.bump();
        inner.files.insert(path.clone(), (text.to_string(), v));
        Ok(Some(Version::new(v)))
    }

    async fn delete(&self, path: &MemoryPath, expected: Option<Version>) -> Result<()> {
        let mut inner = self.lock();
        match (inner.files.get(path), expected) {
            (None, _) => Err(Error::NotFound {
                path: path.normalized(),
            }),
            (Some((_, have)), Some(want)) if *have != want.number() => Err(Error::Precondition {
                path: path.normalized(),
            }),
            _ => {
                inner.files.remove(path);
                Ok(())
            }
        }
    }
}
