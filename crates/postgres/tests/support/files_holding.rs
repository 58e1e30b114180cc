//! Reading a server's (or a derived directory's) files back after an erasure: shared by the
//! PostgreSQL crate's read-back tests and the CLI's tests of several servers on one database.

use std::path::{Path, PathBuf};

/// Every regular file under `dir` holding `needle`, or either half of a needle of 32 bytes or
/// more: a WAL record crossing one of the log's 8 KB pages has the page's header in the middle of
/// its bytes, so a text written there may be found only in two pieces, and one cut can fall
/// inside only one half of a needle much shorter than a page. Files removed while the scan runs
/// (other tests share the server) are skipped; any other failure to read is a failure of the
/// test.
pub fn files_holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_owned()];
    let pieces = match needle.len() {
        0..32 => vec![needle],
        len => vec![&needle[..len / 2], &needle[len / 2..]],
    };
    let finders: Vec<memchr::memmem::Finder> =
        pieces.into_iter().map(memchr::memmem::Finder::new).collect();
    while let Some(dir) = pending.pop() {
        let entries = match fs_err::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => panic!("listing {}: {e}", dir.display()),
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let Ok(meta) = fs_err::symlink_metadata(&path) else { continue };
            if meta.is_dir() {
                pending.push(path);
            } else if meta.is_file() {
                match fs_err::read(&path) {
                    Ok(bytes) if finders.iter().any(|f| f.find(&bytes).is_some()) => {
                        found.push(path)
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => panic!("reading {}: {e}", path.display()),
                }
            }
        }
    }
    found
}
