//! The operations a server extension does in one request (`text-edit`, `rename`, `by-prefix`,
//! `delete-by-external`); each answers `NotSupported` without it, and `native_else` (in the
//! parent) goes on with the seed's steps.

use super::*;

/// A `by-prefix` refusal the store answers for: nothing beneath the directory, or too much for
/// one request.
pub(super) fn directory_refusal(e: &Error) -> bool {
    refused(e, ErrorCode::NotFound) || refused(e, ErrorCode::PayloadTooLarge)
}

/// What a [`directory_refusal`] means to the tool: no such directory, or (over the server's
/// limit) `NotSupported`, so that it goes file by file.
pub(super) fn directory_refused(e: Error, dir: &MemoryPath, operation: &'static str) -> Error {
    if refused(&e, ErrorCode::NotFound) {
        Error::NotFound {
            path: dir.normalized(),
        }
    } else {
        Error::NotSupported { operation }
    }
}

impl ContextQStore {
    /// One request with the `text-edit` extension (the edit applied on the server, under the
    /// row's lock, for a row carrying the tag in the path's workspace); `NotSupported` without
    /// it, and the tool reads, applies and writes back conditionally.
    pub(super) async fn native_edit(&self, path: &MemoryPath, edit: &TextEdit) -> Result<Edited> {
        let not_found = || Error::NotFound {
            path: path.normalized(),
        };
        let extensions = self.extensions().await?;
        if !extensions.text_edit {
            return Err(Error::NotSupported { operation: "edit" });
        }
        let Some(target) = self.target(path)?.filter(|t| !t.rel.is_empty()) else {
            return Err(not_found());
        };
        let external_id = target.external_id(&self.tag);
        let body = EditContext {
            edit: edit.clone(),
            within: Within::new(&self.tag, target.workspace),
            // The answer Claude gets is a few lines: ask for those, not the whole file.
            snippet_lines: extensions
                .edit_snippet
                .then_some(crate::render::SNIPPET_CONTEXT),
        };
        // Random and unique per edit: a repeat after a lost answer is applied at most once.
        let key = format!("mt-{:032x}", fastrand::u128(..));
        // The row edited (remembered for the next command), and what Claude is shown of it.
        let edited = |(id, v): (&str, i64), content, snippet, changed_line| {
            self.remember(&external_id, id);
            Edited {
                version: extensions
                    .conditional_requests
                    .then(|| Version::of_row(id, v as u64)),
                content,
                snippet,
                changed_line,
            }
        };
        let answer = if extensions.edit_snippet {
            let e = self.client.edit_summary(&external_id, &body, None, &key);
            e.await.map(|e| {
                let c = e.context;
                edited((&c.id, c.version), None, e.snippet, e.changed_line)
            })
        } else {
            let e = self.client.edit(&external_id, &body, None, &key);
            e.await.map(|e| {
                let c = e.context;
                edited((&c.id, c.version), Some(c.content), None, e.changed_line)
            })
        };
        match answer {
            Ok(edited) => Ok(edited),
            Err(e) if refused(&e, ErrorCode::NotFound) => Err(not_found()),
            Err(Error::EditRefused { failure, .. }) => Err(Error::EditRefused {
                path: path.normalized(),
                failure,
            }),
            // The engine repeated it (same key) as long as it could: still no answer.
            Err(e) if is_ambiguous(&e) => Err(unknown(path, "edit", e)),
            Err(e) => Err(e),
        }
    }

    /// One request with the `rename` extension, for a file moving within its workspace: the
    /// server moves the row in one transaction (never over an existing file or directory) and
    /// keeps its history. Directories, moves between workspaces and servers without the
    /// extension answer `NotSupported`, and the tool moves file by file.
    pub(super) async fn native_rename(&self, from: &MemoryPath, to: &MemoryPath) -> Result<()> {
        let unsupported = || Error::NotSupported {
            operation: "rename",
        };
        if !self.extensions().await?.rename {
            return Err(unsupported());
        }
        let (Some(source), Some(target)) = (self.target(from)?, self.target(to)?) else {
            return Err(unsupported());
        };
        if source.rel.is_empty() || target.rel.is_empty() || source.workspace != target.workspace {
            return Err(unsupported());
        }
        let old_id = source.external_id(&self.tag);
        let new_id = target.external_id(&self.tag);
        let body = RenameContext {
            to: new_id.clone(),
            title: Some(to.normalized()),
            within: Within::new(&self.tag, &source.workspace),
        };
        match self.client.rename(&old_id, &body).await {
            Ok(renamed) => {
                self.forget(&old_id);
                self.remember(&new_id, &renamed.context.id);
                Ok(())
            }
            // No file there: perhaps a directory, moved whole where the server can.
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                self.rename_dir(from, to, &source, &target).await
            }
            Err(e) if refused(&e, ErrorCode::Conflict) => Err(Error::AlreadyExists {
                path: to.normalized(),
            }),
            // No answer: unknown (as for a directory).
            Err(e) if is_ambiguous(&e) => {
                self.forget(&old_id);
                Err(unknown(from, "rename", e))
            }
            Err(e) => Err(e),
        }
    }

    /// With the `by-prefix` extension a directory is deleted in one transaction (all or
    /// nothing). Without it, at the workspace level of per-workspace mode, or for a directory
    /// over the server's limit, `NotSupported`: the tool deletes file by file.
    pub(super) async fn native_delete_dir(&self, dir: &MemoryPath) -> Result<()> {
        let unsupported = || Error::NotSupported {
            operation: "delete_dir",
        };
        if !self.extensions().await?.by_prefix {
            return Err(unsupported());
        }
        let Some(target) = self.target(dir)?.filter(|t| !t.rel.is_empty()) else {
            return Err(unsupported());
        };
        let body = DeletePrefix {
            prefix: target.prefix(&self.tag),
            within: Within::new(&self.tag, &target.workspace),
        };
        match self.client.delete_prefix(&body).await {
            Ok(done) => self.note(&done),
            Err(e) if directory_refusal(&e) => Err(directory_refused(e, dir, "delete_dir")),
            // No answer: unknown. Nothing left beneath it may be another writer's delete, and
            // something left may still be deleted late; keyed, the engine already asked again.
            Err(e) if is_ambiguous(&e) => Err(unknown(dir, "delete", e)),
            Err(e) => Err(e),
        }
    }

    /// With the `delete-by-external` extension, one request: the row at the path's external
    /// id, within this store's tag and the path's workspace, whatever its version. A 404 is no
    /// file there. An answer lost is read back against the row known at the path before: gone,
    /// deleted; that row still there, deleted again at the version read, so that the first
    /// request committing late cannot make the answer wrong (gone by then: deleted); anything
    /// else unknown (a directory's path, where no row was known, reads back as gone too).
    pub(super) async fn native_delete_file(&self, path: &MemoryPath) -> Result<bool> {
        if !self.extensions().await?.delete_by_external {
            return Err(Error::NotSupported {
                operation: "delete_file",
            });
        }
        let (Some(target), Some(external_id)) = (self.target(path)?, self.external_id(path)?)
        else {
            return Ok(false);
        };
        let known = self.ids().get(&external_id).cloned();
        let delete = |if_match| {
            self.client.delete_by_external(
                &external_id,
                Some(&self.tag),
                Some(&target.workspace),
                if_match,
            )
        };
        let e = match delete(None).await {
            Ok(()) => {
                self.forget(&external_id);
                return Ok(true);
            }
            Err(e) if refused(&e, ErrorCode::NotFound) => return Ok(false),
            Err(e) if is_ambiguous(&e) => e,
            Err(e) => return Err(e),
        };
        // (Keyed, the client already asked again with the key.) The row known at the path
        // still there is deleted again at the version read (a conditional repeat cannot delete
        // anything else); gone, or gone by then, may be another writer's delete: unknown.
        let deleted = match self.client.get_by_external(&external_id).await {
            Ok(Some(now)) if known.as_deref() == Some(now.context.id.as_str()) => {
                delete(Some(now.context.version)).await.is_ok()
            }
            _ => false,
        };
        if deleted {
            self.forget(&external_id);
            Ok(true)
        } else {
            Err(unknown(path, "delete", e))
        }
    }

    /// A directory moved whole with the `by-prefix` extension, within one workspace and below
    /// its top level; `NotSupported` otherwise (and for a directory over the server's limit),
    /// and the tool moves file by file.
    pub(super) async fn rename_dir(
        &self,
        from: &MemoryPath,
        to: &MemoryPath,
        source: &Target,
        target: &Target,
    ) -> Result<()> {
        if !self.extensions().await?.by_prefix {
            return Err(Error::NotSupported {
                operation: "rename",
            });
        }
        let body = RenamePrefix {
            from: source.prefix(&self.tag),
            to: target.prefix(&self.tag),
            title_from: Some(format!("{}/", from.normalized())),
            title_to: Some(format!("{}/", to.normalized())),
            within: Within::new(&self.tag, &source.workspace),
        };
        match self.client.rename_prefix(&body).await {
            Ok(done) => self.note(&done),
            Err(e) if refused(&e, ErrorCode::Conflict) => Err(Error::AlreadyExists {
                path: to.normalized(),
            }),
            Err(e) if directory_refusal(&e) => Err(directory_refused(e, from, "rename")),
            // No answer: unknown. A read-back cannot tell this move from another writer's, nor
            // "not applied" from "applied late"; keyed, the engine already asked again.
            Err(e) if is_ambiguous(&e) => Err(unknown(from, "rename", e)),
            Err(e) => Err(e),
        }
    }

    /// Notes what a directory's delete or rename changed (the old ids are gone, the new ones
    /// name the same rows): the request succeeded.
    pub(super) fn note(&self, done: &PrefixChanges) -> Result<()> {
        for c in &done.changed {
            self.forget(&c.external_id);
            if let Some(new_id) = &c.to {
                self.remember(new_id, &c.id);
            }
        }
        Ok(())
    }
}
