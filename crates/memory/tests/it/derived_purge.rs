use std::sync::{Arc, Mutex};

use evicortex::{DerivedStore, DerivedStoreError, EraseError, EraseReceipt, EraseTarget, Memory};
use evicortex::{EventTime, Namespace, Role, SessionId, TextDigest, Turn, TurnIndex};

/// A derived store keyed by text digest, held in memory: the smallest real implementation of
/// the seam, with an optional injected failure.
#[derive(Debug, Default)]
struct TextKeyed {
    entries: Mutex<Vec<TextDigest>>,
    fail: bool,
}

impl DerivedStore for TextKeyed {
    fn name(&self) -> &'static str {
        "text-keyed test store"
    }
    fn purge(&self, receipt: &EraseReceipt) -> Result<(), DerivedStoreError> {
        if self.fail {
            return Err(DerivedStoreError::new(
                self.name(),
                evicortex::ErrorClass::Io,
                "injected failure",
            ));
        }
        self.entries.lock().unwrap().retain(|d| !receipt.orphaned_texts.contains(d));
        Ok(())
    }
}

fn turn(ns: &str, i: u32, text: &str) -> Turn {
    Turn {
        namespace: Namespace::new(ns).unwrap(),
        session: SessionId::new("s").unwrap(),
        turn: TurnIndex::new(i),
        role: Role::User,
        speaker: None,
        text: text.into(),
        time: EventTime::parse_rfc3339("2024-01-01T00:00:00Z").unwrap(),
        meta: serde_json::Map::new(),
    }
}

#[test]
fn erase_purges_texts_no_live_turn_holds() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    let turns = [turn("a", 0, "only a"), turn("a", 1, "shared"), turn("b", 0, "shared")];
    memory.append(&turns).unwrap();
    let store = Arc::new(TextKeyed::default());
    store.entries.lock().unwrap().extend(turns.iter().map(|t| TextDigest::of(&t.text)));
    memory.attach(store.clone());

    memory.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap();
    assert_eq!(
        *store.entries.lock().unwrap(),
        vec![TextDigest::of("shared"), TextDigest::of("shared")]
    );
}

#[test]
fn a_failing_purge_is_reported_after_the_ledger_commits() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    memory.append(&[turn("a", 0, "x")]).unwrap();
    memory.attach(Arc::new(TextKeyed { fail: true, ..TextKeyed::default() }));
    let err = memory.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap_err();
    assert!(matches!(err, EraseError::Derived(_)), "{err:?}");
    assert_eq!(err.class(), evicortex::ErrorClass::Io);
    assert_eq!(memory.stats().unwrap().ledger.erased_turns, 1);
    memory.verify().unwrap();
}
