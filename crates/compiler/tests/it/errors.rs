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

#[test]
fn further_encoders_add_their_lists_and_more_than_the_maximum_are_refused() {
    use evicortex_compiler::{DenseInput, MAX_ALSO_ENCODERS, Retriever};
    let (records, erased) = conversation();
    let built = build("alice", records, erased);
    let reader = TiktokenReader::o200k_base();
    let q = query("alice", "lake swim", None, 200);
    let vector = crate::fixture::bag_of_words(&q.question);
    let input = DenseInput {
        index: &built.dense,
        query_vector: &vector,
        encoder: &built.encoder,
        pending: 0,
    };
    let also = vec![input; MAX_ALSO_ENCODERS + 1];
    let inputs = CompileInputs {
        corpus: &built.corpus,
        lexical: &built.lexical,
        dense: Some(input),
        also_dense: &also[..1],
        context: ContextInputs::default(),
        reader: &reader,
        reranker: None,
    };
    let dense = CompileConfig::hybrid(5, DenseConfig::On { top_n: 5 });
    let context = compile(&inputs, &q, &dense).unwrap();
    assert_eq!(context.also_dense.len(), 1);
    let first = &context.items[0];
    assert!(
        first.lists.iter().any(|l| l.list == Retriever::DenseAlso(0) && l.rank == 1),
        "{}",
        context.explain()
    );
    for name in ["dense_2", "dense_4_named", "lexical_context"] {
        let list: Retriever = name.parse().unwrap();
        assert_eq!(list.as_str(), name);
        assert_eq!(serde_json::to_string(&list).unwrap(), format!("\"{name}\""));
    }
    assert!("dense_5".parse::<Retriever>().is_err());

    let inputs = CompileInputs { also_dense: &also, ..inputs };
    let err = compile(&inputs, &q, &dense).unwrap_err();
    assert!(matches!(err, CompileError::TooManyEncoders { given: 5, max: 4 }), "{err}");
    let inputs = CompileInputs { dense: None, also_dense: &also[..1], ..inputs };
    let lexical = CompileConfig::hybrid(5, DenseConfig::Off);
    let err = compile(&inputs, &q, &lexical).unwrap_err();
    assert!(matches!(err, CompileError::UnexpectedDenseInput), "{err}");
}
