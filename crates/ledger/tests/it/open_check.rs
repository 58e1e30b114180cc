use evicortex_ledger::{EvidenceLedger, Ledger, OpenError, OpenMode, VerifyError};

use crate::fixture::{Store, raw, turn};

fn stored() -> Store {
    let store = Store::new();
    store.ledger.append(&[turn("a", "s", 0, "one"), turn("a", "s", 1, "two")]).unwrap();
    store
}

#[test]
fn refuses_a_head_that_does_not_match_the_last_record_but_allows_inspection() {
    let store = stored();
    let path = store.path();
    drop(store.ledger);
    raw(&path).execute("DELETE FROM records WHERE seq = 2", []).unwrap();
    let err = Ledger::open(&path).unwrap_err();
    assert!(matches!(err, OpenError::Corrupted { .. }), "{err:?}");
    assert!(
        err.to_string().contains("metadata says the head is record #2, the last record is #1"),
        "{err}"
    );

    let inspected = Ledger::open_with(&path, OpenMode::Inspect).unwrap();
    assert!(inspected.open_problem().is_some());
    assert!(matches!(inspected.verify().unwrap_err(), VerifyError::BadHead { .. }));
    assert!(inspected.append(&[turn("a", "s", 9, "x")]).is_err(), "inspection never writes");
}

#[test]
fn refuses_a_tampered_chain_head() {
    let store = stored();
    let path = store.path();
    drop(store.ledger);
    raw(&path)
        .execute("UPDATE ledger_meta SET value = ?1 WHERE key = 'chain_head'", ["00".repeat(32)])
        .unwrap();
    assert!(matches!(Ledger::open(&path).unwrap_err(), OpenError::Corrupted { .. }));
}

#[test]
fn refuses_an_unknown_format_version() {
    let store = stored();
    let path = store.path();
    drop(store.ledger);
    raw(&path)
        .execute("UPDATE ledger_meta SET value = '4' WHERE key = 'format_version'", [])
        .unwrap();
    let err = Ledger::open(&path).unwrap_err();
    assert!(
        matches!(err, OpenError::UnsupportedFormat { ref found, supported: 3, .. } if found == "4"),
        "{err:?}"
    );
    assert!(matches!(
        Ledger::open_with(&path, OpenMode::Inspect).unwrap_err(),
        OpenError::UnsupportedFormat { .. }
    ));
}

#[test]
fn refuses_a_foreign_sqlite_file_and_a_missing_one_for_inspection() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.sqlite");
    raw(&path).execute_batch("CREATE TABLE t (x INTEGER);").unwrap();
    let err = Ledger::open(&path).unwrap_err();
    assert!(err.to_string().contains("not an EviCortex ledger"), "{err}");
    let missing = dir.path().join("missing.sqlite");
    assert!(matches!(
        Ledger::open_with(&missing, OpenMode::Inspect).unwrap_err(),
        OpenError::NotFound { .. }
    ));
    assert!(!missing.exists(), "inspection creates nothing");
}

#[test]
fn a_file_that_is_not_sqlite_is_a_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    fs_err::write(&path, vec![0x5a; 8192]).unwrap();
    match Ledger::open(&path).unwrap_err() {
        OpenError::Storage(e) => assert!(e.is_corruption(), "{e}"),
        other => panic!("expected a storage corruption, got {other:?}"),
    }
}

/// B5: a refused open leaves a foreign SQLite file exactly as it was (no switch to WAL, no
/// companion files), in both modes.
#[test]
fn a_refused_open_leaves_a_foreign_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    let conn = raw(&path);
    conn.execute_batch("CREATE TABLE x (a); INSERT INTO x VALUES (1);").unwrap();
    drop(conn);
    let before = fs_err::read(&path).unwrap();
    for mode in [OpenMode::ReadWrite, OpenMode::Inspect] {
        let err = Ledger::open_with(&path, mode).unwrap_err();
        assert!(
            matches!(&err, OpenError::Corrupted { detail, .. } if detail.contains("not an EviCortex ledger")),
            "{mode:?}: {err:?}"
        );
        assert!(fs_err::read(&path).unwrap() == before, "{mode:?} changed the file");
        let names: Vec<_> = fs_err::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["ledger.sqlite"], "{mode:?} left files behind");
    }
    let journal: String = raw(&path).query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(journal, "delete");
}

/// An empty database is a ledger to create for a writer, but nothing to inspect.
#[test]
fn inspecting_an_empty_database_is_an_integrity_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ledger.sqlite");
    fs_err::write(&path, b"").unwrap();
    let err = Ledger::open_with(&path, OpenMode::Inspect).unwrap_err();
    assert!(matches!(err, OpenError::Corrupted { .. }), "{err:?}");
    Ledger::open(&path).unwrap().verify().unwrap();
}

/// An EviCortex file whose tables were dropped: `verify` names it as an integrity failure, not
/// as an I/O error about a missing table.
#[test]
fn verify_of_a_ledger_without_its_tables_is_an_integrity_failure() {
    let store = stored();
    let path = store.path();
    drop(store.ledger);
    raw(&path).execute_batch("DROP TABLE records;").unwrap();
    let inspected = Ledger::open_with(&path, OpenMode::Inspect).unwrap();
    let err = inspected.verify().unwrap_err();
    assert!(
        matches!(&err, VerifyError::BadHead { detail } if detail.contains("table is missing")),
        "{err:?}"
    );
}

/// S4: the ledger and its WAL and shared-memory files are readable by their owner only, for a
/// new ledger and for an older one that was not.
#[cfg(unix)]
#[test]
fn ledger_files_are_private_to_their_owner() {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &std::path::Path| fs_err::metadata(p).unwrap().permissions().mode() & 0o777;
    let store = stored();
    let files = store.ledger.files();
    assert!(files.iter().all(|f| f.exists()), "the ledger is open: {files:?}");
    for file in &files {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
    let path = store.path();
    drop(store.ledger);
    fs_err::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(mode(&path), 0o600);
    for file in ledger.files().iter().filter(|f| f.exists()) {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }
}
