//! Embedding cache tests against the real pinned encoder and a real ledger.

use std::sync::OnceLock;

use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use evicortex_embed::{BertEncoder, EncoderConfig, Overlength, Pooling};

use super::*;
use crate::EraseTarget;

fn encoder(config: EncoderConfig) -> BertEncoder {
    match evicortex_embed::load_pinned_minilm(config) {
        Ok(encoder) => encoder,
        Err(err) => panic!(
            "{err}\nthe embedding cache tests need the pinned weights: run `evicortex model fetch`"
        ),
    }
}

fn default_encoder() -> &'static BertEncoder {
    static ENCODER: OnceLock<BertEncoder> = OnceLock::new();
    ENCODER.get_or_init(|| encoder(EncoderConfig::all_minilm_l6_v2()))
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

fn no_progress() -> impl FnMut(&EmbedProgress) {
    |_| {}
}

fn long_text() -> String {
    "We talked for hours about the garden, the tomatoes and the new fence by the road. ".repeat(20)
}

#[test]
fn identical_text_is_embedded_once_across_namespaces_and_runs_resume() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    memory
        .append(&[
            turn("alice", "s1", 0, "I moved to Lisbon in May."),
            turn("bob", "s1", 0, "I moved to Lisbon in May."),
            turn("bob", "s1", 1, "My sister visited in June."),
        ])
        .unwrap();
    let cache = EmbeddingCache::attach_to(&memory).unwrap();
    let encoder = default_encoder();
    let mut seen = Vec::new();
    let report =
        embed_pending(&memory, &cache, encoder, CatchUpLimits { chunk_texts: 1 }, &mut |p| {
            seen.push(*p)
        })
        .unwrap();
    assert_eq!((report.live_turns, report.distinct_texts, report.embedded_texts), (3, 2, 2));
    assert_eq!(report.vectors_written, 2);
    assert_eq!(seen.last().unwrap().done_texts, 2);
    assert_eq!(seen.len(), 3, "one report before and one per committed chunk");

    memory.append(&[turn("alice", "s1", 1, "A new turn about tomatoes.")]).unwrap();
    let report =
        embed_pending(&memory, &cache, encoder, CatchUpLimits::default(), &mut no_progress())
            .unwrap();
    assert_eq!(
        (report.already_cached, report.embedded_texts),
        (2, 1),
        "only the new text is embedded"
    );

    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let vectors = cache.namespace_vectors(&alice, &encoder.identity_digest()).unwrap();
    assert_eq!((vectors.len(), vectors.dimension, vectors.missing.len()), (2, 384, 0));
    let direct = encoder.embed_documents(&["I moved to Lisbon in May."]).unwrap().remove(0);
    assert_eq!(vectors.row(0), direct.single().unwrap());
}

#[test]
fn vectors_of_another_identity_are_never_mixed() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    memory.append(&[turn("alice", "s1", 0, "I moved to Lisbon in May.")]).unwrap();
    let cache = EmbeddingCache::attach_to(&memory).unwrap();
    let mean = default_encoder();
    embed_pending(&memory, &cache, mean, CatchUpLimits::default(), &mut no_progress()).unwrap();

    let mut cls_config = EncoderConfig::all_minilm_l6_v2();
    cls_config.pooling = Pooling::Cls;
    let cls = encoder(cls_config);
    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let under_cls = cache.namespace_vectors(&alice, &cls.identity_digest()).unwrap();
    assert!(under_cls.is_empty());
    assert_eq!(under_cls.missing, vec![alice[0].id]);

    let under_mean = cache.namespace_vectors(&alice, &mean.identity_digest()).unwrap();
    let cls_query = IdentifiedVector {
        identity: cls.identity_digest(),
        vector: cls.embed_query("where do I live?").unwrap().single().unwrap().to_vec(),
    };
    let err = under_mean.check_query(&cls_query).unwrap_err();
    assert!(matches!(err, EmbedError::IdentityMismatch { .. }), "{err}");
    let mean_query = IdentifiedVector {
        identity: mean.identity_digest(),
        vector: mean.embed_query("where do I live?").unwrap().single().unwrap().to_vec(),
    };
    under_mean.check_query(&mean_query).unwrap();
    let stored = cache.identity(&mean.identity_digest()).unwrap().unwrap();
    assert_eq!(&stored, mean.identity());
}

#[test]
fn overlength_turns_are_refused_and_reported_or_windowed_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    memory
        .append(&[turn("alice", "s1", 0, "short"), turn("alice", "s1", 1, &long_text())])
        .unwrap();
    let cache = EmbeddingCache::attach_to(&memory).unwrap();
    let refuse = default_encoder();
    let report =
        embed_pending(&memory, &cache, refuse, CatchUpLimits::default(), &mut no_progress())
            .unwrap();
    assert_eq!(report.embedded_texts, 1);
    assert_eq!(report.refused.len(), 1);
    assert!(report.refused[0].tokens > 256, "{:?}", report.refused);
    let again =
        embed_pending(&memory, &cache, refuse, CatchUpLimits::default(), &mut no_progress())
            .unwrap();
    assert_eq!(
        (again.embedded_texts, again.refused.len()),
        (0, 1),
        "refusals are remembered and still reported"
    );

    let window = encoder(
        EncoderConfig::all_minilm_l6_v2()
            .with_overlength(Overlength::Window { overlap_tokens: 32 }),
    );
    let report =
        embed_pending(&memory, &cache, &window, CatchUpLimits::default(), &mut no_progress())
            .unwrap();
    assert!(report.refused.is_empty());
    assert!(report.vectors_written >= 3);
    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    let vectors = cache.namespace_vectors(&alice, &window.identity_digest()).unwrap();
    let long_id = alice[1].id;
    assert!(
        vectors.turns.iter().filter(|&&t| t == long_id).count() >= 2,
        "windows map back to their turn"
    );
}

#[test]
fn erasure_removes_vectors_of_texts_no_live_turn_holds() {
    let dir = tempfile::tempdir().unwrap();
    let memory = Memory::open(dir.path()).unwrap();
    memory
        .append(&[
            turn("alice", "s1", 0, "shared text"),
            turn("alice", "s1", 1, "alice's secret"),
            turn("bob", "s1", 0, "shared text"),
        ])
        .unwrap();
    let cache = EmbeddingCache::attach_to(&memory).unwrap();
    let encoder = default_encoder();
    let id = encoder.identity_digest();
    embed_pending(&memory, &cache, encoder, CatchUpLimits::default(), &mut no_progress()).unwrap();
    assert_eq!(cache.count(&id).unwrap(), 2);

    memory.erase(&EraseTarget::Namespace(Namespace::new("alice").unwrap())).unwrap();
    assert!(cache.get(&id, &TextDigest::of("alice's secret")).unwrap().is_empty());
    assert_eq!(
        cache.get(&id, &TextDigest::of("shared text")).unwrap().len(),
        1,
        "bob still holds it"
    );
    let bytes = fs_err::read(cache.path()).unwrap();
    let secret = encoder.embed_documents(&["alice's secret"]).unwrap().remove(0);
    let blob: Vec<u8> = secret.single().unwrap().iter().flat_map(|x| x.to_le_bytes()).collect();
    assert!(
        !bytes.windows(blob.len()).any(|w| w == blob.as_slice()),
        "the erased vector is gone from the file"
    );
}

/// A store with two embedded turns of alice, the cache not attached; returns the record to erase.
fn store_with_unattached_cache(dir: &std::path::Path) -> (Memory, evicortex_core::TurnId) {
    let memory = Memory::open(dir).unwrap();
    memory
        .append(&[turn("alice", "s1", 0, "to be forgotten"), turn("alice", "s1", 1, "kept")])
        .unwrap();
    let cache = EmbeddingCache::open(dir).unwrap();
    embed_pending(&memory, &cache, default_encoder(), CatchUpLimits::default(), &mut no_progress())
        .unwrap();
    let alice = memory.evidence(&Namespace::new("alice").unwrap()).unwrap();
    (memory, alice[0].id)
}

#[test]
fn a_crash_between_erasure_and_purge_is_reconciled_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, record) = store_with_unattached_cache(dir.path());
    let id = default_encoder().identity_digest();
    // The ledger commits the erasure and the process dies before any purge: erase through the
    // ledger alone, as such a crash leaves it.
    memory.ledger().erase(&EraseTarget::Record(Namespace::new("alice").unwrap(), record)).unwrap();
    let cache = EmbeddingCache::open(dir.path()).unwrap();
    assert_eq!(cache.count(&id).unwrap(), 2, "stale before reconciliation");
    drop(cache);
    let cache = EmbeddingCache::open_reconciled(&memory).unwrap();
    assert_eq!(cache.count(&id).unwrap(), 1);
    assert!(cache.get(&id, &TextDigest::of("to be forgotten")).unwrap().is_empty());
}

#[test]
fn erasure_purges_the_cache_file_even_when_no_cache_is_attached() {
    let dir = tempfile::tempdir().unwrap();
    let (memory, record) = store_with_unattached_cache(dir.path());
    let id = default_encoder().identity_digest();
    memory.erase(&EraseTarget::Record(Namespace::new("alice").unwrap(), record)).unwrap();
    let cache = EmbeddingCache::open(dir.path()).unwrap();
    assert_eq!(cache.count(&id).unwrap(), 1, "purged by the erasure itself, not by a reconcile");
    assert!(cache.get(&id, &TextDigest::of("to be forgotten")).unwrap().is_empty());
}
