//! `Memory::compile`: the context compiler over this store's ledger, with the namespace's
//! indexes taken from the index cache (brought up to the ledger head first), dense candidates
//! from the memory's encoder and embedding cache, and the memory's reranker.
//!
//! The configuration decides what runs; the memory supplies what it has. Asking for dense
//! retrieval from a memory without an encoder, or for reranking without a reranker, is refused.

use std::{
    sync::{Arc, RwLock, RwLockReadGuard},
    time::{Duration, Instant},
};

use evicortex_compiler::{
    Admission, CompileConfig, CompileInputs, CompileQuery, CompiledContext, ContextInputs,
    DenseConfig, DenseInput, EncoderRef, ReaderTokenizer, RerankConfig, StageTimings,
    compile_timed,
};
use evicortex_core::Namespace;
use evicortex_embed::{EmbedError, IdentifiedVector};
use evicortex_lexical::{Bm25Params, LexicalError};
use evicortex_vector::{VectorError, VectorIndexRead};

use crate::{
    EmbeddingCacheError, ErrorClass, Memory, ReadError,
    dense::Dense,
    index_cache::{DenseIndex, FreshKey, NamespaceIndexes},
    pg_dense::{DenseQuery, PgCandidates},
};

/// What to compile and how.
#[derive(Debug, Clone, Copy)]
pub struct CompileRequest<'a> {
    /// Namespace, question, as-of time and budget.
    pub query: &'a CompileQuery,
    /// Every result-changing setting.
    pub config: &'a CompileConfig,
    /// The reader's tokenizer (see [`crate::reader_tokenizer`]).
    pub reader: &'a dyn ReaderTokenizer,
    /// The question's embeddings the caller already has ([`Memory::embed_query_all`]), matched
    /// to the memory's encoders by identity; an encoder without one embeds the question here
    /// when dense retrieval is on, and a vector of no encoder of the memory is refused.
    pub query_vectors: &'a [IdentifiedVector],
}

/// A compiled context with the time each part took.
#[derive(Debug, Clone)]
pub struct CompileReport {
    /// The context.
    pub context: CompiledContext,
    /// Compiler stages.
    pub stages: StageTimings,
    /// Bringing the namespace's indexes up to the ledger head (zero when already current).
    pub index_refresh: Duration,
    /// Embedding the question (zero when given or dense is off).
    pub query_embedding: Duration,
}

/// Why [`Memory::compile`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
    /// The question is empty or only whitespace.
    #[error("the question is empty")]
    EmptyQuestion,
    /// The configuration asks for dense retrieval from a memory opened without an encoder.
    #[error("dense retrieval is not available: this memory has no encoder (lexical only)")]
    DenseUnavailable,
    /// The configuration turns reranking on for a memory opened without a reranker.
    #[error("reranking is not available: this memory has no reranker")]
    RerankerUnavailable,
    /// The compiler refused the inputs or configuration.
    #[error(transparent)]
    Compile(#[from] evicortex_compiler::CompileError),
    /// Reading the ledger failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Assembling the corpus failed.
    #[error("namespace {namespace}: {source}")]
    Corpus {
        /// The namespace.
        namespace: Namespace,
        /// The failure.
        source: evicortex_compiler::CorpusError,
    },
    /// Building the lexical index failed.
    #[error("namespace {namespace}: lexical index: {source}")]
    Lexical {
        /// The namespace.
        namespace: Namespace,
        /// The failure.
        source: LexicalError,
    },
    /// Building the vector index failed.
    #[error("namespace {namespace}: vector index: {source}")]
    Vector {
        /// The namespace.
        namespace: Namespace,
        /// The failure.
        source: VectorError,
    },
    /// Reading, writing or removing the namespace's vector index file failed.
    #[error("namespace {namespace}: vector index file: {source}")]
    IndexFile {
        /// The namespace.
        namespace: Namespace,
        /// The failure.
        source: evicortex_vector::IndexFileError,
    },
    /// Storing or searching the namespace's vectors in a PostgreSQL store's pgvector tables
    /// failed.
    #[error("namespace {namespace}: pgvector store: {source}")]
    VectorStore {
        /// The namespace.
        namespace: Namespace,
        /// The failure.
        source: evicortex_postgres::VectorStoreError,
    },
    /// Reading vectors from the embedding cache failed.
    #[error("reading turn vectors: {0}")]
    EmbeddingCache(#[from] EmbeddingCacheError),
    /// Embedding the question failed, or a given question vector has another identity.
    #[error("embedding the question: {0}")]
    Embed(#[from] EmbedError),
    /// Applying another process's erasures to this process's derived files failed.
    #[error("applying erasures made through another process: {0}")]
    Erasures(crate::DerivedStoreError),
    /// The question is longer than the encoder's maximum.
    #[error(
        "the question is {tokens} encoder tokens, over the encoder's maximum of {max_tokens}; \
         shorten it"
    )]
    QueryTooLong {
        /// The question's length in encoder tokens.
        tokens: usize,
        /// The encoder's maximum.
        max_tokens: usize,
    },
}

impl CompileError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        use evicortex_compiler::CompileError as Inner;
        match self {
            CompileError::EmptyQuestion
            | CompileError::DenseUnavailable
            | CompileError::RerankerUnavailable
            | CompileError::QueryTooLong { .. } => ErrorClass::BadInput,
            CompileError::Compile(inner) => match inner {
                Inner::ReaderTokenizer(evicortex_compiler::ReaderTokenizerError::Encode {
                    ..
                })
                | Inner::Rerank { .. } => ErrorClass::Internal,
                Inner::Vector(_) => ErrorClass::Integrity,
                _ => ErrorClass::BadInput,
            },
            CompileError::Read(e) => crate::error::read_class(e),
            CompileError::Corpus { .. } | CompileError::Vector { .. } => ErrorClass::Integrity,
            CompileError::Lexical { .. } | CompileError::IndexFile { .. } => ErrorClass::Internal,
            CompileError::EmbeddingCache(e) => e.class(),
            CompileError::VectorStore { source, .. } => crate::error::vector_store_class(source),
            CompileError::Embed(e) => crate::error::embed_class(e),
            CompileError::Erasures(e) => e.class(),
        }
    }

    /// The request field to blame when the caller's input is at fault (`query`, `dense`,
    /// `rerank`, or a configuration field such as `rerank.depth`).
    pub fn field(&self) -> Option<String> {
        use evicortex_compiler::CompileError as Inner;
        match self {
            CompileError::EmptyQuestion | CompileError::QueryTooLong { .. } => {
                Some("query".to_owned())
            }
            CompileError::Embed(e) if crate::error::embed_class(e) == ErrorClass::BadInput => {
                Some("query".to_owned())
            }
            CompileError::DenseUnavailable => Some("dense".to_owned()),
            CompileError::RerankerUnavailable => Some("rerank".to_owned()),
            CompileError::Compile(Inner::InvalidConfig { field, .. }) => Some((*field).to_owned()),
            _ => None,
        }
    }
}

impl Memory {
    /// Compiles a cited context for `request.query` from this store (see
    /// [`evicortex_compiler::compile`] for the pipeline).
    pub fn compile(&self, request: &CompileRequest<'_>) -> Result<CompiledContext, CompileError> {
        self.compile_report(request).map(|r| r.context)
    }

    /// The question's embedding under the memory's (leading) encoder.
    pub fn embed_query(&self, question: &str) -> Result<IdentifiedVector, CompileError> {
        let dense = self.inner.dense.as_ref().ok_or(CompileError::DenseUnavailable)?;
        embed_query_with(dense, question)
    }

    /// The question's embedding under each of the memory's encoders, the leading one first, for
    /// callers that compile one question several times ([`CompileRequest::query_vectors`]).
    pub fn embed_query_all(&self, question: &str) -> Result<Vec<IdentifiedVector>, CompileError> {
        let dense = self.inner.dense.as_ref().ok_or(CompileError::DenseUnavailable)?;
        std::iter::once(dense)
            .chain(&self.inner.also_dense)
            .map(|d| embed_query_with(d, question))
            .collect()
    }

    /// [`Memory::compile`] with timings.
    pub fn compile_report(
        &self,
        request: &CompileRequest<'_>,
    ) -> Result<CompileReport, CompileError> {
        let CompileRequest { query, config, reader, query_vectors } = *request;
        if query.question.trim().is_empty() {
            return Err(CompileError::EmptyQuestion);
        }
        config.validate()?;
        let dense = match config.dense {
            DenseConfig::On { .. } => {
                Some(self.inner.dense.as_ref().ok_or(CompileError::DenseUnavailable)?)
            }
            DenseConfig::Off => None,
        };
        let reranker = match config.rerank {
            RerankConfig::On { .. } => {
                Some(self.inner.reranker.as_deref().ok_or(CompileError::RerankerUnavailable)?)
            }
            RerankConfig::Off => None,
        };

        let started = Instant::now();
        self.apply_erasures_elsewhere()?;
        let namespace = &query.namespace;
        let slot = self.inner.indexes.slot(namespace);
        let also: &[crate::dense::Dense] =
            if dense.is_some() { &self.inner.also_dense } else { &[] };
        let indexes = self.fresh_indexes(namespace, &slot, config, dense, also)?;
        let params = Bm25Params { k1: config.lexical.k1, b: config.lexical.b };
        let analyzer = config.lexical.analyzer;
        // BM25 settings other than the cached index's get an index of their own, not cached:
        // the cache is keyed by namespace alone, never by values a client sends.
        let adhoc = if params == indexes.lexical.params() && analyzer == indexes.lexical.analyzer()
        {
            None
        } else {
            Some(indexes.lexical_with(params, analyzer, namespace)?)
        };
        let index_refresh = started.elapsed();

        let started = Instant::now();
        if let Some(dense) = dense {
            let known: Vec<_> =
                std::iter::once(dense).chain(also).map(|d| d.encoder.identity_digest()).collect();
            if let Some(stray) = query_vectors.iter().find(|v| !known.contains(&v.identity)) {
                dense.encoder.identity_digest().ensure_matches(&stray.identity)?;
            }
        }
        let vector_for = |d: &Dense| -> Result<Vec<f32>, CompileError> {
            let digest = d.encoder.identity_digest();
            match query_vectors.iter().find(|v| v.identity == digest) {
                Some(given) => Ok(given.vector.clone()),
                None => Ok(embed_query_with(d, &query.question)?.vector),
            }
        };
        let query_vector = dense.map(vector_for).transpose()?;
        let also_vectors = also.iter().map(vector_for).collect::<Result<Vec<_>, _>>()?;
        let query_embedding = started.elapsed();

        let as_of = query.as_of.map(|t| t.utc_micros());
        let admission = Admission::new(&indexes.corpus, as_of);
        let top_n = match config.dense {
            DenseConfig::On { top_n } => top_n,
            DenseConfig::Off => 0,
        };
        // A PostgreSQL store's dense lists come from pgvector; the local index (which brought
        // its vectors there) still gives the coverage and the context vectors.
        let from_pg = |d: &Dense, vector: &[f32], local: &DenseIndex| {
            let pg = self.inner.pg_dense.as_ref()?;
            let asked = DenseQuery { vector, top_n, as_of_micros: as_of };
            Some(pg.candidates(d, namespace, &asked, &admission, &local.index))
        };
        // pgvector answers before the compiler runs; its time is the dense stage's.
        let pg_started = Instant::now();
        let pg_leading = match (dense, &query_vector, &indexes.dense) {
            (Some(dense), Some(vector), Some(index)) => {
                from_pg(dense, vector, index).transpose()?
            }
            _ => None,
        };
        let pg_also = also
            .iter()
            .zip(&also_vectors)
            .zip(&indexes.also_dense)
            .map(|((d, vector), index)| {
                index.as_ref().and_then(|index| from_pg(d, vector, index)).transpose()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let pg_fetch =
            if self.inner.pg_dense.is_some() { pg_started.elapsed() } else { Duration::ZERO };

        let encoder_ref;
        let dense_input = match (dense, &query_vector, &indexes.dense) {
            (Some(dense), Some(vector), Some(index)) => {
                encoder_ref = encoder_ref_of(dense);
                Some(DenseInput {
                    index: served(index, pg_leading.as_ref()),
                    query_vector: vector,
                    encoder: &encoder_ref,
                    pending: index.missing.len() as u64,
                })
            }
            _ => None,
        };
        let context = ContextInputs {
            lexical: indexes.window.as_ref().filter(|_| config.context.lexical_radius > 0),
            dense: indexes.context_vectors.as_ref().filter(|_| config.context.dense_radius > 0),
        };
        let also_refs: Vec<EncoderRef> = also.iter().map(encoder_ref_of).collect();
        let also_inputs: Vec<DenseInput<'_>> = also_refs
            .iter()
            .zip(&also_vectors)
            .zip(&indexes.also_dense)
            .zip(&pg_also)
            .filter_map(|(((encoder, vector), index), pg)| {
                let index = index.as_ref()?;
                Some(DenseInput {
                    index: served(index, pg.as_ref()),
                    query_vector: vector,
                    encoder,
                    pending: index.missing.len() as u64,
                })
            })
            .collect();
        let inputs = CompileInputs {
            corpus: &indexes.corpus,
            lexical: adhoc.as_ref().unwrap_or(&indexes.lexical),
            dense: dense_input,
            also_dense: &also_inputs,
            context,
            reader,
            reranker,
        };
        let (context, mut stages) = compile_timed(&inputs, query, config)?;
        stages.dense += pg_fetch;
        tracing::debug!(
            %namespace,
            refresh_ms = index_refresh.as_secs_f64() * 1e3,
            query_embedding_ms = query_embedding.as_secs_f64() * 1e3,
            stages = ?stages,
            "compiled"
        );
        self.inner.precounts.offer(&slot, &indexes, reader);
        Ok(CompileReport { context, stages, index_refresh, query_embedding })
    }
}

impl Memory {
    /// `namespace`'s indexes (`slot`), shared, brought up to the ledger head and to what
    /// `config` asks for (the context indexes), with the encoders `dense` and `also`; the
    /// lexical file written when due (by a thread of its own on a server).
    pub(crate) fn fresh_indexes<'s>(
        &self,
        namespace: &Namespace,
        slot: &'s Arc<RwLock<NamespaceIndexes>>,
        config: &CompileConfig,
        dense: Option<&Dense>,
        also: &[Dense],
    ) -> Result<RwLockReadGuard<'s, NamespaceIndexes>, CompileError> {
        let asked = serde_json::to_string(config).expect("a compile config serialises");
        let key = FreshKey::now(self.view(), dense, also, asked)?;
        self.inner.indexes.refreshed(namespace, slot, key, |indexes| {
            let started = Instant::now();
            indexes.refresh(self.view(), namespace, dense, also)?;
            let turns = started.elapsed();
            indexes.refresh_context(config, namespace)?;
            indexes.asked = Some(config.clone());
            let context = started.elapsed() - turns;
            match self.inner.indexes.lexical_quiet {
                None => crate::lexical_file::save_if_grown(self.view(), namespace, indexes)?,
                Some(quiet) => {
                    if crate::lexical_file::due(&self.inner.indexes, indexes)
                        && indexes.claim_saving()
                    {
                        crate::lexical_file::save_when_quiet(&self.inner, slot, namespace, quiet);
                    }
                }
            }
            tracing::debug!(
                %namespace,
                turns_ms = turns.as_secs_f64() * 1e3,
                context_ms = context.as_secs_f64() * 1e3,
                files_ms = (started.elapsed() - turns - context).as_secs_f64() * 1e3,
                "indexes refreshed"
            );
            Ok(())
        })
    }
}

/// The dense list's source: pgvector's candidates on a PostgreSQL store, else the local index.
fn served<'a>(local: &'a DenseIndex, pg: Option<&'a PgCandidates>) -> &'a dyn VectorIndexRead {
    match pg {
        Some(pg) => pg,
        None => &local.index,
    }
}

/// `question` embedded as a query by `dense`'s encoder, refused when over its maximum.
fn embed_query_with(dense: &Dense, question: &str) -> Result<IdentifiedVector, CompileError> {
    let embedding = dense.encoder.embed_query(question)?;
    match embedding.single() {
        Some(vector) => Ok(IdentifiedVector {
            identity: dense.encoder.identity_digest(),
            vector: vector.to_vec(),
        }),
        None => Err(CompileError::QueryTooLong {
            tokens: embedding.token_count,
            max_tokens: dense.encoder.identity().max_tokens,
        }),
    }
}

/// How a compiled context names `dense`'s encoder: model, revision and identity digest.
fn encoder_ref_of(dense: &Dense) -> EncoderRef {
    let identity = dense.encoder.identity();
    EncoderRef {
        model: match &identity.revision {
            Some(revision) => format!("{}@{revision}", identity.model),
            None => identity.model.clone(),
        },
        // The encoder's own digest of its identity: computing it again costs a canonical JSON
        // and a hash at every compile.
        identity_digest: dense.encoder.identity_digest().to_hex(),
    }
}

#[cfg(test)]
mod tests;
