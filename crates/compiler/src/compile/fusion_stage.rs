//! Stages 2 to 5: dedup, the named speakers' lists, fusion with the time-window, feedback,
//! link and session lists, the reranker's term, and support with abstention.

use std::collections::HashMap;

use evicortex_core::TurnId;
use evicortex_lexical::Bm25Index;

use crate::{
    AbstainReason, CompileConfig, CompileError, CompileInputs, CompileQuery, Corpus, DenseConfig,
    FusedHit, NamesConfig, RankScore, RankedList, RerankConfig, Reranker, Retriever, ScoredKey,
    SessionConfig, SupportSignal, TimeConfig,
    abstain::lexical_coverage,
    candidates::lexical_list,
    dedup::{Duplicate, dedup_ranked_lists},
    feedback::Found,
    filter::Admission,
    fusion::{rrf_fuse, rrf_term, sort_fused},
    names::named_speakers,
    rerank::ranks_of,
    session_list::session_list,
    time_window::{ResolvedTime, resolve_time},
    turn_document::turn_document,
};

/// The fused candidates of one compile and what fusing them decided.
pub(super) struct Fusion {
    /// Every list fused, after dedup.
    pub(super) lists: Vec<RankedList>,
    pub(super) fused: Vec<FusedHit<TurnId>>,
    pub(super) duplicates: Vec<Duplicate<TurnId>>,
    pub(super) named_speakers: Vec<String>,
    pub(super) time_window: Option<ResolvedTime>,
    /// The feedback and link lists, with what linked each candidate.
    pub(super) found: Found,
    /// Rank and score of each candidate in each list.
    pub(super) rank_of: HashMap<(Retriever, TurnId), RankScore>,
    pub(super) rerank_of: HashMap<TurnId, RankScore>,
    pub(super) support: Option<f32>,
    pub(super) abstain_reason: Option<AbstainReason>,
}

/// Fuses the candidate `lists`; `representative` maps a copy to the record kept for it.
pub(super) fn fuse(
    inputs: &CompileInputs<'_>,
    query: &CompileQuery,
    config: &CompileConfig,
    admission: &Admission<'_>,
    context_admits: &impl Fn(TurnId, u32) -> bool,
    representative: &impl Fn(TurnId) -> TurnId,
    lists: &[RankedList],
) -> Result<Fusion, CompileError> {
    let corpus = inputs.corpus;
    // 2. Dedup: every copy maps to the earliest admitted record with the same document.
    let (mut lists, duplicates) = dedup_ranked_lists(lists, representative);

    // 3. Names: each turn list again, filtered to the named speakers' turns.
    let named_speakers = speakers_named(config.names, &query.question, corpus);
    if !named_speakers.is_empty() {
        let said_by_named = |id: TurnId| {
            corpus
                .get(id)
                .and_then(|e| e.turn.speaker.as_deref())
                .is_some_and(|s| named_speakers.iter().any(|n| n == s))
        };
        let companions: Vec<RankedList> = if config.names == NamesConfig::SpeakerSearch {
            let admits = |id: TurnId| admission.admits(id) && said_by_named(id);
            let question = query.question.as_str();
            named_searches(inputs, config, question, context_admits, admits, representative)?
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

    // 4. Fusion; the time window's list; feedback and links; the session list.
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
    let mut found = crate::feedback::find(
        inputs,
        config.feedback,
        config.links,
        &query.question,
        &fused,
        admission,
        (config.lexical.top_n, dense_top_n),
    )?;
    if !found.lists.is_empty() {
        lists.extend(std::mem::take(&mut found.lists));
        fused = rrf_fuse(&lists, config.rrf_k);
    }
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
        let rerank = Rerank { reranker, depth, weight, rrf_k: config.rrf_k };
        rerank.apply(&query.question, corpus, &mut fused, &mut rerank_of)?;
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
    Ok(Fusion {
        lists,
        fused,
        duplicates,
        named_speakers,
        time_window,
        found,
        rank_of,
        rerank_of,
        support,
        abstain_reason,
    })
}

/// The speakers the question names, when it names some but not all of the namespace's.
fn speakers_named(names: NamesConfig, question: &str, corpus: &Corpus) -> Vec<String> {
    match names {
        NamesConfig::Off => Vec::new(),
        NamesConfig::SpeakerLists | NamesConfig::SpeakerSearch => {
            let named = named_speakers(question, corpus.speakers());
            if named.len() < corpus.speakers().len() {
                named.into_iter().map(str::to_owned).collect()
            } else {
                Vec::new()
            }
        }
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

/// The reranker's ordinal term, added to the top `depth` of a fusion.
struct Rerank<'r> {
    reranker: &'r dyn Reranker,
    depth: usize,
    weight: f32,
    rrf_k: f32,
}

impl Rerank<'_> {
    /// Scores the top of `fused`, adds each one's term and sorts again; each scored
    /// candidate's rank and score go to `rerank_of`.
    fn apply(
        &self,
        question: &str,
        corpus: &Corpus,
        fused: &mut [FusedHit<TurnId>],
        rerank_of: &mut HashMap<TurnId, RankScore>,
    ) -> Result<(), CompileError> {
        let _span = tracing::debug_span!("rerank", depth = self.depth).entered();
        let reranker = self.reranker;
        let depth = self.depth.min(fused.len());
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
            hit.score += rrf_term(self.rrf_k, rank, self.weight);
            hit.ranks.push((Retriever::Rerank, rank));
            rerank_of.insert(hit.key, RankScore { rank, score: *score });
        }
        sort_fused(fused);
        Ok(())
    }
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
