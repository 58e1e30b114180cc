//! The reader-token precount counts what packing counts: after it has run over a corpus, a
//! compile without an as-of time finds every text and every rendered line it measures cached,
//! and compiles exactly what a compile over a corpus never precounted does.

use evicortex_compiler::{CompileConfig, DenseConfig, TiktokenReader};

use crate::fixture::{build, conversation, query, run};

const QUESTIONS: [&str; 4] =
    ["Where did I move for the bakery job?", "congratulations", "What about Porto?", "the move"];

#[test]
fn a_compile_after_the_precount_counts_nothing_new_and_packs_the_same() {
    let reader = TiktokenReader::o200k_base();
    let (records, erased) = conversation();
    let precounted = build("alice", records.clone(), erased.clone());
    let cold = build("alice", records, erased);
    let counted = precounted.corpus.precount_text_tokens(&reader, 0..usize::MAX).unwrap();
    assert!(counted > 0);
    let lines = precounted.corpus.line_tokens_cached("o200k_base");
    let texts = precounted.corpus.text_tokens_cached("o200k_base");
    assert!(lines > 0, "lines precounted");
    for config in
        [CompileConfig::hybrid(10, DenseConfig::Off), CompileConfig::hybrid(3, DenseConfig::Off)]
    {
        for budget in [60, 200, 4000] {
            for question in QUESTIONS {
                let q = query("alice", question, None, budget);
                let warm = run(&precounted, &q, &config, &reader, None);
                let fresh = run(&cold, &q, &config, &reader, None);
                assert_eq!(
                    serde_json::to_string(&warm).unwrap(),
                    serde_json::to_string(&fresh).unwrap(),
                    "{question}, {budget} tokens"
                );
                assert_eq!(
                    (
                        precounted.corpus.line_tokens_cached("o200k_base"),
                        precounted.corpus.text_tokens_cached("o200k_base")
                    ),
                    (lines, texts),
                    "{question}, {budget} tokens: a line or text counted anew"
                );
            }
        }
    }
    assert!(
        cold.corpus.line_tokens_cached("o200k_base") > 0,
        "the cold corpus counted as it packed"
    );
}
