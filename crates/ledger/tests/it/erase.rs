use evicortex_core::{Namespace, SessionId, TextDigest, TurnId};
use evicortex_ledger::{EraseError, EraseTarget, Ledger, OpenMode};

use crate::fixture::{Store, all_bytes, contains, turn};

/// A text long enough to spill into SQLite overflow pages, carrying a unique marker.
fn secret(marker: &str) -> String {
    format!("{marker} ").repeat(400)
}

#[test]
fn erasing_a_session_removes_its_text_from_every_file_and_verify_still_passes() {
    let store = Store::new();
    let mut keep = turn("alice", "s-keep", 0, "KEEP-MARKER-visible");
    keep.meta.insert("k".into(), "KEEP-META".into());
    let mut batch = vec![keep];
    for i in 0..20 {
        let mut t = turn("alice", "s-secret", i, &secret(&format!("SECRET-MARKER-{i:02}")));
        t.speaker = Some("SPEAKER-MARKER".into());
        t.meta.insert("note".into(), "META-MARKER".into());
        batch.push(t);
    }
    // Many batches so that old page images sit in the WAL.
    for chunk in batch.chunks(3) {
        store.ledger.append(chunk).unwrap();
    }
    let before = store.ledger.verify().unwrap();
    let target =
        EraseTarget::Session(Namespace::new("alice").unwrap(), SessionId::new("s-secret").unwrap());
    let receipt = store.ledger.erase(&target).unwrap();
    assert_eq!(receipt.erased.len(), 20);
    assert_eq!(receipt.redaction, Some(TurnId::from_raw(before.records + 1)));
    assert_eq!(receipt.orphaned_texts.len(), 20);

    // While the ledger is still open (WAL and shm present) and after closing it.
    for phase in ["open", "closed"] {
        let files = all_bytes(store.dir.path());
        assert!(!files.is_empty());
        for (path, bytes) in &files {
            for marker in ["SECRET-MARKER", "SPEAKER-MARKER", "META-MARKER"] {
                assert!(
                    !contains(bytes, marker.as_bytes()),
                    "{marker} still in {} ({phase})",
                    path.display()
                );
            }
        }
        assert!(
            files.iter().any(|(_, b)| contains(b, b"KEEP-MARKER-visible")),
            "kept text is still stored"
        );
        if phase == "open" {
            let report = store.ledger.verify().unwrap();
            assert_eq!((report.turns, report.erased_turns, report.redactions), (1, 20, 1));
        }
    }
    let path = store.path();
    drop(store.ledger);
    let reopened = Ledger::open_with(&path, OpenMode::Inspect).unwrap();
    reopened.verify().unwrap();
    assert_eq!(reopened.evidence(&Namespace::new("alice").unwrap()).unwrap().len(), 1);
}

#[test]
fn erasing_a_record_checks_its_namespace_and_erased_turns_stay_erased() {
    let store = Store::new();
    store.ledger.append(&[turn("a", "s", 0, "x"), turn("b", "s", 0, "y")]).unwrap();
    let a = Namespace::new("a").unwrap();
    let err = store.ledger.erase(&EraseTarget::Record(a.clone(), TurnId::from_raw(2))).unwrap_err();
    assert!(matches!(err, EraseError::WrongNamespace { .. }), "{err:?}");
    let err =
        store.ledger.erase(&EraseTarget::Record(a.clone(), TurnId::from_raw(99))).unwrap_err();
    assert!(matches!(err, EraseError::NotFound { .. }), "{err:?}");
    let err =
        store.ledger.erase(&EraseTarget::Namespace(Namespace::new("c").unwrap())).unwrap_err();
    assert!(matches!(err, EraseError::NotFound { .. }), "{err:?}");

    let receipt = store.ledger.erase(&EraseTarget::Record(a.clone(), TurnId::from_raw(1))).unwrap();
    assert_eq!(receipt.erased[0].text_digest, TextDigest::of("x"));
    let again = store.ledger.erase(&EraseTarget::Namespace(a.clone())).unwrap();
    assert_eq!((again.redaction, again.already_erased), (None, 1));
    let err = store.ledger.append(&[turn("a", "s", 0, "x")]).unwrap_err();
    assert!(matches!(err, evicortex_ledger::AppendError::Erased { .. }), "{err:?}");
    assert_eq!(store.ledger.stats().unwrap().turns, 1);
    store.ledger.verify().unwrap();
}

#[test]
fn a_text_still_held_elsewhere_is_not_orphaned() {
    let store = Store::new();
    store
        .ledger
        .append(&[
            turn("a", "s", 0, "shared"),
            turn("b", "s", 0, "shared"),
            turn("a", "s", 1, "own"),
        ])
        .unwrap();
    let receipt =
        store.ledger.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap();
    assert_eq!(receipt.erased.len(), 2);
    assert_eq!(receipt.orphaned_texts, vec![TextDigest::of("own")]);
}

#[test]
fn appending_after_an_erasure_continues_the_chain() {
    let store = Store::new();
    store.ledger.append(&[turn("a", "s", 0, "x")]).unwrap();
    store.ledger.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap();
    let receipt = store.ledger.append(&[turn("a", "s", 1, "y")]).unwrap();
    assert_eq!(receipt.head, Some(TurnId::from_raw(3)));
    let report = store.ledger.verify().unwrap();
    assert_eq!(
        (report.records, report.turns, report.erased_turns, report.redactions),
        (3, 1, 1, 1)
    );
}
