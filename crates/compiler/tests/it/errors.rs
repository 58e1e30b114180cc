//! Inconsistent inputs are refused with an error naming what is wrong.

use evicortex_compiler::{
    CompileConfig, CompileError, CompileInputs, ContextInputs, DenseConfig, RerankConfig,
    TiktokenReader, compile,
};
use evicortex_lexical::{Bm25Index, Bm25Params};

use crate::fixture::{build, conversation, query};

#[test]
fn refuses_missing_dense_input_wrong_namespace_and_bm25_mismatch() {
    let (records, erased) = conversation();
    let built = build("alice", records, erased);
    let reader = TiktokenReader::o200k_base();
    let inputs = CompileInputs {
        corpus: &built.corpus,
        lexical: &built.lexical,
        dense: None,
        also_dense: &[],
        context: ContextInputs::default(),
        reader: &reader,
        reranker: None,
    };
    let dense = CompileConfig::hybrid(5, DenseConfig::On { top_n: 5 });
    assert!(matches!(
        compile(&inputs, &query("alice", "x", None, 50), &dense),
        Err(CompileError::MissingDenseInput)
    ));
    let lexical = CompileConfig::hybrid(5, DenseConfig::Off);
    assert!(matches!(
        compile(&inputs, &query("bob", "x", None, 50), &lexical),
        Err(CompileError::NamespaceMismatch { .. })
    ));
    let mut rerank = lexical.clone();
    rerank.rerank = RerankConfig::On { depth: 4, weight: 1.0 };
    assert!(matches!(
        compile(&inputs, &query("alice", "x", None, 50), &rerank),
        Err(CompileError::RerankerMismatch { .. })
    ));
    let other = Bm25Index::new(Bm25Params { k1: 0.9, b: 0.4 });
    let inputs = CompileInputs { lexical: &other, ..inputs };
    let err = compile(&inputs, &query("alice", "x", None, 50), &lexical).unwrap_err();
    assert!(matches!(err, CompileError::Bm25Mismatch { .. }), "{err}");
}
