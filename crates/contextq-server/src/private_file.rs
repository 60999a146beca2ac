//! Files only this user may read: the SQLite database, the audit key, the revocation signal.
//! One way to make them (directories 0700, files 0600, created exclusively, so that a file or
//! link planted at the path is never written through), so that none of them is made another way.

use std::fs::File;
use std::io;
use std::path::Path;

/// Creates `path` as a new private file (0600; missing parent directories 0700) and returns it
/// open for writing. Fails with [`io::ErrorKind::AlreadyExists`] when anything is at `path`.
pub fn create_new(path: &Path) -> io::Result<File> {
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
        && !parent.exists()
    {
        let mut dirs = std::fs::DirBuilder::new();
        dirs.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut dirs, 0o700);
        dirs.create(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// [`create_new`], leaving what exists already as it is.
pub fn ensure(path: &Path) -> io::Result<()> {
    match create_new(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn files_and_directories_are_private_and_never_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a").join("b").join("f");
        create_new(&path).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
        assert_eq!(
            create_new(&path).unwrap_err().kind(),
            io::ErrorKind::AlreadyExists
        );
        ensure(&path).unwrap();
    }
}
