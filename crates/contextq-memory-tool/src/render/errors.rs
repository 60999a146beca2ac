//! The sentences for what went wrong below the tool: every [`Error`]'s (ContextQ's refusals
//! by their code), the partial states of commands done in steps, lost answers, read-only use.

use super::*;
use crate::contextq::error::{ContextQError, ErrorCode};
use crate::error::Error;
use crate::transport::TransportError;

/// A write the store could not confirm either way (not in the spec).
pub fn outcome_unknown(operation: &str, path: &str, cause: &str) -> String {
    format!(
        "The memory store did not confirm whether the {operation} of {path} was applied ({cause}). View {path} to check before retrying."
    )
}

/// A one-step rename (the server's transaction) whose answer was lost and could not be read
/// back: all or nothing, so which one the new path tells.
pub fn rename_unknown(old_path: &str, new_path: &str, cause: &str) -> String {
    format!(
        "The memory store did not confirm whether the rename of {old_path} to {new_path} was applied ({cause}). It is all or nothing: view {new_path}; if it exists the rename was applied, if not {old_path} is unchanged and the rename can be retried."
    )
}

/// A rename that failed before anything changed (not in the spec).
pub fn rename_failed(old_path: &str, new_path: &str, cause: &str) -> String {
    format!("Rename of {old_path} to {new_path} failed and nothing was changed: {cause}")
}

/// A rename whose copy was made but whose source could not be deleted, nor the copy removed
/// again: the TypeScript package's explicit error, naming both paths and the source row's id.
pub fn rename_both_exist(old_path: &str, new_path: &str, source_id: &str, cause: &str) -> String {
    format!(
        "Rename of {old_path} to {new_path} is incomplete: {new_path} was created, but deleting the source {old_path} (id {source_id}) failed: {cause} Both files now exist; delete one of them."
    )
}

/// A rename whose copy was made but whose source delete has an unknown outcome.
pub fn rename_source_unknown(
    old_path: &str,
    new_path: &str,
    source_id: &str,
    cause: &str,
) -> String {
    format!(
        "Rename of {old_path} to {new_path} is incomplete: {new_path} was created, but the memory store did not confirm whether the source {old_path} (id {source_id}) was deleted ({cause}). View {old_path}: if it still exists, delete it to finish the rename; {new_path} holds its content."
    )
}

/// A rename whose copy has an unknown outcome; the source is untouched.
pub fn rename_copy_unknown(old_path: &str, new_path: &str, cause: &str) -> String {
    format!(
        "Rename of {old_path} to {new_path} did not finish: {old_path} is unchanged, but the memory store did not confirm whether the copy at {new_path} was created ({cause}). View {new_path}: if it exists, delete {old_path} to finish the rename; if not, retry it."
    )
}

/// A rename whose source delete failed, and whose undo of the copy has an unknown outcome.
pub fn rename_undo_unknown(old_path: &str, new_path: &str, cause: &str, undo: &str) -> String {
    format!(
        "Rename of {old_path} to {new_path} failed: deleting the source failed ({cause}), so the copy at {new_path} was removed again, but the memory store did not confirm that removal ({undo}). {old_path} is unchanged; view {new_path} and delete it if it still exists."
    )
}

/// At most ten paths, then "and N more".
pub fn path_list(paths: &[String]) -> String {
    const SHOWN: usize = 10;
    if paths.len() <= SHOWN {
        paths.join(", ")
    } else {
        format!(
            "{}, and {} more",
            paths[..SHOWN].join(", "),
            paths.len() - SHOWN
        )
    }
}

/// A directory delete that stopped part way (not in the spec): what was deleted, what has an
/// unknown outcome, what is still there.
pub fn delete_tree_stopped(
    dir: &str,
    deleted: usize,
    total: usize,
    unknown: Option<&str>,
    remaining: &[String],
    cause: &str,
) -> String {
    let unknown = unknown
        .map(|p| format!(" whether {p} was deleted is unknown;"))
        .unwrap_or_default();
    let remaining = if remaining.is_empty() {
        String::new()
    } else {
        format!(" still present: {}.", path_list(remaining))
    };
    format!(
        "Deleting {dir} stopped part way: {deleted} of {total} files were deleted;{unknown}{remaining} Cause: {cause} Run delete on {dir} again to finish."
    )
}

/// A directory delete or rename on a store that caps listings and showed nothing more beneath
/// the directory, though there may be more (not in the spec).
pub fn capped_listing_stopped(dir: &str, done: usize, verb: &str) -> String {
    format!(
        "{done} files beneath {dir} were {verb}, but this memory store lists only one page of entries and its last page showed no more files beneath {dir}; some may remain. View {dir} to check."
    )
}

/// A directory rename that failed while copying (not in the spec).
pub fn rename_dir_copy_failed(
    old_path: &str,
    new_path: &str,
    failed: &str,
    cause: &str,
    state: &str,
) -> String {
    // The cause's own "nothing was changed" (it speaks of the one copy) would say it twice.
    format!(
        "Rename of {old_path} to {new_path} failed while copying {failed}: {}; {state}.",
        without_nothing_changed(cause)
    )
}

/// What a failed directory rename left (the end of [`rename_dir_copy_failed`]): files moved by
/// earlier passes, copies at both places, copies whose removal is unknown; else nothing.
pub fn rename_dir_state(moved: usize, new_path: &str, both: &[String], maybe: &[String]) -> String {
    let mut state = Vec::new();
    if moved > 0 {
        state.push(format!(
            "{moved} files had already been moved to {new_path}"
        ));
    }
    if !both.is_empty() {
        state.push(format!(
            "these copies could not be removed and now exist at both places: {}",
            path_list(both)
        ));
    }
    if !maybe.is_empty() {
        state.push(format!(
            "the memory store did not confirm whether these copies exist: {}",
            path_list(maybe)
        ));
    }
    if state.is_empty() {
        state.push("nothing was changed".to_string());
    }
    state.join("; ")
}

/// A directory rename whose sources could not all be deleted (not in the spec).
pub fn rename_dir_delete_failed(
    old_path: &str,
    new_path: &str,
    left: &[String],
    unknown: Option<&str>,
    copied: usize,
    cause: &str,
) -> String {
    let unknown = unknown
        .map(|p| format!(" Whether {p} was deleted is unknown."))
        .unwrap_or_default();
    format!(
        "Rename of {old_path} to {new_path} is incomplete: every file was copied to {new_path}, but {} of {copied} sources could not be deleted and now exist at both places: {}.{unknown} Cause: {cause} Delete them from {old_path} to finish.",
        left.len(),
        path_list(left),
    )
}

/// An edit gave up because other writers kept changing the file for the whole edit budget.
pub fn edit_conflict(path: &str, attempts: usize, spent: std::time::Duration) -> String {
    format!(
        "The file {path} was changed by other writers while this edit was being saved ({attempts} attempts in {:.1} s); nothing was changed by this command. View the file again and retry the edit.",
        spent.as_secs_f64()
    )
}

/// What Claude reads when a write is refused because the memory is read-only here.
pub fn read_only(command: &str) -> String {
    format!(
        "The memory is read-only here: {command} is not allowed and nothing was changed. Memory can still be viewed."
    )
}

impl Error {
    /// A sentence Claude can act on (without the `Error: ` prefix).
    pub fn tool_message(&self) -> String {
        match self {
            Error::NotFound { path } => does_not_exist(path),
            Error::AlreadyExists { path } => already_exists(path),
            Error::Precondition { path } => format!(
                "The file {path} was changed by another writer; nothing was changed. View it again and retry."
            ),
            Error::EditRefused { path, failure } => {
                format!("No change was made to {path}: {failure}.")
            }
            Error::NotSupported { operation } => {
                format!("This memory store does not support {operation}")
            }
            Error::OutcomeUnknown {
                path,
                operation,
                cause,
            } => outcome_unknown(operation, path, &cause.to_string()),
            Error::Path(e) => e.message(),
            Error::IsADirectory { path } => format!("{path} is a directory, not a file"),
            Error::ParentIsAFile { path, operation } => {
                format!("Cannot {operation} {path}: a parent of it is a file, not a directory")
            }
            Error::Io {
                operation, source, ..
            } => format!("The memory store failed to {operation}: {source}"),
            Error::Config { message } => format!("The memory tool is misconfigured: {message}"),
            Error::ReadOnly { command } => read_only(command),
            Error::SecretRefused { path, kind, line } => format!(
                "Nothing was written to {path}: line {line} of the content looks like {kind}. Do not store credentials (API keys, tokens, passwords, private keys) in memory; write the fact without the secret, e.g. where the credential is kept."
            ),
            Error::VersionNotFound { path, version } => {
                format!("{path} has no version {version}; nothing was changed.")
            }
            Error::Redacted { path, version, .. } => format!(
                "Version {version} of {path} was redacted: its content is gone; nothing was changed."
            ),
            Error::Stopped { message, .. } => message.clone(),
            Error::ContextQ(e) => contextq_message(e),
            Error::Backend {
                backend, source, ..
            } => format!("{} failed: {source}", capitalized(backend)),
        }
    }
}

/// What Claude reads when ContextQ failed or refused: by the contract's error code.
fn contextq_message(e: &ContextQError) -> String {
    match e {
        ContextQError::NotAWorkspace { segment } => format!(
            "{segment:?} cannot be a workspace: the first folder under {ROOT} is a ContextQ workspace, named with 1 to 63 of a-z, 0-9 and '-' (e.g. {ROOT}/acme/notes.md)"
        ),
        ContextQError::OutsideWorkspace { path } => format!(
            "{path} is not inside a workspace: the first folder under {ROOT} is a ContextQ workspace, so write to {ROOT}/<workspace>/{}",
            path.rsplit('/')
                .find(|s| !s.is_empty())
                .unwrap_or("notes.md")
        ),
        ContextQError::WorkspaceNotFound {
            workspace,
            create_allowed: false,
        } => format!(
            "The workspace {workspace:?} does not exist in ContextQ; ask the operator to create it (or enable create_workspaces)"
        ),
        ContextQError::WorkspaceNotFound { workspace, .. } => {
            format!("The workspace {workspace:?} could not be created")
        }
        ContextQError::Api {
            code,
            code_text,
            status,
            message,
            retry_after,
        } => match code {
            Some(ErrorCode::QuotaExceeded) => format!(
                "The memory store is full: {message}. Delete memories you no longer need, then retry."
            ),
            // Read-only only when it is: a key without the write scope, or a read-only server;
            // a key limited to other workspaces may write, just not there.
            Some(ErrorCode::Forbidden)
                if message.contains("lacks the write scope") || message.contains("read-only") =>
            {
                format!(
                    "The memory is read-only here: {}; nothing was changed.",
                    without_nothing_changed(message)
                )
            }
            Some(ErrorCode::Forbidden) => format!(
                "The ContextQ API key may not make this change: {}; nothing was changed.",
                without_nothing_changed(message)
            ),
            Some(ErrorCode::Unauthorized) => format!(
                "The memory store rejected its API key (401: {}); the operator must fix the key.",
                without_nothing_changed(message)
            ),
            Some(ErrorCode::PayloadTooLarge) => format!(
                "The content is too large for the memory store ({message}); at most 1 MiB per file. Split it into smaller files."
            ),
            Some(ErrorCode::Conflict | ErrorCode::EditFailed) => {
                format!("The memory store refused the change: {message}")
            }
            Some(ErrorCode::RateLimited) => format!(
                "The memory store is rate limiting requests{}; nothing was changed by this command. Retry later.",
                retry_after
                    .map(|s| format!(" (retry after {s}s)"))
                    .unwrap_or_default()
            ),
            Some(ErrorCode::Internal) => format!(
                "The memory store failed ({status} {code_text}: {message}); nothing was changed. Retry later."
            ),
            Some(ErrorCode::Unavailable) => format!(
                "The memory store is unavailable for now ({status} {code_text}: {message}); nothing was changed. Retry later."
            ),
            _ => format!("The memory store answered {status} {code_text}: {message}"),
        },
        ContextQError::Transport(TransportError {
            message, timeout, ..
        }) => {
            if *timeout {
                format!(
                    "The memory store did not answer in time ({message}); nothing was changed. Retry later."
                )
            } else {
                format!(
                    "The memory store is unreachable ({message}); nothing was changed. Retry later."
                )
            }
        }
        ContextQError::Protocol { message, .. } => {
            format!("The memory store gave an unexpected answer: {message}")
        }
        ContextQError::HistoryUnavailable { .. } => {
            "This memory store keeps no history; nothing was changed.".to_string()
        }
        ContextQError::RedactionUnavailable { .. } => {
            "This memory store cannot redact; nothing was changed.".to_string()
        }
    }
}

/// `text` with its first letter in capitals (a backend's name opening a sentence).
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathError;

    /// Every store failure's sentence, exactly (the conformance suite cannot provoke ContextQ's
    /// refusals on the in-memory store, so they are pinned here).
    #[test]
    fn every_store_failure_has_its_sentence() {
        let api = |status: u16, code: &str, retry_after: Option<u64>| {
            Error::ContextQ(ContextQError::Api {
                code: ErrorCode::of_answer(status, Some(code)),
                code_text: code.into(),
                status,
                message: "m".into(),
                retry_after,
            })
        };
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::Backend {
                    backend: "the vault",
                    failure: true,
                    source: Box::new(std::io::Error::other("sealed")),
                },
                "The vault failed: sealed",
            ),
            (
                Error::NotFound {
                    path: "/memories/a".into(),
                },
                "The path /memories/a does not exist",
            ),
            (
                Error::AlreadyExists {
                    path: "/memories/a".into(),
                },
                "File /memories/a already exists",
            ),
            (
                Error::Precondition {
                    path: "/memories/a".into(),
                },
                "The file /memories/a was changed by another writer; nothing was changed. View it again and retry.",
            ),
            (
                Error::NotSupported {
                    operation: "rename",
                },
                "This memory store does not support rename",
            ),
            (
                Error::OutcomeUnknown {
                    path: "/memories/a".into(),
                    operation: "delete",
                    cause: Box::new(Error::ContextQ(ContextQError::Protocol {
                        url: "u".into(),
                        message: "lost".into(),
                    })),
                },
                "The memory store did not confirm whether the delete of /memories/a was applied (unexpected answer from ContextQ at u: lost). View /memories/a to check before retrying.",
            ),
            (
                Error::Path(PathError::Escape("/memories/../x".into())),
                "Path /memories/../x would escape /memories directory",
            ),
            (
                Error::ContextQ(ContextQError::NotAWorkspace {
                    segment: "Bad Slug".into(),
                }),
                "\"Bad Slug\" cannot be a workspace: the first folder under /memories is a ContextQ workspace, named with 1 to 63 of a-z, 0-9 and '-' (e.g. /memories/acme/notes.md)",
            ),
            (
                Error::ContextQ(ContextQError::OutsideWorkspace {
                    path: "/memories/n.md".into(),
                }),
                "/memories/n.md is not inside a workspace: the first folder under /memories is a ContextQ workspace, so write to /memories/<workspace>/n.md",
            ),
            (
                Error::IsADirectory {
                    path: "/memories/acme".into(),
                },
                "/memories/acme is a directory, not a file",
            ),
            (
                Error::ContextQ(ContextQError::WorkspaceNotFound {
                    workspace: "acme".into(),
                    create_allowed: false,
                }),
                "The workspace \"acme\" does not exist in ContextQ; ask the operator to create it (or enable create_workspaces)",
            ),
            (
                Error::ContextQ(ContextQError::WorkspaceNotFound {
                    workspace: "acme".into(),
                    create_allowed: true,
                }),
                "The workspace \"acme\" could not be created",
            ),
            (
                Error::ParentIsAFile {
                    path: "/memories/f/x".into(),
                    operation: "create",
                },
                "Cannot create /memories/f/x: a parent of it is a file, not a directory",
            ),
            (
                api(402, "quota_exceeded", None),
                "The memory store is full: m. Delete memories you no longer need, then retry.",
            ),
            (
                api(403, "forbidden", None),
                "The ContextQ API key may not make this change: m; nothing was changed.",
            ),
            (
                api(401, "unauthorized", None),
                "The memory store rejected its API key (401: m); the operator must fix the key.",
            ),
            (
                api(413, "payload_too_large", None),
                "The content is too large for the memory store (m); at most 1 MiB per file. Split it into smaller files.",
            ),
            (
                api(409, "conflict", None),
                "The memory store refused the change: m",
            ),
            (
                api(429, "rate_limited", Some(3)),
                "The memory store is rate limiting requests (retry after 3s); nothing was changed by this command. Retry later.",
            ),
            (
                api(500, "internal", None),
                "The memory store failed (500 internal: m); nothing was changed. Retry later.",
            ),
            (
                api(503, "unavailable", Some(1)),
                "The memory store is unavailable for now (503 unavailable: m); nothing was changed. Retry later.",
            ),
            (
                api(418, "teapot", None),
                "The memory store answered 418 teapot: m",
            ),
            (
                Error::ContextQ(ContextQError::Transport(TransportError {
                    url: "u".into(),
                    message: "refused".into(),
                    timeout: false,
                    sent: false,
                })),
                "The memory store is unreachable (refused); nothing was changed. Retry later.",
            ),
            (
                Error::ContextQ(ContextQError::Transport(TransportError {
                    url: "u".into(),
                    message: "slow".into(),
                    timeout: true,
                    sent: true,
                })),
                "The memory store did not answer in time (slow); nothing was changed. Retry later.",
            ),
            (
                Error::ContextQ(ContextQError::Protocol {
                    url: "u".into(),
                    message: "not JSON".into(),
                }),
                "The memory store gave an unexpected answer: not JSON",
            ),
            (
                Error::Config {
                    message: "no key".into(),
                },
                "The memory tool is misconfigured: no key",
            ),
        ];
        for (error, want) in cases {
            assert_eq!(error.tool_message(), want, "{error:?}");
        }
        assert_eq!(unknown_tool("notes"), "Unknown tool: notes");
        assert_eq!(
            listing_may_be_incomplete(),
            "Note: this memory store returned one full page of entries and no way to the next, so this listing may be incomplete."
        );
    }

    /// A backend's own error comes back as its type, and counts as a store failure when the
    /// backend says so.
    #[test]
    fn a_backend_error_keeps_its_type() {
        let e = Error::Backend {
            backend: "the vault",
            failure: false,
            source: Box::new(std::io::Error::other("sealed")),
        };
        assert_eq!(
            e.backend_error::<std::io::Error>().unwrap().to_string(),
            "sealed"
        );
        assert!(e.backend_error::<std::fmt::Error>().is_none());
        assert!(!e.is_store_failure());
        assert_eq!(e.to_string(), "the vault: sealed");
    }
}
