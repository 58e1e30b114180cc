//! The pipeline: candidates (turn and context lists, filtered inside) -> dedup -> names lists ->
//! RRF -> time-window list and RRF again -> session list and RRF again -> rerank -> support and abstention -> selection in the
//! long-turn rule's order, expansion, exact fit and fill (`pack_turns`) -> manifest.

use std::{
    collections::{HashMap, HashSet},
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, Ordering as AtomicOrdering},
    },
    time::{Duration, Instant},
};

use evicortex_core::TurnId;
use evicortex_lexical::{Bm25Index, SharedSearch};
use evicortex_vector::{IndexKind, VectorIndexRead};

use crate::{
    AbstainReason, Admission, CompileConfig, CompileError, CompileQuery, CompiledContext,
    ContextItem, ContextSearch, ContextVectors, Corpus, Coverage, DedupPolicy, DenseConfig,
    EncoderRef, ExcludedCandidate, ExclusionReason, FusedHit, ListRank, NamesConfig, RankScore,
    RankedList, ReaderTokenizer, RerankConfig, Reranker, Retriever, ScoredKey, SessionConfig,
    SupportSignal, TimeConfig, WindowIndex,
    abstain::lexical_coverage,
    candidates::{dense_candidates_pooled, dense_context_candidates, lexical_list},
    compiled_context::{AlsoDenseRef, COMPILED_CONTEXT_FORMAT},
    context_index::window_admitted,
    dedup::dedup_ranked_lists,
    fusion::{rrf_fuse, rrf_term, sort_fused},
    measure::Premeasured,
    names::named_speakers,
    pack_turns::pack,
    rerank::ranks_of,
    session_list::session_list,
    time_window::resolve_time,
    turn_document::turn_document,
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
    /// Further encoders whose dense lists fusion adds beside `dense`'s (at most
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
    check_inputs(inputs, query, config)?;
    let corpus = inputs.corpus;
    let admission = Admission::new(corpus, query.as_of.map(|t| t.utc_micros()));
    let mut timings = StageTimings::default();
    // A context list ranks a turn only when its whole window is admitted; without an as-of
    // time every eligible record is, and windows hold eligible records only.
    let context_admits = |id: TurnId, radius: u32| match admission.position(id) {
        None => false,
        Some(_) if query.as_of.is_none() => true,
        Some(pos) => window_admitted(corpus, pos, radius, &admission),
    };

    // 1. Candidates, filtered inside each retriever. Each lexical list is a `SharedSearch`: on a
    // large namespace the lexical lists are searched on a second thread while this one searches
    // the dense lists (the stages read different indexes), and this thread, once free, runs a
    // list no thread has claimed or searches the upper half of the rows the other has not
    // reached, so that the two threads finish together; the lists are the same either way.
    let (top_n, radius) = (config.lexical.top_n, config.context.lexical_radius);
    let question = query.question.as_str();
    // No record after the last one an as-of time admits is admitted: where an index's rows
    // follow its keys, the rows of later keys are not searched.
    let last_admitted = query
        .as_of
        .map(|t| corpus.last_admitted_position(t.utc_micros()).map(|pos| corpus.at(pos).id));
    let search_of = |index| bounded_search(index, question, top_n, last_admitted);
    let window_search =
        (inputs.context.lexical).filter(|_| top_n > 0 && radius > 0).map(|w| search_of(w.index()));
    let turn_search = (top_n > 0).then(|| search_of(inputs.lexical));
    let window_admits = |id: TurnId| context_admits(id, radius);
    let turn_admits = |id: TurnId| admission.admits(id);
    // The window list then the turn list, running each that no thread has claimed and helping
    // with each the other runs; the time of each list this thread ran.
    let lexical_parts = || {
        let windows = window_search.as_ref().and_then(|search| run_or_help(search, window_admits));
        (windows, turn_search.as_ref().and_then(|search| run_or_help(search, turn_admits)))
    };
    let dense_on = matches!(config.dense, DenseConfig::On { .. }) && inputs.dense.is_some();
    let beside = dense_on && top_n > 0 && corpus.len() >= beside_from;
    let (mine, theirs, dense, premeasured) = if beside {
        let theirs = Mutex::new((None, None));
        let second_done = AtomicBool::new(false);
        let (mine, dense, premeasured) = std::thread::scope(|scope| {
            // Not joined: a join waits for the thread's exit, and a thread parked in it waits
            // about as long again to be woken; the scope's end waits for the closure alone.
            scope.spawn(|| {
                let times = lexical_parts();
                *theirs.lock().unwrap_or_else(PoisonError::into_inner) = times;
                second_done.store(true, AtomicOrdering::Release);
            });
            let dense = dense_lists(inputs, config, &admission, last_admitted, &context_admits);
            // The dense lists are usually done first: their turns are measured for the pack
            // before this thread joins the lexical lists.
            let mut premeasured = Premeasured::default();
            if let Ok(dense) = &dense {
                premeasured.add(inputs, config.dedup, config.layout, &admission, &dense.lists)?;
            }
            let mine = lexical_parts();
            spin_for(&second_done, SPIN_FOR_SECOND_THREAD);
            Ok::<_, CompileError>((mine, dense, premeasured))
        })?;
        (mine, theirs.into_inner().unwrap_or_else(PoisonError::into_inner), dense, premeasured)
    } else {
        let dense = dense_lists(inputs, config, &admission, last_admitted, &context_admits);
        (lexical_parts(), (None, None), dense, Premeasured::default())
    };
    let time = |mine: Option<Duration>, theirs| mine.or(theirs).unwrap_or_default();
    let windows = (
        window_search.map(|search| lexical_list(search.into_hits(), Retriever::LexicalContext)),
        time(mine.0, theirs.0),
    );
    let turns = (
        turn_search.map(|search| lexical_list(search.into_hits(), Retriever::Lexical)),
        time(mine.1, theirs.1),
    );
    let mut lists: Vec<RankedList> = turns.0.into_iter().chain(windows.0).collect();
    let lexical_time = turns.1 + windows.1;
    let DenseLists { lists: dense_lists, served, also_served, context_search, elapsed } = dense?;
    lists.extend(dense_lists);
    timings.lexical = lexical_time;
    timings.dense = elapsed;

    // 2. Dedup: every copy maps to the earliest admitted record with the same document.
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
    let (mut lists, duplicates) = dedup_ranked_lists(&lists, representative);

    // 3. Names: each turn list again, filtered to the named speakers' turns.
    let named_speakers = match config.names {
        NamesConfig::Off => Vec::new(),
        NamesConfig::SpeakerLists | NamesConfig::SpeakerSearch => {
            let named = named_speakers(&query.question, corpus.speakers());
            if named.len() < corpus.speakers().len() {
                named.into_iter().map(str::to_owned).collect()
            } else {
                Vec::new()
            }
        }
    };
    if !named_speakers.is_empty() {
        let said_by_named = |id: TurnId| {
            corpus
                .get(id)
                .and_then(|e| e.turn.speaker.as_deref())
                .is_some_and(|s| named_speakers.iter().any(|n| n == s))
        };
        let companions: Vec<RankedList> = if config.names == NamesConfig::SpeakerSearch {
            let admits = |id: TurnId| admission.admits(id) && said_by_named(id);
            named_searches(inputs, config, question, &context_admits, admits, &representative)?
        } else {
            lists
                .iter()
                .filter_map(|list| {
                    let retriever = list.retriever.named()?;
                    let hits: Vec<ScoredKey> =
                        list.hits.iter().filter(|h| said_by_named(h.key)).copied().collect();
                    (!hits.is_empty()).then_some(RankedList { retriever, hits })
                })
                .collect()
        };
        lists.extend(companions);
    }

    // 4. Fusion; the time window's list; the reranker's ordinal term.
    let mut fused = rrf_fuse(&lists, config.rrf_k);
    let time_window = match config.time {
        TimeConfig::Off => None,
        TimeConfig::WindowList => query
            .as_of
            .or_else(|| corpus.latest_time())
            .and_then(|reference| resolve_time(&query.question, reference)),
    };
    if let Some(window) = &time_window {
        let (start, end) = (window.start.utc_micros(), window.list_end_micros());
        let hits: Vec<ScoredKey> = fused
            .iter()
            .filter(|h| {
                admission.position(h.key).is_some_and(|pos| {
                    let t = corpus.time_at(pos);
                    start <= t && t < end
                })
            })
            .map(|h| ScoredKey { key: h.key, score: h.score as f32 })
            .collect();
        if !hits.is_empty() {
            lists.push(RankedList { retriever: Retriever::TimeWindow, hits });
            fused = rrf_fuse(&lists, config.rrf_k);
        }
    }
    // Feedback and links, from the best turns of this fusion.
    let dense_top_n = match config.dense {
        DenseConfig::On { top_n } => top_n,
        DenseConfig::Off => 0,
    };
    let found = crate::feedback::find(
        inputs,
        config.feedback,
        config.links,
        &query.question,
        &fused,
        &admission,
        (config.lexical.top_n, dense_top_n),
    )?;
    if !found.lists.is_empty() {
        lists.extend(found.lists);
        fused = rrf_fuse(&lists, config.rrf_k);
    }
    let linked_by = |id: TurnId| -> Vec<crate::LinkName> {
        let (Some(report), Some(by)) = (&found.report, found.links.get(&id)) else {
            return Vec::new();
        };
        by.iter().filter_map(|&i| report.names.get(i).cloned()).collect()
    };
    if let SessionConfig::ScoreList { turns, sessions } = config.session {
        let hits = session_list(&fused, corpus, turns, sessions);
        if !hits.is_empty() {
            lists.push(RankedList { retriever: Retriever::Session, hits });
            fused = rrf_fuse(&lists, config.rrf_k);
        }
    }
    let rank_of: HashMap<(Retriever, TurnId), RankScore> = lists
        .iter()
        .flat_map(|l| {
            l.hits.iter().enumerate().map(|(i, h)| {
                ((l.retriever, h.key), RankScore { rank: i as u32 + 1, score: h.score })
            })
        })
        .collect();
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

    // 5. Support and abstention.
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

    let ranks = |id: TurnId| {
        let lists: Vec<ListRank> = lists
            .iter()
            .filter(|l| !matches!(l.retriever, Retriever::Lexical | Retriever::Dense))
            .filter_map(|l| {
                let r = rank_of.get(&(l.retriever, id))?;
                Some(ListRank { list: l.retriever, rank: r.rank, score: r.score })
            })
            .collect();
        (
            rank_of.get(&(Retriever::Lexical, id)).copied(),
            rank_of.get(&(Retriever::Dense, id)).copied(),
            lists,
        )
    };
    let mut excluded: Vec<ExcludedCandidate> = duplicates
        .iter()
        .map(|d| ExcludedCandidate {
            record: d.key,
            reason: ExclusionReason::Duplicate { of: d.kept },
            lexical: None,
            dense: None,
            lists: Vec::new(),
            fused_rank: None,
            length_divisor: None,
            spread_deferred: false,
        })
        .collect();

    // 6. Selection (in the long-turn rule's order), expansion and exact packing.
    let started = Instant::now();
    let mut items = Vec::new();
    let mut text = String::new();
    let mut tokens_used = 0;
    let mut budget_parts = None;
    let mut abstain_reason = abstain_reason;
    if abstain_reason.is_some() {
        for (i, hit) in fused.iter().enumerate() {
            let (lexical, dense, lists) = ranks(hit.key);
            excluded.push(ExcludedCandidate {
                record: hit.key,
                reason: ExclusionReason::Abstained,
                lexical,
                dense,
                lists,
                fused_rank: Some(i as u32 + 1),
                length_divisor: None,
                spread_deferred: false,
            });
        }
    } else {
        let packed =
            pack(inputs, query, config, &mut fused, &admission, representative, premeasured)?;
        for (i, hit) in fused.iter().enumerate() {
            if packed.over_budget.contains(&hit.key) {
                let (lexical, dense, lists) = ranks(hit.key);
                excluded.push(ExcludedCandidate {
                    record: hit.key,
                    reason: ExclusionReason::Budget,
                    lexical,
                    dense,
                    lists,
                    fused_rank: Some(i as u32 + 1),
                    length_divisor: packed.divisors.get(&hit.key).copied(),
                    spread_deferred: packed.deferred.contains(&hit.key),
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
            let (lexical, dense, lists) = ranks(e.id);
            items.push(ContextItem {
                citation: format!("#{}", e.id.raw()),
                record: e.id,
                digest: e.digest,
                session: e.turn.session.clone(),
                turn: e.turn.turn,
                time: e.turn.time,
                role: e.turn.role,
                speaker: e.turn.speaker.clone(),
                text: chosen.excerpt.map_or(&e.turn.text[..], |x| x.of(&e.turn.text)).to_owned(),
                excerpt: chosen.excerpt,
                also_cited: chosen.also_cited.clone(),
                selected_by: chosen.selection.clone(),
                lexical,
                dense,
                rerank: rerank_of.get(&e.id).copied(),
                lists,
                linked_by: linked_by(e.id),
                fused_rank: fused_at.map(|i| i as u32 + 1),
                fused_score: fused_at.map(|i| fused[i].score),
                length_divisor: packed.divisors.get(&e.id).copied(),
                spread_deferred: packed.deferred.contains(&e.id),
                tokens: chosen.tokens,
            });
        }
        text = packed.text;
        tokens_used = packed.tokens;
        budget_parts = packed.budget_parts;
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
        dense_index: inputs.dense.map(|d| served.unwrap_or_else(|| d.index.kind()).into()),
        context_search,
        also_dense: inputs
            .also_dense
            .iter()
            .enumerate()
            .map(|(i, d)| AlsoDenseRef {
                encoder: d.encoder.clone(),
                index: also_served.get(i).copied().unwrap_or_else(|| d.index.kind()).into(),
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
        named_speakers,
        time_window,
        feedback: found.report,
        budget_parts,
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

/// Records a namespace must hold for a compile to search its lexical lists beside its dense
/// lists, on a second thread: below it the thread costs more than the overlap saves (a lexical
/// stage of a few hundred microseconds at 10,000 turns, `bench ann run`'s stage table).
pub const PARALLEL_STAGES_FROM: usize = 5_000;

/// How long a compile spins for its second thread before it parks until the thread is done:
/// the shared turn list keeps the two threads' ends within tens of microseconds, and a parked
/// thread takes about as long to be woken.
const SPIN_FOR_SECOND_THREAD: Duration = Duration::from_micros(300);

/// Waits up to `limit` for `done`, spinning.
fn spin_for(done: &AtomicBool, limit: Duration) {
    let started = Instant::now();
    while !done.load(AtomicOrdering::Acquire) && started.elapsed() < limit {
        std::hint::spin_loop();
    }
}

/// The search of `index` for `question`'s top `top_n`, over the rows of keys up to the last
/// record an as-of time admits (`Some(None)`: none) where the index's rows follow its keys.
fn bounded_search<'i>(
    index: &'i Bm25Index,
    question: &str,
    top_n: usize,
    last_admitted: Option<Option<TurnId>>,
) -> SharedSearch<'i, TurnId> {
    let search = index.shared_search(&index.analyze(question), top_n);
    match last_admitted {
        None => search,
        Some(None) => search.rows_below(0),
        Some(Some(id)) => match index.rows_up_to(id) {
            Some(end) => search.rows_below(end),
            None => search,
        },
    }
}

/// The named lists as searches of their own: each turn list's retriever run again with `admits`
/// (the named speakers' admitted turns) inside, deduplicated as the first lists were.
fn named_searches(
    inputs: &CompileInputs<'_>,
    config: &CompileConfig,
    question: &str,
    context_admits: &impl Fn(TurnId, u32) -> bool,
    admits: impl Fn(TurnId) -> bool,
    representative: &impl Fn(TurnId) -> TurnId,
) -> Result<Vec<RankedList>, CompileError> {
    let top_n = config.lexical.top_n;
    let mut lists = Vec::new();
    if top_n > 0 {
        let terms = inputs.lexical.analyze(question);
        let hits = inputs.lexical.search(&terms, top_n, &admits);
        lists.push(lexical_list(hits, Retriever::LexicalNamed));
        let radius = config.context.lexical_radius;
        if let Some(windows) = inputs.context.lexical.filter(|_| radius > 0) {
            let hits = windows
                .index()
                .search(&terms, top_n, |id| admits(id) && context_admits(id, radius));
            lists.push(lexical_list(hits, Retriever::LexicalContextNamed));
        }
    }
    if let (DenseConfig::On { top_n }, Some(dense)) = (config.dense, inputs.dense) {
        let ranked = |retriever, hits: Vec<evicortex_vector::VectorHit<TurnId>>| RankedList {
            retriever,
            hits: hits.into_iter().map(|h| ScoredKey { key: h.key, score: h.score }).collect(),
        };
        let hits = dense.index.search(dense.query_vector, top_n, &mut |id| admits(id))?;
        lists.push(ranked(Retriever::DenseNamed, hits));
        for (i, also) in inputs.also_dense.iter().enumerate() {
            let hits = also.index.search(also.query_vector, top_n, &mut |id| admits(id))?;
            lists.push(ranked(Retriever::DenseAlsoNamed(i as u8), hits));
        }
        let radius = config.context.dense_radius;
        if let Some(vectors) = inputs.context.dense.filter(|_| radius > 0) {
            let hits = vectors
                .search(dense.query_vector, top_n, |id| admits(id) && context_admits(id, radius))?;
            lists.push(ranked(Retriever::DenseContextNamed, hits));
        }
    }
    let (lists, _) = dedup_ranked_lists(&lists, representative);
    Ok(lists.into_iter().filter(|l| !l.hits.is_empty()).collect())
}

/// Runs `search` if no thread has claimed it, else helps the thread that has: the time it ran
/// it, if it did.
fn run_or_help(
    search: &SharedSearch<'_, TurnId>,
    admit: impl FnMut(TurnId) -> bool,
) -> Option<Duration> {
    let _span = tracing::debug_span!("lexical_list").entered();
    if search.claim() {
        Some(timed(|| search.run(admit)).1)
    } else {
        search.help(admit);
        None
    }
}

/// `f`'s value and how long it took.
fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    (f(), started.elapsed())
}

/// The dense lists, the kind of index that served each, and how the context list was searched.
struct DenseLists {
    lists: Vec<RankedList>,
    served: Option<IndexKind>,
    also_served: Vec<IndexKind>,
    context_search: Option<ContextSearch>,
    elapsed: Duration,
}

/// `last_admitted` as [`bounded_search`] takes it.
fn dense_lists(
    inputs: &CompileInputs<'_>,
    config: &CompileConfig,
    admission: &Admission<'_>,
    last_admitted: Option<Option<TurnId>>,
    context_admits: &impl Fn(TurnId, u32) -> bool,
) -> Result<DenseLists, CompileError> {
    let started = Instant::now();
    let corpus = inputs.corpus;
    let mut lists: Vec<RankedList> = Vec::new();
    // The kind of index that served each dense list (a graph may answer by its exact scan).
    let mut served: Option<IndexKind> = None;
    let mut also_served: Vec<IndexKind> = Vec::new();
    let mut context_search: Option<ContextSearch> = None;
    if let (DenseConfig::On { top_n }, Some(dense)) = (config.dense, inputs.dense) {
        let radius = config.context.dense_radius;
        let context_vectors = inputs.context.dense.filter(|_| radius > 0);
        // Behind a graph or a sketch, the context list scores only the windows around the
        // index's best turns (`ContextVectors::search_seeded`): a full scan of the context
        // vectors would cost what the approximate index saves. The seeds are the graph's whole
        // beam, which a search walks anyway, or the sketch's best candidates by their `i8`
        // score (`VectorIndexRead::search_pooled`: only the top `top_n` are read in `f32`). The
        // top `top_n` are the same whether the index is asked for them or for the seeds.
        let pool = match (context_vectors, dense.index.kind()) {
            (Some(_), IndexKind::Hnsw(params)) => Some(top_n.max(params.ef_search)),
            (Some(_), IndexKind::Sketch(params)) => Some(top_n.max(params.seeds)),
            _ => None,
        };
        // With no record admitted, none is after the least key.
        let last = last_admitted.map(|last| last.unwrap_or(TurnId::from_raw(0)));
        let (list, pooled, kind) = dense_candidates_pooled(
            dense.index,
            dense.query_vector,
            top_n,
            pool.unwrap_or(0),
            admission,
            last,
            Retriever::Dense,
        )?;
        let seeds = pool.map(|_| pooled);
        lists.push(list);
        served = Some(kind);
        // The further encoders' lists stop at the as-of bound too; they seed nothing.
        for (i, also) in inputs.also_dense.iter().enumerate() {
            let (list, _, kind) = dense_candidates_pooled(
                also.index,
                also.query_vector,
                top_n,
                0,
                admission,
                last,
                Retriever::DenseAlso(i as u8),
            )?;
            lists.push(list);
            also_served.push(kind);
        }
        if let Some(vectors) = context_vectors {
            let admit = |id| context_admits(id, radius);
            let seeds = seeds.as_deref().map(|seeds| (corpus, seeds));
            lists.push(dense_context_candidates(vectors, dense.query_vector, top_n, seeds, admit)?);
            context_search =
                Some(pool.map_or(ContextSearch::Exact, |pool| ContextSearch::Seeded {
                    pool: pool as u32,
                }));
        }
    }
    Ok(DenseLists { lists, served, also_served, context_search, elapsed: started.elapsed() })
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
    let documents: Vec<String> = fused[..depth]
        .iter()
        .map(|h| {
            corpus.get(h.key).map_or_else(String::new, |e| turn_document(&e.turn).into_owned())
        })
        .collect();
    let passages: Vec<&str> = documents.iter().map(String::as_str).collect();
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
            .map(|e| lexical_coverage(lexical, question, &turn_document(&e.turn)))
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
            &inputs.lexical.analyze(&query.question),
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
                    lists: Vec::new(),
                    fused_rank: None,
                    length_divisor: None,
                    spread_deferred: false,
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
                        lists: Vec::new(),
                        fused_rank: None,
                        length_divisor: None,
                        spread_deferred: false,
                    });
                } else if let Some(existing) = out.iter_mut().find(|x| x.record == h.key) {
                    existing.dense = Some(rank);
                }
            }
        }
    }
    Ok(out)
}
