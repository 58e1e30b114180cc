//! The pipeline: candidates (filtered inside) -> dedup -> RRF -> rerank -> support and abstention
//! -> selection, expansion, exact fit and fill (`pack_turns`) -> manifest.

use std::{
    collections::{HashMap, HashSet},
    time::{Duration, Instant},
};

use evicortex_core::TurnId;
use evicortex_lexical::{ANALYZER_VERSION, Bm25Index};
use evicortex_vector::VectorIndexRead;

use crate::{
    AbstainReason, Admission, CompileConfig, CompileError, CompileQuery, CompiledContext,
    ContextItem, Corpus, Coverage, DedupPolicy, DenseConfig, EncoderRef, ExcludedCandidate,
    ExclusionReason, FusedHit, RankScore, RankedList, ReaderTokenizer, RerankConfig, Reranker,
    Retriever, SupportSignal,
    abstain::lexical_coverage,
    candidates::{dense_candidates, lexical_candidates},
    compiled_context::COMPILED_CONTEXT_FORMAT,
    dedup::dedup_ranked_lists,
    fusion::{rrf_fuse, rrf_term, sort_fused},
    lexical_document::lexical_document,
    pack_turns::pack,
    rerank::ranks_of,
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
    /// The reader's tokenizer.
    pub reader: &'a dyn ReaderTokenizer,
    /// The reranker; required exactly when `config.rerank` is on.
    pub reranker: Option<&'a dyn Reranker>,
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
    /// Lexical candidate generation.
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
    let _span = tracing::debug_span!("compile", namespace = %query.namespace).entered();
    check_inputs(inputs, query, config)?;
    let corpus = inputs.corpus;
    let admission = Admission::new(corpus, query.as_of.map(|t| t.utc_micros()));
    let mut timings = StageTimings::default();

    // 1. Candidates, filtered inside each retriever.
    let started = Instant::now();
    let mut lists: Vec<RankedList> = Vec::new();
    if config.lexical.top_n > 0 {
        lists.push(lexical_candidates(
            inputs.lexical,
            &query.question,
            config.lexical.top_n,
            &admission,
        ));
    }
    timings.lexical = started.elapsed();
    let started = Instant::now();
    if let (DenseConfig::On { top_n }, Some(dense)) = (config.dense, inputs.dense) {
        lists.push(dense_candidates(dense.index, dense.query_vector, top_n, &admission)?);
    }
    timings.dense = started.elapsed();

    // 2. Dedup: every copy maps to the earliest admitted record with the same text.
    let started = Instant::now();
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
    let (lists, duplicates) = dedup_ranked_lists(&lists, representative);
    let rank_of: HashMap<(Retriever, TurnId), RankScore> = lists
        .iter()
        .flat_map(|l| {
            l.hits.iter().enumerate().map(|(i, h)| {
                ((l.retriever, h.key), RankScore { rank: i as u32 + 1, score: h.score })
            })
        })
        .collect();

    // 3. Fusion, then the reranker's ordinal term.
    let mut fused = rrf_fuse(&lists, config.rrf_k);
    let mut rerank_of: HashMap<TurnId, RankScore> = HashMap::new();
    if let (RerankConfig::On { depth, weight }, Some(reranker)) = (config.rerank, inputs.reranker) {
        rerank(
            reranker,
            &query.question,
            corpus,
            &mut fused,
            depth,
            weight,
            config.rrf_k,
            &mut rerank_of,
        )?;
    }

    // 4. Support and abstention.
    let support =
        support_score(config.abstention.signal, &lists, inputs.lexical, &query.question, corpus);
    let abstain_reason = if fused.is_empty() {
        Some(AbstainReason::NoCandidates)
    } else {
        match (support, config.abstention.threshold) {
            (Some(support), Some(threshold)) if support < threshold => {
                Some(AbstainReason::BelowThreshold { support, threshold })
            }
            _ => None,
        }
    };
    timings.fuse = started.elapsed();

    let ranks = |id: TurnId, fused_rank: Option<u32>| {
        (
            rank_of.get(&(Retriever::Lexical, id)).copied(),
            rank_of.get(&(Retriever::Dense, id)).copied(),
            fused_rank,
        )
    };
    let mut excluded: Vec<ExcludedCandidate> = duplicates
        .iter()
        .map(|d| ExcludedCandidate {
            record: d.key,
            reason: ExclusionReason::Duplicate { of: d.kept },
            lexical: None,
            dense: None,
            fused_rank: None,
        })
        .collect();

    // 5. Selection, expansion and exact packing.
    let started = Instant::now();
    let mut items = Vec::new();
    let mut text = String::new();
    let mut tokens_used = 0;
    let mut abstain_reason = abstain_reason;
    if abstain_reason.is_some() {
        for (i, hit) in fused.iter().enumerate() {
            let (lexical, dense, fused_rank) = ranks(hit.key, Some(i as u32 + 1));
            excluded.push(ExcludedCandidate {
                record: hit.key,
                reason: ExclusionReason::Abstained,
                lexical,
                dense,
                fused_rank,
            });
        }
    } else {
        let packed = pack(inputs, query, config, &fused, &admission, representative)?;
        for (i, hit) in fused.iter().enumerate() {
            if packed.over_budget.contains(&hit.key) {
                let (lexical, dense, fused_rank) = ranks(hit.key, Some(i as u32 + 1));
                excluded.push(ExcludedCandidate {
                    record: hit.key,
                    reason: ExclusionReason::Budget,
                    lexical,
                    dense,
                    fused_rank,
                });
            }
        }
        if packed.chosen.is_empty() {
            abstain_reason = Some(AbstainReason::NothingFits);
        }
        let fused_pos: HashMap<TurnId, usize> =
            fused.iter().enumerate().map(|(i, h)| (h.key, i)).collect();
        for chosen in &packed.chosen {
            let e = corpus.at(chosen.pos);
            let fused_at = fused_pos.get(&e.id).copied();
            let (lexical, dense, fused_rank) = ranks(e.id, fused_at.map(|i| i as u32 + 1));
            items.push(ContextItem {
                citation: format!("#{}", e.id.raw()),
                record: e.id,
                digest: e.digest,
                session: e.turn.session.clone(),
                turn: e.turn.turn,
                time: e.turn.time,
                role: e.turn.role,
                speaker: e.turn.speaker.clone(),
                text: e.turn.text.clone(),
                also_cited: chosen.also_cited.clone(),
                selected_by: chosen.selection.clone(),
                lexical,
                dense,
                rerank: rerank_of.get(&e.id).copied(),
                fused_rank,
                fused_score: fused_at.map(|i| fused[i].score),
                tokens: chosen.tokens,
            });
        }
        text = packed.text;
        tokens_used = packed.tokens;
    }

    if config.report_filtered {
        excluded.extend(filtered_candidates(inputs, query, config, &admission)?);
    }
    timings.pack = started.elapsed();

    let context = CompiledContext {
        format: COMPILED_CONTEXT_FORMAT.to_owned(),
        namespace: query.namespace.clone(),
        question: query.question.clone(),
        as_of: query.as_of,
        text,
        tokens_used,
        budget: query.budget,
        reader_tokenizer: inputs.reader.name().to_owned(),
        abstain: abstain_reason.is_some(),
        abstain_reason,
        support,
        items,
        excluded,
        encoder: inputs.dense.map(|d| d.encoder.clone()),
        reranker: inputs.reranker.map(|r| r.name().to_owned()),
        coverage: Coverage {
            corpus_last_record: corpus.last_record(),
            lexical: inputs.lexical.covers(),
            dense: inputs.dense.and_then(|d| d.index.covers()),
            dense_pending: inputs.dense.map(|d| d.pending),
        },
        analyzer: ANALYZER_VERSION.to_owned(),
        config: config.clone(),
    };
    Ok((context, timings))
}

fn check_inputs(
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
    let params = inputs.lexical.params();
    if params.k1 != config.lexical.k1 || params.b != config.lexical.b {
        return Err(CompileError::Bm25Mismatch {
            index_k1: params.k1,
            index_b: params.b,
            config_k1: config.lexical.k1,
            config_b: config.lexical.b,
        });
    }
    match (config.dense, inputs.dense) {
        (DenseConfig::On { .. }, None) => return Err(CompileError::MissingDenseInput),
        (DenseConfig::Off, Some(_)) => return Err(CompileError::UnexpectedDenseInput),
        _ => {}
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

#[allow(clippy::too_many_arguments)] // internal stage; the arguments are the stage's whole state
fn rerank(
    reranker: &dyn Reranker,
    question: &str,
    corpus: &Corpus,
    fused: &mut [FusedHit<TurnId>],
    depth: usize,
    weight: f32,
    rrf_k: f32,
    rerank_of: &mut HashMap<TurnId, RankScore>,
) -> Result<(), CompileError> {
    let _span = tracing::debug_span!("rerank", depth).entered();
    let depth = depth.min(fused.len());
    let passages: Vec<&str> = fused[..depth]
        .iter()
        .map(|h| corpus.get(h.key).map_or("", |e| e.turn.text.as_str()))
        .collect();
    let fail =
        |reason: String| CompileError::Rerank { reranker: reranker.name().to_owned(), reason };
    let scores = reranker.score(question, &passages).map_err(|e| fail(e.reason))?;
    if scores.len() != passages.len() {
        return Err(fail(format!(
            "returned {} scores for {} passages",
            scores.len(),
            passages.len()
        )));
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(fail(format!("score {i} is not finite")));
    }
    for (hit, (rank, score)) in
        fused[..depth].iter_mut().zip(ranks_of(&scores).into_iter().zip(&scores))
    {
        hit.score += rrf_term(rrf_k, rank, weight);
        hit.ranks.push((Retriever::Rerank, rank));
        rerank_of.insert(hit.key, RankScore { rank, score: *score });
    }
    sort_fused(fused);
    Ok(())
}

fn support_score(
    signal: SupportSignal,
    lists: &[RankedList],
    lexical: &Bm25Index,
    question: &str,
    corpus: &Corpus,
) -> Option<f32> {
    let of = |retriever| {
        lists.iter().find(|l| l.retriever == retriever).map(|l| l.hits.as_slice()).unwrap_or(&[])
    };
    match signal {
        SupportSignal::MaxDenseCosine => {
            of(Retriever::Dense).iter().map(|h| h.score).reduce(f32::max)
        }
        SupportSignal::LexicalCoverage => of(Retriever::Lexical)
            .iter()
            .filter_map(|h| corpus.get(h.key))
            .map(|e| lexical_coverage(lexical, question, &lexical_document(&e.turn)))
            .reduce(f32::max),
    }
}

/// Candidates of the unfiltered top-N that the filters removed, with the reason.
fn filtered_candidates(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
    admission: &Admission<'_>,
) -> Result<Vec<ExcludedCandidate>, CompileError> {
    let everything = |_: TurnId| true;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    if config.lexical.top_n > 0 {
        let hits = inputs.lexical.search(
            &evicortex_lexical::analyze(&query.question),
            config.lexical.top_n,
            everything,
        );
        for (i, h) in hits.iter().enumerate() {
            if let Some(filter) = admission.reason(h.key)
                && seen.insert(h.key)
            {
                out.push(ExcludedCandidate {
                    record: h.key,
                    reason: ExclusionReason::Filtered { filter },
                    lexical: Some(RankScore { rank: i as u32 + 1, score: h.score }),
                    dense: None,
                    fused_rank: None,
                });
            }
        }
    }
    if let (DenseConfig::On { top_n }, Some(dense)) = (config.dense, inputs.dense) {
        let hits = dense.index.search(dense.query_vector, top_n, &mut |_| true)?;
        for (i, h) in hits.iter().enumerate() {
            let rank = RankScore { rank: i as u32 + 1, score: h.score };
            if let Some(filter) = admission.reason(h.key) {
                if seen.insert(h.key) {
                    out.push(ExcludedCandidate {
                        record: h.key,
                        reason: ExclusionReason::Filtered { filter },
                        lexical: None,
                        dense: Some(rank),
                        fused_rank: None,
                    });
                } else if let Some(existing) = out.iter_mut().find(|x| x.record == h.key) {
                    existing.dense = Some(rank);
                }
            }
        }
    }
    Ok(out)
}
