//! Listing: a directory (paged through `nextCursor`, filtered by prefix on the server and
//! again here), its pages after a path, its outline from the `tree` extension, and search.

use super::*;

impl ContextQStore {
    /// [`Store::outline`] of `dir` through the server's tree (extension `tree`), and, with
    /// `file` (extension `tree-file`), the context the server found at that external id.
    pub(super) async fn tree_of(
        &self,
        dir: &MemoryPath,
        file: Option<&str>,
    ) -> Result<(Option<Listing>, Option<Context>)> {
        let dir = dir.normalized_copy();
        let (target, prefix, workspace, mut listing) = self.listing_of(&dir).await?;
        let tree = match self
            .client
            .tree(
                &prefix,
                Some(&self.tag),
                workspace.as_deref(),
                target.is_none(),
                file,
            )
            .await
        {
            Ok(tree) => tree,
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                return Ok((dir.is_root().then(Listing::default), None));
            }
            Err(e) => return Err(e),
        };
        let workspace_level = matches!(&target, Some(t) if t.rel.is_empty());
        if tree.files == 0 && !dir.is_root() && !workspace_level {
            return Ok((None, tree.file));
        }
        listing.own_size = Some(tree.size_bytes);
        for entry in tree.entries {
            let is_dir = entry.path.ends_with('/');
            let rel = entry.path.trim_end_matches('/');
            let path = match &target {
                None => MemoryPath::root().join(rel),
                Some(_) => dir.join(rel),
            };
            let Ok(path) = path else {
                continue; // not a valid memory path: never listed (its bytes still count above)
            };
            if is_dir {
                // A workspace already listed gets its size.
                listing.dirs.retain(|d| d.path != path);
                listing.dirs.push(DirMeta {
                    path,
                    size: Some(entry.size_bytes),
                });
            } else {
                listing.files.push(FileMeta {
                    path,
                    size: Some(entry.size_bytes),
                    version: None,
                    modified: Some(entry.updated_at),
                });
            }
        }
        Ok((Some(listing), tree.file))
    }

    /// Where a listing of `dir` looks (its target, external-id prefix and workspace) and how it
    /// starts: at the root of per-workspace mode, every workspace as a directory.
    pub(super) async fn listing_of(
        &self,
        dir: &MemoryPath,
    ) -> Result<(Option<Target>, String, Option<String>, Listing)> {
        let target = self.target(dir)?;
        let (prefix, workspace) = match &target {
            None => (format!("{}:", self.tag), None),
            Some(t) => (t.prefix(&self.tag), Some(t.workspace.clone())),
        };
        let mut listing = Listing::default();
        if target.is_none() {
            for ws in self.client.list_workspaces().await? {
                if let Ok(path) = dir.join(&ws.slug) {
                    listing.dirs.push(DirMeta { path, size: None });
                }
            }
        }
        Ok((target, prefix, workspace, listing))
    }

    pub(super) async fn listing(&self, dir: &MemoryPath) -> Result<Option<Listing>> {
        let dir = dir.normalized_copy();
        let (target, prefix, workspace, mut listing) = self.listing_of(&dir).await?;
        let extensions = self.extensions().await?;
        let params = ListParams {
            workspace,
            tag: Some(self.tag.clone()),
            external_id_prefix: extensions.external_id_prefix.then(|| prefix.clone()),
            limit: Some(500),
            cursor: None,
            start_after: None,
        };
        let pages = match self.client.list_all(&params).await {
            Ok(pages) => pages,
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                // The workspace does not exist (yet).
                return Ok(dir.is_root().then(Listing::default));
            }
            Err(e) => return Err(e),
        };
        listing.truncated = !pages.complete;
        let versions = extensions.conditional_requests;
        listing.files = pages
            .contexts
            .into_iter()
            .filter_map(|row| self.file_of(row, &prefix, &dir, target.is_none(), versions))
            .collect();
        let workspace_level = matches!(&target, Some(t) if t.rel.is_empty());
        // Nothing seen beneath it: not a directory. (On a server that caps listings, files beyond
        // its one page cannot be seen: the contract's documented limit.)
        if listing.files.is_empty() && !dir.is_root() && !workspace_level {
            return Ok(None);
        }
        Ok(Some(listing))
    }

    pub(super) async fn page_after(
        &self,
        dir: &MemoryPath,
        page: Page<'_>,
    ) -> Result<Vec<FileMeta>> {
        let extensions = self.extensions().await?;
        if !(extensions.start_after && extensions.cursor && extensions.external_id_prefix) {
            return steps::list_after(self, dir, page).await;
        }
        let dir = dir.normalized_copy();
        let target = self.target(&dir)?;
        let (prefix, workspace) = match &target {
            None => (format!("{}:", self.tag), None),
            Some(t) => (t.prefix(&self.tag), Some(t.workspace.clone())),
        };
        let mut params = ListParams {
            workspace,
            tag: Some(self.tag.clone()),
            external_id_prefix: Some(prefix.clone()),
            limit: Some(page.limit.clamp(1, 500) as u32),
            cursor: None,
            start_after: match page.after {
                Some(a) => self.external_id(a)?,
                None => None,
            },
        };
        let mut files = Vec::new();
        loop {
            let answer = match self.client.list_contexts(&params).await {
                Ok(answer) => answer,
                Err(e) if refused(&e, ErrorCode::NotFound) => return Ok(files),
                Err(e) => return Err(e),
            };
            for row in answer.contexts {
                let versions = extensions.conditional_requests;
                if let Some(f) = self.file_of(row, &prefix, &dir, target.is_none(), versions) {
                    files.push(f);
                    if files.len() == page.limit {
                        return Ok(files);
                    }
                }
            }
            match answer.next_cursor {
                Some(next) if params.cursor.as_ref() != Some(&next) => {
                    params.cursor = Some(next);
                    params.start_after = None;
                }
                _ => return Ok(files),
            }
        }
    }

    pub(super) async fn search_files(
        &self,
        query: &crate::search::Query,
        dir: &MemoryPath,
        limit: usize,
    ) -> Result<crate::search::Searched> {
        if !self.extensions().await?.search {
            return Err(Error::NotSupported {
                operation: "search",
            });
        }
        let dir = dir.normalized_copy();
        let (prefix, workspace) = match self.target(&dir)? {
            None => (format!("{}:", self.tag), None),
            Some(t) => (t.prefix(&self.tag), Some(t.workspace.clone())),
        };
        let params = SearchParams {
            query: query.text().to_string(),
            workspace,
            tag: Some(self.tag.clone()),
            prefix: Some(prefix),
            limit: Some((limit + 1).clamp(1, 100) as u32),
            cursor: None,
        };
        let page = match self.client.search(&params).await {
            Ok(page) => page,
            // The workspace does not exist (yet): nothing to find.
            Err(e) if refused(&e, ErrorCode::NotFound) => {
                return Ok(crate::search::Searched::default());
            }
            Err(e) => return Err(e),
        };
        let more = page.hits.len() > limit || page.next_cursor.is_some();
        let capped = page.capped;
        let found = page
            .hits
            .into_iter()
            .filter(|h| {
                self.owns(
                    &h.external_id,
                    &h.workspace,
                    std::slice::from_ref(&self.tag),
                )
            })
            .filter_map(|h| {
                let path = self.path_of(&h.external_id)?;
                let hidden = path.segments().iter().any(|s| crate::render::hidden(s));
                (!hidden).then_some(crate::search::Found {
                    path,
                    score: h.score,
                    lines: h.snippets,
                })
            })
            .take(limit)
            .collect();
        Ok(crate::search::Searched {
            found,
            more,
            scan_stopped_at: None,
            capped,
        })
    }
}
