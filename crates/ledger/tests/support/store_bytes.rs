//! A store directory's files with their bytes, searched for a text: what an attacker with the
//! disk would see after an erasure. Shared through `#[path]` by the ledger's tests and the CLI's.

use std::path::{Path, PathBuf};

/// Every regular file directly in `dir`, with its bytes.
pub fn all_bytes(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in fs_err::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            out.push((path.clone(), fs_err::read(&path).unwrap()));
        }
    }
    out
}

pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}
