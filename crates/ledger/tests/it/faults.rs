//! An fsync that fails under a write: the write reports it, the handle refuses every later
//! write (whether the failed one reached the disk is unknown), and a reopened ledger verifies.
//! The failure comes from `tests/faultfs.c`, preloaded into a child run of this test.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use evicortex_core::{Namespace, SessionId};
use evicortex_ledger::{
    AppendError, EraseError, EraseTarget, EvidenceLedger, Ledger, StorageError,
};

use crate::{faultfs_shim::build_faultfs, fixture::turn};

const CHILD: &str = "EVICORTEX_FAULT_CHILD_DIR";

/// Runs test `name` of this binary again under the shim, `child_env` naming a fresh directory
/// whose `control` file the child arms; panics unless the child passes. Returns the directory
/// and the faults that fired.
fn run_child(name: &str, child_env: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let shim = build_faultfs(dir.path());
    let output = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", name, "--nocapture", "--test-threads", "1"])
        .env(child_env, dir.path())
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
    (dir, fired)
}

#[test]
fn a_failed_fsync_poisons_the_writer_until_the_ledger_is_reopened() {
    if let Ok(dir) = std::env::var(CHILD) {
        return child(Path::new(&dir));
    }
    let (dir, fired) =
        run_child("faults::a_failed_fsync_poisons_the_writer_until_the_ledger_is_reopened", CHILD);
    assert!(fired.starts_with("fsync "), "{fired}");
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let texts = verified_texts(&ledger);
    assert_eq!(texts, ["before", "after reopening"]);
}

/// The texts of namespace `a`, once `ledger` verifies.
fn verified_texts(ledger: &Ledger) -> Vec<String> {
    ledger.verify().unwrap();
    ledger
        .evidence(&Namespace::new("a").unwrap())
        .unwrap()
        .into_iter()
        .map(|e| e.turn.text)
        .collect()
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

const SCRUB_CHILD: &str = "EVICORTEX_SCRUB_CHILD_DIR";

/// A process that dies after an erasure's commit and before the end of its scrub leaves the
/// erased text in the files (found by the SIGKILL test of `evicortex erase`). Here the scrub's
/// first write to the main file fails and the handle is abandoned unclosed, as a killed process
/// leaves it (a clean close would checkpoint). The next read-write open finishes the scrub
/// before it returns: while it is open, the text is in no file.
#[test]
fn an_erasure_interrupted_before_its_scrub_is_finished_by_the_next_open() {
    if let Ok(dir) = std::env::var(SCRUB_CHILD) {
        return scrub_child(Path::new(&dir));
    }
    let (_dir, fired) = run_child(
        "faults::an_erasure_interrupted_before_its_scrub_is_finished_by_the_next_open",
        SCRUB_CHILD,
    );
    assert!(fired.starts_with("write "), "{fired}");
}

fn holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    crate::store_bytes::all_bytes(dir)
        .into_iter()
        .filter(|(_, bytes)| crate::store_bytes::contains(bytes, needle.as_bytes()))
        .map(|(path, _)| path)
        .collect()
}

fn scrub_child(dir: &Path) {
    let path = dir.join("ledger.sqlite");
    let secret = "SCRUB-MARKER the vault code is 90210 ".repeat(200);
    {
        let ledger = Ledger::open(&path).unwrap();
        ledger.append(&[turn("a", "kept", 0, "kept"), turn("a", "secret", 0, &secret)]).unwrap();
    }
    let ledger = Ledger::open(&path).unwrap();
    fs_err::write(dir.join("control"), "write ledger.sqlite 1\n").unwrap();
    let target =
        EraseTarget::Session(Namespace::new("a").unwrap(), SessionId::new("secret").unwrap());
    let err = ledger.erase(&target).unwrap_err();
    assert!(matches!(&err, EraseError::ScrubIncomplete { .. }), "{err:?}");
    // Killed: nothing is closed, so no checkpoint on close tidies up.
    std::mem::forget(ledger);
    assert!(
        !holding(dir, "SCRUB-MARKER").is_empty(),
        "the interrupted scrub left the erased text in a file (what this test is about)"
    );

    let reopened = Ledger::open(&path).unwrap();
    let left = holding(dir, "SCRUB-MARKER");
    assert!(left.is_empty(), "the erased text is still in {left:?} after the reopen");
    let texts = verified_texts(&reopened);
    assert_eq!(texts, ["kept"]);
    // The mark is gone: the next erasure starts from a clean state, and so does a third open.
    reopened.erase(&target).unwrap();
    drop(reopened);
    Ledger::open(&path).unwrap().verify().unwrap();
}
