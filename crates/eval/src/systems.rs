//! The systems an evaluation compares, behind one trait, and the controls that need neither
//! encoder nor compiler: `bm25-official`, `no-memory`, `full-history` and `oracle`.
//!
//! Every system gets the same [`EvalQuestion`] (turns, timestamps, namespace, query, as-of) and the
//! same budgets, reader tokenizer and candidate limit; it returns, per budget, the evidence that
//! actually fits, in its own rank order.

use std::time::{Duration, Instant};

use evicortex_core::Role;

use crate::{
    controls::bm25_okapi::{Bm25Okapi, Bm25OkapiParams},
    eval_question::{EvalQuestion, EvalTurn},
    packing::{PackItem, PackPolicy, ReaderTokenizer, pack},
    ranking::{Ranking, RankingCorpus, TurnRef},
};

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
    /// The reader tokenizer budgets are counted in.
    pub reader: ReaderTokenizer,
    /// The most candidates a retriever may offer the packer.
    pub candidate_limit: usize,
}

/// The reader line of a turn: `[#<n>] <YYYY-MM-DD HH:MM> <role>[ (<speaker>)]: <text>`, `n` the
/// 1-based position of the turn in the question's haystack (its ledger order on ingest).
pub fn turn_line(q: &EvalQuestion, turn: &EvalTurn) -> String {
    let n = q.turns.iter().position(|t| t.at == turn.at).map_or(0, |p| p + 1);
    let speaker = turn.speaker.as_ref().map(|s| format!(" ({s})")).unwrap_or_default();
    format!("[#{n}] {} {}{speaker}: {}", turn.time.format("%Y-%m-%d %H:%M"), turn.role, turn.text)
}

/// A turn as a pack item.
pub fn turn_item(q: &EvalQuestion, turn: &EvalTurn) -> PackItem {
    PackItem {
        session: turn.session.clone(),
        time: turn.time,
        order: turn.at.turn,
        line: turn_line(q, turn),
    }
}

/// Packs ranked turns at every budget and times the packing.
pub fn pack_turns(
    q: &EvalQuestion,
    ranked: &[TurnRef],
    budgets: &[Option<usize>],
    settings: &SharedSettings,
    policy: PackPolicy,
    corpus: RankingCorpus,
    retrieve_time: Duration,
) -> anyhow::Result<Vec<SystemOutput>> {
    let items: Vec<PackItem> = ranked
        .iter()
        .map(|&at| {
            q.turn(at).map(|t| turn_item(q, t)).ok_or_else(|| anyhow::anyhow!("no turn {at:?}"))
        })
        .collect::<anyhow::Result<_>>()?;
    budgets
        .iter()
        .map(|&budget| {
            let start = Instant::now();
            let packed = pack(&items, budget, &settings.reader, policy)?;
            Ok(SystemOutput {
                ranking: Ranking {
                    turns: packed.included.iter().map(|&i| ranked[i]).collect(),
                    sessions: None,
                    corpus,
                },
                tokens_used: packed.tokens_used,
                abstained: None,
                support: None,
                stages: vec![("retrieve", retrieve_time), ("pack", start.elapsed())],
            })
        })
        .collect()
}

/// The released BM25 (user turns, split on spaces). Without a budget it ranks sessions and turns
/// exactly as the release (the conformance configuration); with a budget it packs its turn
/// ranking (first `candidate_limit` turns) and its session metrics come from the widening.
#[derive(Debug)]
pub struct Bm25OfficialSystem {
    /// Shared settings.
    pub settings: SharedSettings,
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
                    tokens_used: 0,
                    abstained: None,
                    support: None,
                    stages: vec![("retrieve", retrieve)],
                }),
                Some(_) => {
                    let top: Vec<TurnRef> =
                        full.turns.iter().copied().take(self.settings.candidate_limit).collect();
                    let mut out = pack_turns(
                        q,
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
    /// Shared settings.
    pub settings: SharedSettings,
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
        pack_turns(
            q,
            &ranked,
            budgets,
            &self.settings,
            PackPolicy::StopAtFirstMiss,
            RankingCorpus::AllTurns,
            start.elapsed(),
        )
    }
}

/// Oracle: only the gold evidence turns, oldest first. Its scores are the ceiling a budget allows.
#[derive(Debug)]
pub struct OracleSystem {
    /// Shared settings.
    pub settings: SharedSettings,
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
            .filter(|t| q.keys.gold_turns.contains(q.keys.turn_key(t.at)))
            .map(|t| t.at)
            .collect();
        pack_turns(
            q,
            &ranked,
            budgets,
            &self.settings,
            PackPolicy::SkipWhatDoesNotFit,
            RankingCorpus::AllTurns,
            start.elapsed(),
        )
    }
}
