//! Store files readable by their owner only: directories 0700, files 0600, whatever the umask.
//!
//! A store holds conversation text, vectors derived from it and key hashes; no other local user
//! may read them. SQLite creates a database's `-wal`, `-shm` and `-journal` files with the mode
//! of the database file itself, so restricting the database before those exist covers them too;
//! files of an older store are restricted when it is next opened for writing.

use std::{io, path::Path};

/// The mode of a store directory.
pub const PRIVATE_DIR_MODE: u32 = 0o700;
/// The mode of a store file.
pub const PRIVATE_FILE_MODE: u32 = 0o600;

/// Creates `dir` (and missing parents, with the default mode) and restricts `dir` itself to its
/// owner; an existing `dir` is restricted as well.
pub fn create_private_dir(dir: &Path) -> io::Result<()> {
    fs_err::create_dir_all(dir)?;
    restrict(dir, PRIVATE_DIR_MODE)
}

/// Restricts the SQLite database at `path` and those of its `-wal`, `-shm` and `-journal`
/// companions that exist to their owner.
pub fn restrict_sqlite_files(path: &Path) -> io::Result<()> {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let file = Path::new(&name);
        match restrict(file, PRIVATE_FILE_MODE) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && !suffix.is_empty() => {}
            other => other?,
        }
    }
    Ok(())
}

/// Creates an empty file at `path` readable by its owner only (SQLite takes an empty file as an
/// empty database), or restricts the file already there.
pub(crate) fn create_private_file(path: &Path) -> io::Result<()> {
    let mut options = fs_err::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use fs_err::os::unix::fs::OpenOptionsExt;
        options.mode(PRIVATE_FILE_MODE);
    }
    options.open(path)?;
    restrict(path, PRIVATE_FILE_MODE)
}

/// Sets `mode` on `path` unless it already has it (changing the mode of a file one does not own
/// fails, and need not be tried when there is nothing to change).
#[cfg(unix)]
fn restrict(path: &Path, mode: u32) -> io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let current = fs_err::metadata(path)?.permissions();
    if current.mode() & 0o7777 != mode {
        fs_err::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn restrict(path: &Path, _mode: u32) -> io::Result<()> {
    fs_err::metadata(path).map(|_| ())
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn mode(path: &Path) -> u32 {
        fs_err::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn directories_and_files_end_up_private_whatever_they_were() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a/store");
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        fs_err::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        create_private_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);

        let db = dir.join("x.sqlite");
        create_private_file(&db).unwrap();
        assert_eq!(mode(&db), 0o600);
        let wal = dir.join("x.sqlite-wal");
        fs_err::write(&wal, b"").unwrap();
        fs_err::set_permissions(&wal, std::fs::Permissions::from_mode(0o644)).unwrap();
        fs_err::set_permissions(&db, std::fs::Permissions::from_mode(0o666)).unwrap();
        restrict_sqlite_files(&db).unwrap();
        assert_eq!((mode(&db), mode(&wal)), (0o600, 0o600));
        assert!(restrict_sqlite_files(&dir.join("missing.sqlite")).is_err());
    }
}
