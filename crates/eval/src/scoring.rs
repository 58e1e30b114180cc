//! Scores a question's ranking with the released metrics, at session and turn level, and
//! averages them over questions.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::{
    metrics::{RetrievalScores, evaluate_at, evaluate_turns_at_session_level},
    protocol::EvidenceKeys,
    ranking::{Ranking, RankingCorpus},
};

/// Metric name -> value, e.g. `recall_all@5` -> 0.74.
pub type MetricTable = BTreeMap<String, f64>;

/// Session- and turn-level scores of one question (or their mean over questions).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LevelScores {
    /// Session level.
    pub session: MetricTable,
    /// Turn level.
    pub turn: MetricTable,
}

/// Scores `ranking` at every cutoff.
pub fn score_ranking(keys: &EvidenceKeys, ranking: &Ranking, cutoffs: &[usize]) -> LevelScores {
    let turn_keys: Vec<&str> = ranking.turns.iter().map(|&r| keys.turn_key(r)).collect();
    let gold_turns: HashSet<&str> = keys.gold_turns.iter().map(String::as_str).collect();
    let gold_sessions: HashSet<&str> = keys.gold_sessions.iter().map(String::as_str).collect();
    let mut out = LevelScores::default();
    for &k in cutoffs {
        let turn = evaluate_at(&turn_keys, &gold_turns, keys.relevant_user_turns, k);
        insert(&mut out.turn, k, turn);
        let session = match &ranking.sessions {
            Some(sessions) => {
                let session_keys: Vec<&str> =
                    sessions.iter().map(|&s| keys.session_keys[s].as_str()).collect();
                evaluate_at(&session_keys, &gold_sessions, keys.relevant_sessions, k)
            }
            None => {
                let relevant = match ranking.corpus {
                    RankingCorpus::UserTurns => keys.widened_relevant_user_turns,
                    RankingCorpus::AllTurns => keys.widened_relevant_all_turns,
                };
                evaluate_turns_at_session_level(&turn_keys, &gold_turns, relevant, k)
            }
        };
        insert(&mut out.session, k, session);
    }
    out
}

fn insert(table: &mut MetricTable, k: usize, s: RetrievalScores) {
    table.insert(format!("recall_any@{k}"), s.recall_any);
    table.insert(format!("recall_all@{k}"), s.recall_all);
    table.insert(format!("ndcg_any@{k}"), s.ndcg_any);
}

/// Running means of [`LevelScores`].
#[derive(Clone, Debug, Default)]
pub struct MeanScores {
    sum: LevelScores,
    n: usize,
}

impl MeanScores {
    /// Adds one question.
    pub fn add(&mut self, s: &LevelScores) {
        for (dst, src) in [(&mut self.sum.session, &s.session), (&mut self.sum.turn, &s.turn)] {
            for (k, v) in src {
                *dst.entry(k.clone()).or_insert(0.0) += v;
            }
        }
        self.n += 1;
    }
    /// Questions added.
    pub fn count(&self) -> usize {
        self.n
    }
    /// The means (empty tables when nothing was added).
    pub fn mean(&self) -> LevelScores {
        let n = self.n.max(1) as f64;
        let div = |t: &MetricTable| t.iter().map(|(k, v)| (k.clone(), v / n)).collect();
        LevelScores { session: div(&self.sum.session), turn: div(&self.sum.turn) }
    }
}
