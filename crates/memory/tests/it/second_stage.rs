use std::sync::Arc;

use evicortex::{
    CatchUpLimits, CompileConfig, CompileQuery, CompileRequest, DenseConfig, ErasableVectors,
    EraseTarget, LoadedReranker, Namespace, RerankConfig, RerankerSpec, TextDigest, TiktokenReader,
    TokenBudget, Turn,
};
use evicortex_rerank::{CandidateVectors, CosineReranker, Reranker};

use crate::{derived_purge::turn, test_store::TestStore};

fn need<T, E: std::fmt::Display>(loaded: Result<T, E>) -> T {
    loaded.unwrap_or_else(|err| {
        panic!(
            "{err}\nthis test needs the pinned weights: run `evicortex model fetch` and \
             `evicortex model fetch all-mpnet-base-v2`"
        )
    })
}

/// The second stage through the facade: `mpnet-cosine` loads all-mpnet-base-v2 from the
/// verified cache, compile records its name (model and identity digest) and a raw cosine per
/// reranked item, each candidate is embedded once, and an erasure purges the candidate vectors
/// of the texts it orphaned while the others stay.
#[test]
fn the_mpnet_second_stage_reranks_records_its_identity_and_forgets_erased_texts() {
    let spec: RerankerSpec = "mpnet-cosine".parse().unwrap();
    let loaded = need(evicortex::load_reranker(&spec));
    let mpnet = need(evicortex::load_catalogue_encoder(
        "all-mpnet-base-v2",
        evicortex::Overlength::Window { overlap_tokens: 64 },
    ));
    assert_eq!(
        loaded.reranker.name(),
        CosineReranker::new(mpnet.clone(), Arc::new(ErasableVectors::new(1))).name()
    );
    assert!(
        loaded
            .reranker
            .name()
            .starts_with("encoder-cosine:sentence-transformers/all-mpnet-base-v2@"),
        "{}",
        loaded.reranker.name()
    );

    // The same reranker, with its candidate store at hand to look into.
    let vectors = Arc::new(ErasableVectors::new(1000));
    let reranker = Arc::new(CosineReranker::new(mpnet.clone(), vectors.clone()));
    let minilm = need(evicortex::load_pinned_encoder(evicortex::Overlength::Refuse));
    let store = TestStore::new();
    let memory = store
        .builder()
        .encoder(minilm)
        .loaded_reranker(LoadedReranker {
            reranker: reranker.clone(),
            derived: Some(vectors.clone()),
        })
        .open()
        .unwrap();
    let texts = [
        "I adopted a beagle named Rex last spring.",
        "My sister lives in Porto and works as a nurse.",
        "We watched a documentary about volcanoes.",
        "Rex chewed my running shoes again.",
    ];
    let turns: Vec<Turn> = texts.iter().enumerate().map(|(i, t)| turn("a", i as u32, t)).collect();
    memory.append(&turns).unwrap();
    memory.append(&[turn("b", 0, texts[0])]).unwrap();
    memory.catch_up(None, CatchUpLimits::default(), &mut |_| {}).unwrap();

    let query = CompileQuery {
        namespace: Namespace::new("a").unwrap(),
        question: "What is the name of my dog?".into(),
        as_of: None,
        budget: TokenBudget::new(400),
    };
    let mut config = CompileConfig::hybrid(10, DenseConfig::On { top_n: 10 });
    config.rerank = RerankConfig::On { depth: 16, weight: 1.0 };
    let reader = TiktokenReader::o200k_base();
    let request =
        CompileRequest { query: &query, config: &config, reader: &reader, query_vectors: &[] };
    let context = memory.compile(&request).unwrap();
    assert_eq!(context.reranker.as_deref(), Some(reranker.name()));
    let reranked: Vec<_> = context.items.iter().filter_map(|i| i.rerank).collect();
    assert_eq!(reranked.len(), texts.len(), "every candidate is reranked");
    let q = mpnet.embed(evicortex::EmbeddingRole::Query, &[query.question.as_str()]).unwrap();
    let d = mpnet.embed(evicortex::EmbeddingRole::Document, &[texts[0]]).unwrap();
    let expected = evicortex_embed::cosine(q[0].single().unwrap(), d[0].single().unwrap());
    let rex = context.items.iter().find(|i| i.text == texts[0]).unwrap();
    assert!((rex.rerank.unwrap().score - expected).abs() < 1e-6, "the raw cosine is recorded");
    assert_eq!(reranker.embedded_texts(), texts.len());
    memory.compile(&request).unwrap();
    assert_eq!(reranker.embedded_texts(), texts.len(), "a candidate is embedded once");
    assert_eq!(vectors.len(), texts.len());

    // Erasing namespace a purges every text it held, the one namespace b still holds too
    // (embedded again when b's compile reranks it).
    memory.erase(&EraseTarget::Namespace(Namespace::new("a").unwrap())).unwrap();
    let id = mpnet.identity_digest();
    for text in &texts {
        assert!(vectors.get(&id, &TextDigest::of(text)).is_none(), "{text} was purged");
    }
    assert_eq!(vectors.len(), 0);
}
