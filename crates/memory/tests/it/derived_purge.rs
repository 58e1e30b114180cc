use std::sync::{Arc, Mutex};

use evicortex::{DerivedStore, DerivedStoreError, EraseError, EraseReceipt, EraseTarget};
use evicortex::{EventTime, Namespace, Role, SessionId, TextDigest, Turn, TurnIndex};

use crate::test_store::TestStore;

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
        self.entries.lock().unwrap().retain(|d| !receipt.erased_texts.contains(d));
        Ok(())
    }
}

/// Turn `i` of a user in session `s` of namespace `ns`.
pub(crate) fn turn(ns: &str, i: u32, text: &str) -> Turn {
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
fn erase_purges_every_erased_text_even_one_still_held() {
    let store = TestStore::new();
    let memory = store.open();
    let turns = [turn("a", 0, "only a"), turn("a", 1, "shared"), turn("b", 0, "shared")];
    memory.append(&turns).unwrap();
    let store = Arc::new(TextKeyed::default());
    store.entries.lock().unwrap().extend(turns.iter().map(|t| TextDigest::of(&t.text)));
    memory.attach(store.clone());

    memory.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap();
    assert!(store.entries.lock().unwrap().is_empty(), "b's \"shared\" is derived again");
}

#[test]
fn a_failing_purge_is_reported_after_the_ledger_commits() {
    let store = TestStore::new();
    let memory = store.open();
    memory.append(&[turn("a", 0, "x")]).unwrap();
    memory.attach(Arc::new(TextKeyed { fail: true, ..TextKeyed::default() }));
    let err = memory.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap_err();
    assert!(matches!(err, EraseError::Derived(_)), "{err:?}");
    assert_eq!(err.class(), evicortex::ErrorClass::Io);
    assert_eq!(memory.stats().unwrap().ledger.erased_turns, 1);
    memory.verify().unwrap();
}

/// S1 for derived data: the embedding cache is keyed by an unsalted digest of the text, so after
/// an erasure neither that key nor the vector may be left in any file of the store (not in a
/// leaf, not as a divider key in an interior b-tree page, not in a WAL). On PostgreSQL the files
/// are those of the derived directory, where the embedding cache lives; the pgvector rows are
/// postgres_vectors' concern.
#[test]
fn an_erased_texts_cache_key_and_vector_are_in_no_file() {
    let encoder = match evicortex_embed::load_pinned_minilm(
        evicortex_embed::EncoderConfig::all_minilm_l6_v2(),
    ) {
        Ok(encoder) => encoder,
        Err(err) => {
            panic!("{err}\nthis test needs the pinned weights: run `evicortex model fetch`")
        }
    };
    let encoder = std::sync::Arc::new(encoder);
    let store = TestStore::new();
    let memory = store.builder().encoder(encoder.clone()).open().unwrap();
    let secrets: Vec<String> =
        (0..60).map(|i| format!("secret number {i} is {}", i * 7919)).collect();
    let mut turns: Vec<Turn> =
        secrets.iter().enumerate().map(|(i, s)| turn("a", i as u32, s)).collect();
    turns.extend((0..60).map(|i| turn("b", i, &format!("kept line {i}"))));
    memory.append(&turns).unwrap();
    memory.catch_up(None, evicortex::CatchUpLimits::default(), &mut |_| {}).unwrap();
    let texts: Vec<&str> = secrets.iter().map(String::as_str).collect();
    let blobs: Vec<Vec<u8>> = evicortex_embed::Encoder::embed_documents(encoder.as_ref(), &texts)
        .unwrap()
        .iter()
        .map(|e| e.single().unwrap().iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();

    memory.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap();
    for entry in fs_err::read_dir(store.files_dir()).unwrap() {
        let path = entry.unwrap().path();
        let bytes = fs_err::read(&path).unwrap();
        for (secret, blob) in secrets.iter().zip(&blobs) {
            let key = TextDigest::of(secret);
            assert!(
                !bytes.windows(32).any(|w| w == key.as_bytes()),
                "the cache key of {secret:?} is still in {}",
                path.display()
            );
            assert!(
                !bytes.windows(blob.len()).any(|w| w == blob.as_slice()),
                "the vector of {secret:?} is still in {}",
                path.display()
            );
        }
    }
}
