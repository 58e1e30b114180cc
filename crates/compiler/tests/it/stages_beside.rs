//! On a large namespace the lexical lists are searched on a second thread beside the dense lists,
//! whose turns are then measured for the pack: the compiled context is byte for byte the
//! one-thread compile's.

use evicortex_compiler::{
    CompileConfig, CompileInputs, ContextConfig, ContextInputs, DenseConfig, DenseInput, LongTurns,
    PARALLEL_STAGES_FROM, TiktokenReader, WindowIndex, compile_timed_beside_from,
};
use evicortex_lexical::{Analyzer, Bm25Params};

use crate::fixture::{bag_of_words, build, conversation, notes, query};

#[test]
fn lexical_beside_dense_compiles_what_one_thread_compiles() {
    let (mut records, erased) = conversation();
    // Enough records for the product's rule to take the second thread.
    let first = records.iter().map(|e| e.id.raw()).max().unwrap() + 1;
    records.extend(notes(first, PARALLEL_STAGES_FROM as u64));
    let built = build("alice", records, erased);
    assert!(built.corpus.len() >= PARALLEL_STAGES_FROM);
    let reader = TiktokenReader::o200k_base();
    let window =
        WindowIndex::build(&built.corpus, 1, Bm25Params { k1: 1.2, b: 0.75 }, Analyzer::Plain)
            .unwrap();
    for config in [
        CompileConfig::hybrid(10, DenseConfig::On { top_n: 20 }),
        CompileConfig::hybrid(3, DenseConfig::On { top_n: 50 }),
        // The long-turn rule measures every candidate: the dense lists' turns, and the window
        // list's when it is done first, are measured ahead of the pack on the dense thread.
        CompileConfig {
            long_turns: LongTurns::ScaledByLength { unit_tokens: 100 },
            context: ContextConfig { lexical_radius: 1, dense_radius: 0 },
            ..CompileConfig::hybrid(10, DenseConfig::On { top_n: 20 })
        },
    ] {
        for (question, as_of) in [
            ("Where did I move for the bakery job?", None),
            ("the kettle and the dog", Some("2024-05-10T00:00:00Z")),
        ] {
            let q = query("alice", question, as_of, 500);
            let vector = bag_of_words(question);
            let inputs = CompileInputs {
                corpus: &built.corpus,
                lexical: &built.lexical,
                dense: Some(DenseInput {
                    index: &built.dense,
                    query_vector: &vector,
                    encoder: &built.encoder,
                    pending: 0,
                }),
                also_dense: &[],
                context: ContextInputs { lexical: Some(&window), dense: None },
                reader: &reader,
                reranker: None,
            };
            let (beside, _) = compile_timed_beside_from(&inputs, &q, &config, 1).unwrap();
            let (alone, _) = compile_timed_beside_from(&inputs, &q, &config, usize::MAX).unwrap();
            assert_eq!(
                serde_json::to_string(&beside).unwrap(),
                serde_json::to_string(&alone).unwrap(),
                "{question}"
            );
            assert!(!beside.items.is_empty(), "{question}");
        }
    }
}
