//! The files beneath an import's folder, one at a time, in the order of their memory paths as
//! text (the order [`contextq_memory_tool::Store::list_after`] pages in), so that an import of a
//! million files holds a window of them, never the list.
//!
//! What is held: the names of each directory on the way down (a directory's entries are read
//! whole and sorted, as its order needs), so memory grows with the largest directory, not with
//! the tree. Symbolic links are never followed; the import's own leftovers (`.cqmem-*`) are
//! skipped; what `view` hides (a name starting with `.`, `node_modules`) is counted, with
//! everything beneath it, unless hidden files are asked for.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One directory being walked: its path below the root, its entries still to visit.
struct Level {
    segments: Vec<String>,
    dir: PathBuf,
    entries: std::vec::IntoIter<(OsString, bool)>,
}

/// Which entries a [`Walk::filtered`] walk takes: given an entry's segments below the root
/// and whether it is a directory, `true` to take it (a directory left out is not entered).
pub(crate) type Keep = Box<dyn Fn(&[String], bool) -> bool + Send>;

/// A walk of the files beneath a folder.
pub(crate) struct Walk {
    stack: Vec<Level>,
    include_hidden: bool,
    /// Instead of the hidden rule: which entries to take.
    keep: Option<Keep>,
    /// Files left out because `view` hides them, so far.
    pub(crate) hidden: usize,
}

impl Walk {
    /// A walk of the files beneath `root`.
    pub(crate) fn new(root: &Path, include_hidden: bool) -> std::io::Result<Walk> {
        let mut walk = Walk {
            stack: Vec::new(),
            include_hidden,
            keep: None,
            hidden: 0,
        };
        walk.enter(Vec::new(), root.to_path_buf())?;
        Ok(walk)
    }

    /// A walk of the files beneath `root` that `keep` takes (and nothing left out is counted).
    pub(crate) fn filtered(root: &Path, keep: Keep) -> std::io::Result<Walk> {
        let mut walk = Walk {
            stack: Vec::new(),
            include_hidden: true,
            keep: Some(keep),
            hidden: 0,
        };
        walk.enter(Vec::new(), root.to_path_buf())?;
        Ok(walk)
    }

    /// Reads `dir`'s entries (files and directories, no links), sorted so that the paths
    /// beneath them come out in text order: a directory sorts as its name followed by `/`
    /// (`d-1/` before `d/`, `d.md` before `d/`), as every path beneath it does.
    fn enter(&mut self, segments: Vec<String>, dir: PathBuf) -> std::io::Result<()> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(&dir)? {
            let entry = entry?;
            let kind = entry.file_type()?;
            if kind.is_symlink() || !(kind.is_dir() || kind.is_file()) {
                continue;
            }
            entries.push((entry.file_name(), kind.is_dir()));
        }
        entries.sort_by_cached_key(|(name, is_dir)| {
            let mut key = name.as_encoded_bytes().to_vec();
            if *is_dir {
                key.push(b'/');
            }
            key
        });
        self.stack.push(Level {
            segments,
            dir,
            entries: entries.into_iter(),
        });
        Ok(())
    }

    /// Counts the files beneath `dir` as hidden.
    fn skip(&mut self, dir: &Path) -> std::io::Result<()> {
        for file in Walk::new(dir, true)? {
            file?;
            self.hidden += 1;
        }
        Ok(())
    }
}

impl Iterator for Walk {
    /// A file: its path segments below the root, and where it is on disk.
    type Item = std::io::Result<(Vec<String>, PathBuf)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let level = self.stack.last_mut()?;
            let Some((name, is_dir)) = level.entries.next() else {
                self.stack.pop();
                continue;
            };
            let path = level.dir.join(&name);
            let name = name.to_string_lossy().to_string();
            if name.starts_with(".cqmem-") {
                continue;
            }
            let mut segments = level.segments.clone();
            segments.push(name);
            let name = segments.last().expect("just pushed");
            if let Some(keep) = &self.keep {
                if !keep(&segments, is_dir) {
                    continue;
                }
            } else if !self.include_hidden && contextq_memory_tool::render::hidden(name) {
                let skipped = if is_dir {
                    self.skip(&path)
                } else {
                    self.hidden += 1;
                    Ok(())
                };
                if let Err(e) = skipped {
                    return Some(Err(e));
                }
                continue;
            }
            if is_dir {
                if let Err(e) = self.enter(segments, path) {
                    return Some(Err(e));
                }
                continue;
            }
            return Some(Ok((segments, path)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        for f in files {
            let p = dir.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x\n").unwrap();
        }
        dir
    }

    fn walked(dir: &Path, include_hidden: bool) -> (Vec<String>, usize) {
        let mut walk = Walk::new(dir, include_hidden).unwrap();
        let files = walk
            .by_ref()
            .map(|f| f.unwrap().0.join("/"))
            .collect::<Vec<_>>();
        (files, walk.hidden)
    }

    #[test]
    fn files_come_out_in_the_text_order_of_their_paths() {
        let files = [
            "d/x.md", "d-1/y.md", "d.md", "a/b/c.md", "a/b.md", "ab.md", "Z.md", "d/e/f.md",
        ];
        let dir = tree(&files);
        let (got, hidden) = walked(dir.path(), false);
        let mut expected: Vec<String> = files.iter().map(|f| f.to_string()).collect();
        expected.sort_by(|a, b| format!("/memories/{a}").cmp(&format!("/memories/{b}")));
        assert_eq!(got, expected);
        assert_eq!(hidden, 0);
    }

    #[test]
    fn hidden_files_are_counted_and_left_out_unless_asked_for() {
        let dir = tree(&[
            "a.md",
            ".secret.md",
            "node_modules/x/y.md",
            "node_modules/z.md",
            ".git/config",
        ]);
        std::fs::write(dir.path().join(".cqmem-export-1-2"), "half").unwrap();
        assert_eq!(walked(dir.path(), false), (vec!["a.md".to_string()], 4));
        let (all, hidden) = walked(dir.path(), true);
        assert_eq!(all.len(), 5, "{all:?}");
        assert_eq!(hidden, 0);
    }

    #[cfg(unix)]
    #[test]
    fn links_are_never_followed() {
        let outside = tree(&["secret.md"]);
        let dir = tree(&["a.md"]);
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), dir.path().join("s.md"))
            .unwrap();
        assert_eq!(walked(dir.path(), false).0, vec!["a.md".to_string()]);
    }
}
