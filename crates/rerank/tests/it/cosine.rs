use std::sync::{Arc, OnceLock};

use evicortex_embed::{BertEncoder, Encoder, load_pinned, pinned_model};
use evicortex_rerank::{CosineReranker, InMemoryVectors, MAX_RERANK_DEPTH, Reranker};

fn mpnet() -> Arc<BertEncoder> {
    static ENCODER: OnceLock<Arc<BertEncoder>> = OnceLock::new();
    Arc::clone(ENCODER.get_or_init(|| {
        let model = pinned_model("all-mpnet-base-v2").unwrap();
        Arc::new(load_pinned(model.name(), model.default_config()).unwrap_or_else(|err| {
            panic!("{err}\nthe second stage needs the pinned weights: run `evicortex model fetch --all`")
        }))
    }))
}

const QUESTION: &str = "Where did I move to last spring?";
const PASSAGES: [&str; 4] = [
    "My sister visited me in June and we spent a rainy weekend in Sintra.",
    "Last spring I moved from Porto to Lisbon for a new job.",
    "I play five-a-side football on Thursdays.",
    "Last spring I moved from Porto to Lisbon for a new job.",
];

#[test]
fn candidates_are_scored_by_cosine_and_each_text_is_embedded_once() {
    let encoder = mpnet();
    let reranker = CosineReranker::new(encoder.clone(), Arc::new(InMemoryVectors::new(1000)));
    assert!(reranker.name().starts_with("encoder-cosine:sentence-transformers/all-mpnet-base-v2@"));
    let scores = reranker.score(QUESTION, &PASSAGES).unwrap();
    let best = (0..scores.len()).max_by(|&a, &b| scores[a].total_cmp(&scores[b])).unwrap();
    assert!(best == 1 || best == 3, "{scores:?}");
    assert_eq!(scores[1], scores[3], "the same text scores the same");
    assert_eq!(reranker.embedded_texts(), 3, "the repeated passage is embedded once");

    // The scores are the encoder's own cosines.
    let query = encoder.embed_query(QUESTION).unwrap();
    let passage = encoder.embed_documents(&[PASSAGES[0]]).unwrap().remove(0);
    let direct = evicortex_embed::cosine(query.single().unwrap(), passage.single().unwrap());
    assert!((direct - scores[0]).abs() < 1e-6, "{direct} vs {}", scores[0]);

    // A later question over the same candidates embeds nothing new.
    let again = reranker.score("What sport do I play?", &PASSAGES[..3]).unwrap();
    assert_eq!(reranker.embedded_texts(), 3);
    let best = (0..again.len()).max_by(|&a, &b| again[a].total_cmp(&again[b])).unwrap();
    assert_eq!(best, 2, "{again:?}");
}

#[test]
fn more_candidates_than_the_depth_are_refused() {
    let reranker = CosineReranker::new(mpnet(), Arc::new(InMemoryVectors::new(10)));
    let passages = vec!["a turn"; MAX_RERANK_DEPTH + 1];
    let err = reranker.score(QUESTION, &passages).unwrap_err();
    assert!(err.reason.contains("depth of 16"), "{}", err.reason);
    assert_eq!(reranker.embedded_texts(), 0, "refused before embedding");
}
