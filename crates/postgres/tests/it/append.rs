//! Append semantics: dedup, all-or-nothing batches, conflicts, erased turns, namespaces.

use evicortex_core::TurnId;
use evicortex_ledger::{
    AppendStatus, ConflictingRecord, EraseTarget, EvidenceLedger, ScanEvidence,
};
use evicortex_postgres::AppendError;

use crate::support::{TestDb, count, ns, turn};

#[test]
fn an_identical_turn_is_already_present() {
    let db = TestDb::new();
    let pg = db.ledger();
    let batch = [turn("alice", "s1", 0, "hello"), turn("alice", "s1", 1, "world")];
    let first = pg.append(&batch).unwrap();
    assert_eq!(first.appended(), 2);
    let again = pg.append(&batch).unwrap();
    assert_eq!((again.appended(), again.already_present()), (0, 2));
    for (a, b) in first.outcomes.iter().zip(&again.outcomes) {
        assert_eq!((a.id, a.digest), (b.id, b.digest));
        assert_eq!(b.status, AppendStatus::AlreadyPresent);
    }
    // Twice in one batch: stored once, the second answered as the first.
    let twice = pg.append(&[turn("alice", "s1", 2, "x"), turn("alice", "s1", 2, "x")]).unwrap();
    assert_eq!(twice.outcomes[0].status, AppendStatus::Appended);
    assert_eq!(twice.outcomes[1].status, AppendStatus::AlreadyPresent);
    assert_eq!(twice.outcomes[0].id, twice.outcomes[1].id);
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 3);
    assert_eq!(pg.verify().unwrap().records, 3);
}

#[test]
fn a_conflict_refuses_the_whole_batch_naming_the_record() {
    let db = TestDb::new();
    let pg = db.ledger();
    pg.append(&[turn("alice", "s1", 0, "original"), turn("alice", "s1", 1, "second")]).unwrap();
    let head = pg.head().unwrap();

    let err = pg
        .append(&[turn("alice", "s2", 0, "new and fine"), turn("alice", "s1", 1, "rewritten")])
        .unwrap_err();
    match &err {
        AppendError::Conflict { index, existing, field, .. } => {
            assert_eq!(*index, 1);
            assert_eq!(*existing, ConflictingRecord::Stored(TurnId::from_raw(2)));
            assert_eq!(*field, "text");
        }
        other => panic!("expected a conflict, got {other}"),
    }
    assert!(err.to_string().contains("record #2"), "{err}");
    assert_eq!(pg.head().unwrap(), head, "nothing of the batch was stored");
    assert_eq!(pg.evidence(&ns("alice")).unwrap().len(), 2);
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 2);

    let in_batch =
        pg.append(&[turn("bob", "s1", 0, "one"), turn("bob", "s1", 0, "another")]).unwrap_err();
    assert!(matches!(
        in_batch,
        AppendError::Conflict { index: 1, existing: ConflictingRecord::InBatch(0), .. }
    ));
    assert!(pg.evidence(&ns("bob")).unwrap().is_empty());
    pg.verify().unwrap();
}

#[test]
fn what_cannot_be_stored_faithfully_is_refused_by_field() {
    let db = TestDb::new();
    let pg = db.ledger();
    let mut t = turn("alice", "s1", 0, "nul \0 inside");
    let err = pg.append(&[turn("alice", "s1", 1, "fine"), t.clone()]).unwrap_err();
    assert!(matches!(err, AppendError::InvalidTurn { index: 1, field: "text", .. }), "{err}");
    t.text = "fine".to_owned();
    t.time = evicortex_core::EventTime::parse_rfc3339("2024-05-02T10:00:00.0000001Z").unwrap();
    let err = pg.append(&[t]).unwrap_err();
    assert!(matches!(err, AppendError::InvalidTurn { index: 0, field: "time", .. }), "{err}");
    assert_eq!(pg.head().unwrap(), None);
}

#[test]
fn an_erased_turn_cannot_be_appended_again() {
    let db = TestDb::new();
    let pg = db.ledger();
    let t = turn("alice", "s1", 0, "to be erased");
    pg.append(std::slice::from_ref(&t)).unwrap();
    pg.erase(&EraseTarget::Record(ns("alice"), TurnId::from_raw(1))).unwrap();
    let err = pg.append(&[turn("alice", "s9", 0, "new"), t]).unwrap_err();
    assert!(
        matches!(
            err,
            AppendError::Erased { index: 1, existing, .. } if existing == TurnId::from_raw(1)
        ),
        "{err}"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 2, "the turn and its redaction");
}

#[test]
fn namespaces_are_numbered_and_read_apart() {
    let db = TestDb::new();
    let pg = db.ledger();
    let receipt = pg
        .append(&[
            turn("alice", "s1", 0, "a1"),
            turn("bob", "s1", 0, "b1"),
            turn("alice", "s1", 1, "a2"),
            turn("bob", "s1", 1, "b2"),
            turn("bob", "s1", 2, "b3"),
        ])
        .unwrap();
    let ids: Vec<u64> = receipt.outcomes.iter().map(|o| o.id.raw()).collect();
    assert_eq!(ids, [1, 1, 2, 2, 3], "each namespace counts its own records");
    let alice: Vec<String> =
        pg.evidence(&ns("alice")).unwrap().into_iter().map(|e| e.turn.text).collect();
    assert_eq!(alice, ["a1", "a2"]);
    assert_eq!(pg.namespace_head(&ns("bob")).unwrap(), Some(TurnId::from_raw(3)));
    assert_eq!(pg.namespace_head(&ns("carol")).unwrap(), None);

    pg.erase(&EraseTarget::Namespace(ns("bob"))).unwrap();
    assert_eq!(pg.namespaces().unwrap(), [ns("alice")]);
    assert_eq!(pg.evidence(&ns("alice")).unwrap().len(), 2, "untouched by bob's erasure");
    assert!(pg.evidence(&ns("bob")).unwrap().is_empty());
    assert_eq!(pg.namespace_head(&ns("bob")).unwrap(), Some(TurnId::from_raw(4)), "its redaction");
    let next = pg.append(&[turn("alice", "s2", 0, "a3")]).unwrap();
    assert_eq!(next.outcomes[0].id, TurnId::from_raw(3));

    let mut after_first = Vec::new();
    pg.for_each_evidence(&ns("alice"), Some(TurnId::from_raw(1)), |e| {
        after_first.push((e.id.raw(), e.turn.text));
        Ok::<(), evicortex_postgres::ReadError>(())
    })
    .unwrap();
    assert_eq!(after_first, [(2, "a2".to_owned()), (3, "a3".to_owned())]);

    let mut seen = Vec::new();
    pg.for_each_evidence_since(
        None,
        Some(evicortex_ledger::LedgerPosition::from_raw(2)),
        |p, e| {
            seen.push((p.raw(), e.turn.text));
            Ok::<(), evicortex_postgres::ReadError>(())
        },
    )
    .unwrap();
    assert_eq!(seen, [(3, "a2".to_owned()), (7, "a3".to_owned())]);
    pg.verify().unwrap();
}

#[test]
fn a_batch_larger_than_one_statement_is_looked_up_and_stored_whole() {
    // The lookup and the insert send a thousand keys or rows per statement.
    let db = TestDb::new();
    let pg = db.ledger();
    let text = |i: u32| format!("turn {i}");
    let first: Vec<_> = (0..2_500).map(|i| turn("alice", "s1", i, &text(i))).collect();
    let receipt = pg.append(&first).unwrap();
    assert_eq!(receipt.appended(), 2_500);
    let ids: Vec<u64> = receipt.outcomes.iter().map(|o| o.id.raw()).collect();
    assert_eq!(ids, (1..=2_500).collect::<Vec<u64>>());

    // Stored turns, new ones and in-batch repeats, interleaved across statement boundaries.
    let mut second = Vec::new();
    for i in 2_000..3_200 {
        second.push(turn("alice", "s1", i, &text(i)));
        if i % 7 == 0 {
            second.push(turn("alice", "s1", i, &text(i)));
        }
    }
    let receipt = pg.append(&second).unwrap();
    assert_eq!(receipt.appended(), 700);
    let mut seen = std::collections::HashSet::new();
    for (t, outcome) in second.iter().zip(&receipt.outcomes) {
        let i = t.turn.raw();
        assert_eq!(outcome.id.raw(), u64::from(i) + 1, "turn {i}");
        let appended = i >= 2_500 && seen.insert(i);
        let expected = if appended { AppendStatus::Appended } else { AppendStatus::AlreadyPresent };
        assert_eq!(outcome.status, expected, "turn {i}");
    }
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 3_200);

    // A conflict with a stored turn far into the batch refuses all of it, naming its index.
    let mut third: Vec<_> = (3_200..4_500).map(|i| turn("alice", "s1", i, &text(i))).collect();
    third.push(turn("alice", "s1", 1_999, "rewritten"));
    let err = pg.append(&third).unwrap_err();
    assert!(
        matches!(
            err,
            AppendError::Conflict { index: 1_300, existing: ConflictingRecord::Stored(id), field: "text", .. }
                if id == TurnId::from_raw(2_000)
        ),
        "{err}"
    );
    assert_eq!(count(&db, "SELECT count(*) FROM records"), 3_200);
    let texts: Vec<String> =
        pg.evidence(&ns("alice")).unwrap().into_iter().map(|e| e.turn.text).collect();
    assert_eq!(texts, (0..3_200).map(text).collect::<Vec<_>>());
    assert_eq!(pg.verify().unwrap().records, 3_200);
}

#[test]
fn a_batch_of_long_turns_split_by_text_bytes_is_stored_whole() {
    // 40 turns of 1 MiB: more text than one insert statement takes (32 MiB), so two statements.
    let db = TestDb::new();
    let pg = db.ledger();
    let text = |i: u32| format!("{i:>4}").repeat(1 << 18);
    let batch: Vec<_> = (0..40).map(|i| turn("alice", "s1", i, &text(i))).collect();
    assert_eq!(pg.append(&batch).unwrap().appended(), 40);
    let stored: Vec<String> =
        pg.evidence(&ns("alice")).unwrap().into_iter().map(|e| e.turn.text).collect();
    assert_eq!(stored, (0..40).map(text).collect::<Vec<_>>());
    assert_eq!(pg.verify().unwrap().records, 40);
}
