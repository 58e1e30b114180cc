//! The systems an evaluation compares, behind one trait, and the controls that need neither
//! encoder nor compiler: `bm25-official`, `no-memory`, `full-history` and `oracle`.
//!
//! Every system gets the same [`EvalQuestion`] (turns, timestamps, namespace, query, as-of) and the
//! same budgets, reader tokenizer and candidate limit; it returns, per budget, the evidence that
//! actually fits, in its own rank order. Every system's context is rendered in the product's
//! layout and counted exactly in the reader's tokenizer (the compiler's renderer and count, see
//! [`pack_turns`]), so all pay for the same preamble, session headers and citations.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use evicortex::front_end::{PackPolicy, RenderTurn, pack_ranked};
use evicortex::{CompiledContext, Layout, ReaderTokenizer, Role, TokenBudget};

use crate::{
    controls::bm25_okapi::{Bm25Okapi, Bm25OkapiParams},
    eval_question::{EvalQuestion, EvalTurn},
    eval_store::{EvalStore, QuestionRecords, RecordsCache},
    ranking::{Ranking, RankingCorpus, TurnRef},
};

/// The systems the runner knows, in the order reports list them.
pub const KNOWN_SYSTEMS: &[&str] = &[
    "evicortex",
    "evicortex-rerank",
    "comparator",
    "bm25-official",
    "bm25",
    "dense",
    "no-memory",
    "full-history",
    "oracle",
];

/// What a system produced for one question at one budget.
#[derive(Clone, Debug, Default)]
pub struct SystemOutput {
    /// The packed evidence in rank order (what scoring sees).
    pub ranking: Ranking,
    /// Reader tokens of the packed context.
    pub tokens_used: usize,
    /// Whether the system abstained (`None`: it never abstains).
    pub abstained: Option<bool>,
    /// The support score behind the abstention decision, where the system has one.
    pub support: Option<f32>,
    /// Time per stage.
    pub stages: Vec<(&'static str, Duration)>,
    /// The packed context, as the reader would get it.
    pub text: String,
    /// The whole compiled context, for systems that run the product's compile path.
    pub compiled: Option<Box<CompiledContext>>,
}

/// A system under evaluation.
pub trait EvalSystem {
    /// Its report name.
    fn name(&self) -> &str;
    /// Runs one question at every budget (`None` = no budget).
    fn run(
        &mut self,
        question: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Vec<SystemOutput>>;
}

/// Settings every system shares.
#[derive(Clone, Debug)]
pub struct SharedSettings {
    /// The reader tokenizer budgets are counted in (the product's).
    pub reader: Arc<dyn ReaderTokenizer>,
    /// The most candidates a retriever may offer the packer.
    pub candidate_limit: usize,
    /// The store holding every question's haystack: contexts cite its ledger records.
    pub store: Option<Arc<EvalStore>>,
    /// The layout every system that packs ranked evidence renders in: the product default's,
    /// so that all pay the same per line.
    pub layout: Layout,
}

impl SharedSettings {
    /// The store; systems that pack need it to cite records.
    pub fn store(&self) -> anyhow::Result<&Arc<EvalStore>> {
        self.store.as_ref().context("packing into a budget needs the evaluation store")
    }
}

/// Packs ranked turns at every budget with the product's layout and exact count, and times it.
/// Without a budget nothing is rendered: the whole ranking is scored as it is.
#[allow(clippy::too_many_arguments)] // the shared packing step of every control: its whole input
pub fn pack_turns(
    records: Option<&QuestionRecords>,
    ranked: &[TurnRef],
    budgets: &[Option<usize>],
    settings: &SharedSettings,
    policy: PackPolicy,
    corpus: RankingCorpus,
    retrieve_time: Duration,
) -> anyhow::Result<Vec<SystemOutput>> {
    let items: Vec<Vec<RenderTurn<'_>>> = match records {
        Some(records) => ranked
            .iter()
            .map(|&at| Ok(vec![RenderTurn::whole(records.evidence_at(at)?, &[])]))
            .collect::<anyhow::Result<_>>()?,
        None => Vec::new(),
    };
    budgets
        .iter()
        .map(|&budget| {
            let start = Instant::now();
            let Some(budget) = budget else {
                return Ok(SystemOutput {
                    ranking: Ranking { turns: ranked.to_vec(), sessions: None, corpus },
                    stages: vec![("retrieve", retrieve_time)],
                    ..SystemOutput::default()
                });
            };
            let budget = TokenBudget::new(u32::try_from(budget).unwrap_or(u32::MAX));
            let packed = pack_ranked(
                &items,
                Some(budget),
                settings.reader.as_ref(),
                settings.layout,
                policy,
            )?;
            Ok(SystemOutput {
                ranking: Ranking {
                    turns: packed.included.iter().map(|&i| ranked[i]).collect(),
                    sessions: None,
                    corpus,
                },
                tokens_used: packed.tokens,
                stages: vec![("retrieve", retrieve_time), ("pack", start.elapsed())],
                text: packed.text,
                ..SystemOutput::default()
            })
        })
        .collect()
}

/// The released BM25 (user turns, split on spaces). Without a budget it ranks sessions and turns
/// exactly as the release (the conformance configuration); with a budget it packs its turn
/// ranking (first `candidate_limit` turns) and its session metrics come from the widening.
#[derive(Debug)]
pub struct Bm25OfficialSystem {
    settings: SharedSettings,
    records: RecordsCache,
}

impl Bm25OfficialSystem {
    /// The released BM25 under `settings`.
    pub fn new(settings: SharedSettings) -> Bm25OfficialSystem {
        Bm25OfficialSystem { settings, records: RecordsCache::default() }
    }
}

impl EvalSystem for Bm25OfficialSystem {
    fn name(&self) -> &str {
        "bm25-official"
    }
    fn run(
        &mut self,
        q: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Vec<SystemOutput>> {
        let start = Instant::now();
        let admitted: Vec<&EvalTurn> = q.admitted().collect();
        let full = rank_official(q, &admitted);
        let retrieve = start.elapsed();
        budgets
            .iter()
            .map(|&budget| match budget {
                None => Ok(SystemOutput {
                    ranking: full.clone(),
                    stages: vec![("retrieve", retrieve)],
                    ..SystemOutput::default()
                }),
                Some(_) => {
                    let top: Vec<TurnRef> =
                        full.turns.iter().copied().take(self.settings.candidate_limit).collect();
                    let records = self.records.get(self.settings.store()?, q)?;
                    let mut out = pack_turns(
                        Some(&records),
                        &top,
                        &[budget],
                        &self.settings,
                        PackPolicy::SkipWhatDoesNotFit,
                        RankingCorpus::UserTurns,
                        retrieve,
                    )?;
                    Ok(out.remove(0))
                }
            })
            .collect()
    }
}

fn rank_official(q: &EvalQuestion, admitted: &[&EvalTurn]) -> Ranking {
    let params = Bm25OkapiParams::RELEASED;
    let mut sessions: Vec<(usize, Vec<&str>)> = Vec::new();
    for t in admitted {
        if t.role != Role::User {
            continue;
        }
        match sessions.last_mut() {
            Some((s, texts)) if *s == t.at.session => texts.push(&t.text),
            _ => sessions.push((t.at.session, vec![&t.text])),
        }
    }
    // Sessions with no user turn still are documents of the released index (empty text).
    let mut all_sessions: Vec<usize> = admitted.iter().map(|t| t.at.session).collect();
    all_sessions.dedup();
    let session_texts: Vec<String> = all_sessions
        .iter()
        .map(|s| {
            sessions.iter().find(|(x, _)| x == s).map(|(_, v)| v.join(" ")).unwrap_or_default()
        })
        .collect();
    let session_ranking = Bm25Okapi::new(session_texts.iter().map(String::as_str), params)
        .ranking(&q.query)
        .into_iter()
        .map(|i| all_sessions[i])
        .collect();
    let user_turns: Vec<&EvalTurn> =
        admitted.iter().copied().filter(|t| t.role == Role::User).collect();
    let turns = Bm25Okapi::new(user_turns.iter().map(|t| t.text.as_str()), params)
        .ranking(&q.query)
        .into_iter()
        .map(|i| user_turns[i].at)
        .collect();
    Ranking { turns, sessions: Some(session_ranking), corpus: RankingCorpus::UserTurns }
}

/// No memory: an empty context. Its scores are the floor.
#[derive(Debug)]
pub struct NoMemorySystem;

impl EvalSystem for NoMemorySystem {
    fn name(&self) -> &str {
        "no-memory"
    }
    fn run(
        &mut self,
        _: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Vec<SystemOutput>> {
        Ok(budgets.iter().map(|_| SystemOutput::default()).collect())
    }
}

/// Full history: the most recent admitted turns that fit, a contiguous window ending at the
/// question (ranked newest first).
#[derive(Debug)]
pub struct FullHistorySystem {
    settings: SharedSettings,
    records: RecordsCache,
}

impl FullHistorySystem {
    /// Full history under `settings`.
    pub fn new(settings: SharedSettings) -> FullHistorySystem {
        FullHistorySystem { settings, records: RecordsCache::default() }
    }
}

impl EvalSystem for FullHistorySystem {
    fn name(&self) -> &str {
        "full-history"
    }
    fn run(
        &mut self,
        q: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Vec<SystemOutput>> {
        let start = Instant::now();
        let mut turns: Vec<&EvalTurn> = q.admitted().collect();
        turns.sort_by_key(|t| (t.time, t.at));
        let ranked: Vec<TurnRef> = turns.iter().rev().map(|t| t.at).collect();
        let records = self.records.for_budgets(&self.settings, q, budgets)?;
        pack_turns(
            records.as_deref(),
            &ranked,
            budgets,
            &self.settings,
            PackPolicy::StopAtFirstMiss,
            RankingCorpus::AllTurns,
            start.elapsed(),
        )
    }
}

/// Oracle: only the dataset's evidence turns (of any role), oldest first. Its scores are the
/// ceiling a budget allows, and its context the reader's.
#[derive(Debug)]
pub struct OracleSystem {
    settings: SharedSettings,
    records: RecordsCache,
}

impl OracleSystem {
    /// The oracle under `settings`.
    pub fn new(settings: SharedSettings) -> OracleSystem {
        OracleSystem { settings, records: RecordsCache::default() }
    }
}

impl EvalSystem for OracleSystem {
    fn name(&self) -> &str {
        "oracle"
    }
    fn run(
        &mut self,
        q: &EvalQuestion,
        budgets: &[Option<usize>],
    ) -> anyhow::Result<Vec<SystemOutput>> {
        let start = Instant::now();
        let ranked: Vec<TurnRef> = q
            .admitted()
            .filter(|t| q.keys.evidence_turns.contains(q.keys.turn_key(t.at)))
            .map(|t| t.at)
            .collect();
        let records = self.records.for_budgets(&self.settings, q, budgets)?;
        pack_turns(
            records.as_deref(),
            &ranked,
            budgets,
            &self.settings,
            PackPolicy::SkipWhatDoesNotFit,
            RankingCorpus::AllTurns,
            start.elapsed(),
        )
    }
}
