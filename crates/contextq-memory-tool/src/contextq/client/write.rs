//! Writing: workspaces, bulk upserts, updates, text edits, renames, a prefix deleted or moved,
//! deletes and redactions. Unsafe requests are keyed where the server has `idempotency`.

use super::*;

impl Client {
    /// `POST /api/workspaces`
    pub async fn create_workspace(&self, slug: &str, name: &str) -> Result<Workspace> {
        let path = "/api/workspaces";
        let body = serde_json::json!({"slug": slug, "name": name});
        let a = self
            .request(Method::POST, path, Some(&body), None, Idempotency::Unsafe)
            .await?;
        self.decode(path, &a.body)
    }

    /// `POST /api/workspaces/:slug/archive`
    pub async fn archive_workspace(&self, slug: &str) -> Result<Workspace> {
        let path = format!("/api/workspaces/{}/archive", segment(slug));
        let a = self
            .request(
                Method::POST,
                &path,
                Some(&serde_json::json!({})),
                None,
                Idempotency::Safe,
            )
            .await?;
        self.decode(&path, &a.body)
    }

    /// `DELETE /api/workspaces/:slug`
    pub async fn delete_workspace(&self, slug: &str) -> Result<()> {
        let path = format!("/api/workspaces/{}", segment(slug));
        self.request(Method::DELETE, &path, None, None, Idempotency::Unsafe)
            .await?;
        Ok(())
    }

    /// `POST /api/contexts/bulk-upsert` (all or nothing). Retried on an unknown outcome when
    /// keyed (extension `idempotency`), else only when no item is create-only.
    pub async fn bulk_upsert(&self, items: &[ContextInput]) -> Result<Vec<UpsertResult>> {
        let path = "/api/contexts/bulk-upsert";
        let body = self.encode(
            path,
            &BulkUpsert {
                contexts: items.to_vec(),
            },
        )?;
        let kind = if items.iter().any(|i| i.if_absent) {
            Idempotency::Unsafe
        } else {
            Idempotency::Safe
        };
        let (key, kind) = self.write_key(kind).await?;
        let a = self
            .request_with(Method::POST, path, Some(&body), None, key.as_deref(), kind)
            .await?;
        Ok(self.decode::<BulkUpsertResults>(path, &a.body)?.results)
    }

    /// `PUT /api/contexts/:id`, with `If-Match` when `if_match` is given.
    pub async fn update(
        &self,
        id: &str,
        content: &str,
        title: Option<&str>,
        tags: Option<&[String]>,
        if_match: Option<i64>,
    ) -> Result<Fetched> {
        let path = format!("/api/contexts/{}", segment(id));
        let body = self.encode(
            &path,
            &UpdateContext {
                content: content.to_string(),
                title: title.map(|t| Some(t.to_string())),
                tags: tags.map(<[String]>::to_vec),
            },
        )?;
        let kind = if if_match.is_some() {
            Idempotency::Unsafe
        } else {
            Idempotency::Safe
        };
        let (key, kind) = self.write_key(kind).await?;
        let a = self
            .request_with(
                Method::PUT,
                &path,
                Some(&body),
                if_match,
                key.as_deref(),
                kind,
            )
            .await?;
        Ok(Fetched {
            context: self.decode(&path, &a.body)?,
            etag: a.etag,
        })
    }

    /// `POST /api/contexts/by-external/:externalId/edit` (extension `text-edit`: send it only to
    /// a server that shows it), with `If-Match` when given. `idempotency_key` (1 to 128 visible
    /// ASCII characters, unique per edit) makes it safe to repeat, so the retry engine repeats
    /// it after a lost answer and the server applies it at most once. An edit that cannot apply
    /// is [`Error::EditRefused`].
    pub async fn edit(
        &self,
        external_id: &str,
        body: &EditContext,
        if_match: Option<i64>,
        idempotency_key: &str,
    ) -> Result<EditedContext> {
        self.post_edit(external_id, body, if_match, idempotency_key)
            .await
    }

    /// [`Client::edit`] with `snippetLines` set in `body` (extension `edit-snippet`: send it
    /// only to a server that shows it): the answer carries the lines around the change, not
    /// the whole new content.
    pub async fn edit_summary(
        &self,
        external_id: &str,
        body: &EditContext,
        if_match: Option<i64>,
        idempotency_key: &str,
    ) -> Result<EditedSummary> {
        self.post_edit(external_id, body, if_match, idempotency_key)
            .await
    }

    pub(super) async fn post_edit<T: serde::de::DeserializeOwned>(
        &self,
        external_id: &str,
        body: &EditContext,
        if_match: Option<i64>,
        idempotency_key: &str,
    ) -> Result<T> {
        let path = format!("/api/contexts/by-external/{}/edit", segment(external_id));
        let body = self.encode(&path, &body)?;
        // Recorded outcomes make a repeat's answer the edit's outcome; the text edit's own keys
        // (before `idempotency`) only make it safe to repeat.
        let kind = if self.extensions().await?.idempotency {
            Idempotency::Keyed
        } else {
            Idempotency::Safe
        };
        let a = self
            .request_with(
                Method::POST,
                &path,
                Some(&body),
                if_match,
                Some(idempotency_key),
                kind,
            )
            .await?;
        self.decode(&path, &a.body)
    }

    /// `POST /api/contexts/by-external/:externalId/rename` (extension `rename`: send it only to
    /// a server that shows it). Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn rename(&self, external_id: &str, body: &RenameContext) -> Result<RenamedContext> {
        let path = format!("/api/contexts/by-external/{}/rename", segment(external_id));
        self.post_unsafe(&path, body).await
    }

    /// `POST /api/contexts/by-prefix/delete` (extension `by-prefix`): a directory deleted in
    /// one transaction. Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn delete_prefix(&self, body: &DeletePrefix) -> Result<PrefixChanges> {
        self.post_unsafe("/api/contexts/by-prefix/delete", body)
            .await
    }

    /// `POST /api/contexts/by-prefix/rename` (extension `by-prefix`): a directory moved in one
    /// transaction. Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn rename_prefix(&self, body: &RenamePrefix) -> Result<PrefixChanges> {
        self.post_unsafe("/api/contexts/by-prefix/rename", body)
            .await
    }

    pub(super) async fn post_unsafe<B: serde::Serialize, T: DeserializeOwned>(
        &self,
        path: &str,
        body: &B,
    ) -> Result<T> {
        let body = self.encode(path, body)?;
        let (key, kind) = self.write_key(Idempotency::Unsafe).await?;
        let a = self
            .request_with(Method::POST, path, Some(&body), None, key.as_deref(), kind)
            .await?;
        self.decode(path, &a.body)
    }

    /// `DELETE /api/contexts/:id`, with `If-Match` when given.
    pub async fn delete(&self, id: &str, if_match: Option<i64>) -> Result<()> {
        let path = format!("/api/contexts/{}", segment(id));
        let (key, kind) = self.write_key(Idempotency::Unsafe).await?;
        self.request_with(Method::DELETE, &path, None, if_match, key.as_deref(), kind)
            .await?;
        Ok(())
    }

    /// `DELETE /api/contexts/by-external/:externalId?requireTag=&workspace=` (extension
    /// `delete-by-external`): the context there deleted in one request, if it carries `tag` and
    /// lives in `workspace` (else 404, nothing changed), and, with `if_match`, is at that
    /// version (else 412). Keyed when the server records outcomes (repeated, its answer the outcome); else not repeated after an unknown outcome: the caller reads back.
    pub async fn delete_by_external(
        &self,
        external_id: &str,
        tag: Option<&str>,
        workspace: Option<&str>,
        if_match: Option<i64>,
    ) -> Result<()> {
        let mut path = format!("/api/contexts/by-external/{}", segment(external_id));
        let mut sep = '?';
        for (name, value) in [("requireTag", tag), ("workspace", workspace)] {
            if let Some(v) = value {
                path.push_str(&format!("{sep}{name}={}", segment(v)));
                sep = '&';
            }
        }
        let (key, kind) = self.write_key(Idempotency::Unsafe).await?;
        self.request_with(Method::DELETE, &path, None, if_match, key.as_deref(), kind)
            .await?;
        Ok(())
    }

    /// `POST /api/redactions` (extension `redaction`, admin scope): one request's worth of
    /// versions redacted (or, `dryRun`, listed). Repeated after a lost answer: a redaction
    /// applied twice is the same redaction (an already redacted version is reported as such).
    /// [`ContextQError::RedactionUnavailable`] on a server without the extension.
    pub async fn redact(&self, body: &RedactRequest) -> Result<Redaction> {
        if !self.extensions().await?.redaction {
            return Err(Error::from(ContextQError::RedactionUnavailable {
                url: self.base_url.clone(),
            }));
        }
        let path = "/api/redactions";
        let body = self.encode(path, body)?;
        let (key, kind) = self.write_key(Idempotency::Safe).await?;
        let a = self
            .request_with(Method::POST, path, Some(&body), None, key.as_deref(), kind)
            .await?;
        self.decode(path, &a.body)
    }
}
