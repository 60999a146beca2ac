//! Redaction of memory files' history, on a ContextQ that can (the `redaction` extension of
//! contextq-server; docs/history.md, "Redaction"): the content of one version, or of every
//! version holding a given text, removed for good. The version stays in the history, marked
//! redacted, with the SHA-256 of what was there; the server audits who redacted what, never the
//! text.
//!
//! [`MemoryTool::redact`] plans first (a dry run, paged through the whole match) and then, unless
//! asked for the plan only, redacts; the report lists every version exactly. A file's current
//! content is never redacted: the server refuses the whole request (nothing changed) when the
//! version asked for is the file's current state, or when a matching file's content holds the
//! text now, and the caller edits or deletes it first. Needs a key with the `admin` scope of the
//! whole tenant.

use contextq_api::history::{Action, MAX_REDACTED_VERSIONS, RedactRequest, Redaction};

use super::error::ContextQError;
use super::store::ContextQStore;
use crate::error::{Error, Result};
use crate::path::MemoryPath;
use crate::tool::MemoryTool;

/// What [`MemoryTool::redact`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RedactTarget<'a> {
    /// One version of a file.
    Version(u64),
    /// Every version holding `text` (exact, case-sensitive): of the file, or with `all_paths`
    /// of every file beneath the directory.
    Matching {
        /// The text.
        text: &'a str,
        /// The path is a directory: every file beneath it.
        all_paths: bool,
    },
}

/// One version a redaction took (or, planned, would take).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RedactedFileVersion {
    /// The file (`None`: an external id of the tool's namespace that is no memory path).
    pub path: Option<MemoryPath>,
    /// The version number.
    pub version: u64,
    /// What the change that wrote it did.
    pub action: Action,
    /// When it was written.
    pub at: chrono::DateTime<chrono::Utc>,
    /// Its content's bytes before the redaction.
    pub size: u64,
    /// The SHA-256 of its content, kept.
    pub sha256: Option<String>,
    /// It had been redacted before (nothing changed for it).
    pub already: bool,
}

/// What [`MemoryTool::redact`] did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RedactionReport {
    /// The versions, oldest change first.
    pub versions: Vec<RedactedFileVersion>,
    /// Only the plan: nothing was changed.
    pub dry_run: bool,
    /// SQLite behind the server: whether its write-ahead log was truncated after the last
    /// request (`Some(false)`: another process still read it; a later checkpoint truncates
    /// it). `None`: PostgreSQL, a plan, or nothing redacted.
    pub wal_truncated: Option<bool>,
}

impl RedactionReport {
    /// The versions whose content this call removed (not those redacted before).
    pub fn newly_redacted(&self) -> usize {
        self.versions.iter().filter(|v| !v.already).count()
    }
}

impl MemoryTool<ContextQStore> {
    /// Redacts `target` of the file (or, `all_paths`, the directory) at `path`; with `dry_run`
    /// only the plan. Refused by the server, nothing changed, when the text would stay in a
    /// file's current content ([`ContextQError::Api`] with code `conflict`, whose message
    /// says to change or delete the file first); [`ContextQError::RedactionUnavailable`] on a
    /// server without the extension; [`Error::ReadOnly`] on a read-only tool. A match of more
    /// than one request's worth is redacted in several requests, each all or nothing.
    pub async fn redact(
        &self,
        path: &str,
        target: RedactTarget<'_>,
        dry_run: bool,
    ) -> Result<RedactionReport> {
        let path = MemoryPath::parse(path)?.normalized_copy();
        if !dry_run {
            self.refuse_if_read_only("redact")?;
        }
        let store = self.store();
        let mut request = RedactRequest {
            dry_run,
            ..RedactRequest::default()
        };
        match target {
            RedactTarget::Version(n) => {
                let (id, workspace) = self.file_key(&path)?;
                request.external_id = Some(id);
                request.workspace = Some(workspace);
                request.version = Some(super::history::wire(n));
            }
            RedactTarget::Matching { text, all_paths } => {
                request.matching = Some(text.to_string());
                if all_paths {
                    match store.history_key(&path, true)? {
                        Some((workspace, prefix)) => {
                            request.external_id_prefix = Some(prefix);
                            request.workspace = Some(workspace);
                        }
                        // The root in per-workspace mode: every workspace's files.
                        None => request.external_id_prefix = Some(format!("{}:", store.tag())),
                    }
                } else {
                    let directory = || Error::Config {
                        message: format!(
                            "{} is a directory: add --all-paths (RedactTarget::Matching {{ all_paths: true, .. }}) to redact every file beneath it",
                            path.normalized()
                        ),
                    };
                    let (id, workspace) = self.file_key(&path).map_err(|e| match e {
                        Error::IsADirectory { .. } => directory(),
                        e => e,
                    })?;
                    if crate::Store::list(store, &path).await?.is_some() {
                        return Err(directory());
                    }
                    request.external_id = Some(id);
                    request.workspace = Some(workspace);
                }
            }
        }
        let client = store.client();
        let mut report = RedactionReport {
            dry_run,
            ..RedactionReport::default()
        };
        // The server names external ids; people (and Claude) name paths.
        let named = |e: Error| match (
            e.into_backend_error::<ContextQError>(),
            request.external_id.as_deref(),
        ) {
            (
                Ok(ContextQError::Api {
                    code,
                    code_text,
                    status,
                    message,
                    retry_after,
                }),
                Some(id),
            ) => Error::from(ContextQError::Api {
                code,
                code_text,
                status,
                message: message.replace(id, &path.normalized()),
                retry_after,
            }),
            (Ok(c), _) => c.into(),
            (Err(e), _) => e,
        };
        loop {
            let answer: Redaction = client.redact(&request).await.map_err(named)?;
            let taken = answer.redacted.len();
            let fresh = answer.redacted.iter().filter(|v| !v.already).count();
            if dry_run {
                // A plan pages on; a redaction's next request finds the rest by itself (what it
                // redacted no longer matches).
                request.after_seq = answer.redacted.last().map(|v| v.seq).or(request.after_seq);
            }
            if answer.wal_truncated.is_some() {
                report.wal_truncated = answer.wal_truncated;
            }
            for v in answer.redacted {
                report.versions.push(RedactedFileVersion {
                    path: store.path_of(&v.external_id),
                    version: super::history::number(v.version),
                    action: v.action,
                    at: super::history::time(&v.created_at)?,
                    size: v.size_bytes,
                    sha256: v.content_sha256,
                    already: v.already,
                });
            }
            if !answer.more {
                break;
            }
            // A redaction that changed nothing while more remain would go round for ever.
            if !dry_run && (fresh == 0 || taken < MAX_REDACTED_VERSIONS) {
                return Err(Error::from(ContextQError::Protocol {
                    url: client.base_url().to_string(),
                    message:
                        "a redaction answered that more versions match but redacted none of them"
                            .into(),
                }));
            }
        }
        Ok(report)
    }
}
