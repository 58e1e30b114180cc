use evicortex_core::{Namespace, SessionId, TextDigest, TurnId};
use evicortex_ledger::{EraseError, EraseTarget, EvidenceLedger, Ledger, LedgerPosition, OpenMode};

use crate::{
    fixture::{Store, raw, turn},
    store_bytes::{all_bytes, contains},
};

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
    assert_eq!(receipt.erased_texts.len(), 20);

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
    // Numbers are per namespace: "a" has no record 2, whatever "b" holds.
    let err = store.ledger.erase(&EraseTarget::Record(a.clone(), TurnId::from_raw(2))).unwrap_err();
    assert!(matches!(err, EraseError::NotFound { .. }), "{err:?}");
    let err =
        store.ledger.erase(&EraseTarget::Record(a.clone(), TurnId::from_raw(99))).unwrap_err();
    assert!(matches!(err, EraseError::NotFound { .. }), "{err:?}");
    let err =
        store.ledger.erase(&EraseTarget::Namespace(Namespace::new("c").unwrap())).unwrap_err();
    assert!(matches!(err, EraseError::NotFound { .. }), "{err:?}");

    let receipt = store.ledger.erase(&EraseTarget::Record(a.clone(), TurnId::from_raw(1))).unwrap();
    assert_eq!(receipt.erased[0].text_digest, TextDigest::of("x"));
    assert_eq!(receipt.redaction, Some(TurnId::from_raw(2)), "the redaction is a's record 2");
    assert_eq!(store.ledger.last_erasure(&a).unwrap(), Some(TurnId::from_raw(2)));
    let err = store.ledger.erase(&EraseTarget::Record(a.clone(), TurnId::from_raw(2))).unwrap_err();
    assert!(matches!(err, EraseError::NotATurn { .. }), "{err:?}");
    let again = store.ledger.erase(&EraseTarget::Namespace(a.clone())).unwrap();
    assert_eq!((again.redaction, again.already_erased), (None, 1));
    let err = store.ledger.append(&[turn("a", "s", 0, "x")]).unwrap_err();
    assert!(matches!(err, evicortex_ledger::AppendError::Erased { .. }), "{err:?}");
    assert_eq!(store.ledger.stats().unwrap().turns, 1);
    store.ledger.verify().unwrap();
}

#[test]
fn an_erasure_lists_every_erased_text_even_one_held_elsewhere() {
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
    // Every erased text, "shared" too: b's turn then has its derived data computed again.
    let mut texts = vec![TextDigest::of("own"), TextDigest::of("shared")];
    texts.sort();
    assert_eq!(receipt.erased_texts, texts);
}

#[test]
fn appending_after_an_erasure_continues_the_chain() {
    let store = Store::new();
    store.ledger.append(&[turn("a", "s", 0, "x")]).unwrap();
    store.ledger.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap();
    let receipt = store.ledger.append(&[turn("a", "s", 1, "y")]).unwrap();
    assert_eq!(receipt.head, Some(LedgerPosition::from_raw(3)));
    let report = store.ledger.verify().unwrap();
    assert_eq!(
        (report.records, report.turns, report.erased_turns, report.redactions),
        (3, 1, 1, 1)
    );
}

/// BLAKE3 of a turn's content the way format version 1 digested it: unsalted, so anyone holding
/// the file could confirm a guessed text against an erased record's kept digest.
fn unsalted_content_digest(text: &str, meta: &str) -> [u8; 32] {
    let mut bytes = b"EVCX".to_vec();
    bytes.extend_from_slice(&1u16.to_le_bytes());
    bytes.extend_from_slice(&[3, 0]);
    for s in [text, meta] {
        bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
        bytes.extend_from_slice(s.as_bytes());
    }
    *blake3::hash(&bytes).as_bytes()
}

/// S1: what an erased record keeps (its content digest, its record digest, the redaction's list)
/// must not confirm a guessed text: the content digest is salted, and the salt goes with the
/// text.
#[test]
fn an_erased_turns_kept_digest_confirms_no_guessed_text() {
    let store = Store::new();
    let secret = "My locker code is ZEBRAQUOKKA4711";
    store.ledger.append(&[turn("a", "s", 0, "public"), turn("a", "s", 1, secret)]).unwrap();
    let conn = raw(&store.path());
    let salt: Option<Vec<u8>> =
        conn.query_row("SELECT salt FROM records WHERE seq = 2", [], |r| r.get(0)).unwrap_or(None);
    drop(conn);
    store
        .ledger
        .erase(&EraseTarget::Record(Namespace::new("a").unwrap(), TurnId::from_raw(2)))
        .unwrap();

    let conn = raw(&store.path());
    let kept: Vec<u8> = conn
        .query_row("SELECT content_digest FROM records WHERE seq = 2", [], |r| r.get(0))
        .unwrap();
    assert_ne!(kept, unsalted_content_digest(secret, "{}"), "the kept digest confirms the text");
    let salt = salt.expect("a live turn has a salt column");
    assert_eq!(salt.len(), 32);
    let salt_left: Option<Vec<u8>> =
        conn.query_row("SELECT salt FROM records WHERE seq = 2", [], |r| r.get(0)).unwrap();
    assert_eq!(salt_left, None, "erasure clears the salt");
    drop(conn);
    for (path, bytes) in all_bytes(store.dir.path()) {
        assert!(!contains(&bytes, &salt), "the erased salt is still in {}", path.display());
        assert!(!contains(&bytes, secret.as_bytes()), "the text is still in {}", path.display());
    }
    store.ledger.verify().unwrap();
}

#[test]
fn erased_after_sees_only_erasures_past_the_position() {
    let store = Store::new();
    assert!(!store.ledger.erased_after(None).unwrap(), "an empty ledger erased nothing");
    let receipt =
        store.ledger.append(&[turn("alice", "s", 0, "one"), turn("alice", "s", 1, "two")]).unwrap();
    let head = store.ledger.head().unwrap();
    assert!(!store.ledger.erased_after(None).unwrap());
    let target = EraseTarget::Record(Namespace::new("alice").unwrap(), receipt.outcomes[0].id);
    let erased = store.ledger.erase(&target).unwrap();
    assert!(erased.redaction.is_some());
    let redaction = store.ledger.head().unwrap();
    assert!(store.ledger.erased_after(None).unwrap());
    assert!(store.ledger.erased_after(head).unwrap(), "the redaction came after the old head");
    assert!(!store.ledger.erased_after(redaction).unwrap(), "nothing after the redaction");
    store.ledger.append(&[turn("alice", "s", 2, "three")]).unwrap();
    assert!(!store.ledger.erased_after(redaction).unwrap(), "appends are not erasures");
}
