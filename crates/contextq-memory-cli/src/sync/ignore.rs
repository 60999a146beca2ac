//! What a sync leaves out, on both sides alike ([`Rules`]): the folder's ignore file
//! (`.contextq-syncignore`, gitignore's syntax), what `view` hides (names starting with `.`,
//! `node_modules`) unless hidden files are asked for, and always the sync's own state and an
//! import's leftovers. A path left out is neither copied, nor deleted, nor listed as a change,
//! whichever side holds it: a file only the store holds under an ignored name stays there.

use std::path::Path;

use anyhow::{Context as _, Result};
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::STATE_DIR;

/// The ignore file a folder may hold, read at the start of every pass.
pub const IGNORE_FILE: &str = ".contextq-syncignore";

/// The rules of one folder.
#[derive(Debug, Clone)]
pub struct Rules {
    file: Gitignore,
    include_hidden: bool,
}

impl Rules {
    /// The rules of `dir`: its ignore file when it has one, and `include_hidden`. A pattern
    /// the file cannot hold is an error naming the file and the line.
    pub fn of(dir: &Path, include_hidden: bool) -> Result<Rules> {
        let mut builder = GitignoreBuilder::new(dir);
        let path = dir.join(IGNORE_FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                for (n, line) in text.lines().enumerate() {
                    builder
                        .add_line(Some(path.clone()), line)
                        .with_context(|| {
                            format!(
                                "{} line {}: {line:?} is not a pattern (gitignore's syntax: docs/sync.md)",
                                path.display(),
                                n + 1
                            )
                        })?;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
        let file = builder
            .build()
            .with_context(|| format!("the patterns of {}", path.display()))?;
        Ok(Rules {
            file,
            include_hidden,
        })
    }

    /// Whether the entry at `segments` (below the folder; a directory when `is_dir`) is left
    /// out. The ignore file decides first (a pattern leaves out, `!pattern` keeps even what
    /// `view` hides), for the entry or the nearest directory of it a pattern names; then
    /// hidden names, unless asked for; the sync's state and `.cqmem-*` always.
    pub fn ignored(&self, segments: &[String], is_dir: bool) -> bool {
        let Some(first) = segments.first() else {
            return false;
        };
        if first == STATE_DIR || segments.iter().any(|s| s.starts_with(".cqmem-")) {
            return true;
        }
        let rel = segments.join("/");
        let m = self.file.matched_path_or_any_parents(&rel, is_dir);
        if m.is_ignore() {
            return true;
        }
        if m.is_whitelist() {
            return false;
        }
        !self.include_hidden
            && segments
                .iter()
                .any(|s| contextq_memory_tool::render::hidden(s))
    }

    /// [`Rules::ignored`] for a file named by its path below the folder (`a/b.md`).
    pub fn ignores_file(&self, rel: &str) -> bool {
        let segments: Vec<String> = rel.split('/').map(str::to_string).collect();
        self.ignored(&segments, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(file: Option<&str>, include_hidden: bool) -> (tempfile::TempDir, Rules) {
        let dir = tempfile::tempdir().unwrap();
        if let Some(text) = file {
            std::fs::write(dir.path().join(IGNORE_FILE), text).unwrap();
        }
        let r = Rules::of(dir.path(), include_hidden).unwrap();
        (dir, r)
    }

    #[test]
    fn defaults_leave_out_what_view_hides_and_the_syncs_own() {
        let (_d, r) = rules(None, false);
        for out in [
            ".git/config",
            "a/.hidden.md",
            "node_modules/x/y.md",
            ".contextq-sync/baseline.json",
            "a/.cqmem-123",
        ] {
            assert!(r.ignores_file(out), "{out}");
        }
        for kept in ["MEMORY.md", "a/b/c.md", "a.b/c.md"] {
            assert!(!r.ignores_file(kept), "{kept}");
        }
        let (_d, all) = rules(None, true);
        assert!(!all.ignores_file(".git/config"));
        assert!(all.ignores_file(".contextq-sync/baseline.json"));
    }

    #[test]
    fn the_file_leaves_out_and_keeps() {
        let text = "# drafts stay on this machine\n*.tmp\ndrafts/\n/build\n!.notes/\n!keep.tmp\n\n";
        let (_d, r) = rules(Some(text), false);
        for out in [
            "x.tmp",
            "a/b/x.tmp",
            "drafts/a.md",
            "a/drafts/b.md",
            "build/x.md",
        ] {
            assert!(r.ignores_file(out), "{out}");
        }
        for kept in [
            "keep.tmp",
            ".notes/a.md",
            "a/build/x.md",
            "draft.md",
            "MEMORY.md",
        ] {
            assert!(!r.ignores_file(kept), "{kept}");
        }
        // A directory is decided as one, so a walk need not enter it.
        assert!(r.ignored(&["drafts".to_string()], true));
        assert!(!r.ignored(&["drafts".to_string()], false));
    }

    #[test]
    fn a_bad_pattern_names_the_file_and_the_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(IGNORE_FILE), "ok.md\n[z-a]\n").unwrap();
        let e = format!("{:#}", Rules::of(dir.path(), false).unwrap_err());
        assert!(e.contains(IGNORE_FILE) && e.contains("line 2"), "{e}");
    }
}
