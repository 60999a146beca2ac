//! Reading: one file by its path (a row of this store's tag in its workspace), and what a
//! `view` shows, the file or the directory, in as few requests as the server allows.

use super::*;

impl ContextQStore {
    /// Fetches a row by external id, only if it is ours ([`ContextQStore::owns`]).
    pub(super) async fn fetch(&self, external_id: &str) -> Result<Option<Fetched>> {
        let fetched = self.client.get_by_external(external_id).await?;
        Ok(match fetched {
            Some(f) if self.owns(external_id, &f.context.workspace, &f.context.tags) => {
                self.remember(external_id, &f.context.id);
                Some(f)
            }
            Some(_) | None => {
                self.forget(external_id);
                None
            }
        })
    }

    pub(super) async fn id_of(&self, external_id: &str) -> Result<Option<String>> {
        if let Some(id) = self.ids().get(external_id).cloned() {
            return Ok(Some(id));
        }
        Ok(self.fetch(external_id).await?.map(|f| f.context.id))
    }

    /// The file a listed row is, when it is ours and beneath `prefix` (the listing of `dir`;
    /// `at_root`: the root of per-workspace mode, where the workspace is the first segment).
    pub(super) fn file_of(
        &self,
        row: ContextSummary,
        prefix: &str,
        dir: &MemoryPath,
        at_root: bool,
        versions: bool,
    ) -> Option<FileMeta> {
        // A server without externalIdPrefix lists more: filter here.
        let rel = row.external_id.strip_prefix(prefix)?;
        if rel.is_empty() || !self.owns(&row.external_id, &row.workspace, &row.tags) {
            return None;
        }
        let path = if at_root {
            MemoryPath::root().join(rel)
        } else {
            dir.join(rel)
        };
        let Ok(path) = path else {
            tracing::warn!(external_id = %row.external_id, "skipping a row whose external id is not a valid memory path");
            return None;
        };
        self.remember(&row.external_id, &row.id);
        Some(FileMeta {
            path,
            size: row.size_bytes,
            version: versions.then(|| Version::of_row(&row.id, row.version as u64)),
            modified: Some(row.updated_at),
        })
    }

    pub(super) async fn entry(&self, path: &MemoryPath) -> Result<Option<Entry>> {
        let Some(external_id) = self.external_id(path)? else {
            return Ok(None);
        };
        Ok(self.fetch(&external_id).await?.map(|f| Entry {
            version: f.etag.map(|v| Version::of_row(&f.context.id, v as u64)),
            content: f.context.content,
            id: Some(f.context.id),
        }))
    }

    pub(super) async fn view_path(&self, path: &MemoryPath) -> Result<Viewed> {
        let extensions = self.extensions().await?;
        let file = match path.is_root() {
            true => None,
            false => self.external_id(path)?,
        };
        let (true, true, Some(external_id)) = (extensions.tree, extensions.tree_file, file) else {
            return steps::view(self, path).await;
        };
        // The file at the path and the directory beneath it, in one request.
        let (listing, file) = self.tree_of(path, Some(&external_id)).await?;
        match file {
            Some(c) if self.owns(&external_id, &c.workspace, &c.tags) => {
                self.remember(&external_id, &c.id);
                return Ok(Viewed::File(Entry {
                    version: extensions
                        .conditional_requests
                        .then(|| Version::of_row(&c.id, c.version as u64)),
                    content: c.content,
                    id: Some(c.id),
                }));
            }
            _ => self.forget(&external_id),
        }
        Ok(match listing {
            Some(listing) => Viewed::Directory(listing),
            None => Viewed::Missing,
        })
    }

    /// Settles a write at `external_id` whose answer was `lost` (after the retry engine's own
    /// repeats): the row read back there is the write's when `ours` says so; anything else,
    /// or no answer to the read, leaves it unknown ([`Error::OutcomeUnknown`]).
    pub(super) async fn read_back(
        &self,
        external_id: &str,
        path: &MemoryPath,
        lost: Error,
        ours: impl Fn(&Fetched) -> bool,
    ) -> Result<Fetched> {
        match self.client.get_by_external(external_id).await {
            Ok(Some(f)) if ours(&f) => Ok(f),
            _ => Err(unknown(path, "write", lost)),
        }
    }

    /// What a conditional write says when the row it was read from is gone: the file is not
    /// found if nothing is at its path now, else it changed (another row holds the path).
    pub(super) async fn row_gone(&self, external_id: &str, path: &MemoryPath) -> Result<Error> {
        self.forget(external_id);
        Ok(match self.fetch(external_id).await? {
            None => Error::NotFound {
                path: path.normalized(),
            },
            Some(_) => Error::Precondition {
                path: path.normalized(),
            },
        })
    }
}
