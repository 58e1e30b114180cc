//! Stage 1, candidates: the lexical lists (turns, windows) and the dense lists (turns, further
//! encoders, context vectors), each filtered inside its retriever. On a large namespace the
//! lexical lists run on a second thread beside the dense lists; the lists are the same either way.

use std::{
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, Ordering as AtomicOrdering},
    },
    time::{Duration, Instant},
};

use evicortex_core::TurnId;
use evicortex_lexical::{Bm25Index, SharedSearch};
use evicortex_vector::IndexKind;

use crate::{
    CompileConfig, CompileError, CompileInputs, CompileQuery, ContextSearch, DenseConfig,
    RankedList, Retriever,
    candidates::{dense_candidates_pooled, dense_context_candidates, lexical_list},
    filter::Admission,
    measure::Premeasured,
};

/// How long a compile spins for its second thread before it parks until the thread is done:
/// the shared turn list keeps the two threads' ends within tens of microseconds, and a parked
/// thread takes about as long to be woken.
const SPIN_FOR_SECOND_THREAD: Duration = Duration::from_micros(300);

/// The candidate lists of one compile and what searching them found out.
pub(super) struct Candidates {
    /// The turn list, the window list, then the dense lists.
    pub(super) lists: Vec<RankedList>,
    /// The kind of index that served the dense list (a graph may answer by its exact scan).
    pub(super) served: Option<IndexKind>,
    /// Likewise for each also-encoder's list.
    pub(super) also_served: Vec<IndexKind>,
    pub(super) context_search: Option<ContextSearch>,
    /// Turns of the dense lists measured for the pack while the lexical lists ran.
    pub(super) premeasured: Premeasured,
    pub(super) lexical_time: Duration,
    pub(super) dense_time: Duration,
}

/// The candidate lists; the lexical ones beside the dense ones from `beside_from` records.
pub(super) fn candidate_lists(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
    admission: &Admission<'_>,
    context_admits: &(impl Fn(TurnId, u32) -> bool + Sync),
    beside_from: usize,
) -> Result<Candidates, CompileError> {
    // Each lexical list is a `SharedSearch`: on a large namespace the lexical lists are searched
    // on a second thread while this one searches the dense lists (the stages read different
    // indexes), and this thread, once free, runs a list no thread has claimed or searches the
    // upper half of the rows the other has not reached, so that the two threads finish together.
    let corpus = inputs.corpus;
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
            let dense = dense_lists(inputs, config, admission, last_admitted, context_admits);
            // The dense lists are usually done first: their turns are measured for the pack
            // before this thread joins the lexical lists.
            let mut premeasured = Premeasured::default();
            if let Ok(dense) = &dense {
                premeasured.add(inputs, config.dedup, config.layout, admission, &dense.lists)?;
            }
            let mine = lexical_parts();
            spin_for(&second_done, SPIN_FOR_SECOND_THREAD);
            Ok::<_, CompileError>((mine, dense, premeasured))
        })?;
        (mine, theirs.into_inner().unwrap_or_else(PoisonError::into_inner), dense, premeasured)
    } else {
        let dense = dense_lists(inputs, config, admission, last_admitted, context_admits);
        (lexical_parts(), (None, None), dense, Premeasured::default())
    };
    let time = |mine: Option<Duration>, theirs| mine.or(theirs).unwrap_or_default();
    let windows =
        window_search.map(|search| lexical_list(search.into_hits(), Retriever::LexicalContext));
    let turns = turn_search.map(|search| lexical_list(search.into_hits(), Retriever::Lexical));
    let lexical_time = time(mine.1, theirs.1) + time(mine.0, theirs.0);
    let DenseLists { lists: dense_lists, served, also_served, context_search, elapsed } = dense?;
    let lists = turns.into_iter().chain(windows).chain(dense_lists).collect();
    Ok(Candidates {
        lists,
        served,
        also_served,
        context_search,
        premeasured,
        lexical_time,
        dense_time: elapsed,
    })
}

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

/// Runs `search` if no thread has claimed it, else helps the thread that has: the time it ran
/// it, if it did.
fn run_or_help(
    search: &SharedSearch<'_, TurnId>,
    admit: impl FnMut(TurnId) -> bool,
) -> Option<Duration> {
    let _span = tracing::debug_span!("lexical_list").entered();
    if search.claim() {
        let started = Instant::now();
        search.run(admit);
        Some(started.elapsed())
    } else {
        search.help(admit);
        None
    }
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
        // The also-encoders' lists stop at the as-of bound too; they seed nothing.
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
