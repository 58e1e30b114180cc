use evicortex::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use evicortex::{IngestOptions, parse_jsonl};
use proptest::prelude::*;

use crate::test_store::TestStore;

fn arb_turn() -> impl Strategy<Value = Turn> {
    (
        prop::sample::select(vec!["alice", "bob", "conv-26"]),
        "\\PC{1,16}",
        prop::sample::select(Role::ALL.to_vec()),
        prop::option::of("\\PC{1,12}"),
        any::<String>(),
        -2_000_000_000_000_000i64..4_000_000_000_000_000,
        (-1_439i32..1_440).prop_map(|m| m * 60),
        prop::collection::btree_map("[a-z]{1,4}", "\\PC{0,8}", 0..3),
    )
        .prop_map(|(ns, session, role, speaker, text, micros, offset, meta)| Turn {
            namespace: Namespace::new(ns).unwrap(),
            session: SessionId::new(&session).unwrap(),
            turn: TurnIndex::new(0),
            role,
            speaker,
            text,
            time: EventTime::from_parts(micros, offset).unwrap(),
            meta: meta.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect(),
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn export_is_taken_back_by_ingest_byte_for_byte(mut turns in prop::collection::vec(arb_turn(), 1..20)) {
        for (i, t) in turns.iter_mut().enumerate() {
            t.turn = TurnIndex::new(i as u32);
        }
        let store = TestStore::new();
        let memory = store.open();
        memory.append(&turns).unwrap();
        let mut exported = Vec::new();
        let summary = memory.export(None, &mut exported).unwrap();
        prop_assert_eq!(summary.turns as usize, turns.len());

        let parsed = parse_jsonl("export", &exported, &IngestOptions::default()).unwrap();
        prop_assert_eq!(&parsed, &turns);
        for (p, t) in parsed.iter().zip(&turns) {
            prop_assert_eq!(p.text.as_bytes(), t.text.as_bytes());
            prop_assert_eq!(p.time.offset_seconds(), t.time.offset_seconds());
        }

        // A second store fed the export exports the same bytes.
        let copy_store = TestStore::new();
        let copy = copy_store.open();
        copy.append(&parsed).unwrap();
        let mut again = Vec::new();
        copy.export(None, &mut again).unwrap();
        prop_assert_eq!(exported, again);
        copy.verify().unwrap();
    }
}

#[test]
fn export_filters_by_namespace() {
    let store = TestStore::new();
    let memory = store.open();
    let input = concat!(
        r#"{"namespace":"a","session":"s","turn":0,"role":"user","text":"for a","time":"2024-01-01T00:00:00Z"}"#,
        "\n",
        r#"{"namespace":"b","session":"s","turn":0,"role":"user","text":"for b","time":"2024-01-01T00:00:00Z"}"#,
        "\n"
    );
    memory
        .append(&parse_jsonl("in", input.as_bytes(), &IngestOptions::default()).unwrap())
        .unwrap();
    let mut out = Vec::new();
    memory.export(Some(&Namespace::new("b").unwrap()), &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), input.lines().nth(1).unwrap().to_owned() + "\n");
}
