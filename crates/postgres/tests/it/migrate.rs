//! An embedded ledger copied into an empty PostgreSQL ledger: the same records, digests, chain
//! and verify report; a non-empty target and a tampered source refused with nothing written.

use evicortex_core::{SessionId, TurnId};
use evicortex_ledger::{EraseTarget, EvidenceLedger, Ledger, VerifyError};
use evicortex_postgres::{ImportError, verify_migration};

use crate::support::{TestDb, count, ns, turn};

/// Three namespaces, a duplicate append, an erased session and an erased record.
fn embedded_ledger(dir: &tempfile::TempDir) -> Ledger {
    let ledger = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let batch = vec![
        turn("alice", "s1", 0, "I moved to Lisbon in May."),
        turn("alice", "s1", 1, "Nice! How is the weather?"),
        turn("bob", "s1", 0, "Bob's first turn, with unicode: é ✓ 日本"),
        turn("alice", "s2", 3, "A second session."),
        turn("carol", "c", 0, "Carol's secret is 4711."),
        turn("carol", "c", 1, "Carol keeps this one."),
    ];
    ledger.append(&batch).unwrap();
    // Appending the same turns again adds nothing: the copy must not either.
    assert_eq!(ledger.append(&batch).unwrap().appended(), 0);
    ledger.erase(&EraseTarget::Session(ns("alice"), SessionId::new("s1").unwrap())).unwrap();
    ledger.erase(&EraseTarget::Record(ns("carol"), TurnId::from_raw(1))).unwrap();
    ledger
        .append(&[turn("bob", "s9", 7, "  after the erasures  "), turn("alice", "s2", 4, "more")])
        .unwrap();
    ledger
}

#[test]
fn a_copy_verifies_as_its_source_with_the_same_evidence() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = embedded_ledger(&dir);
    let db = TestDb::new();
    let pg = db.ledger();
    let mut calls = 0;
    let report = pg.import_ledger(&embedded, &mut |_, _| calls += 1).unwrap();
    assert!(calls > 0);
    let source = embedded.verify().unwrap();
    assert_eq!(
        (report.records, report.turns, report.erased_turns, report.redactions),
        (10, 5, 3, 2)
    );
    assert_eq!((report.head, report.chain_head), (source.head, source.chain_head));

    let check = verify_migration(&embedded, &pg).unwrap();
    assert_eq!(check.embedded, check.postgres);
    assert_eq!(pg.verify().unwrap(), source);

    for name in ["alice", "bob", "carol"] {
        let copied = pg.evidence(&ns(name)).unwrap();
        assert_eq!(copied, embedded.evidence(&ns(name)).unwrap(), "namespace {name}");
        assert_eq!(
            pg.namespace_head(&ns(name)).unwrap(),
            embedded.namespace_head(&ns(name)).unwrap()
        );
    }
    assert_eq!(pg.namespaces().unwrap(), embedded.namespaces().unwrap());
    assert_eq!(pg.head().unwrap(), embedded.head().unwrap());
    // Erased texts are absent from the copy too: no row holds them, nor a salt for them.
    assert_eq!(count(&db, "SELECT count(*) FROM records WHERE text LIKE '%Lisbon%'"), 0);
    assert_eq!(count(&db, "SELECT count(*) FROM records WHERE text LIKE '%4711%'"), 0);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM records WHERE erased_by IS NOT NULL AND salt IS NULL \
                    AND text IS NULL AND content_digest IS NOT NULL"
        ),
        3
    );
}

#[test]
fn appending_after_a_copy_continues_the_chain_and_the_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = embedded_ledger(&dir);
    let db = TestDb::new();
    let pg = db.ledger();
    pg.import_ledger(&embedded, &mut |_, _| {}).unwrap();
    let next = [turn("carol", "c", 2, "a new turn"), turn("dave", "d", 0, "a new tenant")];
    let pg_receipt = pg.append(&next).unwrap();
    let embedded_receipt = embedded.append(&next).unwrap();
    assert_eq!(pg_receipt.head, embedded_receipt.head);
    let ids =
        |r: &evicortex_ledger::AppendReceipt| r.outcomes.iter().map(|o| o.id).collect::<Vec<_>>();
    assert_eq!(ids(&pg_receipt), ids(&embedded_receipt));
    assert_eq!(ids(&pg_receipt), [TurnId::from_raw(4), TurnId::from_raw(1)]);
    // A turn already copied is recognised as present, an erased one as erased.
    assert_eq!(
        pg.append(&[turn("bob", "s1", 0, "Bob's first turn, with unicode: é ✓ 日本")])
            .unwrap()
            .appended(),
        0
    );
    assert!(pg.append(&[turn("alice", "s1", 0, "I moved to Lisbon in May.")]).is_err());
    let report = pg.verify().unwrap();
    assert_eq!(report.records, 12);
    // Salts differ per store, so the chains part after the copy; the copy itself matched.
    assert_eq!(pg.evidence(&ns("dave")).unwrap()[0].turn, next[1]);
}

#[test]
fn a_non_empty_postgres_ledger_is_refused_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = embedded_ledger(&dir);
    let db = TestDb::new();
    let pg = db.ledger();
    pg.append(&[turn("zed", "z", 0, "already here")]).unwrap();
    let before = pg.verify().unwrap();
    let err = pg.import_ledger(&embedded, &mut |_, _| {}).unwrap_err();
    assert!(matches!(err, ImportError::NotEmpty { records: 1, head: 1, .. }), "{err}");
    assert!(err.to_string().contains("not empty"), "{err}");
    assert_eq!(pg.verify().unwrap(), before);
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 1);
}

#[test]
fn a_tampered_embedded_ledger_is_refused_naming_the_record_with_nothing_written() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = embedded_ledger(&dir);
    let conn = rusqlite::Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    // Position 3 is bob's first turn; the records after it (a batch and more) are fine.
    conn.execute("UPDATE records SET text = 'forged' WHERE seq = 3", []).unwrap();
    drop(conn);
    let db = TestDb::new();
    let pg = db.ledger();
    let err = pg.import_ledger(&embedded, &mut |_, _| {}).unwrap_err();
    match &err {
        ImportError::Source(VerifyError::BadRecord { position, detail }) => {
            assert_eq!(position.raw(), 3);
            assert!(detail.contains("digest mismatch"), "{detail}");
        }
        other => panic!("expected the tampered record named, got {other}"),
    }
    assert!(err.to_string().contains("nothing was written"), "{err}");
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 0);
    let report = pg.verify().unwrap();
    assert_eq!((report.records, report.head), (0, None));
}

/// A source whose corruption is found after whole batches were copied leaves the PostgreSQL
/// ledger empty: the copy is one transaction.
#[test]
fn corruption_found_after_copied_batches_leaves_postgres_empty() {
    let dir = tempfile::tempdir().unwrap();
    let embedded = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let many: Vec<_> = (0..1200).map(|i| turn("alice", "long", i, &format!("turn {i}"))).collect();
    embedded.append(&many).unwrap();
    let conn = rusqlite::Connection::open(dir.path().join("ledger.sqlite")).unwrap();
    conn.execute("UPDATE records SET text = 'forged' WHERE seq = 1150", []).unwrap();
    drop(conn);
    let db = TestDb::new();
    let pg = db.ledger();
    let mut progress = Vec::new();
    let err =
        pg.import_ledger(&embedded, &mut |done, total| progress.push((done, total))).unwrap_err();
    assert!(
        matches!(&err, ImportError::Source(VerifyError::BadRecord { position, .. }) if position.raw() == 1150),
        "{err}"
    );
    assert_eq!(progress, [(500, 1200), (1000, 1200)], "two batches were copied before");
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 0);
    assert_eq!(pg.verify().unwrap().records, 0);
}
