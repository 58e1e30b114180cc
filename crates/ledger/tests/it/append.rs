use evicortex_core::{EventTime, TurnId};
use evicortex_ledger::{
    AppendError, AppendStatus, ConflictingRecord, EvidenceLedger, LedgerPosition,
};

use crate::fixture::{Store, turn};

/// S2: a record's id is its number in its namespace, so ids say nothing about other tenants.
#[test]
fn numbers_records_per_namespace_and_reads_back_in_order() {
    let store = Store::new();
    let batch = vec![
        turn("a", "s1", 0, "hello"),
        turn("b", "s1", 0, "other ns"),
        turn("a", "s1", 1, "world"),
    ];
    let receipt = store.ledger.append(&batch).unwrap();
    let ids: Vec<u64> = receipt.outcomes.iter().map(|o| o.id.raw()).collect();
    assert_eq!(ids, [1, 1, 2]);
    assert_eq!(receipt.head, Some(LedgerPosition::from_raw(3)));
    let a = store.ledger.evidence(&batch[0].namespace).unwrap();
    assert_eq!(a.iter().map(|e| e.turn.text.as_str()).collect::<Vec<_>>(), ["hello", "world"]);
    assert_eq!(a.iter().map(|e| e.id.raw()).collect::<Vec<_>>(), [1, 2]);
    let b = store.ledger.append(&[turn("b", "s1", 1, "again")]).unwrap();
    assert_eq!(b.outcomes[0].id, TurnId::from_raw(2));
    assert_eq!(
        store.ledger.namespace_head(&batch[1].namespace).unwrap(),
        Some(TurnId::from_raw(2))
    );
    assert_eq!(a[0].digest, receipt.outcomes[0].digest);
    assert_eq!(store.ledger.verify().unwrap().turns, 4);
}

#[test]
fn identical_reingest_is_a_no_op() {
    let store = Store::new();
    let batch = vec![turn("a", "s", 0, "x"), turn("a", "s", 1, "y")];
    let first = store.ledger.append(&batch).unwrap();
    let again = store.ledger.append(&batch).unwrap();
    assert_eq!(again.appended(), 0);
    assert_eq!(again.already_present(), 2);
    assert!(again.outcomes.iter().all(|o| o.status == AppendStatus::AlreadyPresent));
    assert_eq!(
        again.outcomes.iter().map(|o| (o.id, o.digest)).collect::<Vec<_>>(),
        first.outcomes.iter().map(|o| (o.id, o.digest)).collect::<Vec<_>>()
    );
    assert_eq!(store.ledger.stats().unwrap().records, 2);
}

#[test]
fn conflicting_content_refuses_the_whole_batch() {
    let store = Store::new();
    store.ledger.append(&[turn("a", "s", 0, "original")]).unwrap();
    let before = store.ledger.stats().unwrap();
    let batch = vec![turn("a", "s", 5, "new and fine"), turn("a", "s", 0, "rewritten")];
    let err = store.ledger.append(&batch).unwrap_err();
    assert!(
        matches!(
            err,
            AppendError::Conflict { index: 1, field: "text", existing: ConflictingRecord::Stored(id), .. }
                if id == TurnId::from_raw(1)
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "conflict: namespace a session \"s\" turn 0 is already stored as record #1 with a different text"
    );
    assert_eq!(store.ledger.stats().unwrap(), before, "nothing of the refused batch is stored");
    store.ledger.verify().unwrap();
}

#[test]
fn conflicts_inside_one_batch_are_refused_and_duplicates_collapse() {
    let store = Store::new();
    let mut other_time = turn("a", "s", 0, "x");
    other_time.time = EventTime::parse_rfc3339("2024-05-02T09:00:00Z").unwrap();
    let err = store.ledger.append(&[turn("a", "s", 0, "x"), other_time]).unwrap_err();
    assert!(
        matches!(
            err,
            AppendError::Conflict {
                index: 1,
                field: "time",
                existing: ConflictingRecord::InBatch(0),
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(store.ledger.stats().unwrap().records, 0);
    let receipt = store.ledger.append(&[turn("a", "s", 0, "x"), turn("a", "s", 0, "x")]).unwrap();
    assert_eq!(receipt.appended(), 1);
    assert_eq!(receipt.outcomes[1].id, receipt.outcomes[0].id);
}

#[test]
fn same_instant_in_another_offset_is_a_different_turn() {
    let store = Store::new();
    let mut a = turn("a", "s", 0, "x");
    a.time = EventTime::parse_rfc3339("2024-05-02T10:00:00+01:00").unwrap();
    store.ledger.append(std::slice::from_ref(&a)).unwrap();
    let mut b = a.clone();
    b.time = EventTime::parse_rfc3339("2024-05-02T09:00:00Z").unwrap();
    assert!(matches!(
        store.ledger.append(&[b]).unwrap_err(),
        AppendError::Conflict { field: "time", .. }
    ));
    assert_eq!(store.ledger.evidence(&a.namespace).unwrap()[0].turn.time.offset_seconds(), 3600);
}

#[test]
fn refuses_what_it_cannot_store_faithfully() {
    let store = Store::new();
    let mut t = turn("a", "s", 0, "x");
    t.time = EventTime::parse_rfc3339("2024-05-02T10:00:00.0000005Z").unwrap();
    let err = store.ledger.append(&[turn("a", "s", 1, "ok"), t]).unwrap_err();
    assert!(matches!(err, AppendError::InvalidTurn { index: 1, field: "time", .. }), "{err:?}");
    let mut t = turn("a", "s", 0, "x");
    t.time = EventTime::from_parts(0, -1).unwrap();
    let err = store.ledger.append(&[t]).unwrap_err();
    assert!(matches!(err, AppendError::InvalidTurn { index: 0, field: "time", .. }), "{err:?}");
    let mut t = turn("a", "s", 0, "x");
    t.speaker = Some(String::new());
    assert!(matches!(
        store.ledger.append(&[t]).unwrap_err(),
        AppendError::InvalidTurn { index: 0, field: "speaker", .. }
    ));
    assert_eq!(store.ledger.stats().unwrap().records, 0);
}

#[test]
fn keeps_texts_byte_for_byte() {
    let store = Store::new();
    let texts =
        ["", " ", "\u{0}nul inside", "tabs\tand\r\nCRLF\n", "emoji 👩‍👩‍👧 and RTL שלום", "\u{feff}bom"];
    let batch: Vec<_> =
        texts.iter().enumerate().map(|(i, t)| turn("a", "s", i as u32, t)).collect();
    store.ledger.append(&batch).unwrap();
    let back: Vec<String> = store
        .ledger
        .evidence(&batch[0].namespace)
        .unwrap()
        .into_iter()
        .map(|e| e.turn.text)
        .collect();
    assert_eq!(back, texts);
    store.ledger.verify().unwrap();
}

#[test]
fn data_survives_reopening() {
    let store = Store::new();
    store.ledger.append(&[turn("a", "s", 0, "durable")]).unwrap();
    let path = store.path();
    drop(store.ledger);
    let reopened = evicortex_ledger::Ledger::open(&path).unwrap();
    assert_eq!(reopened.verify().unwrap().turns, 1);
    let receipt = reopened.append(&[turn("a", "s", 1, "more")]).unwrap();
    assert_eq!(receipt.head, Some(LedgerPosition::from_raw(2)));
}

/// Group commit: batches committed in one transaction are each all-or-nothing, a refused batch
/// is rolled back alone, and later batches see earlier ones as if appended one after another.
#[test]
fn a_group_commits_good_batches_and_refuses_a_bad_one_alone() {
    let store = Store::new();
    store.ledger.append(&[turn("a", "s", 0, "original")]).unwrap();
    let first = vec![turn("a", "s", 1, "first")];
    let bad = vec![turn("a", "s", 2, "would be fine"), turn("a", "s", 0, "rewritten")];
    let mut unnamed = turn("a", "s", 3, "x");
    unnamed.speaker = Some(String::new());
    let invalid = vec![unnamed];
    let last =
        vec![turn("a", "s", 1, "first"), turn("b", "s", 0, "last"), turn("a", "s", 3, "after")];
    let results =
        store.ledger.append_group(&[&first, &bad, &invalid, &last]).expect("the group commits");
    assert_eq!(results.len(), 4);
    let first = results[0].as_ref().unwrap();
    assert_eq!(first.outcomes[0].id, TurnId::from_raw(2));
    assert!(
        matches!(results[1], Err(AppendError::Conflict { index: 1, field: "text", .. })),
        "{:?}",
        results[1]
    );
    assert!(matches!(results[2], Err(AppendError::InvalidTurn { .. })), "{:?}", results[2]);
    let last = results[3].as_ref().unwrap();
    assert_eq!(last.outcomes[0].status, AppendStatus::AlreadyPresent, "sees the earlier batch");
    assert_eq!(last.outcomes[0].id, TurnId::from_raw(2));
    assert_eq!(last.outcomes[1].id, TurnId::from_raw(1), "numbered in its own namespace");
    assert_eq!(last.outcomes[2].id, TurnId::from_raw(3), "the refused batch took no number");
    assert_eq!(last.head, Some(LedgerPosition::from_raw(4)), "nor a position");
    let a = store.ledger.evidence(&evicortex_core::Namespace::new("a").unwrap()).unwrap();
    assert_eq!(
        a.iter().map(|e| e.turn.text.as_str()).collect::<Vec<_>>(),
        ["original", "first", "after"]
    );
    assert_eq!(store.ledger.verify().unwrap().turns, 4);
}
