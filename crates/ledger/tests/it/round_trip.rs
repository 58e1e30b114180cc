use std::collections::BTreeMap;

use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use evicortex_ledger::{EvidenceLedger, Ledger, OpenMode};
use proptest::prelude::*;

/// An arbitrary turn; the turn index is set by the caller to keep keys unique.
pub fn arb_turn() -> impl Strategy<Value = Turn> {
    (
        prop::sample::select(vec!["alice", "bob", "tenant:42@eu", "q_7a0d-abs"]),
        "\\PC{1,24}",
        prop::sample::select(Role::ALL.to_vec()),
        prop::option::of("\\PC{1,16}"),
        any::<String>(),
        -62_000_000_000_000_000i64..253_000_000_000_000_000i64,
        (-1_439i32..1_440).prop_map(|m| m * 60),
        prop::collection::btree_map("[a-z_]{1,6}", arb_json(), 0..3),
    )
        .prop_map(|(ns, session, role, speaker, text, micros, offset, meta)| Turn {
            namespace: Namespace::new(ns).unwrap(),
            session: SessionId::new(&session).unwrap(),
            turn: TurnIndex::new(0),
            role,
            speaker,
            text,
            time: EventTime::from_parts(micros, offset).unwrap(),
            meta: meta.into_iter().collect(),
        })
}

fn arb_json() -> impl Strategy<Value = serde_json::Value> {
    prop_oneof![
        Just(serde_json::Value::Null),
        any::<bool>().prop_map(serde_json::Value::Bool),
        any::<i64>().prop_map(serde_json::Value::from),
        (-1e9f64..1e9).prop_map(serde_json::Value::from),
        "\\PC{0,12}".prop_map(serde_json::Value::String),
        prop::collection::vec(any::<u8>().prop_map(serde_json::Value::from), 0..3)
            .prop_map(serde_json::Value::Array),
    ]
}

/// Batches of turns with unique (namespace, session, turn) keys.
pub fn arb_batches(max_batches: usize, max_turns: usize) -> impl Strategy<Value = Vec<Vec<Turn>>> {
    prop::collection::vec(prop::collection::vec(arb_turn(), 1..max_turns), 1..max_batches).prop_map(
        |batches| {
            let mut next = 0u32;
            batches
                .into_iter()
                .map(|batch| {
                    batch
                        .into_iter()
                        .map(|mut t| {
                            t.turn = TurnIndex::new(next);
                            next += 1;
                            t
                        })
                        .collect()
                })
                .collect()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn append_then_read_back_and_verify(batches in arb_batches(5, 12)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.sqlite");
        let ledger = Ledger::open(&path).unwrap();
        let mut expected: BTreeMap<Namespace, Vec<Turn>> = BTreeMap::new();
        let mut total = 0;
        for batch in &batches {
            let receipt = ledger.append(batch).unwrap();
            prop_assert_eq!(receipt.appended(), batch.len());
            for t in batch {
                expected.entry(t.namespace.clone()).or_default().push(t.clone());
            }
            total += batch.len();
        }
        // Re-appending everything is a no-op.
        for batch in &batches {
            prop_assert_eq!(ledger.append(batch).unwrap().appended(), 0);
        }
        drop(ledger);
        let ledger = Ledger::open_with(&path, OpenMode::Inspect).unwrap();
        let report = ledger.verify().unwrap();
        prop_assert_eq!(report.turns as usize, total);
        for (ns, turns) in &expected {
            let back: Vec<Turn> = ledger.evidence(ns).unwrap().into_iter().map(|e| e.turn).collect();
            prop_assert_eq!(&back, turns);
            for (b, t) in back.iter().zip(turns) {
                prop_assert_eq!(b.time.offset_seconds(), t.time.offset_seconds());
            }
        }
        prop_assert_eq!(ledger.stats().unwrap().namespaces as usize, expected.len());
    }
}
