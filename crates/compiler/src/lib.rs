//! The context compiler: for a question, the original turns that support it, cited, inside a hard
//! budget counted in the reader's own tokens, or an abstention.
//!
//! Pipeline ([`compile`]): lexical and dense candidates over each turn's document
//! ([`turn_document`]), and context candidates over its window of session neighbours
//! ([`WindowIndex`], [`ContextVectors`]), with the namespace, as-of and erasure filters applied
//! inside candidate generation; dedup of identical documents (earliest kept, all cited); each
//! turn list again filtered to the speakers the question names; reciprocal-rank fusion with an
//! explicit `k`; the fused candidates said in the question's time window as one more list, and
//! optionally those of the best-scored sessions as another ([`SessionConfig`]); an
//! optional [`Reranker`] over at most 16 fused candidates whose ordinal ranks add one more RRF
//! term; a support score and threshold for abstention; greedy selection in fused order, or with
//! long turns' scores scaled down by their length, optionally spread over sessions
//! ([`SessionSpread`]), with optional adjacent-turn expansion; a
//! chronological layout grouped by session; and an exact count of the rendered block in the
//! reader's tokenizer, trimmed until it fits, then filled with further whole candidate turns while
//! it still fits. The compiler takes plain inputs ([`Corpus`], a `Bm25Index`, a
//! `VectorIndexRead`, the context indexes and a precomputed query vector): no ledger, no model.
//!
//! ```
//! use evicortex_compiler::{
//!     CompileConfig, CompileInputs, CompileQuery, Corpus, DenseConfig, TiktokenReader, compile,
//!     turn_document,
//! };
//! use evicortex_core::*;
//! use evicortex_lexical::{Bm25Index, Bm25Params};
//!
//! let ns = Namespace::new("alice").unwrap();
//! let turn = |i: u32, text: &str| Evidence {
//!     id: TurnId::from_raw(u64::from(i)),
//!     digest: EvidenceDigest::from_bytes([0; 32]),
//!     turn: Turn {
//!         namespace: ns.clone(),
//!         session: SessionId::new("s1").unwrap(),
//!         turn: TurnIndex::new(i),
//!         role: Role::User,
//!         speaker: None,
//!         text: text.to_owned(),
//!         time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
//!         meta: Default::default(),
//!     },
//! };
//! let evidence = vec![turn(0, "I moved to Lisbon in May."), turn(1, "My cat is called Tom.")];
//! let mut lexical = Bm25Index::new(Bm25Params { k1: 1.2, b: 0.75 });
//! for e in &evidence {
//!     lexical.add(e.id, &turn_document(&e.turn)).unwrap();
//! }
//! let corpus = Corpus::new(ns.clone(), evidence, []).unwrap();
//! let reader = TiktokenReader::o200k_base();
//! let inputs = CompileInputs {
//!     corpus: &corpus,
//!     lexical: &lexical,
//!     dense: None,
//!     also_dense: &[],
//!     context: Default::default(),
//!     reader: &reader,
//!     reranker: None,
//! };
//! let query = CompileQuery {
//!     namespace: ns,
//!     question: "Where did I move?".into(),
//!     as_of: None,
//!     budget: TokenBudget::new(60),
//! };
//! let context = compile(&inputs, &query, &CompileConfig::hybrid(10, DenseConfig::Off)).unwrap();
//! assert!(context.text.contains("[#0] 10:00 user: I moved to Lisbon in May."));
//! assert!(context.tokens_used <= 60);
//! ```
#![warn(missing_docs)]

mod abstain;
mod candidates;
mod compile;
mod compiled_context;
mod config;
mod context_index;
mod corpus;
mod coverage;
mod dedup;
mod error;
mod excerpt;
mod feedback;
mod filter;
mod fusion;
mod measure;
mod names;
mod pack;
mod pack_ranked;
mod pack_turns;
mod query;
mod reader_tokens;
mod render;
mod rerank;
mod session_list;
mod spread;
#[cfg(test)]
mod test_corpus;
mod time_window;
mod turn_document;

/// Which turns a compile admits (namespace, as-of, erased): exported for dense candidates the
/// caller fetches itself (a PostgreSQL store's pgvector lists).
pub use crate::filter::Admission;
pub use crate::{
    abstain::lexical_coverage,
    candidates::{MAX_ALSO_ENCODERS, Retriever},
    compile::{
        CompileInputs, ContextInputs, DenseInput, PARALLEL_STAGES_FROM, StageTimings, compile,
        compile_timed, compile_timed_beside_from,
    },
    compiled_context::{
        AbstainReason, AlsoDenseRef, BudgetParts, COMPILED_CONTEXT_FORMAT, CompiledContext,
        ContextItem, ContextSearch, Coverage, DenseIndexRef, EncoderRef, ExcludedCandidate,
        ExclusionReason, ListRank, RankScore, Selection,
    },
    config::{
        AbstentionConfig, CompileConfig, ContextConfig, CoverageConfig, DEFAULT_TOP_N, DedupPolicy,
        DenseConfig, ExcerptConfig, Expansion, FeedbackConfig, Layout, LexicalConfig, LinksConfig,
        LongTurns, NamesConfig, RerankConfig, SessionConfig, SessionSpread, SpreadQuestions,
        SupportSignal, TimeConfig,
    },
    context_index::{ContextVectors, WindowIndex},
    corpus::Corpus,
    error::{CompileError, CorpusError},
    excerpt::Excerpt,
    feedback::{FeedbackReport, LinkName},
    filter::FilterReason,
    names::named_speakers,
    pack_ranked::{PackPolicy, RankedPack, pack_ranked},
    query::CompileQuery,
    reader_tokens::{ReaderTokenizer, ReaderTokenizerError, TiktokenReader, reader_tokenizer},
    render::{
        PREAMBLE, RenderTurn, layout_header, layout_prefix, render_block, render_chronological,
        session_header, turn_prefix,
    },
    rerank::{MAX_RERANK_DEPTH, RerankError, Reranker},
    time_window::{ResolvedTime, resolve_time},
    turn_document::turn_document,
};
// Pipeline stages, named across the crate's modules but not part of its API.
pub(crate) use crate::{
    candidates::{RankedList, ScoredKey},
    fusion::FusedHit,
    pack::{BudgetPlanner, fill_exactly, fit_exactly},
};
