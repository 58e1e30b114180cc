//! Scores a question's ranking with the released metrics, at session and turn level, and
//! averages them over questions.

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::{
    metrics::{RetrievalScores, evaluate_at, evaluate_turns_at_session_level},
    protocol::{EvidenceKeys, strip_turn_id},
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

/// The two levels a question is scored at.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Level {
    /// Sessions (widened from turns for turn-level systems).
    Session,
    /// Turns.
    Turn,
}

/// Scores `ranking` at every cutoff, and over the whole packed context.
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
    let packed = match &ranking.sessions {
        Some(sessions) => {
            let session_keys: Vec<&str> =
                sessions.iter().map(|&s| keys.session_keys[s].as_str()).collect();
            PackedRecall {
                turn: packed_recall(&turn_keys, &gold_turns),
                session: packed_recall(&session_keys, &gold_sessions),
            }
        }
        None => packed_turn_recall(&turn_keys, &gold_turns),
    };
    insert_packed(&mut out.turn, packed.turn);
    insert_packed(&mut out.session, packed.session);
    out
}

/// Whether the gold evidence is anywhere in the packed context, whatever its rank: what a reader
/// can use at this budget. A cutoff counts items, so it favours systems whose items are larger
/// (a chunk lists several turns); this measure counts only what fits the budget.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PackedRecall {
    /// (any, all) gold turns packed.
    pub turn: (bool, bool),
    /// (any, all) gold sessions reached by a packed evidence turn.
    pub session: (bool, bool),
}

/// [`PackedRecall`] of a turn ranking given by keys; sessions by the released widening.
pub fn packed_turn_recall(packed_turns: &[&str], gold_turns: &HashSet<&str>) -> PackedRecall {
    let sessions: Vec<&str> = packed_turns.iter().map(|t| strip_turn_id(t)).collect();
    let gold_sessions: HashSet<&str> = gold_turns.iter().map(|t| strip_turn_id(t)).collect();
    PackedRecall {
        turn: packed_recall(packed_turns, gold_turns),
        session: packed_recall(&sessions, &gold_sessions),
    }
}

fn insert_packed(table: &mut MetricTable, (any, all): (bool, bool)) {
    table.insert(format!("recall_any@{PACKED}"), f64::from(u8::from(any)));
    table.insert(format!("recall_all@{PACKED}"), f64::from(u8::from(all)));
}

/// Whether any, and whether every, `gold` key is among the `packed` keys (none is all of none
/// only when there is gold to find).
fn packed_recall(packed: &[&str], gold: &HashSet<&str>) -> (bool, bool) {
    let packed: HashSet<&str> = packed.iter().copied().collect();
    let any = gold.iter().any(|g| packed.contains(g));
    let all = !gold.is_empty() && gold.iter().all(|g| packed.contains(g));
    (any, all)
}

/// The cutoff name of the [`PackedRecall`] measures: the whole packed context.
pub const PACKED: &str = "packed";

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ranking::{RankingCorpus, TurnRef};

    /// Two sessions of three turns; the gold turns are the first turns of both sessions, and
    /// non-evidence turns of a gold session carry their own `noans` key, as the release does.
    fn keys() -> EvidenceKeys {
        EvidenceKeys {
            session_keys: vec!["answer_a".into(), "answer_b".into()],
            turn_keys: vec![
                vec!["answer_a_1".into(), "noans_a_2".into(), "noans_a_3".into()],
                vec!["answer_b_1".into(), "noans_b_2".into(), "noans_b_3".into()],
            ],
            gold_sessions: ["answer_a".to_owned(), "answer_b".to_owned()].into(),
            gold_turns: ["answer_a_1".to_owned(), "answer_b_1".to_owned()].into(),
            evidence_turns: ["answer_a_1".to_owned(), "answer_b_1".to_owned()].into(),
            relevant_user_turns: 2,
            relevant_sessions: 2,
            widened_relevant_user_turns: 2,
            widened_relevant_all_turns: 2,
            exclusion: None,
        }
    }

    fn ranking(turns: &[(usize, usize)]) -> Ranking {
        Ranking {
            turns: turns.iter().map(|&(session, turn)| TurnRef { session, turn }).collect(),
            sessions: None,
            corpus: RankingCorpus::AllTurns,
        }
    }

    #[test]
    fn packed_recall_counts_gold_turns_anywhere_in_the_context_beyond_every_cutoff() {
        // Two distinct widened sessions fill cutoff 1 before the second gold turn arrives.
        let r = ranking(&[(0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (1, 0)]);
        let s = score_ranking(&keys(), &r, &[1]);
        assert_eq!(s.turn["recall_all@1"], 0.0);
        assert_eq!(s.turn["recall_any@packed"], 1.0);
        assert_eq!(s.turn["recall_all@packed"], 1.0);
        assert_eq!(s.session["recall_all@1"], 0.0);
        assert_eq!(s.session["recall_all@packed"], 1.0);
    }

    #[test]
    fn packed_recall_is_zero_when_a_gold_turn_did_not_fit() {
        let r = ranking(&[(1, 0), (0, 1)]);
        let s = score_ranking(&keys(), &r, &[10]);
        assert_eq!(s.turn["recall_any@packed"], 1.0);
        assert_eq!(s.turn["recall_all@packed"], 0.0);
        // A non-evidence turn of a gold session does not widen to it.
        assert_eq!(s.session["recall_all@packed"], 0.0);
        let empty = score_ranking(&keys(), &ranking(&[]), &[10]);
        assert_eq!(empty.turn["recall_any@packed"], 0.0);
    }
}
