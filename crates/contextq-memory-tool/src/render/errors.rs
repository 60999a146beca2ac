//! The sentences for what went wrong below the tool: every [`Error`]'s (a backend's own error
//! words itself, `BackendError`), the partial states of commands done in steps, lost answers, read-only use.

use super::*;
use crate::error::Error;

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
            Error::Backend(e) => e.tool_message(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::path::PathError;

    /// Every store failure's sentence, exactly (the conformance suite cannot provoke ContextQ's
    /// refusals on the in-memory store, so they are pinned here).
    #[test]
    fn every_store_failure_has_its_sentence() {
        let cases: Vec<(Error, &str)> = vec![
            (
                Error::Backend(Box::new(Vault(true))),
                "The vault is sealed; nothing was changed.",
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
                    cause: Box::new(Error::Io {
                        operation: "delete",
                        path: "a".into(),
                        source: std::io::Error::other("lost"),
                    }),
                },
                "The memory store did not confirm whether the delete of /memories/a was applied (delete a: lost). View /memories/a to check before retrying.",
            ),
            (
                Error::Path(PathError::Escape("/memories/../x".into())),
                "Path /memories/../x would escape /memories directory",
            ),
            (
                Error::IsADirectory {
                    path: "/memories/acme".into(),
                },
                "/memories/acme is a directory, not a file",
            ),
            (
                Error::ParentIsAFile {
                    path: "/memories/f/x".into(),
                    operation: "create",
                },
                "Cannot create /memories/f/x: a parent of it is a file, not a directory",
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

    /// A backend of a test's own: its error words itself.
    #[derive(Debug, thiserror::Error)]
    #[error("the vault is sealed")]
    struct Vault(bool);

    impl crate::error::BackendError for Vault {
        fn tool_message(&self) -> String {
            "The vault is sealed; nothing was changed.".into()
        }
        fn is_failure(&self) -> bool {
            self.0
        }
    }

    /// A backend's own error comes back as its type, and counts as a store failure when the
    /// backend says so.
    #[test]
    fn a_backend_error_keeps_its_type() {
        let e = Error::Backend(Box::new(Vault(false)));
        assert!(e.backend_error::<Vault>().is_some_and(|v| !v.0));
        assert!(e.backend_error::<std::fmt::Error>().is_none());
        assert!(!e.is_store_failure());
        assert!(Error::Backend(Box::new(Vault(true))).is_store_failure());
        assert_eq!(e.to_string(), "the vault is sealed");
    }
}
