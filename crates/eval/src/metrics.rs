//! The released LongMemEval retrieval metrics: recall_any@k, recall_all@k and ndcg_any@k, and the
//! turn-to-session widening, exactly as `eval_utils.py` and `run_retrieval.py` compute them.
//!
//! A ranking is a list of evidence keys, best first; several corpus entries may share a key (the
//! repeated filler sessions). After packing, a system's ranking is what it actually packed, so a
//! budget-limited system is never credited for evidence that did not fit.
//!
//! DCG is `rel_1 + sum_{i >= 2} rel_i / log2(i)`; the ideal DCG sorts the relevance of every
//! corpus entry, so it depends only on how many corpus entries are relevant.

use std::collections::HashSet;

use serde::Serialize;

use crate::protocol::strip_turn_id;

/// The three released scores at one cutoff, each 0..=1.
#[derive(Copy, Clone, Debug, PartialEq, Serialize)]
pub struct RetrievalScores {
    /// At least one gold item in the top k.
    pub recall_any: f64,
    /// Every gold item in the top k.
    pub recall_all: f64,
    /// nDCG with binary relevance.
    pub ndcg_any: f64,
}

/// DCG of binary relevances (the released `dcg`).
pub fn dcg(relevances: impl IntoIterator<Item = bool>) -> f64 {
    relevances
        .into_iter()
        .enumerate()
        .map(|(i, rel)| match (rel, i) {
            (false, _) => 0.0,
            (true, 0) => 1.0,
            (true, i) => 1.0 / ((i + 1) as f64).log2(),
        })
        .sum()
}

/// Scores `ranked` (keys, best first) at cutoff `k` against `gold`; `relevant_in_corpus` is the
/// number of corpus entries whose key is gold (for the ideal DCG).
pub fn evaluate_at(
    ranked: &[&str],
    gold: &HashSet<&str>,
    relevant_in_corpus: usize,
    k: usize,
) -> RetrievalScores {
    let top = &ranked[..k.min(ranked.len())];
    let recalled: HashSet<&str> = top.iter().copied().collect();
    let recall_any = gold.iter().any(|g| recalled.contains(g));
    let recall_all = gold.iter().all(|g| recalled.contains(g));
    RetrievalScores {
        recall_any: f64::from(u8::from(recall_any)),
        recall_all: f64::from(u8::from(recall_all)),
        ndcg_any: ndcg(top, gold, relevant_in_corpus, k),
    }
}

/// Scores a turn ranking at session level (the released `evaluate_retrieval_turn2session`): turn
/// keys are stripped to session keys, and the cutoff widens until `k` distinct sessions are in
/// (or the ranking ends). `gold_turns` are the gold turn keys; `relevant_in_corpus` the number of
/// corpus turns whose stripped key is a gold session.
pub fn evaluate_turns_at_session_level(
    ranked_turns: &[&str],
    gold_turns: &HashSet<&str>,
    relevant_in_corpus: usize,
    k: usize,
) -> RetrievalScores {
    let gold: HashSet<&str> = gold_turns.iter().map(|t| strip_turn_id(t)).collect();
    let sessions: Vec<&str> = ranked_turns.iter().map(|t| strip_turn_id(t)).collect();
    let mut effective_k = k;
    let mut distinct: HashSet<&str> = sessions.iter().take(effective_k).copied().collect();
    while effective_k < sessions.len() && distinct.len() < k {
        effective_k += 1;
        distinct.insert(sessions[effective_k - 1]);
    }
    evaluate_at(&sessions, &gold, relevant_in_corpus, effective_k)
}

fn ndcg(top: &[&str], gold: &HashSet<&str>, relevant_in_corpus: usize, k: usize) -> f64 {
    let ideal = dcg((0..k.min(relevant_in_corpus)).map(|_| true));
    if ideal == 0.0 {
        return 0.0;
    }
    dcg(top.iter().map(|key| gold.contains(key))) / ideal
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set<'a>(items: &[&'a str]) -> HashSet<&'a str> {
        items.iter().copied().collect()
    }

    #[test]
    fn dcg_matches_the_released_formula() {
        // rel_1 + rel_2/log2(2) + rel_3/log2(3)
        assert!((dcg([true, true, true]) - (1.0 + 1.0 + 1.0 / 3f64.log2())).abs() < 1e-12);
        assert_eq!(dcg([false, true]), 1.0);
        assert_eq!(dcg([]), 0.0);
    }

    #[test]
    fn recall_any_all_and_ndcg() {
        let ranked = ["a", "x", "b", "y"];
        let gold = set(&["a", "b"]);
        let s1 = evaluate_at(&ranked, &gold, 2, 1);
        assert_eq!((s1.recall_any, s1.recall_all, s1.ndcg_any), (1.0, 0.0, 1.0));
        let s3 = evaluate_at(&ranked, &gold, 2, 3);
        assert_eq!((s3.recall_any, s3.recall_all), (1.0, 1.0));
        let expect = (1.0 + 1.0 / 3f64.log2()) / 2.0;
        assert!((s3.ndcg_any - expect).abs() < 1e-12);
        // a ranking shorter than k (after packing) is scored on what it holds
        let short = evaluate_at(&["x"], &gold, 2, 10);
        assert_eq!((short.recall_any, short.ndcg_any), (0.0, 0.0));
        // no relevant item in the corpus: ndcg is 0 by definition
        assert_eq!(evaluate_at(&ranked, &set(&["z"]), 0, 3).ndcg_any, 0.0);
    }

    #[test]
    fn session_widening_extends_the_cutoff_to_k_distinct_sessions() {
        let ranked = ["s1_1", "s1_3", "s2_1", "answer_g_5"];
        let gold = set(&["answer_g_5"]);
        // k = 2: the first two turns are one session, so the cutoff widens to 3 turns (s1, s2)
        let s = evaluate_turns_at_session_level(&ranked, &gold, 1, 2);
        assert_eq!(s.recall_any, 0.0);
        let s = evaluate_turns_at_session_level(&ranked, &gold, 1, 3);
        assert_eq!(s.recall_all, 1.0);
        // ndcg over widened turn positions: gold at position 4
        assert!((s.ndcg_any - 1.0 / 4f64.log2()).abs() < 1e-12);
    }
}
