//! The pipeline: candidates (turn and context lists, filtered inside) -> dedup -> names lists ->
//! RRF -> time-window list and RRF again -> session list and RRF again -> rerank -> support and abstention -> selection in the
//! long-turn rule's order, expansion, exact fit and fill (`pack_turns`) -> manifest.

mod candidate_stage;
mod checks;
mod fusion_stage;
mod pack_stage;

use std::time::{Duration, Instant};

use evicortex_core::TurnId;
use evicortex_lexical::Bm25Index;
use evicortex_vector::VectorIndexRead;

use crate::{
    CompileConfig, CompileError, CompileQuery, CompiledContext, ContextVectors, Corpus, Coverage,
    DedupPolicy, EncoderRef, ReaderTokenizer, Reranker, WindowIndex,
    compiled_context::{AlsoDenseRef, COMPILED_CONTEXT_FORMAT},
    context_index::window_admitted,
    filter::Admission,
};

/// Everything a compile reads besides the query and configuration. No ledger, no model: the
/// dense side is a precomputed query vector and an index.
#[derive(Clone, Copy, Debug)]
pub struct CompileInputs<'a> {
    /// The namespace's evidence.
    pub corpus: &'a Corpus,
    /// BM25 over the same evidence.
    pub lexical: &'a Bm25Index,
    /// The dense side; required exactly when `config.dense` is on.
    pub dense: Option<DenseInput<'a>>,
    /// Also-encoders whose dense lists fusion adds beside `dense`'s (at most
    /// [`MAX_ALSO_ENCODERS`](crate::MAX_ALSO_ENCODERS), each with its own index and query
    /// vector); empty when `config.dense` is off. Context vectors and the dense abstention
    /// signal stay `dense`'s.
    pub also_dense: &'a [DenseInput<'a>],
    /// The context lists' indexes; each required when `config.context` turns its list on.
    pub context: ContextInputs<'a>,
    /// The reader's tokenizer.
    pub reader: &'a dyn ReaderTokenizer,
    /// The reranker; required exactly when `config.rerank` is on.
    pub reranker: Option<&'a dyn Reranker>,
}

/// The indexes of the context lists, built from the same corpus (see [`WindowIndex`] and
/// [`ContextVectors`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct ContextInputs<'a> {
    /// BM25 over window documents, for `context.lexical_radius`.
    pub lexical: Option<&'a WindowIndex>,
    /// Context vectors, for `context.dense_radius`.
    pub dense: Option<&'a ContextVectors>,
}

/// The dense side of a compile.
#[derive(Clone, Copy)]
pub struct DenseInput<'a> {
    /// Vectors of the namespace's turns under one encoder.
    pub index: &'a dyn VectorIndexRead,
    /// The question embedded as a query by the same encoder.
    pub query_vector: &'a [f32],
    /// That encoder.
    pub encoder: &'a EncoderRef,
    /// Turns of the corpus that have no vector in `index` yet (not embedded so far): dense
    /// coverage lags by that many, and the compiled context says so.
    pub pending: u64,
}

impl std::fmt::Debug for DenseInput<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseInput")
            .field("dim", &self.query_vector.len())
            .field("encoder", self.encoder)
            .finish()
    }
}

/// Wall time per stage of one compile (kept out of [`CompiledContext`], which must be
/// reproducible byte for byte).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimings {
    /// Lexical candidate generation: the turn list's time plus the window list's (on a large
    /// namespace they run beside the dense lists, and may run beside each other).
    pub lexical: Duration,
    /// Dense candidate generation.
    pub dense: Duration,
    /// Dedup, fusion, reranking and support.
    pub fuse: Duration,
    /// Selection, expansion, rendering and exact counting.
    pub pack: Duration,
}

/// Compiles `query` under `config`.
pub fn compile(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
) -> Result<CompiledContext, CompileError> {
    compile_timed(inputs, query, config).map(|(context, _)| context)
}

/// [`compile`] that also reports per-stage wall time.
pub fn compile_timed(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
) -> Result<(CompiledContext, StageTimings), CompileError> {
    compile_timed_beside_from(inputs, query, config, PARALLEL_STAGES_FROM)
}

/// [`compile_timed`] with the records from which the lexical lists are searched on a second
/// thread beside the dense lists (the product's is [`PARALLEL_STAGES_FROM`]); the compiled
/// context is the same whatever it is.
pub fn compile_timed_beside_from(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
    beside_from: usize,
) -> Result<(CompiledContext, StageTimings), CompileError> {
    let _span = tracing::debug_span!("compile", namespace = %query.namespace).entered();
    checks::check_inputs(inputs, query, config)?;
    let corpus = inputs.corpus;
    let admission = Admission::new(corpus, query.as_of.map(|t| t.utc_micros()));
    // A context list ranks a turn only when its whole window is admitted; without an as-of
    // time every eligible record is, and windows hold eligible records only.
    let context_admits = |id: TurnId, radius: u32| match admission.position(id) {
        None => false,
        Some(_) if query.as_of.is_none() => true,
        Some(pos) => window_admitted(corpus, pos, radius, &admission),
    };
    // Every copy maps to the earliest admitted record with the same document.
    let representative = |id: TurnId| -> TurnId {
        if config.dedup == DedupPolicy::Off {
            return id;
        }
        let Some(pos) = corpus.position(id) else { return id };
        corpus
            .text_group(pos)
            .iter()
            .map(|&p| corpus.at(p as usize).id)
            .find(|&other| admission.admits(other))
            .unwrap_or(id)
    };

    let candidates = candidate_stage::candidate_lists(
        inputs,
        query,
        config,
        &admission,
        &context_admits,
        beside_from,
    )?;
    let started = Instant::now();
    let mut fusion = fusion_stage::fuse(
        inputs,
        query,
        config,
        &admission,
        &context_admits,
        &representative,
        &candidates.lists,
    )?;
    let fuse_time = started.elapsed();
    let started = Instant::now();
    let assembled = pack_stage::assemble(
        inputs,
        query,
        config,
        &admission,
        &representative,
        &mut fusion,
        candidates.premeasured,
    )?;
    let timings = StageTimings {
        lexical: candidates.lexical_time,
        dense: candidates.dense_time,
        fuse: fuse_time,
        pack: started.elapsed(),
    };

    let context = CompiledContext {
        format: COMPILED_CONTEXT_FORMAT.to_owned(),
        namespace: query.namespace.clone(),
        question: query.question.clone(),
        as_of: query.as_of,
        text: assembled.text,
        tokens_used: assembled.tokens_used,
        budget: query.budget,
        reader_tokenizer: inputs.reader.name().to_owned(),
        abstain: assembled.abstain_reason.is_some(),
        abstain_reason: assembled.abstain_reason,
        support: fusion.support,
        items: assembled.items,
        excluded: assembled.excluded,
        encoder: inputs.dense.map(|d| d.encoder.clone()),
        dense_index: inputs
            .dense
            .map(|d| candidates.served.unwrap_or_else(|| d.index.kind()).into()),
        context_search: candidates.context_search,
        also_dense: inputs
            .also_dense
            .iter()
            .enumerate()
            .map(|(i, d)| AlsoDenseRef {
                encoder: d.encoder.clone(),
                index: candidates
                    .also_served
                    .get(i)
                    .copied()
                    .unwrap_or_else(|| d.index.kind())
                    .into(),
                covers: d.index.covers(),
                pending: d.pending,
            })
            .collect(),
        reranker: inputs.reranker.map(|r| r.name().to_owned()),
        coverage: Coverage {
            corpus_last_record: corpus.last_record(),
            lexical: inputs.lexical.covers(),
            dense: inputs.dense.and_then(|d| d.index.covers()),
            dense_pending: inputs.dense.map(|d| d.pending),
        },
        analyzer: config.lexical.analyzer.version().to_owned(),
        named_speakers: fusion.named_speakers,
        time_window: fusion.time_window,
        feedback: fusion.found.report,
        budget_parts: assembled.budget_parts,
        config: config.clone(),
    };
    Ok((context, timings))
}

/// Records a namespace must hold for a compile to search its lexical lists beside its dense
/// lists, on a second thread: below it the thread costs more than the overlap saves (a lexical
/// stage of a few hundred microseconds at 10,000 turns, `bench ann run`'s stage table).
pub const PARALLEL_STAGES_FROM: usize = 5_000;
