//! History, versions and restores of memory files, on a ContextQ that keeps versions (the
//! `history` extension of contextq-server; docs/contextq-api.md, "The `history` extension").
//!
//! A memory file's versions are numbered 1, 2, 3, ... over its whole life, also across a delete
//! and a new create at the same path. Reading them never changes anything; a restore is an
//! ordinary conditional write, so it adds a version (a restore never rewrites history) and never
//! clobbers a change made after the caller looked:
//!
//! - [`MemoryTool::restore`] restores one file to a version: refused with
//!   [`Error::Precondition`] when the file's newest version is not the one the caller saw, or
//!   when it changes between the read and the write (`If-Match`).
//! - [`MemoryTool::restore_plan`] works out what restoring a directory to a point in time
//!   takes (recreate what was deleted since, revert what changed, remove what was created
//!   since); [`MemoryTool::restore_tree`] carries a plan out, each step conditional on the state
//!   the plan saw, and reports exactly what it did and what it skipped.
//!
//! Against a ContextQ without the extension, every function here answers
//! [`ContextQError::HistoryUnavailable`]. Only this tool's rows count (its tag, the path's workspace),
//! as for every other operation of [`ContextQStore`].

use chrono::{DateTime, Utc};
use contextq_api::history::{Action, PastState, VersionSummary};

use super::client::restoring;
use super::error::ContextQError;
use super::store::ContextQStore;
use crate::error::{Error, Result};
use crate::path::MemoryPath;
use crate::store::{PutMode, Store, Version};
use crate::tool::MemoryTool;

/// One version of a memory file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileVersion {
    /// Its number among the file's versions (1, 2, 3, ...).
    pub version: u64,
    /// What the change did.
    pub action: Action,
    /// When (RFC 3339, UTC).
    pub at: DateTime<Utc>,
    /// Bytes of content after the change (0 for a delete).
    pub size: u64,
    /// The key that made the change, masked (`sk_live_…abcd`); `None` for an operator command.
    pub key: Option<String>,
    /// That key's name, when it has one (`keys create --name`).
    pub key_name: Option<String>,
    /// For a [`Action::Restore`]: the version whose content it put back.
    pub restored_from: Option<u64>,
    /// The content after the change (only from [`MemoryTool::version`]; `None` for a delete
    /// and for a redacted version).
    pub content: Option<String>,
    /// When its content was redacted (`None`: not redacted): gone for good, `size` 0, only
    /// `sha256` says what was there.
    pub redacted_at: Option<DateTime<Utc>>,
    /// Lowercase hex SHA-256 of the content (`None` for a delete).
    pub sha256: Option<String>,
}

impl FileVersion {
    fn from_summary(v: &VersionSummary, content: Option<String>) -> Result<Self> {
        Ok(FileVersion {
            version: number(v.version),
            action: v.action,
            at: time(&v.created_at)?,
            size: v.size_bytes,
            key: v
                .key_last4
                .as_ref()
                .map(|l| format!("{}…{l}", contextq_api::KEY_PREFIX)),
            key_name: v.key_name.clone(),
            restored_from: v.restored_from.map(number),
            content,
            redacted_at: v.redacted_at.as_deref().map(time).transpose()?,
            sha256: v.content_sha256.clone(),
        })
    }

    /// [`Error::Redacted`] for a redacted version, which cannot be shown, compared or restored.
    pub fn require_content(&self, path: &MemoryPath) -> Result<()> {
        match &self.redacted_at {
            Some(at) => Err(Error::Redacted {
                path: path.normalized(),
                version: self.version,
                at: rfc3339(at),
            }),
            None => Ok(()),
        }
    }
}

/// What [`MemoryTool::restore`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// The file's content was replaced by the version's.
    Rewrote,
    /// The file was gone and was created with the version's content.
    Recreated,
    /// The version is a delete, and the file was deleted.
    Deleted,
    /// The file already was as the version says; nothing was written.
    Unchanged,
}

/// One step of a directory restore.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepAction {
    /// Changed since: write back the content it had then.
    Revert,
    /// Deleted since: create it again with the content it had then.
    Recreate,
    /// Created since (or there then and deleted before, and created again): delete it.
    Remove,
    /// As it was then: nothing to do.
    Unchanged,
    /// What it was then is not known (versions pruned by retention, or written before the
    /// server kept them): left as it is.
    Unknown,
    /// What it held then was redacted: it cannot be brought back, and is left as it is.
    Redacted,
}

/// One file of a [`RestorePlan`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestoreStep {
    /// The file.
    pub path: MemoryPath,
    /// What restoring it takes.
    pub action: StepAction,
    /// The version it held then (for `Revert` and `Recreate`).
    pub target: Option<u64>,
    /// Its newest version when the plan was made (`None`: it has no kept version).
    pub latest: Option<u64>,
    /// The file's row and version (`ETag`) when the plan was made, if it exists then: the steps
    /// are conditional on it (never on another row at the same path).
    current: Option<Version>,
    /// Its external id.
    external_id: String,
    /// Its workspace.
    workspace: String,
}

/// What restoring a directory to a point in time takes ([`MemoryTool::restore_plan`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RestorePlan {
    /// The directory.
    pub dir: MemoryPath,
    /// The point in time, as the server read it.
    pub at: DateTime<Utc>,
    /// One step per file that exists now or had a version kept, by path.
    pub steps: Vec<RestoreStep>,
}

impl RestorePlan {
    /// The steps that change something (revert, recreate, remove).
    pub fn changes(&self) -> impl Iterator<Item = &RestoreStep> {
        self.steps.iter().filter(|s| {
            matches!(
                s.action,
                StepAction::Revert | StepAction::Recreate | StepAction::Remove
            )
        })
    }

    /// How many steps take `action`.
    pub fn count(&self, action: StepAction) -> usize {
        self.steps.iter().filter(|s| s.action == action).count()
    }
}

/// What happened to one step of a plan.
#[derive(Debug)]
pub enum StepOutcome {
    /// Done as planned.
    Done,
    /// Not done: the file changed after the plan was made (nothing was written to it).
    Conflict,
    /// Not done: the write failed (nothing was written, unless the error is
    /// [`Error::OutcomeUnknown`]).
    Failed(Error),
}

/// What [`MemoryTool::restore_tree`] did, step by step.
#[derive(Debug, Default)]
pub struct RestoreReport {
    /// Every change the plan had, with its outcome, in the plan's order.
    pub steps: Vec<(RestoreStep, StepOutcome)>,
}

impl RestoreReport {
    /// Steps of `action` that were done.
    pub fn done(&self, action: StepAction) -> usize {
        self.steps
            .iter()
            .filter(|(s, o)| s.action == action && matches!(o, StepOutcome::Done))
            .count()
    }

    /// Steps refused because the file changed after the plan was made.
    pub fn conflicts(&self) -> impl Iterator<Item = &RestoreStep> {
        self.steps
            .iter()
            .filter(|(_, o)| matches!(o, StepOutcome::Conflict))
            .map(|(s, _)| s)
    }

    /// Steps that failed otherwise, with their errors.
    pub fn failures(&self) -> impl Iterator<Item = (&RestoreStep, &Error)> {
        self.steps.iter().filter_map(|(s, o)| match o {
            StepOutcome::Failed(e) => Some((s, e)),
            _ => None,
        })
    }

    /// Whether every step was done.
    pub fn complete(&self) -> bool {
        self.steps
            .iter()
            .all(|(_, o)| matches!(o, StepOutcome::Done))
    }
}

fn parse(path: &str) -> Result<MemoryPath> {
    Ok(MemoryPath::parse(path)?)
}

/// A version number of the wire (`i64`, always 1 or more) as the library's `u64`.
pub(super) fn number(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}

/// The library's `u64` version number as the wire's `i64`.
pub(super) fn wire(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A time of the wire (RFC 3339) as a `DateTime<Utc>`.
pub(super) fn time(text: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            Error::from(ContextQError::Protocol {
                url: String::new(),
                message: format!("the time {text:?} is not RFC 3339: {e}"),
            })
        })
}

/// A time as the wire writes it (RFC 3339, UTC, milliseconds).
pub fn rfc3339(t: &DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

impl MemoryTool<ContextQStore> {
    /// The file at `path`: its external id and workspace ([`Error::IsADirectory`] for the root
    /// or a workspace).
    pub(super) fn file_key(&self, path: &MemoryPath) -> Result<(String, String)> {
        let store = self.store();
        match store.history_key(path, false)? {
            Some((ws, id)) if !path.is_root() && id != format!("{}:{ws}/", store.tag()) => {
                Ok((id, ws))
            }
            _ => Err(Error::IsADirectory {
                path: path.raw().to_string(),
            }),
        }
    }

    /// Every kept version of the file at `path`, newest first (deleted incarnations included).
    /// [`Error::NotFound`] when it has none.
    pub async fn history(&self, path: &str) -> Result<Vec<FileVersion>> {
        let path = parse(path)?;
        let (external_id, workspace) = self.file_key(&path)?;
        let client = self.store().client();
        let mut out = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let Some(page) = client
                .versions(&external_id, Some(&workspace), Some(500), cursor.as_deref())
                .await?
            else {
                break;
            };
            out.extend(
                page.versions
                    .iter()
                    .filter(|v| v.tags.iter().any(|t| t == self.store().tag()))
                    .map(|v| FileVersion::from_summary(v, None))
                    .collect::<Result<Vec<_>>>()?,
            );
            match page.next_cursor {
                Some(c) if cursor.as_ref() != Some(&c) => cursor = Some(c),
                _ => break,
            }
        }
        if out.is_empty() {
            return Err(Error::NotFound {
                path: path.normalized(),
            });
        }
        Ok(out)
    }

    /// One version of the file at `path`, with its content.
    pub async fn version(&self, path: &str, version: u64) -> Result<FileVersion> {
        let path = parse(path)?;
        let (external_id, workspace) = self.file_key(&path)?;
        self.fetch_version(&path, &external_id, &workspace, version)
            .await
    }

    async fn fetch_version(
        &self,
        path: &MemoryPath,
        external_id: &str,
        workspace: &str,
        version: u64,
    ) -> Result<FileVersion> {
        let v = self
            .store()
            .client()
            .version(external_id, wire(version), Some(workspace))
            .await?
            .filter(|v| v.summary.tags.iter().any(|t| t == self.store().tag()))
            .ok_or_else(|| Error::VersionNotFound {
                path: path.normalized(),
                version,
            })?;
        FileVersion::from_summary(&v.summary, v.content)
    }

    /// Restores the file at `path` to `version` (its content then, or deleted if that version
    /// is a delete). With `seen_latest`, only if the file's newest version is still that one
    /// (the one the caller looked at); in any case only if the file does not change between
    /// this call's read and its write. Refused with [`Error::Precondition`] otherwise; nothing
    /// is written then.
    pub async fn restore(
        &self,
        path: &str,
        version: u64,
        seen_latest: Option<u64>,
    ) -> Result<Restored> {
        let path = parse(path)?;
        let (external_id, workspace) = self.file_key(&path)?;
        let changed = || Error::Precondition {
            path: path.normalized(),
        };
        self.refuse_if_read_only("restore")?;
        // The file as it is now, first: the write below is conditional on exactly this state
        // (its row and version), so when the caller names the newest version it saw, that
        // version must be this state. Check and write are then one condition the server
        // enforces: a change after this read fails the write, one before it fails the check.
        let current = self.store().get(&path).await?;
        if let Some(seen) = seen_latest {
            let latest = self
                .store()
                .client()
                .versions(&external_id, Some(&workspace), Some(1), None)
                .await?
                .and_then(|p| p.versions.into_iter().next());
            let agrees = match (&latest, &current) {
                (Some(v), Some(now)) => {
                    number(v.version) == seen
                        && v.action != Action::Delete
                        && now.version.as_ref().is_some_and(|n| {
                            n.row() == Some(v.context_id.as_str())
                                && n.number() == v.context_version as u64
                        })
                }
                (Some(v), None) => number(v.version) == seen && v.action == Action::Delete,
                (None, _) => false,
            };
            if !agrees {
                return Err(changed());
            }
        }
        let target = self
            .fetch_version(&path, &external_id, &workspace, version)
            .await?;
        target.require_content(&path)?;
        let result = match (target.content, current) {
            (None, None) => Ok(Restored::Unchanged),
            (None, Some(now)) => self
                .delete("restore", &path, Some(now.version.ok_or_else(changed)?))
                .await
                .map(|()| Restored::Deleted),
            (Some(content), Some(now)) if now.content == content => Ok(Restored::Unchanged),
            (Some(content), Some(now)) => {
                let mode = PutMode::Update(now.version.ok_or_else(changed)?);
                restoring(version, self.put("restore", &path, &content, mode))
                    .await
                    .map(|_| Restored::Rewrote)
            }
            (Some(content), None) => restoring(
                version,
                self.put("restore", &path, &content, PutMode::Create),
            )
            .await
            .map(|_| Restored::Recreated),
        };
        result.map_err(|e| match e {
            Error::AlreadyExists { .. } | Error::NotFound { .. } => changed(),
            e => e,
        })
    }

    /// What restoring the directory `dir` to the point in time `at` (RFC 3339) takes: one step
    /// per file that exists now or has a kept version beneath it. Nothing is changed. In
    /// per-workspace mode `dir` is a workspace or a directory in one.
    pub async fn restore_plan(&self, dir: &str, at: DateTime<Utc>) -> Result<RestorePlan> {
        let dir = parse(dir)?.normalized_copy();
        let store = self.store();
        let (workspace, prefix) = store.history_key(&dir, true)?.ok_or_else(|| {
            Error::from(ContextQError::OutsideWorkspace {
                path: format!("{}/<workspace>", dir.raw()),
            })
        })?;
        let (at, pasts) = store
            .client()
            .history_at(&rfc3339(&at), &prefix, Some(&workspace))
            .await?;
        let at = time(&at)?;
        let now = store.list(&dir).await?.unwrap_or_default();
        let mut steps = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for past in pasts {
            let Some(path) = store.path_of(&past.external_id) else {
                continue;
            };
            let ours = |v: &VersionSummary| v.tags.iter().any(|t| t == store.tag());
            if !ours(&past.latest) {
                continue;
            }
            seen.insert(path.normalized());
            let exists = past.latest.action != Action::Delete;
            let then = past.version.as_ref().filter(|v| ours(v));
            let same = |v: &VersionSummary| {
                v.version == past.latest.version
                    || (exists
                        && v.content_sha256.is_some()
                        && v.content_sha256 == past.latest.content_sha256)
            };
            let (action, target) = match (past.state, then) {
                (PastState::Present, Some(v)) if same(v) => (StepAction::Unchanged, None),
                (PastState::Present, Some(v)) if v.is_redacted() => {
                    (StepAction::Redacted, Some(number(v.version)))
                }
                (PastState::Present, Some(v)) if exists => {
                    (StepAction::Revert, Some(number(v.version)))
                }
                (PastState::Present, Some(v)) => (StepAction::Recreate, Some(number(v.version))),
                (PastState::Deleted | PastState::Absent, _) if exists => (StepAction::Remove, None),
                (PastState::Deleted | PastState::Absent, _) => (StepAction::Unchanged, None),
                (PastState::Unknown, _) if !exists => (StepAction::Unchanged, None),
                _ => (StepAction::Unknown, None),
            };
            steps.push(RestoreStep {
                path,
                action,
                target,
                latest: Some(number(past.latest.version)),
                current: exists.then(|| {
                    Version::of_row(&past.latest.context_id, past.latest.context_version as u64)
                }),
                external_id: past.external_id,
                workspace: workspace.clone(),
            });
        }
        // Files that exist now without any kept version: their past is not known.
        for file in now.files {
            if seen.insert(file.path.normalized()) {
                let external_id = store
                    .history_key(&file.path, false)?
                    .map(|(_, id)| id)
                    .unwrap_or_default();
                steps.push(RestoreStep {
                    path: file.path,
                    action: StepAction::Unknown,
                    target: None,
                    latest: None,
                    current: file.version,
                    external_id,
                    workspace: workspace.clone(),
                });
            }
        }
        steps.sort_by_key(|a| a.path.normalized());
        Ok(RestorePlan { dir, at, steps })
    }

    /// Carries out `plan`: every change conditional on the state the plan saw (a file changed
    /// since is left alone and reported as a conflict). `progress` is called after each step
    /// with (steps done, steps in all). Never stops half-way on one file's failure: the report
    /// says what was done, what conflicted and what failed.
    pub async fn restore_tree(
        &self,
        plan: &RestorePlan,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<RestoreReport> {
        self.refuse_if_read_only("restore")?;
        let changes: Vec<&RestoreStep> = plan.changes().collect();
        let total = changes.len();
        let mut report = RestoreReport::default();
        for (i, step) in changes.into_iter().enumerate() {
            let outcome = match self.apply(step).await {
                Ok(()) => StepOutcome::Done,
                Err(
                    Error::Precondition { .. }
                    | Error::AlreadyExists { .. }
                    | Error::NotFound { .. },
                ) => StepOutcome::Conflict,
                Err(e) => StepOutcome::Failed(e),
            };
            report.steps.push((step.clone(), outcome));
            progress(i + 1, total);
        }
        Ok(report)
    }

    async fn apply(&self, step: &RestoreStep) -> Result<()> {
        let store = self.store();
        let content = || async {
            let target = step.target.ok_or_else(|| {
                Error::from(ContextQError::Protocol {
                    url: store.client().base_url().to_string(),
                    message: "a restore step without a version".into(),
                })
            })?;
            let v = self
                .fetch_version(&step.path, &step.external_id, &step.workspace, target)
                .await?;
            // Redacted after the plan was made.
            v.require_content(&step.path)?;
            v.content.ok_or_else(|| Error::VersionNotFound {
                path: step.path.normalized(),
                version: target,
            })
        };
        let current = || {
            step.current.clone().ok_or_else(|| Error::Precondition {
                path: step.path.normalized(),
            })
        };
        match step.action {
            StepAction::Revert => {
                let text = content().await?;
                let put = self.put("restore", &step.path, &text, PutMode::Update(current()?));
                // `content` found the step's version: it has one.
                restoring(step.target.unwrap_or(1), put).await?;
            }
            StepAction::Recreate => {
                let text = content().await?;
                let put = self.put("restore", &step.path, &text, PutMode::Create);
                restoring(step.target.unwrap_or(1), put).await?;
            }
            StepAction::Remove => self.delete("restore", &step.path, Some(current()?)).await?,
            StepAction::Unchanged | StepAction::Unknown | StepAction::Redacted => {}
        }
        Ok(())
    }
}
