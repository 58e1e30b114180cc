//! Group commit: several batches in one transaction, each under its own savepoint.

use evicortex_core::TurnId;
use evicortex_ledger::EvidenceLedger;
use evicortex_postgres::AppendError;

use crate::support::{TestDb, count, turn};

#[test]
fn a_group_commits_once_and_a_refused_batch_rolls_back_alone() {
    let db = TestDb::new();
    let pg = db.ledger();
    pg.append(&[turn("alice", "s0", 0, "stored before")]).unwrap();

    let first = [turn("alice", "s1", 0, "one"), turn("alice", "s1", 1, "two")];
    // The same key as the stored turn with another text: a conflict.
    let conflicting = [turn("alice", "s1", 2, "three"), turn("alice", "s0", 0, "rewritten")];
    let third = [turn("alice", "s2", 0, "four"), turn("bob", "s1", 0, "five")];
    let mut invalid = turn("alice", "s3", 0, "six");
    invalid.speaker = Some(String::new());
    let fourth = [invalid];
    // A turn of the first batch again: already present, seen across savepoints.
    let fifth = [turn("alice", "s1", 1, "two")];

    let results = pg.append_group(&[&first, &conflicting, &third, &fourth, &fifth]).unwrap();

    assert_eq!(results[0].as_ref().unwrap().appended(), 2);
    assert!(matches!(results[1], Err(AppendError::Conflict { field: "text", .. })), "{results:?}");
    let third_receipt = results[2].as_ref().unwrap();
    assert_eq!(third_receipt.appended(), 2);
    // Numbers continue from the first batch: the refused one left no gap.
    assert_eq!(third_receipt.outcomes[0].id, TurnId::from_raw(4));
    assert_eq!(third_receipt.outcomes[1].id, TurnId::from_raw(1));
    assert!(
        matches!(results[3], Err(AppendError::InvalidTurn { field: "speaker", .. })),
        "{results:?}"
    );
    assert_eq!(results[4].as_ref().unwrap().already_present(), 1);

    assert_eq!(count(&db, "SELECT count(*) FROM records"), 5);
    assert_eq!(count(&db, "SELECT count(*) FROM records WHERE text = 'three'"), 0);
    let report = pg.verify().unwrap();
    assert_eq!(report.records, 5);
    assert_eq!(pg.head().unwrap(), third_receipt.head);
}
