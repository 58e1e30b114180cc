//! Catch-up and the embedding cache against the real pinned encoder and a real ledger.

use std::sync::{Arc, OnceLock};

use evicortex_core::{EventTime, Namespace, Role, SessionId, TextDigest, Turn, TurnIndex};
use evicortex_embed::{Encoder, EncoderConfig, IdentifiedVector, Overlength, Pooling};

use super::*;
use crate::{EraseTarget, embedding_cache::EmbeddingCache};

fn encoder(config: EncoderConfig) -> Arc<dyn Encoder> {
    match evicortex_embed::load_pinned_minilm(config) {
        Ok(encoder) => Arc::new(encoder),
        Err(err) => {
            panic!("{err}\nthe catch-up tests need the pinned weights: run `evicortex model fetch`")
        }
    }
}

fn default_encoder() -> Arc<dyn Encoder> {
    static ENCODER: OnceLock<Arc<dyn Encoder>> = OnceLock::new();
    Arc::clone(ENCODER.get_or_init(|| encoder(EncoderConfig::all_minilm_l6_v2())))
}

fn open(dir: &std::path::Path, encoder: Arc<dyn Encoder>) -> Memory {
    Memory::builder(dir).encoder(encoder).open().unwrap()
}

/// A store in `dir` with the default encoder, holding `turns`; and that encoder.
fn store_holding(dir: &std::path::Path, turns: &[Turn]) -> (Arc<dyn Encoder>, Memory) {
    let encoder = default_encoder();
    let memory = open(dir, encoder.clone());
    memory.append(turns).unwrap();
    (encoder, memory)
}

fn cache(memory: &Memory) -> &EmbeddingCache {
    &memory.inner.dense.as_ref().expect("opened with an encoder").cache
}

fn turn(namespace: &str, session: &str, index: u32, text: &str) -> Turn {
    Turn {
        namespace: Namespace::new(namespace).unwrap(),
        session: SessionId::new(session).unwrap(),
        turn: TurnIndex::new(index),
        role: Role::User,
        speaker: None,
        text: text.to_owned(),
        time: EventTime::parse_rfc3339("2024-05-02T10:00:00+01:00").unwrap(),
        meta: serde_json::Map::new(),
    }
}

fn said_by(speaker: &str, mut turn: Turn) -> Turn {
    turn.speaker = Some(speaker.to_owned());
    turn
}

fn no_progress() -> impl FnMut(&EmbedProgress) {
    |_| {}
}

fn long_text() -> String {
    "We talked for hours about the garden, the tomatoes and the new fence by the road. ".repeat(20)
}

#[test]
fn identical_text_is_embedded_once_across_namespaces_and_runs_resume() {
    let dir = tempfile::tempdir().unwrap();
    let (encoder, memory) = store_holding(
        dir.path(),
        &[
            turn("alice", "s1", 0, "I moved to Lisbon in May."),
            turn("bob", "s1", 0, "I moved to Lisbon in May."),
            turn("bob", "s1", 1, "My sister visited in June."),
        ],
    );
    let mut seen = Vec::new();
    let report =
        memory.catch_up(None, CatchUpLimits { chunk_texts: 1 }, &mut |p| seen.push(*p)).unwrap();
    assert_eq!((report.live_turns, report.distinct_texts, report.embedded_texts), (3, 2, 2));
    assert_eq!(report.vectors_written, 2);
    assert_eq!(seen.last().unwrap().done_texts, 2);
    assert_eq!(seen.len(), 3, "one report before and one per committed chunk");

    memory.append(&[turn("alice", "s1", 1, "A new turn about tomatoes.")]).unwrap();
    let report = memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!(
        (report.already_cached, report.embedded_texts),
        (2, 1),
        "only the new text is embedded"
    );

    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let vectors =
        cache(&memory).namespace_vectors(&pending_of(&alice), &encoder.identity_digest()).unwrap();
    assert_eq!((vectors.len(), vectors.dimension, vectors.missing.len()), (2, 384, 0));
    let direct = encoder.embed_documents(&["I moved to Lisbon in May."]).unwrap().remove(0);
    assert_eq!(vectors.row(0), direct.single().unwrap());

    // A scope of one namespace embeds only its texts.
    memory.append(&[turn("carol", "s1", 0, "Carol's only turn.")]).unwrap();
    let carol = Namespace::new("carol").unwrap();
    let report =
        memory.catch_up(Some(&carol), CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!((report.live_turns, report.embedded_texts), (1, 1));
}

#[test]
fn vectors_of_another_identity_are_never_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let mean = default_encoder();
    let memory = open(dir.path(), mean.clone());
    memory.append(&[turn("alice", "s1", 0, "I moved to Lisbon in May.")]).unwrap();
    memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();

    let mut cls_config = EncoderConfig::all_minilm_l6_v2();
    cls_config.pooling = Pooling::Cls;
    let cls = encoder(cls_config);
    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let under_cls =
        cache(&memory).namespace_vectors(&pending_of(&alice), &cls.identity_digest()).unwrap();
    assert!(under_cls.is_empty());
    assert_eq!(under_cls.missing, vec![alice[0].id]);
    let stored = cache(&memory).identity(&mean.identity_digest()).unwrap().unwrap();
    assert_eq!(&stored, mean.identity());

    // A question vector of another identity is refused before anything is compared.
    let cls_query = IdentifiedVector {
        identity: cls.identity_digest(),
        vector: cls.embed_query("where do I live?").unwrap().single().unwrap().to_vec(),
    };
    let query = crate::CompileQuery {
        namespace: Namespace::new("alice").unwrap(),
        question: "where do I live?".to_owned(),
        as_of: None,
        budget: evicortex_core::TokenBudget::new(100),
    };
    let config = crate::CompileConfig::hybrid(10, crate::DenseConfig::On { top_n: 10 });
    let reader = crate::TiktokenReader::o200k_base();
    let request = crate::CompileRequest {
        query: &query,
        config: &config,
        reader: &reader,
        query_vectors: std::slice::from_ref(&cls_query),
    };
    let err = memory.compile(&request).unwrap_err();
    assert_eq!(err.class(), crate::ErrorClass::Integrity, "{err}");
    let own = memory.embed_query("where do I live?").unwrap();
    let request = crate::CompileRequest { query_vectors: std::slice::from_ref(&own), ..request };
    assert_eq!(memory.compile(&request).unwrap().items.len(), 1);
}

#[test]
fn overlength_turns_are_refused_and_reported_or_windowed_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let memory = open(dir.path(), default_encoder());
    memory
        .append(&[turn("alice", "s1", 0, "short"), turn("alice", "s1", 1, &long_text())])
        .unwrap();
    let report = memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!(report.embedded_texts, 1);
    assert_eq!(report.refused.len(), 1);
    assert!(report.refused[0].tokens > 256, "{:?}", report.refused);
    let again = memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!(
        (again.embedded_texts, again.refused.len()),
        (0, 1),
        "refusals are remembered and still reported"
    );
    drop(memory);

    let window = encoder(
        EncoderConfig::all_minilm_l6_v2()
            .with_overlength(Overlength::Window { overlap_tokens: 32 }),
    );
    let memory = open(dir.path(), window.clone());
    let report = memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert!(report.refused.is_empty());
    assert!(report.vectors_written >= 3);
    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let vectors =
        cache(&memory).namespace_vectors(&pending_of(&alice), &window.identity_digest()).unwrap();
    let long_id = alice[1].id;
    assert!(
        vectors.turns.iter().filter(|&&t| t == long_id).count() >= 2,
        "windows map back to their turn"
    );
}

#[test]
fn erasure_removes_vectors_of_erased_texts_and_a_live_turn_s_is_embedded_again() {
    let dir = tempfile::tempdir().unwrap();
    let (encoder, memory) = store_holding(
        dir.path(),
        &[
            turn("alice", "s1", 0, "shared text"),
            turn("alice", "s1", 1, "alice's secret"),
            turn("bob", "s1", 0, "shared text"),
        ],
    );
    let id = encoder.identity_digest();
    memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!(cache(&memory).count(&id).unwrap(), 2);

    memory.erase(&EraseTarget::Namespace(Namespace::new("alice").unwrap())).unwrap();
    assert!(cache(&memory).get(&id, &TextDigest::of("alice's secret")).unwrap().is_empty());
    // Bob still holds it: purged all the same, and embedded again by the next catch-up.
    assert!(cache(&memory).get(&id, &TextDigest::of("shared text")).unwrap().is_empty());
    memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!(cache(&memory).get(&id, &TextDigest::of("shared text")).unwrap().len(), 1);
    let bytes = fs_err::read(cache(&memory).path()).unwrap();
    let secret = encoder.embed_documents(&["alice's secret"]).unwrap().remove(0);
    let blob: Vec<u8> = secret.single().unwrap().iter().flat_map(|x| x.to_le_bytes()).collect();
    assert!(
        !bytes.windows(blob.len()).any(|w| w == blob.as_slice()),
        "the erased vector is gone from the file"
    );
}

#[test]
fn a_turn_s_vector_is_its_document_s_and_erasure_purges_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let (encoder, memory) = store_holding(
        dir.path(),
        &[
            said_by("Alice", turn("chat", "s1", 0, "see you at the lake")),
            said_by("Bob", turn("chat", "s1", 1, "see you at the lake")),
        ],
    );
    let id = encoder.identity_digest();
    let report = memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!((report.distinct_texts, report.embedded_texts), (2, 2), "two documents");
    let alice = TextDigest::of("Alice: see you at the lake");
    let bob = TextDigest::of("Bob: see you at the lake");
    let direct = encoder.embed_documents(&["Alice: see you at the lake"]).unwrap().remove(0);
    assert_eq!(cache(&memory).get(&id, &alice).unwrap(), vec![direct.single().unwrap().to_vec()]);

    let chat = Namespace::new("chat").unwrap();
    let record = memory.evidence(&chat).unwrap()[0].id;
    let receipt = memory.erase(&EraseTarget::Record(chat, record)).unwrap();
    assert!(receipt.erased_texts.contains(&alice), "{receipt:?}");
    assert!(!receipt.erased_texts.contains(&bob), "{receipt:?}");
    assert!(cache(&memory).get(&id, &alice).unwrap().is_empty(), "Alice's document is erased");
    assert_eq!(cache(&memory).get(&id, &bob).unwrap().len(), 1, "Bob still says it");
}

/// An [`embedded_store`] whose ledger committed the erasure of one of the two turns and whose
/// process died before any purge: erased through the ledger alone, as such a crash leaves it.
fn erased_without_purge(dir: &std::path::Path) {
    let record = embedded_store(dir);
    let ledger = evicortex_ledger::Ledger::open(&dir.join(crate::LEDGER_FILE)).unwrap();
    evicortex_ledger::EvidenceLedger::erase(
        &ledger,
        &EraseTarget::Record(Namespace::new("alice").unwrap(), record),
    )
    .unwrap();
}

/// A store with two embedded turns of alice; returns the record to erase.
fn embedded_store(dir: &std::path::Path) -> evicortex_core::TurnId {
    let memory = open(dir, default_encoder());
    memory
        .append(&[turn("alice", "s1", 0, "to be forgotten"), turn("alice", "s1", 1, "kept")])
        .unwrap();
    memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    memory.evidence(&Namespace::new("alice").unwrap()).unwrap()[0].id
}

#[test]
fn a_crash_between_erasure_and_purge_is_reconciled_on_open() {
    let dir = tempfile::tempdir().unwrap();
    erased_without_purge(dir.path());
    let id = default_encoder().identity_digest();
    let stale = EmbeddingCache::open(dir.path()).unwrap();
    assert_eq!(stale.count(&id).unwrap(), 2, "stale before reconciliation");
    drop(stale);
    let memory = Memory::open(dir.path()).unwrap();
    let reconciled = EmbeddingCache::open(memory.dir()).unwrap();
    assert_eq!(reconciled.count(&id).unwrap(), 1);
    assert!(reconciled.get(&id, &TextDigest::of("to be forgotten")).unwrap().is_empty());
}

/// A memory opened beside the process that holds the store removes no vector at open (a sweep
/// there could drop one the writer stored for a turn appended after the sweep's read) and stores
/// none; the writer's own open reconciles. Without the skip the beside open drops the stale
/// vector at once.
#[test]
fn a_memory_beside_the_store_s_writer_sweeps_and_embeds_nothing() {
    let dir = tempfile::tempdir().unwrap();
    erased_without_purge(dir.path());
    let id = default_encoder().identity_digest();
    let writer = crate::StoreLock::acquire(dir.path()).unwrap();
    let beside = Memory::builder(dir.path())
        .encoder(default_encoder())
        .lock_store_or_beside()
        .open()
        .unwrap();
    match beside.store_lock_refusal() {
        Some(crate::StoreLockError::Busy { holder, .. }) => {
            assert!(holder.starts_with(&format!("pid {}", std::process::id())), "{holder}");
        }
        other => panic!("expected the writer to be named, got {other:?}"),
    }
    assert_eq!(cache(&beside).count(&id).unwrap(), 2, "nothing swept beside the writer");
    let refused = beside.catch_up(None, CatchUpLimits::default(), &mut no_progress());
    assert!(matches!(refused, Err(CatchUpError::BesideWriter)), "{refused:?}");
    drop((beside, writer));

    let memory = Memory::builder(dir.path()).lock_store_or_beside().open().unwrap();
    assert!(memory.store_lock_refusal().is_none(), "the lock was free");
    let reconciled = EmbeddingCache::open(memory.dir()).unwrap();
    assert_eq!(reconciled.count(&id).unwrap(), 1, "the writer's open reconciles");
    assert!(matches!(
        Memory::builder(dir.path()).lock_store().open(),
        Err(crate::OpenError::Locked(_))
    ));
}

#[test]
fn a_memory_without_an_encoder_still_purges_the_store_s_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let record = embedded_store(dir.path());
    let id = default_encoder().identity_digest();
    let memory = Memory::open(dir.path()).unwrap();
    assert!(!memory.has_encoder());
    memory.erase(&EraseTarget::Record(Namespace::new("alice").unwrap(), record)).unwrap();
    let cache = EmbeddingCache::open(dir.path()).unwrap();
    assert_eq!(cache.count(&id).unwrap(), 1, "purged by the erasure itself");
    assert!(cache.get(&id, &TextDigest::of("to be forgotten")).unwrap().is_empty());
}

/// An erasure that lands between catch-up's check and its write of a chunk's vectors waits for
/// the writer lock, then purges what was written: the vector does not survive. Without the lock
/// around check and write, the erasure completes first and the write puts the erased text's
/// vector back (this test then fails).
#[test]
fn an_erasure_between_check_and_write_waits_for_the_writer_lock() {
    let dir = tempfile::tempdir().unwrap();
    let encoder = default_encoder();
    let id = encoder.identity_digest();
    let memory = open(dir.path(), encoder);
    memory.append(&[turn("alice", "secret", 0, "the vault code is 4711")]).unwrap();
    let eraser = Arc::new(std::sync::Mutex::new(None));
    {
        let (memory, eraser) = (memory.clone(), Arc::clone(&eraser));
        memory.clone().inner.before_put.set(move || {
            let memory = memory.clone();
            let erasing = std::thread::spawn(move || {
                let session = SessionId::new("secret").unwrap();
                memory.erase(&EraseTarget::Session(Namespace::new("alice").unwrap(), session))
            });
            // Long enough for an erasure that is not held back to finish.
            std::thread::sleep(std::time::Duration::from_millis(300));
            *eraser.lock().unwrap() = Some(erasing);
        });
    }
    memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    let erasing = eraser.lock().unwrap().take().expect("the hook ran");
    erasing.join().unwrap().unwrap();
    assert!(
        cache(&memory).get(&id, &TextDigest::of("the vault code is 4711")).unwrap().is_empty(),
        "the erased text's vector was written back after the erasure purged it"
    );
}

/// Catch-up embeds texts it read before an erasure and writes their vectors after it: the
/// writer lock and the erasure log drop what the erasure orphaned. Run many times with the
/// erasure landing at different points of the catch-up; no vector of an erased turn survives,
/// whether its text is orphaned or only its document (a text another speaker still says).
/// (Writing the vectors without the check makes this fail within a few rounds.)
#[test]
fn catch_up_racing_erasure_never_leaves_a_vector_of_an_erased_text() {
    let encoder = default_encoder();
    let id = encoder.identity_digest();
    let rounds = 40;
    let mut erased_mid_catch_up = 0;
    for round in 0..rounds {
        let dir = tempfile::tempdir().unwrap();
        let memory = open(dir.path(), encoder.clone());
        let secret = |i: u32| format!("round {round} secret number {i} about the red door");
        let kept = |i: u32| format!("round {round} kept number {i} about the garden");
        // Half the secrets are said by Alice while Bob says the same words: their texts stay
        // live, only Alice's documents are orphaned.
        let spoken = |i: u32| i % 2 == 1;
        let mut turns = Vec::new();
        for i in 0..24 {
            if spoken(i) {
                turns.push(said_by("Alice", turn("alice", "secret", i, &secret(i))));
                turns.push(said_by("Bob", turn("alice", "bob", i, &secret(i))));
            } else {
                turns.push(turn("alice", "secret", i, &secret(i)));
            }
            turns.push(turn("alice", "kept", i, &kept(i)));
        }
        memory.append(&turns).unwrap();

        let catching_up = {
            let memory = memory.clone();
            std::thread::spawn(move || {
                let mut chunks = 0;
                memory
                    .catch_up(None, CatchUpLimits { chunk_texts: 2 }, &mut |_| chunks += 1)
                    .unwrap();
                chunks
            })
        };
        // Erase at a different point of the catch-up each round.
        std::thread::sleep(std::time::Duration::from_micros(500 * (round as u64 % 20)));
        let session = SessionId::new("secret").unwrap();
        memory.erase(&EraseTarget::Session(Namespace::new("alice").unwrap(), session)).unwrap();
        if !catching_up.is_finished() {
            erased_mid_catch_up += 1;
        }
        catching_up.join().unwrap();

        let cache = cache(&memory);
        for i in 0..24 {
            let erased = if spoken(i) { format!("Alice: {}", secret(i)) } else { secret(i) };
            assert!(
                cache.get(&id, &TextDigest::of(&erased)).unwrap().is_empty(),
                "round {round}: a vector of erased turn {i} survived the erasure"
            );
            if spoken(i) {
                let bob = TextDigest::of(&format!("Bob: {}", secret(i)));
                assert_eq!(cache.get(&id, &bob).unwrap().len(), 1, "round {round}: Bob's {i}");
            }
        }
        let kept_vectors =
            (0..24).filter(|&i| !cache.get(&id, &TextDigest::of(&kept(i))).unwrap().is_empty());
        assert_eq!(kept_vectors.count(), 24, "round {round}: every kept text is embedded");
    }
    assert!(
        erased_mid_catch_up >= rounds / 4,
        "only {erased_mid_catch_up} of {rounds} erasures landed during a catch-up: the test does \
         not exercise the race"
    );
}

/// The turns of `evidence` as the index cache looks their vectors up.
fn pending_of(
    evidence: &[evicortex_core::Evidence],
) -> Vec<(evicortex_core::TurnId, evicortex_core::TextDigest)> {
    evidence.iter().map(crate::index_cache::pending).collect()
}

/// A store whose namespace "alice" holds `texts` as turns 0, 1, ... of one session, embedded
/// under the default encoder (which refuses overlength texts) and then under the windowing one;
/// returns the memory opened with the windowing encoder, and that encoder.
fn embedded_under_both_encoders(
    dir: &std::path::Path,
    texts: &[String],
) -> (Memory, Arc<dyn Encoder>) {
    let memory = open(dir, default_encoder());
    let turns: Vec<Turn> =
        texts.iter().enumerate().map(|(i, t)| turn("alice", "s1", i as u32, t)).collect();
    memory.append(&turns).unwrap();
    memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    drop(memory);
    let window = encoder(
        EncoderConfig::all_minilm_l6_v2()
            .with_overlength(Overlength::Window { overlap_tokens: 32 }),
    );
    let memory = open(dir, window.clone());
    memory.catch_up(None, CatchUpLimits::default(), &mut no_progress()).unwrap();
    (memory, window)
}

#[test]
fn the_known_texts_read_at_once_are_those_looked_up_one_by_one() {
    let dir = tempfile::tempdir().unwrap();
    let texts = ["short", "another short one", &long_text()].map(str::to_owned);
    // The long text has three windows under the windowing identity, and none but a refusal
    // under the default one; "unseen" has nothing under either.
    let (memory, window) = embedded_under_both_encoders(dir.path(), &texts);

    let digests: Vec<TextDigest> = texts
        .iter()
        .chain(std::iter::once(&"unseen".to_owned()))
        .map(|t| TextDigest::of(&turn_document(&turn("alice", "s1", 0, t))))
        .collect();
    for identity in [default_encoder().identity_digest(), window.identity_digest()] {
        let known = cache(&memory).known_texts(&identity).unwrap();
        for d in &digests {
            assert_eq!(
                known.contains(d),
                cache(&memory).is_known(&identity, d).unwrap(),
                "{d:?} under {identity:?}"
            );
        }
        let found: Vec<bool> = digests.iter().map(|d| known.contains(d)).collect();
        assert_eq!(found, [true, true, true, false], "by a vector or a refusal, not unseen");
        assert_eq!(known.len(), 3);
    }
}

/// The vectors are read in text-digest order but come out as the turns were given: each turn's
/// windows in a row, a text two turns share filled for both, the turns without a vector listed
/// as missing or refused in the order given.
#[test]
fn namespace_vectors_read_in_key_order_come_out_in_turn_order() {
    let dir = tempfile::tempdir().unwrap();
    let texts: Vec<String> = ["I planted tomatoes.", "The fence is new.", "I planted tomatoes."]
        .map(str::to_owned)
        .into_iter()
        .chain([long_text(), "Walked the dog.".to_owned()])
        .collect();
    let (memory, window) = embedded_under_both_encoders(dir.path(), &texts);
    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let mut pending = pending_of(&alice);
    // A text never embedded, between two that are.
    let unseen = TextDigest::of(&turn_document(&turn("alice", "s1", 9, "never embedded")));
    pending.insert(2, (evicortex_core::TurnId::from_raw(999), unseen));
    let mut digests: Vec<_> = pending.iter().map(|(_, d)| *d).collect();
    digests.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    assert_ne!(
        digests,
        pending.iter().map(|(_, d)| *d).collect::<Vec<_>>(),
        "the turns are not already in key order, so the test says something"
    );

    for (identity, refused) in [
        (default_encoder().identity_digest(), vec![alice[3].id]),
        (window.identity_digest(), vec![]),
    ] {
        let vectors = cache(&memory).namespace_vectors(&pending, &identity).unwrap();
        // The rows, one text at a time, in the order given.
        let mut expected_turns = Vec::new();
        let mut expected_data = Vec::new();
        for (turn, text) in &pending {
            for vector in cache(&memory).get(&identity, text).unwrap() {
                expected_turns.push(*turn);
                expected_data.extend(vector);
            }
        }
        assert_eq!(vectors.turns, expected_turns);
        assert_eq!(vectors.data, expected_data);
        assert_eq!(vectors.missing, vec![evicortex_core::TurnId::from_raw(999)]);
        assert_eq!(vectors.refused, refused);
    }
    let windowed = cache(&memory).namespace_vectors(&pending, &window.identity_digest()).unwrap();
    assert!(windowed.turns.iter().filter(|&&t| t == alice[3].id).count() >= 2);
    assert_eq!(windowed.row(0), windowed.row(2), "the shared text's vector, for both turns");
}
