//! `Memory::compile`: the context compiler over this store's ledger, with per-namespace indexes
//! built from the ledger (and the embedding cache for dense retrieval), cached in memory, and
//! refreshed when the ledger head moves.
//!
//! Indexes record the ledger head they cover. New turns are added incrementally; an erasure
//! anywhere in the ledger (a new redaction record) rebuilds the namespace's indexes from the
//! ledger, so erased text never survives in a derived index.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
    time::{Duration, Instant},
};

use evicortex_compiler::{
    CompileConfig, CompileInputs, CompileQuery, CompiledContext, Corpus, CorpusError, DenseConfig,
    DenseInput, EncoderRef, ReaderTokenizer, Reranker, StageTimings, compile_timed,
};
use evicortex_core::{Namespace, TurnId};
use evicortex_embed::{
    EmbedError, Encoder, EncoderIdentity, EncoderIdentityDigest, IdentifiedVector,
};
use evicortex_lexical::{Bm25Index, Bm25Params, LexicalError};
use evicortex_vector::{ExactIndex, VectorError, VectorIndex, WindowedIndex};

use crate::{EmbeddingCache, EmbeddingCacheError, Memory, ReadError};

/// What to compile and how.
#[derive(Debug)]
pub struct CompileRequest<'a> {
    /// Namespace, question, as-of time and budget.
    pub query: CompileQuery,
    /// Every result-changing setting.
    pub config: CompileConfig,
    /// The reader's tokenizer (see [`evicortex_compiler::reader_tokenizer`]).
    pub reader: &'a dyn ReaderTokenizer,
    /// The dense side; required exactly when `config.dense` is on.
    pub dense: Option<DenseRequest<'a>>,
    /// The reranker; required exactly when `config.rerank` is on.
    pub reranker: Option<&'a dyn Reranker>,
}

/// Where dense candidates come from.
#[derive(Debug)]
pub struct DenseRequest<'a> {
    /// The store's embedding cache, holding the turns' vectors.
    pub cache: &'a EmbeddingCache,
    /// The encoder identity the vectors must have.
    pub identity: &'a EncoderIdentity,
    /// The question's vector, given or computed.
    pub query: QueryVector<'a>,
}

/// The question's embedding.
pub enum QueryVector<'a> {
    /// Already embedded (no model needed); its identity must match.
    Precomputed(&'a IdentifiedVector),
    /// Embed it with this encoder, whose identity must match.
    Encode(&'a dyn Encoder),
}

impl std::fmt::Debug for QueryVector<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QueryVector::Precomputed(v) => f.debug_tuple("Precomputed").field(&v.identity).finish(),
            QueryVector::Encode(e) => f.debug_tuple("Encode").field(&e.identity().model).finish(),
        }
    }
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
    /// Embedding the question (zero when precomputed or dense is off).
    pub query_embedding: Duration,
}

/// Why [`Memory::compile`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CompileError {
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
        source: CorpusError,
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
    /// Reading vectors from the embedding cache failed.
    #[error("reading turn vectors from the embedding cache")]
    EmbeddingCache(#[from] EmbeddingCacheError),
    /// Embedding the question failed, or its identity does not match the stored vectors'.
    #[error("embedding the question")]
    Embed(#[from] EmbedError),
    /// The question embedded into several windows (longer than the encoder's maximum).
    #[error("the question is longer than the encoder's maximum ({windows} windows); shorten it")]
    QueryTooLong {
        /// Windows produced.
        windows: usize,
    },
}

impl CompileError {
    /// What kind of failure this is, for exit codes and HTTP statuses; `None` for embedding and
    /// cache failures, whose source (e.g. a missing model) says it better.
    pub fn class(&self) -> Option<crate::ErrorClass> {
        use crate::ErrorClass;
        use evicortex_compiler::CompileError as Inner;
        Some(match self {
            CompileError::Compile(inner) => match inner {
                Inner::ReaderTokenizer(evicortex_compiler::ReaderTokenizerError::Encode {
                    ..
                })
                | Inner::Rerank { .. } => ErrorClass::Internal,
                Inner::Vector(_) => ErrorClass::Integrity,
                _ => ErrorClass::BadInput,
            },
            CompileError::Read(e) => ErrorClass::of_read(e),
            CompileError::Corpus { .. } | CompileError::Vector { .. } => ErrorClass::Integrity,
            CompileError::QueryTooLong { .. } => ErrorClass::BadInput,
            CompileError::EmbeddingCache(_) | CompileError::Embed(_) => return None,
            CompileError::Lexical { .. } => ErrorClass::Internal,
        })
    }
}

impl Memory {
    /// Compiles a cited context for `request.query` from this store (see
    /// [`evicortex_compiler::compile`] for the pipeline).
    pub fn compile(&self, request: &CompileRequest<'_>) -> Result<CompiledContext, CompileError> {
        self.compile_report(request).map(|r| r.context)
    }

    /// [`Memory::compile`] with timings.
    pub fn compile_report(
        &self,
        request: &CompileRequest<'_>,
    ) -> Result<CompileReport, CompileError> {
        let namespace = &request.query.namespace;
        let params = Bm25Params { k1: request.config.lexical.k1, b: request.config.lexical.b };
        let started = Instant::now();
        let slot = self.indexes.slot(namespace, params);
        let mut indexes = slot.lock().unwrap_or_else(PoisonError::into_inner);
        indexes.refresh(self, namespace)?;
        let dense_identity = match (&request.dense, request.config.dense) {
            (Some(dense), DenseConfig::On { .. }) => {
                Some(indexes.dense_index(dense.cache, dense.identity, namespace)?)
            }
            _ => None,
        };
        let index_refresh = started.elapsed();

        let started = Instant::now();
        let query_vector: Option<Vec<f32>> = match &request.dense {
            None => None,
            Some(dense) => Some(query_vector(dense, &request.query.question)?),
        };
        let query_embedding = started.elapsed();

        let encoder_ref;
        let dense = match (&dense_identity, &query_vector, &request.dense) {
            (Some(digest), Some(vector), Some(dense)) => {
                let index = &indexes.dense[digest];
                encoder_ref = EncoderRef {
                    model: match &dense.identity.revision {
                        Some(revision) => format!("{}@{revision}", dense.identity.model),
                        None => dense.identity.model.clone(),
                    },
                    identity_digest: digest.to_hex(),
                };
                Some(DenseInput { index, query_vector: vector, encoder: &encoder_ref })
            }
            _ => None,
        };
        let inputs = CompileInputs {
            corpus: &indexes.corpus,
            lexical: &indexes.lexical,
            dense,
            reader: request.reader,
            reranker: request.reranker,
        };
        let (context, stages) = compile_timed(&inputs, &request.query, &request.config)?;
        Ok(CompileReport { context, stages, index_refresh, query_embedding })
    }
}

fn query_vector(dense: &DenseRequest<'_>, question: &str) -> Result<Vec<f32>, CompileError> {
    let expected = dense.identity.digest();
    match dense.query {
        QueryVector::Precomputed(vector) => {
            expected.ensure_matches(&vector.identity)?;
            Ok(vector.vector.clone())
        }
        QueryVector::Encode(encoder) => {
            expected.ensure_matches(&encoder.identity().digest())?;
            let embedding = encoder.embed_query(question)?;
            match embedding.single() {
                Some(vector) => Ok(vector.to_vec()),
                None => Err(CompileError::QueryTooLong { windows: embedding.windows.len() }),
            }
        }
    }
}

/// The in-memory indexes of every namespace compiled so far.
#[derive(Debug, Default)]
pub(crate) struct IndexCache {
    namespaces: Mutex<HashMap<IndexKey, Arc<Mutex<NamespaceIndexes>>>>,
}

/// A namespace and the bit patterns of its BM25 `k1` and `b`.
type IndexKey = (Namespace, [u32; 2]);

impl IndexCache {
    fn slot(&self, namespace: &Namespace, params: Bm25Params) -> Arc<Mutex<NamespaceIndexes>> {
        let key = (namespace.clone(), [params.k1.to_bits(), params.b.to_bits()]);
        let mut map = self.namespaces.lock().unwrap_or_else(PoisonError::into_inner);
        map.entry(key)
            .or_insert_with(|| Arc::new(Mutex::new(NamespaceIndexes::empty(namespace, params))))
            .clone()
    }
}

/// One namespace's corpus and indexes, and the ledger position they cover.
#[derive(Debug)]
struct NamespaceIndexes {
    corpus: Corpus,
    lexical: Bm25Index,
    params: Bm25Params,
    /// The ledger head these cover (`None`: never built).
    head: Option<TurnId>,
    /// Redaction records seen at the last build; a change means an erasure.
    redactions: u64,
    dense: HashMap<EncoderIdentityDigest, WindowedIndex>,
}

impl NamespaceIndexes {
    fn empty(namespace: &Namespace, params: Bm25Params) -> NamespaceIndexes {
        NamespaceIndexes {
            corpus: Corpus::new(namespace.clone(), Vec::new(), [])
                .expect("an empty corpus is valid"),
            lexical: Bm25Index::new(params),
            params,
            head: None,
            redactions: 0,
            dense: HashMap::new(),
        }
    }

    /// Brings the corpus and lexical index to the ledger head: new turns incrementally, a full
    /// rebuild after any erasure.
    fn refresh(&mut self, memory: &Memory, namespace: &Namespace) -> Result<(), CompileError> {
        let head = memory.head()?;
        if head.is_some() && head == self.head {
            return Ok(());
        }
        let _span = tracing::debug_span!("refresh_indexes", %namespace).entered();
        let redactions = memory.stats()?.ledger.redactions;
        let new_records = if self.head.is_none() || redactions != self.redactions {
            *self = NamespaceIndexes::empty(namespace, self.params);
            memory.evidence(namespace)?
        } else {
            match self.corpus.last_record() {
                Some(last) => memory.evidence_after(namespace, last)?,
                None => memory.evidence(namespace)?,
            }
        };
        if !new_records.is_empty() {
            self.dense.clear();
        }
        for e in new_records {
            self.lexical
                .add(e.id, &evicortex_compiler::lexical_document(&e.turn))
                .map_err(|source| CompileError::Lexical { namespace: namespace.clone(), source })?;
            self.corpus
                .push(e)
                .map_err(|source| CompileError::Corpus { namespace: namespace.clone(), source })?;
        }
        if let Some(head) = head {
            self.lexical
                .mark_covered(head)
                .map_err(|source| CompileError::Lexical { namespace: namespace.clone(), source })?;
        }
        self.head = head;
        self.redactions = redactions;
        Ok(())
    }

    /// The vector index of this namespace under `identity`, built from the embedding cache.
    fn dense_index(
        &mut self,
        cache: &EmbeddingCache,
        identity: &EncoderIdentity,
        namespace: &Namespace,
    ) -> Result<EncoderIdentityDigest, CompileError> {
        let digest = identity.digest();
        if self.dense.contains_key(&digest) {
            return Ok(digest);
        }
        let _span = tracing::debug_span!("build_vector_index", %namespace).entered();
        let vectors = cache.namespace_vectors(self.corpus.evidence(), &digest)?;
        let vector_err = |source| CompileError::Vector { namespace: namespace.clone(), source };
        let mut index = ExactIndex::new(vectors.dimension.max(identity.dimension));
        let mut window = 0u32;
        for (row, turn) in vectors.turns.iter().enumerate() {
            window = if row > 0 && vectors.turns[row - 1] == *turn { window + 1 } else { 0 };
            index.insert((*turn, window), vectors.row(row)).map_err(vector_err)?;
        }
        if let Some(head) = self.head {
            index.mark_covered(head).map_err(vector_err)?;
        }
        if !vectors.missing.is_empty() {
            tracing::warn!(
                %namespace,
                missing = vectors.missing.len(),
                "turns without a vector under this encoder are not dense candidates (run `evicortex embed`)"
            );
        }
        self.dense.insert(digest, WindowedIndex::new(index));
        Ok(digest)
    }
}

#[cfg(test)]
mod tests {
    use evicortex_compiler::{CompileConfig, TiktokenReader};
    use evicortex_core::{EventTime, TokenBudget};

    use super::*;
    use crate::{EraseTarget, IngestOptions, parse_jsonl};

    fn append(memory: &Memory, lines: &[&str]) {
        let jsonl = lines.join("\n");
        let turns = parse_jsonl("test", jsonl.as_bytes(), &IngestOptions::default()).unwrap();
        memory.append(&turns).unwrap();
    }

    fn line(ns: &str, session: &str, turn: u32, time: &str, text: &str) -> String {
        format!(
            r#"{{"namespace":"{ns}","session":"{session}","turn":{turn},"role":"user","text":"{text}","time":"{time}"}}"#
        )
    }

    fn compile(memory: &Memory, question: &str, as_of: Option<&str>) -> CompiledContext {
        let reader = TiktokenReader::o200k_base();
        let request = CompileRequest {
            query: CompileQuery {
                namespace: Namespace::new("alice").unwrap(),
                question: question.to_owned(),
                as_of: as_of.map(|t| EventTime::parse_rfc3339(t).unwrap()),
                budget: TokenBudget::new(200),
            },
            config: CompileConfig::hybrid(10, DenseConfig::Off),
            reader: &reader,
            dense: None,
            reranker: None,
        };
        memory.compile(&request).unwrap()
    }

    /// BM25 indexes the speaker's name with the text: a question naming Melanie finds what
    /// Melanie said, not the turns that address her by name.
    #[test]
    fn a_question_naming_a_speaker_finds_that_speakers_turn() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::open(dir.path()).unwrap();
        let said = |turn: u32, speaker: &str, text: &str| {
            format!(
                r#"{{"namespace":"alice","session":"s1","turn":{turn},"role":"user","speaker":"{speaker}","text":"{text}","time":"2024-05-02T10:0{turn}:00Z"}}"#
            )
        };
        append(
            &memory,
            &[
                &said(0, "Caroline", "Hi Melanie!"),
                &said(1, "Melanie", "The race was great."),
                &said(2, "Caroline", "My race is next week."),
                &said(3, "Caroline", "The race route is by the river."),
            ],
        );
        let reader = TiktokenReader::o200k_base();
        let request = CompileRequest {
            query: CompileQuery {
                namespace: Namespace::new("alice").unwrap(),
                question: "Melanie race".to_owned(),
                as_of: None,
                budget: TokenBudget::new(200),
            },
            config: CompileConfig::hybrid(1, DenseConfig::Off),
            reader: &reader,
            dense: None,
            reranker: None,
        };
        let context = memory.compile(&request).unwrap();
        assert_eq!(context.items.len(), 1, "{}", context.explain());
        assert_eq!(context.items[0].text, "The race was great.", "{}", context.explain());
    }

    #[test]
    fn follows_appends_and_erasures_and_is_reproducible_across_opens() {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::open(dir.path()).unwrap();
        append(
            &memory,
            &[
                &line("alice", "s1", 0, "2024-05-02T10:00:00Z", "I moved to Lisbon in May."),
                &line("bob", "b1", 0, "2024-05-02T10:00:00Z", "Bob also moved to Lisbon."),
            ],
        );
        let first = compile(&memory, "where did I move?", None);
        assert_eq!(first.items.len(), 1, "{}", first.explain());
        assert!(first.text.contains("I moved to Lisbon in May."));

        // A new turn is picked up incrementally; the as-of filter hides it.
        append(
            &memory,
            &[&line("alice", "s2", 0, "2024-07-01T09:00:00Z", "Then I moved again, to Porto.")],
        );
        let second = compile(&memory, "where did I move?", None);
        assert_eq!(second.items.len(), 2, "{}", second.explain());
        let before = compile(&memory, "where did I move?", Some("2024-06-01T00:00:00Z"));
        assert_eq!(before.items.len(), 1);

        // Erasure rebuilds the indexes: the erased text is gone from every context.
        let lisbon = second.items.iter().find(|i| i.text.contains("Lisbon")).unwrap().record;
        memory.erase(&EraseTarget::Record(Namespace::new("alice").unwrap(), lisbon)).unwrap();
        let after = compile(&memory, "where did I move to Lisbon?", None);
        assert!(!after.text.contains("Lisbon in May"), "{}", after.text);
        assert!(after.items.iter().all(|i| i.record != lisbon));

        // A fresh open compiles the same bytes.
        let reopened = Memory::open(dir.path()).unwrap();
        assert_eq!(
            compile(&reopened, "where did I move?", None).to_json(),
            compile(&memory, "where did I move?", None).to_json()
        );
    }
}
