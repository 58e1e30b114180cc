//! How the servers compile context: the dense side (the pinned encoder and the store's embedding
//! cache) or, when the operator asked for it, lexical retrieval alone; the default compile
//! configuration; and the reader tokenizers requests may name.
//!
//! Dense retrieval needs every stored turn embedded, so appends through the servers embed their
//! texts first and store the vectors together with the ledger append (under one write lock that
//! erasures take too). Overlength texts are refused before anything is stored.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use evicortex::compiler::{
    CompileConfig, CompileQuery, CompiledContext, DenseConfig, ReaderTokenizer,
};
use evicortex::{
    CompileRequest as MemoryCompileRequest, DenseRequest, EmbeddingCache, EmbeddingCacheError,
    Memory, QueryVector,
};
use evicortex_core::{Namespace, TextDigest, TokenBudget, Turn};
use evicortex_embed::{EmbeddingRole, Encoder, TextEmbedding};

use crate::dto::CompileRequest;
use crate::{ApiError, facade_errors};

/// Reader tokenizers a request may name. Paths to tokenizer files are not accepted from
/// requests: a client must not make the server open files.
pub const READER_TOKENIZERS: [&str; 2] = ["o200k_base", "cl100k_base"];

/// Candidates per retriever in the default configuration.
pub const DEFAULT_TOP_N: usize = 50;

/// The compile side of a server.
#[derive(Debug)]
pub struct Retrieval {
    dense: Option<DenseSide>,
    readers: Mutex<HashMap<String, Arc<dyn ReaderTokenizer>>>,
    writes: Mutex<()>,
}

/// Embeddings of a batch's texts, made before the batch is stored.
#[derive(Debug)]
pub struct PreparedEmbeddings(Vec<(TextDigest, TextEmbedding)>);

struct DenseSide {
    encoder: Arc<dyn Encoder>,
    cache: Arc<EmbeddingCache>,
}

impl std::fmt::Debug for DenseSide {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseSide")
            .field("encoder", &self.encoder.identity().model)
            .field("cache", &self.cache)
            .finish()
    }
}

impl Retrieval {
    /// Lexical (BM25) retrieval only, chosen explicitly by the operator: nothing is embedded and
    /// compile requests may not turn dense retrieval on.
    pub fn lexical_only() -> Retrieval {
        Retrieval { dense: None, readers: Mutex::default(), writes: Mutex::default() }
    }

    /// Hybrid retrieval: BM25 plus cosine under `encoder`, with vectors in `memory`'s embedding
    /// cache, which is attached to `memory` so that erasures purge it.
    pub fn hybrid(
        memory: &Memory,
        encoder: Arc<dyn Encoder>,
    ) -> Result<Retrieval, EmbeddingCacheError> {
        let cache = EmbeddingCache::attach_to(memory)?;
        Ok(Retrieval {
            dense: Some(DenseSide { encoder, cache }),
            readers: Mutex::default(),
            writes: Mutex::default(),
        })
    }

    /// Whether dense retrieval is available.
    pub fn is_hybrid(&self) -> bool {
        self.dense.is_some()
    }

    /// The configuration used when a request gives no `options`: stated in full in every output.
    pub fn default_config(&self) -> CompileConfig {
        match self.dense {
            Some(_) => {
                CompileConfig::hybrid(DEFAULT_TOP_N, DenseConfig::On { top_n: DEFAULT_TOP_N })
            }
            None => CompileConfig::hybrid(DEFAULT_TOP_N, DenseConfig::Off),
        }
    }

    /// Refuses, before anything is stored, texts the encoder would refuse (overlength under the
    /// `refuse` policy), naming the turn.
    pub fn check_embeddable(&self, turns: &[Turn]) -> Result<(), ApiError> {
        let Some(dense) = &self.dense else { return Ok(()) };
        let texts: Vec<&str> = turns.iter().map(|t| t.text.as_str()).collect();
        let counts = dense
            .encoder
            .count_tokens_many(EmbeddingRole::Document, &texts)
            .map_err(|e| ApiError::invalid("turns", e))?;
        let config = dense.encoder.identity();
        for (i, tokens) in counts.into_iter().enumerate() {
            if tokens > config.max_tokens
                && config.overlength == evicortex_embed::Overlength::Refuse
            {
                return Err(ApiError::invalid(
                    format!("turns[{i}].text"),
                    format!(
                        "is {tokens} encoder tokens, over the encoder's maximum of {}; the server \
                         refuses overlength texts (start it with --overlength window to embed them \
                         as windows)",
                        config.max_tokens
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Embeds the distinct texts of `turns` (before they are stored, outside any lock).
    pub fn embed(&self, turns: &[Turn]) -> Result<PreparedEmbeddings, ApiError> {
        let Some(dense) = &self.dense else { return Ok(PreparedEmbeddings(Vec::new())) };
        let mut seen = std::collections::HashSet::new();
        let texts: Vec<(TextDigest, &str)> = turns
            .iter()
            .map(|t| (TextDigest::of(&t.text), t.text.as_str()))
            .filter(|(digest, _)| seen.insert(*digest))
            .collect();
        let plain: Vec<&str> = texts.iter().map(|(_, text)| *text).collect();
        let embeddings = dense
            .encoder
            .embed_documents(&plain)
            .map_err(|e| ApiError::Storage { message: format!("embedding the turns: {e}") })?;
        Ok(PreparedEmbeddings(texts.iter().map(|(digest, _)| *digest).zip(embeddings).collect()))
    }

    /// Serialises the server's writes: an append together with storing its embeddings, and an
    /// erasure together with its purge, so that an erasure can never be followed by the
    /// re-insertion of an erased text's vectors.
    pub fn write_lock(&self) -> std::sync::MutexGuard<'_, ()> {
        self.writes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stores embeddings made by [`Retrieval::embed`] for turns that are now in the ledger.
    pub fn store(&self, prepared: &PreparedEmbeddings) -> Result<(), ApiError> {
        let Some(dense) = &self.dense else { return Ok(()) };
        if prepared.0.is_empty() {
            return Ok(());
        }
        let rows: Vec<_> =
            prepared.0.iter().map(|(digest, embedding)| (*digest, embedding)).collect();
        dense.cache.put(dense.encoder.identity(), &rows).map_err(|e| ApiError::Storage {
            message: format!(
                "the turns are stored, but storing their embeddings failed ({e}); resending the \
                 same request is safe and retries it"
            ),
        })?;
        Ok(())
    }

    /// Compiles `request` over `namespace`.
    pub fn compile(
        &self,
        memory: &Memory,
        namespace: &Namespace,
        request: CompileRequest,
    ) -> Result<CompiledContext, ApiError> {
        if request.query.trim().is_empty() {
            return Err(ApiError::invalid("query", "is empty"));
        }
        let reader = self.reader(&request.reader_tokenizer)?;
        let config = match request.options {
            None => self.default_config(),
            Some(options) => {
                serde_json::from_value::<CompileConfig>(serde_json::Value::Object(options))
                    .map_err(|e| ApiError::invalid("options", e))?
            }
        };
        let dense = match (&self.dense, config.dense) {
            (Some(dense), DenseConfig::On { .. }) => Some(DenseRequest {
                cache: &dense.cache,
                identity: dense.encoder.identity(),
                query: QueryVector::Encode(dense.encoder.as_ref()),
            }),
            (None, DenseConfig::On { .. }) => {
                return Err(ApiError::invalid(
                    "options.dense",
                    "dense retrieval is not available: this server runs lexical-only",
                ));
            }
            (_, DenseConfig::Off) => None,
        };
        let query = CompileQuery {
            namespace: namespace.clone(),
            question: request.query,
            as_of: request.as_of,
            budget: TokenBudget::new(request.budget),
        };
        let compile_request =
            MemoryCompileRequest { query, config, reader: reader.as_ref(), dense, reranker: None };
        memory.compile(&compile_request).map_err(facade_errors::compile)
    }

    fn reader(&self, name: &str) -> Result<Arc<dyn ReaderTokenizer>, ApiError> {
        if !READER_TOKENIZERS.contains(&name) {
            return Err(ApiError::invalid(
                "reader_tokenizer",
                format!(
                    "unknown reader tokenizer {name:?}; this server accepts {}",
                    READER_TOKENIZERS.join(", ")
                ),
            ));
        }
        let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(reader) = readers.get(name) {
            return Ok(Arc::clone(reader));
        }
        let reader: Arc<dyn ReaderTokenizer> = evicortex::compiler::reader_tokenizer(name)
            .map_err(|e| ApiError::Unavailable {
                message: format!("reader tokenizer {name}: {e}"),
            })?
            .into();
        readers.insert(name.to_owned(), Arc::clone(&reader));
        Ok(reader)
    }
}
