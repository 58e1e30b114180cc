//! Rows altered behind the ledger's back are caught, naming the first bad record.

use evicortex_ledger::{EvidenceLedger, LedgerPosition};
use evicortex_postgres::{ConnectError, PgLedger, ReadError, VerifyError};

use crate::support::{TestDb, ns, turn};

fn three_turns(db: &TestDb) -> PgLedger {
    let pg = db.ledger();
    pg.append(&[
        turn("alice", "s1", 0, "one"),
        turn("alice", "s1", 1, "two"),
        turn("alice", "s1", 2, "three"),
    ])
    .unwrap();
    pg.verify().unwrap();
    pg
}

fn bad_record(err: VerifyError) -> (u64, String) {
    match err {
        VerifyError::BadRecord { position, detail } => (position.raw(), detail),
        other => panic!("expected a bad record, got {other}"),
    }
}

#[test]
fn verify_names_an_edited_text() {
    let db = TestDb::new();
    let pg = three_turns(&db);
    db.raw().execute("UPDATE records SET text = 'forged' WHERE seq = 2", &[]).unwrap();
    let err = pg.verify().unwrap_err();
    assert!(err.to_string().contains("record #2"), "{err}");
    let (position, detail) = bad_record(err);
    assert_eq!(position, 2);
    assert!(detail.contains("digest mismatch"), "{detail}");
    // Reads never serve it.
    match pg.evidence(&ns("alice")).unwrap_err() {
        ReadError::Corrupted { position, .. } => assert_eq!(position, LedgerPosition::from_raw(2)),
        other => panic!("expected corruption, got {other}"),
    }
}

#[test]
fn verify_names_a_rewritten_chain_hash_a_lost_record_and_a_false_head() {
    for (edit, bad, what) in [
        ("UPDATE records SET chain = digest WHERE seq = 3", 3, "chain hash mismatch"),
        ("DELETE FROM records WHERE seq = 2", 2, "missing"),
    ] {
        let db = TestDb::new();
        let pg = three_turns(&db);
        db.raw().execute(edit, &[]).unwrap();
        let (position, detail) = bad_record(pg.verify().unwrap_err());
        assert_eq!(position, bad, "{edit}");
        assert!(detail.contains(what), "{edit}: {detail}");
    }

    let db = TestDb::new();
    let pg = three_turns(&db);
    db.raw().execute("UPDATE ledger_meta SET value = '2' WHERE key = 'head_seq'", &[]).unwrap();
    assert!(matches!(pg.verify().unwrap_err(), VerifyError::BadHead { .. }));
    // A writer refuses to build on a head that does not match, and so does a new connection.
    assert!(pg.append(&[turn("alice", "s1", 3, "four")]).is_err());
    match PgLedger::connect(&db.url).unwrap_err() {
        ConnectError::Corrupted { detail, .. } => assert!(detail.contains("head"), "{detail}"),
        other => panic!("expected an integrity error, got {other}"),
    }
}

#[test]
fn a_salt_edit_is_a_digest_mismatch() {
    let db = TestDb::new();
    let pg = three_turns(&db);
    db.raw().execute("UPDATE records SET salt = sha256(salt) WHERE seq = 1", &[]).unwrap();
    let (position, detail) = bad_record(pg.verify().unwrap_err());
    assert_eq!(
        (position, detail.as_str()),
        (1, "digest mismatch: the record's content was altered")
    );
}
