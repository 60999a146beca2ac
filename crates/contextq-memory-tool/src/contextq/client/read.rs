//! Reading: workspaces, listings (paged), the tree, search, one context, and versions
//! (extension `history`).

use super::request::with_query;
use super::*;

impl Client {
    /// `GET /api/workspaces`
    pub async fn list_workspaces(&self) -> Result<Vec<Workspace>> {
        let path = "/api/workspaces";
        let a = self
            .request(Method::GET, path, None, None, Idempotency::Read)
            .await?;
        Ok(self.decode::<WorkspaceList>(path, &a.body)?.workspaces)
    }

    /// `GET /api/workspaces`, for what it says of the key: the workspaces it is limited to
    /// (extension `workspace-keys`), or the whole tenant (every key of a ContextQ without the
    /// extension). One request, which also checks that ContextQ accepts the key now.
    pub async fn key_reach(&self) -> Result<crate::contextq::path_model::KeyReach> {
        let path = "/api/workspaces";
        let a = self
            .request(Method::GET, path, None, None, Idempotency::Read)
            .await?;
        let list = self.decode::<WorkspaceList>(path, &a.body)?;
        Ok(match list.limited_to {
            Some(slugs) => crate::contextq::path_model::KeyReach::Workspaces(slugs),
            None => crate::contextq::path_model::KeyReach::Tenant,
        })
    }

    /// `GET /api/contexts` (one page).
    pub async fn list_contexts(&self, params: &ListParams) -> Result<ContextPage> {
        let path = with_query(
            "/api/contexts",
            &[
                ("workspace", params.workspace.clone()),
                ("tag", params.tag.clone()),
                ("externalIdPrefix", params.external_id_prefix.clone()),
                ("limit", params.limit.map(|l| l.to_string())),
                ("cursor", params.cursor.clone()),
                ("startAfter", params.start_after.clone()),
            ],
        );
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Read)
            .await?;
        self.decode(&path, &a.body)
    }

    /// `GET /api/audit` (extension `audit-log`: send it only to a server that shows it): a page
    /// of the tenant's activity log, newest first, of the contexts under the external-id
    /// `prefix`, at most `limit`, from `cursor`.
    pub async fn audit_page(
        &self,
        prefix: &str,
        limit: u32,
        cursor: Option<&str>,
    ) -> Result<contextq_api::audit::AuditPage> {
        let path = with_query(
            "/api/audit",
            &[
                ("externalIdPrefix", Some(prefix.to_string())),
                ("limit", Some(limit.to_string())),
                ("cursor", cursor.map(str::to_string)),
            ],
        );
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Read)
            .await?;
        self.decode(&path, &a.body)
    }

    /// `GET /api/contexts/search` (extension `search`: send it only to a server that shows it):
    /// the best hits of `query` (its text, checked by the server), with `tag`, in `workspace`,
    /// under the external-id `prefix`, at most `limit`, from `cursor`.
    pub async fn search(&self, params: &SearchParams) -> Result<contextq_api::search::SearchPage> {
        let path = with_query(
            "/api/contexts/search",
            &[
                ("q", Some(params.query.clone())),
                ("workspace", params.workspace.clone()),
                ("tag", params.tag.clone()),
                ("prefix", params.prefix.clone()),
                ("limit", params.limit.map(|l| l.to_string())),
                ("cursor", params.cursor.clone()),
            ],
        );
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Read)
            .await?;
        self.decode(&path, &a.body)
    }

    /// `GET /api/contexts/tree?prefix=` (extension `tree`: send it only to a server that shows
    /// it): the contexts under `prefix` with `tag`, in `workspace`, two levels deep with sizes
    /// added up by the server; with `workspace_first`, only those whose first segment after
    /// the prefix is their own workspace's slug; with `file` (extension `tree-file`), the
    /// context at that external id beside it ([`Tree::file`]).
    pub async fn tree(
        &self,
        prefix: &str,
        tag: Option<&str>,
        workspace: Option<&str>,
        workspace_first: bool,
        file: Option<&str>,
    ) -> Result<Tree> {
        let path = with_query(
            "/api/contexts/tree",
            &[
                ("prefix", Some(prefix.to_string())),
                (
                    "workspaceFirst",
                    workspace_first.then(|| "true".to_string()),
                ),
                ("file", file.map(str::to_string)),
                ("requireTag", tag.map(str::to_string)),
                ("workspace", workspace.map(str::to_string)),
            ],
        );
        let a = self
            .request(Method::GET, &path, None, None, Idempotency::Read)
            .await?;
        self.decode(&path, &a.body)
    }

    /// Every page of `GET /api/contexts`, following `nextCursor` (bounded at 10,000 pages).
    /// [`AllPages::complete`] is `false` when a server without the `cursor` extension filled a
    /// page and gave no cursor.
    pub async fn list_all(&self, params: &ListParams) -> Result<AllPages> {
        let mut params = params.clone();
        let limit = params.limit.unwrap_or(500) as usize;
        let mut all = Vec::new();
        for _ in 0..10_000 {
            let page = self.list_contexts(&params).await?;
            let full = page.contexts.len() >= limit;
            all.extend(page.contexts);
            match page.next_cursor {
                Some(c) if params.cursor.as_ref() != Some(&c) => {
                    params.cursor = Some(c);
                    params.start_after = None;
                }
                _ => {
                    let cursor = self.known_extensions().is_some_and(|e| e.cursor);
                    return Ok(AllPages {
                        contexts: all,
                        complete: cursor || !full,
                    });
                }
            }
        }
        Err(Error::from(ContextQError::Protocol {
            url: format!("{}/api/contexts", self.base_url),
            message: "more than 10,000 pages: the cursor never ends".into(),
        }))
    }

    /// `GET /api/contexts/by-external/:externalId`; `None` on 404.
    pub async fn get_by_external(&self, external_id: &str) -> Result<Option<Fetched>> {
        let path = format!("/api/contexts/by-external/{}", segment(external_id));
        self.fetch(&path).await
    }

    /// `GET /api/contexts/:id`; `None` on 404.
    pub async fn get(&self, id: &str) -> Result<Option<Fetched>> {
        let path = format!("/api/contexts/{}", segment(id));
        self.fetch(&path).await
    }

    pub(super) async fn fetch(&self, path: &str) -> Result<Option<Fetched>> {
        let Some(a) = self.read_optional(path).await? else {
            return Ok(None);
        };
        Ok(Some(Fetched {
            context: self.decode(path, &a.body)?,
            etag: a.etag,
        }))
    }

    /// A `GET` of `path`; `None` on 404.
    pub(super) async fn read_optional(&self, path: &str) -> Result<Option<Reply>> {
        match self
            .request(Method::GET, path, None, None, Idempotency::Read)
            .await
        {
            Ok(a) => Ok(Some(a)),
            Err(e) if e.contextq_code() == Some(ErrorCode::NotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET path` decoded, or `None` on 404.
    pub(super) async fn get_optional<T: DeserializeOwned>(&self, path: &str) -> Result<Option<T>> {
        self.read_optional(path)
            .await?
            .map(|a| self.decode(path, &a.body))
            .transpose()
    }

    /// [`ContextQError::HistoryUnavailable`] unless the server has the `history` extension.
    pub(super) async fn require_history(&self) -> Result<()> {
        if self.extensions().await?.history {
            Ok(())
        } else {
            Err(Error::from(ContextQError::HistoryUnavailable {
                url: self.base_url.clone(),
            }))
        }
    }

    /// `GET /api/contexts/by-external/:externalId/versions` (extension `history`): one page,
    /// newest first, of the versions written in `workspace` when given; `None` on 404 (no
    /// version kept).
    pub async fn versions(
        &self,
        external_id: &str,
        workspace: Option<&str>,
        limit: Option<u32>,
        cursor: Option<&str>,
    ) -> Result<Option<VersionPage>> {
        self.require_history().await?;
        let path = with_query(
            &format!(
                "/api/contexts/by-external/{}/versions",
                segment(external_id)
            ),
            &[
                ("workspace", workspace.map(str::to_string)),
                ("limit", limit.map(|l| l.to_string())),
                ("cursor", cursor.map(str::to_string)),
            ],
        );
        self.get_optional(&path).await
    }

    /// `GET /api/contexts/by-external/:externalId/versions/:n` (extension `history`): the
    /// version with its content; `None` on 404.
    pub async fn version(
        &self,
        external_id: &str,
        version: i64,
        workspace: Option<&str>,
    ) -> Result<Option<HistoryVersion>> {
        self.require_history().await?;
        let mut path = format!(
            "/api/contexts/by-external/{}/versions/{version}",
            segment(external_id)
        );
        if let Some(w) = workspace {
            path = format!("{path}?workspace={}", segment(w));
        }
        self.get_optional(&path).await
    }

    /// Every page of `GET /api/history` (extension `history`): each external id under
    /// `prefix` with a kept version written in `workspace`, what it was at `at` (RFC 3339) and
    /// its newest version; with the point in time as the server read it.
    pub async fn history_at(
        &self,
        at: &str,
        prefix: &str,
        workspace: Option<&str>,
    ) -> Result<(String, Vec<PathAt>)> {
        self.require_history().await?;
        let mut paths = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..10_000 {
            let mut path = format!(
                "/api/history?at={}&externalIdPrefix={}&limit=500",
                segment(at),
                segment(prefix)
            );
            if let Some(w) = workspace {
                path.push_str(&format!("&workspace={}", segment(w)));
            }
            if let Some(c) = &cursor {
                path.push_str(&format!("&cursor={}", segment(c)));
            }
            let a = self
                .request(Method::GET, &path, None, None, Idempotency::Read)
                .await?;
            let page: HistoryPage = self.decode(&path, &a.body)?;
            paths.extend(page.paths);
            match page.next_cursor {
                Some(c) if cursor.as_ref() != Some(&c) => cursor = Some(c),
                _ => return Ok((page.at, paths)),
            }
        }
        Err(Error::from(ContextQError::Protocol {
            url: format!("{}/api/history", self.base_url),
            message: "more than 10,000 pages: the cursor never ends".into(),
        }))
    }
}
