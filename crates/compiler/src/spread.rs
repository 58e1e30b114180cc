//! Spreading the packed turns over sessions: a question that counts or lists ("how many times",
//! "what books has Melanie read") is answered by a few turns in each of several sessions, and one
//! session's many matching turns must not fill the budget before the others are reached.

use std::collections::{HashMap, HashSet};

use evicortex_core::TurnId;

use crate::{Admission, Corpus, FusedHit, SessionSpread, SpreadQuestions};

/// Whether coverage selection applies to `question`, and with which weight.
pub(crate) fn coverage_applies(coverage: crate::CoverageConfig, question: &str) -> Option<f32> {
    match coverage {
        crate::CoverageConfig::Off => None,
        crate::CoverageConfig::NewFacets { weight, questions: SpreadQuestions::All } => {
            Some(weight)
        }
        crate::CoverageConfig::NewFacets { weight, questions: SpreadQuestions::Aggregating } => {
            is_aggregating(question).then_some(weight)
        }
    }
}

/// Whether `spread` applies to `question`.
pub(crate) fn applies(spread: SessionSpread, question: &str) -> Option<u32> {
    match spread {
        SessionSpread::Off => None,
        SessionSpread::PerSession { turns, questions: SpreadQuestions::All } => Some(turns),
        SessionSpread::PerSession { turns, questions: SpreadQuestions::Aggregating } => {
            is_aggregating(question).then_some(turns)
        }
    }
}

/// Words that ask for a count, a total or a list. Plural heads after "what"/"which" ("what
/// books", "which cities") are caught by their ending, which also takes in a few singular nouns
/// ("which bus"): the cost of a false positive is only a reordering.
pub(crate) fn is_aggregating(question: &str) -> bool {
    let lower = question.to_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    const ALONE: [&str; 12] = [
        "ever",
        "total",
        "altogether",
        "combined",
        "both",
        "all",
        "every",
        "each",
        "different",
        "various",
        "list",
        "times",
    ];
    const NOT_PLURAL: [&str; 6] = ["is", "was", "does", "has", "this", "kinds"];
    words.iter().any(|w| ALONE.contains(w))
        || words.windows(2).any(|pair| match pair {
            ["how", "many" | "much" | "often"] => true,
            ["what" | "which", head] => {
                head.len() > 3
                    && head.ends_with('s')
                    && !head.ends_with("ss")
                    && !NOT_PLURAL.contains(head)
            }
            _ => false,
        })
}

/// Reorders `fused` so that, among admitted candidates, at most `turns` of any one session come
/// before every candidate of a session that has fewer ahead of it; the deferred candidates follow
/// in their own order. Returns the deferred candidates.
pub(crate) fn spread_over_sessions(
    fused: &mut Vec<FusedHit<TurnId>>,
    corpus: &Corpus,
    admission: &Admission<'_>,
    turns: u32,
) -> HashSet<TurnId> {
    let mut ahead: HashMap<&str, u32> = HashMap::new();
    let (mut first, mut deferred) = (Vec::with_capacity(fused.len()), Vec::new());
    for hit in fused.drain(..) {
        let Some(pos) = admission.position(hit.key) else {
            first.push(hit);
            continue;
        };
        let count = ahead.entry(corpus.at(pos).turn.session.as_str()).or_default();
        if *count < turns {
            *count += 1;
            first.push(hit);
        } else {
            deferred.push(hit);
        }
    }
    let ids = deferred.iter().map(|h| h.key).collect();
    first.extend(deferred);
    *fused = first;
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_corpus::corpus;

    #[test]
    fn a_session_past_its_share_waits_behind_the_other_sessions() {
        // Records 1..=5: session a holds 1, 2 and 3; session b holds 4; session c holds 5.
        let corpus = corpus(&["a", "a", "a", "b", "c"]);
        let admission = Admission::new(&corpus, None);
        let hit = |id: u64| FusedHit { key: TurnId::from_raw(id), score: 1.0, ranks: Vec::new() };
        let mut fused: Vec<_> = [1, 2, 3, 4, 5].into_iter().map(hit).collect();
        let deferred = spread_over_sessions(&mut fused, &corpus, &admission, 1);
        let order: Vec<u64> = fused.iter().map(|h| h.key.raw()).collect();
        assert_eq!(order, vec![1, 4, 5, 2, 3]);
        assert_eq!(deferred, [2, 3].into_iter().map(TurnId::from_raw).collect());
        let mut fused: Vec<_> = [1, 2, 3, 4, 5].into_iter().map(hit).collect();
        spread_over_sessions(&mut fused, &corpus, &admission, 2);
        let order: Vec<u64> = fused.iter().map(|h| h.key.raw()).collect();
        assert_eq!(order, vec![1, 2, 4, 5, 3]);
    }

    #[test]
    fn counting_totalling_and_listing_questions_aggregate() {
        for q in [
            "How many items of clothing do I need to pick up?",
            "How much have I made from selling eggs this month?",
            "What is the total cost of Lola's vet visit and flea medication?",
            "What books has Melanie read?",
            "Which cities has Jon visited?",
            "What do Jon and Gina both have in common?",
            "Did I visit all the museums on my list?",
            "Have I ever been to Rome?",
        ] {
            assert!(is_aggregating(q), "{q}");
        }
        for q in [
            "What did Caroline research?",
            "What is Caroline's identity?",
            "Where did Caroline move from 4 years ago?",
            "Which bus did I take?",
            "What was the date on which I attended the BBQ?",
        ] {
            assert!(!is_aggregating(q), "{q}");
        }
    }
}
