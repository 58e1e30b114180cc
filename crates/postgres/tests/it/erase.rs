//! Erasure semantics: the embedded ledger's, target by target.

use evicortex_core::{SessionId, TextDigest, TurnId};
use evicortex_ledger::{EraseTarget, EvidenceLedger};
use evicortex_postgres::EraseError;

use crate::support::{TestDb, count, ns, turn};

#[test]
fn erasing_a_record_a_session_and_a_namespace() {
    let db = TestDb::new();
    let pg = db.ledger();
    pg.append(&[
        turn("alice", "s1", 0, "same words"),
        turn("alice", "s1", 1, "alice s1 t1"),
        turn("alice", "s2", 0, "same words"),
        turn("alice", "s2", 1, "alice s2 t1"),
        turn("bob", "s1", 0, "bob's"),
    ])
    .unwrap();

    let one = pg.erase(&EraseTarget::Record(ns("alice"), TurnId::from_raw(2))).unwrap();
    assert_eq!(one.redaction, Some(TurnId::from_raw(5)), "numbered in alice's namespace");
    assert_eq!(one.erased.len(), 1);
    assert_eq!(one.erased[0].id, TurnId::from_raw(2));
    assert_eq!(one.erased_texts, [TextDigest::of("alice s1 t1")]);

    let session =
        pg.erase(&EraseTarget::Session(ns("alice"), SessionId::new("s1").unwrap())).unwrap();
    assert_eq!((session.erased.len(), session.already_erased), (1, 1));
    // Every erased text, though s2 still holds "same words".
    assert_eq!(session.erased_texts, [TextDigest::of("same words")]);

    let all = pg.erase(&EraseTarget::Namespace(ns("alice"))).unwrap();
    assert_eq!(all.erased.len(), 2);
    assert!(all.erased_texts.contains(&TextDigest::of("same words")));
    let again = pg.erase(&EraseTarget::Namespace(ns("alice"))).unwrap();
    assert_eq!((again.redaction, again.erased.len(), again.already_erased), (None, 0, 4));

    assert!(pg.evidence(&ns("alice")).unwrap().is_empty());
    assert_eq!(pg.evidence(&ns("bob")).unwrap().len(), 1);
    assert_eq!(
        count(
            &db,
            "SELECT count(*) FROM records WHERE text IS NOT NULL OR salt IS NOT NULL \
             OR meta IS NOT NULL OR speaker IS NOT NULL"
        ),
        1,
        "only bob's turn keeps its content"
    );
    let report = pg.verify().unwrap();
    assert_eq!((report.turns, report.erased_turns, report.redactions), (1, 4, 3));
}

#[test]
fn what_is_not_there_or_not_a_turn_is_refused() {
    let db = TestDb::new();
    let pg = db.ledger();
    pg.append(&[turn("alice", "s1", 0, "x")]).unwrap();
    assert!(matches!(
        pg.erase(&EraseTarget::Namespace(ns("nobody"))).unwrap_err(),
        EraseError::NotFound { .. }
    ));
    assert!(matches!(
        pg.erase(&EraseTarget::Record(ns("alice"), TurnId::from_raw(9))).unwrap_err(),
        EraseError::NotFound { .. }
    ));
    pg.erase(&EraseTarget::Record(ns("alice"), TurnId::from_raw(1))).unwrap();
    assert!(matches!(
        pg.erase(&EraseTarget::Record(ns("alice"), TurnId::from_raw(2))).unwrap_err(),
        EraseError::NotATurn { .. }
    ));
    pg.verify().unwrap();
}

#[test]
fn a_server_that_would_keep_the_texts_is_refused_before_anything_is_erased() {
    let db = TestDb::new();
    // Settable per database, so the other tests' databases keep the server's settings.
    db.raw()
        .batch_execute(&format!(
            "ALTER DATABASE {} SET log_parameter_max_length_on_error = 64",
            db.name()
        ))
        .unwrap();
    let pg = db.ledger();
    pg.append(&[turn("alice", "s1", 0, "stays")]).unwrap();
    let err = pg.erase(&EraseTarget::Namespace(ns("alice"))).unwrap_err();
    match &err {
        EraseError::ServerRetainsBytes { problems } => {
            assert_eq!(problems.len(), 1, "{problems:?}");
            assert!(problems[0].contains("log_parameter_max_length_on_error is 64"), "{err}");
        }
        other => panic!("expected a refusal, got {other}"),
    }
    assert!(err.to_string().contains("nothing was erased"), "{err}");
    assert_eq!(pg.evidence(&ns("alice")).unwrap().len(), 1);
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 1);
}

#[test]
fn a_scrub_left_pending_is_finished_on_connect() {
    let db = TestDb::new();
    let pg = db.ledger();
    pg.append(&[turn("alice", "s1", 0, "x")]).unwrap();
    pg.erase(&EraseTarget::Namespace(ns("alice"))).unwrap();
    assert_eq!(count(&db, "SELECT count(*) FROM ledger_meta WHERE key = 'scrub_pending'"), 0);
    // As a crash between the erasure's commit and the end of its scrub leaves it.
    db.raw()
        .execute("INSERT INTO ledger_meta (key, value) VALUES ('scrub_pending', '2 1')", &[])
        .unwrap();
    drop(pg);
    let pg = db.ledger();
    assert_eq!(count(&db, "SELECT count(*) FROM ledger_meta WHERE key = 'scrub_pending'"), 0);
    pg.verify().unwrap();
}
