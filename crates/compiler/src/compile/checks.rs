//! What a compile checks before it starts: the inputs agree with the query and the
//! configuration (namespace, BM25 parameters, analyzer, context indexes, encoders, reranker).

use evicortex_lexical::Bm25Index;

use crate::{CompileConfig, CompileError, CompileInputs, CompileQuery, DenseConfig, RerankConfig};

pub(super) fn check_inputs(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
) -> Result<(), CompileError> {
    config.validate()?;
    if query.namespace != *inputs.corpus.namespace() {
        return Err(CompileError::NamespaceMismatch {
            query: query.namespace.clone(),
            corpus: inputs.corpus.namespace().clone(),
        });
    }
    check_lexical_index(inputs.lexical, config)?;
    check_context_inputs(inputs, config)?;
    match (config.dense, inputs.dense) {
        (DenseConfig::On { .. }, None) => return Err(CompileError::MissingDenseInput),
        (DenseConfig::Off, Some(_)) => return Err(CompileError::UnexpectedDenseInput),
        (DenseConfig::Off, None) if !inputs.also_dense.is_empty() => {
            return Err(CompileError::UnexpectedDenseInput);
        }
        _ => {}
    }
    if inputs.also_dense.len() > crate::MAX_ALSO_ENCODERS {
        return Err(CompileError::TooManyEncoders {
            given: inputs.also_dense.len() + 1,
            max: crate::MAX_ALSO_ENCODERS + 1,
        });
    }

    match (config.rerank, inputs.reranker) {
        (RerankConfig::On { .. }, None) => {
            Err(CompileError::RerankerMismatch { config: "on", given: "no" })
        }
        (RerankConfig::Off, Some(_)) => {
            Err(CompileError::RerankerMismatch { config: "off", given: "a" })
        }
        _ => Ok(()),
    }
}

fn check_lexical_index(index: &Bm25Index, config: &CompileConfig) -> Result<(), CompileError> {
    let params = index.params();
    if params.k1 != config.lexical.k1 || params.b != config.lexical.b {
        return Err(CompileError::Bm25Mismatch {
            index_k1: params.k1,
            index_b: params.b,
            config_k1: config.lexical.k1,
            config_b: config.lexical.b,
        });
    }
    if index.analyzer() != config.lexical.analyzer {
        return Err(CompileError::AnalyzerMismatch {
            index: index.analyzer().version(),
            config: config.lexical.analyzer.version(),
        });
    }
    Ok(())
}

fn check_context_inputs(
    inputs: &CompileInputs<'_>,
    config: &CompileConfig,
) -> Result<(), CompileError> {
    let corpus_len = inputs.corpus.len();
    let radius = config.context.lexical_radius;
    match (radius > 0 && config.lexical.top_n > 0, inputs.context.lexical) {
        (true, None) => {
            return Err(CompileError::ContextInput {
                list: "lexical_context",
                reason: "it is on but no window index was given".to_owned(),
            });
        }
        (true, Some(window)) => {
            let problem = if window.radius() != radius {
                Some(format!("the index has radius {}, config {radius}", window.radius()))
            } else if window.built_for() != corpus_len {
                Some(format!(
                    "the index was built from {} records, the corpus has {corpus_len}",
                    window.built_for()
                ))
            } else {
                None
            };
            if let Some(reason) = problem {
                return Err(CompileError::ContextInput { list: "lexical_context", reason });
            }
            check_lexical_index(window.index(), config)?;
        }
        (false, _) => {}
    }
    let radius = config.context.dense_radius;
    let dense_on = matches!(config.dense, DenseConfig::On { .. });
    match (radius > 0 && dense_on, inputs.context.dense) {
        (true, None) => Err(CompileError::ContextInput {
            list: "dense_context",
            reason: "it is on but no context vectors were given".to_owned(),
        }),
        (true, Some(vectors)) if vectors.radius() != radius => Err(CompileError::ContextInput {
            list: "dense_context",
            reason: format!("the vectors have radius {}, config {radius}", vectors.radius()),
        }),
        (true, Some(vectors)) if vectors.built_for() != corpus_len => {
            Err(CompileError::ContextInput {
                list: "dense_context",
                reason: format!(
                    "the vectors were built from {} records, the corpus has {corpus_len}",
                    vectors.built_for()
                ),
            })
        }
        _ => Ok(()),
    }
}
