//! Errors of compiling a context.

use evicortex_core::{Namespace, TurnId};

use crate::ReaderTokenizerError;

/// Why a context could not be compiled. Abstention is not an error; see
/// [`crate::CompiledContext::abstain`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// A configuration field out of range or inconsistent with another.
    #[error("config {field}: {reason}")]
    InvalidConfig {
        /// The field, dotted (`rerank.depth`).
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The query's namespace is not the corpus's.
    #[error("query namespace {query} does not match the corpus namespace {corpus}")]
    NamespaceMismatch {
        /// The query's namespace.
        query: Namespace,
        /// The corpus's namespace.
        corpus: Namespace,
    },
    /// Dense retrieval is on but no query vector and index were given.
    #[error("dense retrieval is on but no query embedding was given")]
    MissingDenseInput,
    /// A query vector and index were given although dense retrieval is off.
    #[error("a dense input was given but config dense is off")]
    UnexpectedDenseInput,
    /// More encoders were given than a compile fuses.
    #[error("{given} encoders given; a compile fuses at most {max}")]
    TooManyEncoders {
        /// Encoders given (the first and the further ones).
        given: usize,
        /// The most a compile fuses.
        max: usize,
    },
    /// The lexical index was built with other BM25 parameters than the configuration states.
    #[error(
        "lexical index uses k1 = {index_k1}, b = {index_b}; config says k1 = {config_k1}, b = {config_b}"
    )]
    Bm25Mismatch {
        /// The index's k1.
        index_k1: f32,
        /// The index's b.
        index_b: f32,
        /// The configuration's k1.
        config_k1: f32,
        /// The configuration's b.
        config_b: f32,
    },
    /// The lexical index was built with another analyzer than the configuration states.
    #[error("lexical index uses the analyzer {index}; config says {config}")]
    AnalyzerMismatch {
        /// The index's analyzer version.
        index: &'static str,
        /// The configuration's.
        config: &'static str,
    },
    /// A context list is on but its index was not given, or was built for another window or
    /// analyzer, or from an older corpus.
    #[error("context list {list}: {reason}")]
    ContextInput {
        /// `lexical_context` or `dense_context`.
        list: &'static str,
        /// What does not match.
        reason: String,
    },
    /// The dense index failed (dimension mismatch, unusable query vector).
    #[error("dense retrieval: {0}")]
    Vector(#[from] evicortex_vector::VectorError),
    /// The reader tokenizer failed.
    #[error(transparent)]
    ReaderTokenizer(#[from] ReaderTokenizerError),
    /// The reranker failed or returned unusable scores.
    #[error("reranker {reranker}: {reason}")]
    Rerank {
        /// The reranker's name.
        reranker: String,
        /// What went wrong.
        reason: String,
    },
    /// A reranker was given although reranking is off, or none although it is on.
    #[error("config rerank is {config} but {given} reranker was given")]
    RerankerMismatch {
        /// `"on"` or `"off"`.
        config: &'static str,
        /// `"a"` or `"no"`.
        given: &'static str,
    },
}

/// Why a corpus could not be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CorpusError {
    /// Two evidence records share a ledger id.
    #[error("record {record} appears twice")]
    DuplicateRecord {
        /// The repeated id.
        record: TurnId,
    },
    /// An appended record is not after the corpus's last one.
    #[error("record {record} is not after the corpus's last record {last}")]
    OutOfOrder {
        /// The appended id.
        record: TurnId,
        /// The last id held.
        last: TurnId,
    },
}
