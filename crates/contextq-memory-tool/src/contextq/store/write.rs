//! Writing, with its settle and repeat logic: create (create-only where the server has
//! `conditional-requests`, else check then upsert), update at a version, overwrite, bulk
//! creates, deletes; a write whose outcome is unknown is read back and settled, never guessed.

use super::*;

impl ContextQStore {
    pub(super) fn input(
        &self,
        target: &Target,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
        if_absent: bool,
    ) -> ContextInput {
        ContextInput {
            external_id: external_id.to_string(),
            workspace: target.workspace.clone(),
            kind: self.context_type.clone(),
            title: Some(path.normalized()),
            content: content.to_string(),
            tags: Some(vec![self.tag.clone()]),
            if_absent,
        }
    }

    /// Upserts one row; creates a missing workspace when allowed. Returns the row's id and
    /// version.
    pub(super) async fn upsert(
        &self,
        target: &Target,
        input: ContextInput,
    ) -> Result<(String, i64)> {
        for attempt in 0..2 {
            match self.client.bulk_upsert(std::slice::from_ref(&input)).await {
                Ok(results) => {
                    let r = results.into_iter().next().ok_or_else(|| {
                        Error::from(ContextQError::Protocol {
                            url: format!("{}/api/contexts/bulk-upsert", self.client.base_url()),
                            message: "no result for the one item sent".into(),
                        })
                    })?;
                    self.remember(&input.external_id, &r.id);
                    return Ok((r.id, r.version));
                }
                Err(e) if refused(&e, ErrorCode::NotFound) && attempt == 0 => {
                    if !self.create_workspaces {
                        return Err(Error::from(ContextQError::WorkspaceNotFound {
                            workspace: target.workspace.clone(),
                            create_allowed: false,
                        }));
                    }
                    match self
                        .client
                        .create_workspace(&target.workspace, &target.workspace)
                        .await
                    {
                        Ok(_) => continue,
                        Err(e) if refused(&e, ErrorCode::Conflict) => continue,
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(Error::from(ContextQError::WorkspaceNotFound {
            workspace: target.workspace.clone(),
            create_allowed: true,
        }))
    }

    /// The bulk-upsert item that creates `path`, or `None` when a server without conditional
    /// requests already holds it (checked with a `GET`, as [`Self::create`] does).
    pub(super) async fn create_input(
        &self,
        path: &MemoryPath,
        text: &str,
        conditional: bool,
    ) -> Result<Option<ContextInput>> {
        let (target, external_id) = self.file_target(path)?;
        if !conditional && self.client.get_by_external(&external_id).await?.is_some() {
            return Ok(None);
        }
        Ok(Some(self.input(
            &target,
            &external_id,
            path,
            text,
            conditional,
        )))
    }

    pub(super) async fn create(
        &self,
        target: &Target,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
    ) -> Result<Option<Version>> {
        let exists = || Error::AlreadyExists {
            path: path.normalized(),
        };
        if !self.extensions().await?.conditional_requests {
            // The TypeScript package's documented gap: check, then upsert (not atomic on such a server: a
            // create racing this one between the two requests can be overwritten).
            if self.client.get_by_external(external_id).await?.is_some() {
                return Err(exists());
            }
            let input = self.input(target, external_id, path, content, false);
            return match self.upsert(target, input).await {
                Ok(_) => Ok(None), // no versions without conditional requests
                // Our content there is ours; nothing there may still be applied late.
                Err(e) if is_ambiguous(&e) => self
                    .read_back(external_id, path, e, |f| f.context.content == content)
                    .await
                    .map(|_| None),
                Err(e) => Err(e),
            };
        }
        let input = self.input(target, external_id, path, content, true);
        match self.upsert(target, input).await {
            Ok((id, v)) => Ok(Some(Version::of_row(&id, v as u64))),
            // Exists, or refused for another reason (archived workspace, ...).
            Err(e) if refused(&e, ErrorCode::Conflict) => {
                match self.client.get_by_external(external_id).await? {
                    Some(_) => Err(exists()),
                    None => Err(e),
                }
            }
            // Keyed, the client already asked again with the key. Our content at version 1 is
            // ours. Nothing there says nothing: not applied, or applied and deleted since (a
            // second try could resurrect it), or applied late.
            Err(e) if is_ambiguous(&e) => {
                let f = self
                    .read_back(external_id, path, e, |f| {
                        f.context.content == content && f.context.version == 1
                    })
                    .await?;
                self.remember(external_id, &f.context.id);
                Ok(Some(Version::of_row(&f.context.id, 1)))
            }
            Err(e) => Err(e),
        }
    }

    /// `PUT` with `If-Match: expected` to the row `expected` was read from (a version comes only
    /// from a server's `ETag`). A precondition is never carried to another row: when that row is
    /// gone the file changed (deleted, perhaps created again) and the write is refused.
    pub(super) async fn update(
        &self,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
        expected: &Version,
    ) -> Result<Option<Version>> {
        let precondition = || Error::Precondition {
            path: path.normalized(),
        };
        // A version that names no row was not read from this store: it matches nothing here.
        let Some(id) = expected.row() else {
            return Err(precondition());
        };
        let expected = expected.number() as i64;
        // The row at `expected + 1` with our content is our write.
        let ours = |f: &Fetched| f.context.content == content && f.context.version == expected + 1;
        // An attempt read back as "not applied" may commit late, so after one a 412 is read back.
        let mut lost = false;
        for attempt in 0..2 {
            match self
                .client
                .update(id, content, None, None, Some(expected))
                .await
            {
                Ok(f) => return Ok(f.etag.map(|v| Version::of_row(id, v as u64))),
                Err(e) if refused(&e, ErrorCode::PreconditionFailed) && lost => {
                    return match self.client.get(id).await {
                        Ok(Some(f)) if ours(&f) => {
                            Ok(Some(Version::of_row(id, expected as u64 + 1)))
                        }
                        // Changed by someone, perhaps after ours: not known.
                        _ => Err(unknown(path, "write", e)),
                    };
                }
                Err(e) if refused(&e, ErrorCode::PreconditionFailed) => return Err(precondition()),
                // Gone after an attempt that may still have applied first: not known.
                Err(e) if refused(&e, ErrorCode::NotFound) && lost => {
                    return Err(unknown(path, "write", e));
                }
                Err(e) if refused(&e, ErrorCode::NotFound) => {
                    return Err(self.row_gone(external_id, path).await?);
                }
                Err(e) if is_ambiguous(&e) => {
                    // Unknown outcome: read back.
                    let back = match self.client.get(id).await {
                        Ok(back) => back,
                        Err(_) => return Err(unknown(path, "write", e)),
                    };
                    match back {
                        Some(f) if ours(&f) => {
                            return Ok(Some(Version::of_row(id, expected as u64 + 1)));
                        }
                        // Still at the version we wrote against: not applied (yet).
                        Some(f) if f.context.version == expected && attempt == 0 => {
                            lost = true;
                            continue;
                        }
                        Some(f) if f.context.version == expected => return Err(e),
                        // Changed by someone (ours may be among the changes) or gone.
                        _ => return Err(unknown(path, "write", e)),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        unreachable!("the loop returns on its second attempt")
    }

    /// A plain upsert: writes whatever is there.
    pub(super) async fn overwrite(
        &self,
        target: &Target,
        external_id: &str,
        path: &MemoryPath,
        content: &str,
    ) -> Result<Option<Version>> {
        let input = self.input(target, external_id, path, content, false);
        match self.upsert(target, input).await {
            Ok((id, v)) => Ok(self
                .client
                .known_extensions()
                .filter(|e| e.conditional_requests)
                .map(|_| Version::of_row(&id, v as u64))),
            Err(e) if is_ambiguous(&e) => {
                let f = self
                    .read_back(external_id, path, e, |f| f.context.content == content)
                    .await?;
                Ok(f.etag
                    .map(|_| Version::of_row(&f.context.id, f.context.version as u64)))
            }
            Err(e) => Err(e),
        }
    }

    /// Sends `chunk` as one bulk-upsert and records each file's outcome in `out`; when the
    /// request fails, leaves them to [`Self::one_by_one`].
    pub(super) async fn send_chunk(
        &self,
        chunk: Vec<(usize, ContextInput)>,
        conditional: bool,
        out: &mut [Option<Result<Option<Version>>>],
    ) {
        let inputs: Vec<ContextInput> = chunk.iter().map(|(_, input)| input.clone()).collect();
        let results = match self.client.bulk_upsert(&inputs).await {
            Ok(results) => results,
            // Perhaps applied: a file of this request sent again on its own would find itself
            // there and be refused, so each is settled here (keyed, the client already asked
            // again with the key): a row holding our content (at version 1 for a create-only
            // write) is ours; anything else unknown.
            Err(e) if is_ambiguous(&e) => {
                for (i, input) in &chunk {
                    let path = self
                        .path_of(&input.external_id)
                        .unwrap_or_else(MemoryPath::root);
                    let back = self.client.get_by_external(&input.external_id).await.ok();
                    out[*i] = Some(match back {
                        Some(Some(f))
                            if f.context.content == input.content
                                && (!conditional || f.context.version == 1) =>
                        {
                            self.remember(&input.external_id, &f.context.id);
                            Ok(conditional.then(|| Version::of_row(&f.context.id, 1)))
                        }
                        _ => Err(unknown(
                            &path,
                            "write",
                            Error::from(ContextQError::Protocol {
                                url: self.client.base_url().to_string(),
                                message: e.to_string(),
                            }),
                        )),
                    });
                }
                return;
            }
            // Refused: nothing of it was applied. A large request (`large-bulk`) is sent again
            // as requests of the contract's size, so that one file there already costs a
            // hundred files' requests one by one, not a thousand; the files of a refused
            // request of that size go on their own.
            Err(_) => {
                if chunk.len() > MAX_BULK_ITEMS {
                    for part in chunk.chunks(MAX_BULK_ITEMS) {
                        Box::pin(self.send_chunk(part.to_vec(), conditional, out)).await;
                    }
                }
                return;
            }
        };
        let answers_what_was_sent = results.len() == chunk.len()
            && chunk
                .iter()
                .zip(&results)
                .all(|((_, input), r)| r.external_id == input.external_id);
        if !answers_what_was_sent {
            // Settle each file on its own.
            return;
        }
        for ((i, input), r) in chunk.iter().zip(results) {
            self.remember(&input.external_id, &r.id);
            out[*i] = Some(Ok(
                conditional.then(|| Version::of_row(&r.id, r.version as u64))
            ));
        }
    }

    /// Each file without an outcome in `out` through `put` with `Create`.
    pub(super) async fn one_by_one(
        &self,
        files: &[(MemoryPath, String)],
        out: Vec<Option<Result<Option<Version>>>>,
    ) -> Vec<Result<Option<Version>>> {
        let mut done = Vec::with_capacity(files.len());
        for ((path, text), r) in files.iter().zip(out) {
            done.push(match r {
                Some(r) => r,
                None => self.put(path, text, PutMode::Create).await,
            });
        }
        done
    }

    pub(super) async fn put_file(
        &self,
        path: &MemoryPath,
        text: &str,
        mode: PutMode,
    ) -> Result<Option<Version>> {
        let (target, external_id) = self.file_target(path)?;
        match mode {
            PutMode::Create => self.create(&target, &external_id, path, text).await,
            PutMode::Overwrite => self.overwrite(&target, &external_id, path, text).await,
            PutMode::Update(expected) => self.update(&external_id, path, text, &expected).await,
        }
    }

    pub(super) async fn create_files(
        &self,
        files: &[(MemoryPath, String)],
    ) -> Vec<Result<Option<Version>>> {
        let mut out: Vec<Option<Result<Option<Version>>>> =
            (0..files.len()).map(|_| None).collect();
        let Ok(extensions) = self.extensions().await else {
            // The server did not answer: each file's own `put` reports it.
            return self.one_by_one(files, out).await;
        };
        let conditional = extensions.conditional_requests;
        let most = if extensions.large_bulk {
            MAX_LARGE_BULK_ITEMS
        } else {
            MAX_BULK_ITEMS
        };
        // (index, input) of the files to send, in chunks.
        let mut chunk: Vec<(usize, ContextInput)> = Vec::new();
        let mut bytes = 0;
        for (i, (path, text)) in files.iter().enumerate() {
            let input = match self.create_input(path, text, conditional).await {
                Ok(Some(input)) => input,
                Ok(None) => {
                    out[i] = Some(Err(Error::AlreadyExists {
                        path: path.normalized(),
                    }));
                    continue;
                }
                Err(e) => {
                    out[i] = Some(Err(e));
                    continue;
                }
            };
            if chunk.len() == most || (bytes + text.len() > BULK_BYTES && !chunk.is_empty()) {
                self.send_chunk(std::mem::take(&mut chunk), conditional, &mut out)
                    .await;
                bytes = 0;
            }
            bytes += text.len();
            chunk.push((i, input));
        }
        if !chunk.is_empty() {
            self.send_chunk(chunk, conditional, &mut out).await;
        }
        self.one_by_one(files, out).await
    }

    pub(super) async fn delete_row(
        &self,
        path: &MemoryPath,
        expected: Option<Version>,
    ) -> Result<()> {
        let not_found = || Error::NotFound {
            path: path.normalized(),
        };
        let Some(external_id) = self.external_id(path)? else {
            return Err(not_found());
        };
        // With a precondition, the row it was read from (never another row at this path);
        // without, whatever row holds the path.
        let id = match &expected {
            Some(v) => match v.row() {
                Some(row) => row.to_string(),
                None => {
                    return Err(Error::Precondition {
                        path: path.normalized(),
                    });
                }
            },
            None => match self.id_of(&external_id).await? {
                Some(id) => id,
                None => return Err(not_found()),
            },
        };
        // A version comes only from a server's `ETag`, so If-Match is only sent to one that has
        // conditional requests.
        let if_match = expected.as_ref().map(|v| v.number() as i64);
        let mut lost: Option<Error> = None;
        let result = loop {
            break match self.client.delete(&id, if_match).await {
                Err(e) if refused(&e, ErrorCode::PreconditionFailed) && lost.is_none() => {
                    Err(Error::Precondition {
                        path: path.normalized(),
                    })
                }
                // After a lost attempt: ours committed late, or another writer's delete (or
                // change) came first. Not known.
                Err(e)
                    if lost.is_some()
                        && (refused(&e, ErrorCode::NotFound)
                            || refused(&e, ErrorCode::PreconditionFailed)) =>
                {
                    Err(unknown(path, "delete", lost.take().unwrap_or(e)))
                }
                Err(e) if refused(&e, ErrorCode::NotFound) && expected.is_some() => {
                    Err(self.row_gone(&external_id, path).await?)
                }
                Err(e) if refused(&e, ErrorCode::NotFound) => Err(not_found()),
                // (Keyed, the client already asked again with the key.) The row still there and
                // unchanged (ids are never reused) is deleted once more, conditionally where it
                // was; gone may be another writer's delete.
                Err(e) if is_ambiguous(&e) => match self.client.get(&id).await {
                    Ok(Some(f))
                        if lost.is_none() && if_match.is_none_or(|v| f.context.version == v) =>
                    {
                        lost = Some(e);
                        continue;
                    }
                    _ => Err(unknown(path, "delete", lost.take().unwrap_or(e))),
                },
                other => other,
            };
        };
        if !matches!(result, Err(Error::Precondition { .. })) {
            self.forget(&external_id);
        }
        result
    }
}
