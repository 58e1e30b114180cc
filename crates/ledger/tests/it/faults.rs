//! An fsync that fails under a write: the write reports it, the handle refuses every later
//! write (whether the failed one reached the disk is unknown), and a reopened ledger verifies.
//! The failure comes from `tests/faultfs.c`, preloaded into a child run of this test.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use evicortex_core::Namespace;
use evicortex_ledger::{AppendError, EraseError, EraseTarget, Ledger, StorageError};

use crate::fixture::turn;

const CHILD: &str = "EVICORTEX_FAULT_CHILD_DIR";

/// Compiles the fault shim into `dir` with the system C compiler.
pub fn build_faultfs(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/faultfs.c");
    let out = dir.join("libfaultfs.so");
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-o"])
        .arg(&out)
        .arg(&source)
        .arg("-ldl")
        .status()
        .expect("the fault injection tests need a C compiler (`cc`) to build tests/faultfs.c");
    assert!(status.success(), "compiling {}", source.display());
    out
}

#[test]
fn a_failed_fsync_poisons_the_writer_until_the_ledger_is_reopened() {
    if let Ok(dir) = std::env::var(CHILD) {
        return child(Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let shim = build_faultfs(dir.path());
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "faults::a_failed_fsync_poisons_the_writer_until_the_ledger_is_reopened"])
        .args(["--nocapture", "--test-threads", "1"])
        .env(CHILD, dir.path())
        .env("FAULTFS_CONTROL", dir.path().join("control"))
        .env("LD_PRELOAD", &shim)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the child run failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let fired = fs_err::read_to_string(dir.path().join("control.fired")).unwrap();
    assert!(fired.starts_with("fsync "), "{fired}");
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    ledger.verify().unwrap();
    let texts: Vec<String> = ledger
        .evidence(&Namespace::new("a").unwrap())
        .unwrap()
        .into_iter()
        .map(|e| e.turn.text)
        .collect();
    assert_eq!(texts, ["before", "after reopening"]);
}

/// Runs under the shim: `control` arms the next fsync to fail.
fn child(dir: &Path) {
    let path = dir.join("ledger.sqlite");
    let ledger = Ledger::open(&path).unwrap();
    ledger.append(&[turn("a", "s", 0, "before")]).unwrap();
    fs_err::write(dir.join("control"), "fsync 1\n").unwrap();
    let err = ledger.append(&[turn("a", "s", 1, "lost")]).unwrap_err();
    assert!(
        matches!(&err, AppendError::Storage(s) if s.is_io_failure()),
        "the failed fsync is reported: {err:?}"
    );
    assert!(!dir.join("control").exists(), "the fault fired once");
    // The disk works again, but this handle does not carry on as if nothing happened.
    let err = ledger.append(&[turn("a", "s", 2, "after")]).unwrap_err();
    assert!(matches!(&err, AppendError::Storage(StorageError::Poisoned { .. })), "{err:?}");
    assert!(err.to_string().contains("reopen the store"), "{err}");
    let err = ledger.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap_err();
    assert!(matches!(&err, EraseError::Storage(StorageError::Poisoned { .. })), "{err:?}");
    assert!(ledger.poisoned().is_some());
    drop(ledger);
    let ledger = Ledger::open(&path).unwrap();
    ledger.verify().unwrap();
    assert!(
        ledger
            .evidence(&Namespace::new("a").unwrap())
            .unwrap()
            .iter()
            .all(|e| e.turn.text != "lost"),
        "the append that reported failure is not stored"
    );
    ledger.append(&[turn("a", "s", 1, "after reopening")]).unwrap();
}
