use evicortex_ledger::{Ledger, OpenError, OpenMode, VerifyError};

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
        .execute("UPDATE ledger_meta SET value = '2' WHERE key = 'format_version'", [])
        .unwrap();
    let err = Ledger::open(&path).unwrap_err();
    assert!(
        matches!(err, OpenError::UnsupportedFormat { ref found, supported: 1, .. } if found == "2"),
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
