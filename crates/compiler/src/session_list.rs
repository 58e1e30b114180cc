//! Session-level evidence: sessions scored from their fused turns, so that a session where
//! several turns support the question lifts those turns together.

use std::collections::HashMap;

use evicortex_core::TurnId;

use crate::{Corpus, FusedHit, ScoredKey};

/// The session list: each session's score is the sum of the fused scores of its best `turns`
/// fused candidates (a session is not penalised for being long: only its best turns count); the
/// candidates of the best `sessions` sessions follow in order of their session's score, then in
/// fused order inside a session. Each hit carries its session's score. `fused` must be sorted
/// (best first), as fusion leaves it.
pub(crate) fn session_list(
    fused: &[FusedHit<TurnId>],
    corpus: &Corpus,
    turns: u32,
    sessions: u32,
) -> Vec<ScoredKey> {
    // Sessions in order of their best candidate, each with its candidates in fused order.
    let mut order: Vec<(&str, Vec<&FusedHit<TurnId>>)> = Vec::new();
    let mut slot: HashMap<&str, usize> = HashMap::new();
    for hit in fused {
        let Some(evidence) = corpus.get(hit.key) else { continue };
        let session = evidence.turn.session.as_str();
        let i = *slot.entry(session).or_insert_with(|| {
            order.push((session, Vec::new()));
            order.len() - 1
        });
        order[i].1.push(hit);
    }
    let mut scored: Vec<(f64, usize)> = order
        .iter()
        .enumerate()
        .map(|(i, (_, hits))| (hits.iter().take(turns as usize).map(|h| h.score).sum(), i))
        .collect();
    // Stable: equal scores keep the order of their best candidate.
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored
        .into_iter()
        .take(sessions as usize)
        .flat_map(|(score, i)| {
            order[i].1.iter().map(move |h| ScoredKey { key: h.key, score: score as f32 })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_corpus::corpus;

    fn hit(id: u64, score: f64) -> FusedHit<TurnId> {
        FusedHit { key: TurnId::from_raw(id), score, ranks: Vec::new() }
    }

    fn keys(list: &[ScoredKey]) -> Vec<u64> {
        list.iter().map(|h| h.key.raw()).collect()
    }

    #[test]
    fn a_session_with_several_supporting_turns_outranks_one_strong_turn() {
        // Records 1..=4: session a holds 1; session b holds 2, 3 and 4.
        let corpus = corpus(&["a", "b", "b", "b"]);
        let fused = [hit(1, 0.30), hit(2, 0.20), hit(3, 0.15), hit(4, 0.01)];
        let list = session_list(&fused, &corpus, 2, 10);
        assert_eq!(keys(&list), vec![2, 3, 4, 1]);
        assert!((list[0].score - 0.35).abs() < 1e-6);
        // With one turn per session the order is the fused order of the sessions' best turns.
        assert_eq!(keys(&session_list(&fused, &corpus, 1, 10)), vec![1, 2, 3, 4]);
    }

    #[test]
    fn only_the_best_sessions_are_listed() {
        let corpus = corpus(&["a", "b", "c"]);
        let fused = [hit(1, 0.3), hit(2, 0.2), hit(3, 0.1)];
        assert_eq!(keys(&session_list(&fused, &corpus, 3, 2)), vec![1, 2]);
        assert!(session_list(&[], &corpus, 3, 2).is_empty());
    }
}
