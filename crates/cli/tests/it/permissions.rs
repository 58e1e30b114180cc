//! S4: a store is readable by its owner only, whatever the umask: directory 0700, every file
//! 0600 (ledger, keys, and the embedding cache where the encoder is installed; the cache on its
//! own is tested in the facade's tests).

use std::{os::unix::fs::PermissionsExt, path::Path, process::Command};

use crate::cli::{BIN, sample};

fn mode(path: &Path) -> u32 {
    fs_err::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Runs the binary under `umask 000`, where files would otherwise be created world-writable.
fn run_with_open_umask(store: &Path, args: &str) {
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("umask 000 && exec \"$0\" --store \"$1\" {args}"))
        .arg(BIN)
        .arg(store)
        .env_remove("EVICORTEX_HOME")
        .status()
        .unwrap();
    assert!(status.success(), "{args}");
}

#[test]
fn store_files_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    run_with_open_umask(&store, &format!("ingest {}", sample().display()));
    run_with_open_umask(&store, "keys create --namespace alice");
    assert_eq!(mode(&store), 0o700, "{}", store.display());
    let files: Vec<_> = fs_err::read_dir(&store).unwrap().map(|e| e.unwrap().path()).collect();
    for name in ["ledger.sqlite", "keys.sqlite"] {
        assert!(files.iter().any(|f| f.ends_with(name)), "{name} missing: {files:?}");
    }
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
}
