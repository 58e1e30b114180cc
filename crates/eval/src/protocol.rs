//! The released LongMemEval retrieval protocol: evidence keys, gold labels and exclusions, as
//! `src/retrieval/run_retrieval.py` and `eval_utils.py` of the LongMemEval repository define them.
//!
//! - Only user turns are indexed by the released retrievers. A turn's key is
//!   `<session_id>_<i+1>`, `i` its index among ALL turns of the session.
//! - Inside an evidence session (id contains `answer`), a turn without `has_answer` gets `answer`
//!   replaced by `noans` in its key; a session none of whose user turns has `has_answer` gets the
//!   same relabelling of its session key.
//! - Gold items are the keys containing `answer`.
//! - `_abs` questions and questions with no user-side evidence turn are not scored (419 of 500
//!   remain in the official S file, 418 in the 499-record file).
//!
//! Systems that retrieve assistant turns too get keys by the same rule (an assistant turn is never
//! a gold turn, since gold turns are user turns; at session level it widens to its session).

use std::collections::HashSet;

use evicortex::Role;

use crate::datasets::longmemeval::{HaystackSession, Question};

/// Why a question is not scored by the retrieval metrics.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Exclusion {
    /// An `_abs` question: reported separately as an abstention case.
    Abstention,
    /// No user turn carries `has_answer`.
    NoUserEvidence,
}

/// The evidence keys and gold labels of one question under the released protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvidenceKeys {
    /// Key of each session (session-level retrieval), in haystack order.
    pub session_keys: Vec<String>,
    /// Key of each turn (any role), per session, in haystack order.
    pub turn_keys: Vec<Vec<String>>,
    /// Gold session keys.
    pub gold_sessions: HashSet<String>,
    /// Gold turn keys (user turns with `has_answer`).
    pub gold_turns: HashSet<String>,
    /// Every turn the dataset marks as evidence, of any role (`has_answer` on an assistant turn
    /// too): what the oracle gives the reader. The released retrieval metrics score only user
    /// turns, but a single-session-assistant question is answered by the assistant's turn.
    pub evidence_turns: HashSet<String>,
    /// Number of user turns whose key is gold (the ideal's relevant count at turn level).
    pub relevant_user_turns: usize,
    /// Number of sessions whose key is gold (the ideal's relevant count at session level).
    pub relevant_sessions: usize,
    /// Number of user turns whose key widens to a gold session (the ideal's relevant count of the
    /// session widening over user turns).
    pub widened_relevant_user_turns: usize,
    /// Number of turns of any role whose key widens to a gold session (the same over all turns).
    pub widened_relevant_all_turns: usize,
    /// Why the question is excluded from retrieval metrics, if it is.
    pub exclusion: Option<Exclusion>,
}

impl EvidenceKeys {
    /// Computes the keys of `question`.
    pub fn of(question: &Question) -> EvidenceKeys {
        let mut session_keys = Vec::with_capacity(question.sessions.len());
        let mut turn_keys = Vec::with_capacity(question.sessions.len());
        for session in &question.sessions {
            session_keys.push(session_key(session));
            turn_keys.push((0..session.turns.len()).map(|i| turn_key(session, i)).collect());
        }
        let mut gold_turns = HashSet::new();
        let mut evidence_turns = HashSet::new();
        let mut relevant_user_turns = 0;
        for (session, keys) in question.sessions.iter().zip(&turn_keys) {
            for (turn, key) in session.turns.iter().zip::<&Vec<String>>(keys) {
                if turn.has_answer == Some(true) {
                    evidence_turns.insert(key.clone());
                }
                if turn.role == Role::User && key.contains("answer") {
                    gold_turns.insert(key.clone());
                    relevant_user_turns += 1;
                }
            }
        }
        let gold_sessions: HashSet<String> =
            session_keys.iter().filter(|k| k.contains("answer")).cloned().collect();
        let relevant_sessions = session_keys.iter().filter(|k| gold_sessions.contains(*k)).count();
        let (widened_relevant_user_turns, widened_relevant_all_turns) = widened_counts(
            &gold_turns,
            question.sessions.iter().map(|s| &s.turns).zip(&turn_keys).flat_map(|(turns, keys)| {
                turns.iter().zip(keys).map(|(t, k)| (t.role == Role::User, k.as_str()))
            }),
        );
        let exclusion = if question.abstention {
            Some(Exclusion::Abstention)
        } else if gold_turns.is_empty() {
            Some(Exclusion::NoUserEvidence)
        } else {
            None
        };
        EvidenceKeys {
            session_keys,
            turn_keys,
            gold_sessions,
            gold_turns,
            evidence_turns,
            relevant_user_turns,
            relevant_sessions,
            widened_relevant_user_turns,
            widened_relevant_all_turns,
            exclusion,
        }
    }

    /// The key of the haystack turn `at`.
    pub fn turn_key(&self, at: crate::ranking::TurnRef) -> &str {
        &self.turn_keys[at.session][at.turn]
    }
}

/// Counts the turns (user turns, all turns) whose key widens to a session of a gold turn.
pub fn widened_counts<'k>(
    gold_turns: &HashSet<String>,
    turns: impl Iterator<Item = (bool, &'k str)>,
) -> (usize, usize) {
    let gold: HashSet<&str> = gold_turns.iter().map(|t| strip_turn_id(t)).collect();
    let (mut user, mut all) = (0, 0);
    for (is_user, key) in turns {
        if gold.contains(strip_turn_id(key)) {
            all += 1;
            user += usize::from(is_user);
        }
    }
    (user, all)
}

/// Whether a turn packed only in part (a long turn's excerpt) counts as packed evidence: only
/// where the part holds the whole gold answer, compared as lowercase words with runs of
/// whitespace collapsed and the answer's closing punctuation dropped, on word boundaries. A turn
/// that does not state the answer verbatim never counts from an excerpt, so an excerpt is never
/// credited with evidence it may have cut away (whole turns are credited as the benchmark
/// labels them).
pub fn excerpt_holds_answer(answer: &str, excerpt: &str) -> bool {
    let words = |text: &str| -> Vec<String> {
        text.split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_lowercase)
            .collect()
    };
    let answer = words(answer);
    let shown = words(excerpt);
    !answer.is_empty() && shown.windows(answer.len()).any(|w| w == answer.as_slice())
}

/// The session key: the id, with `answer` relabelled `noans` when no user turn has evidence.
pub fn session_key(session: &HaystackSession) -> String {
    let user_evidence =
        session.turns.iter().any(|t| t.role == Role::User && t.has_answer == Some(true));
    if session.id.contains("answer") && !user_evidence {
        session.id.replace("answer", "noans")
    } else {
        session.id.clone()
    }
}

/// The key of turn `index` of `session`: `<session_id>_<index+1>`, relabelled `noans` inside an
/// evidence session when the turn has no evidence label.
pub fn turn_key(session: &HaystackSession, index: usize) -> String {
    let key = format!("{}_{}", session.id, index + 1);
    if session.id.contains("answer") && session.turns[index].has_answer != Some(true) {
        key.replace("answer", "noans")
    } else {
        key
    }
}

/// The session part of a turn key: everything before the last `_` (the released
/// `strip_turn_id`).
pub fn strip_turn_id(key: &str) -> &str {
    key.rsplit_once('_').map_or("", |(head, _)| head)
}

#[cfg(test)]
mod tests {
    use chrono::NaiveDateTime;

    use super::*;
    use crate::datasets::longmemeval::HaystackTurn;

    #[test]
    fn an_excerpt_counts_only_where_it_states_the_answer() {
        assert!(excerpt_holds_answer(
            "Business Administration.",
            "I got my business  administration degree"
        ));
        assert!(excerpt_holds_answer("3", "we bought 3 chairs"));
        assert!(!excerpt_holds_answer("3", "we bought 30 chairs"));
        assert!(!excerpt_holds_answer("Lisbon", "the flight to Porto"));
        assert!(!excerpt_holds_answer("", "anything"));
    }

    fn session(id: &str, turns: &[(Role, Option<bool>)]) -> HaystackSession {
        HaystackSession {
            id: id.into(),
            occurrence: 1,
            date: NaiveDateTime::default(),
            turns: turns
                .iter()
                .map(|&(role, has_answer)| HaystackTurn {
                    role,
                    content: String::new(),
                    has_answer,
                })
                .collect(),
        }
    }

    #[test]
    fn keys_follow_the_released_relabelling() {
        let u = Role::User;
        let a = Role::Assistant;
        let ev = session("answer_x_1", &[(u, Some(false)), (a, Some(true)), (u, Some(true))]);
        assert_eq!(session_key(&ev), "answer_x_1");
        assert_eq!(turn_key(&ev, 0), "noans_x_1_1");
        assert_eq!(turn_key(&ev, 1), "answer_x_1_2");
        assert_eq!(turn_key(&ev, 2), "answer_x_1_3");
        let assistant_only = session("answer_y", &[(u, Some(false)), (a, Some(true))]);
        assert_eq!(session_key(&assistant_only), "noans_y");
        let filler = session("sharegpt_abc_0", &[(u, None)]);
        assert_eq!(turn_key(&filler, 0), "sharegpt_abc_0_1");
        assert_eq!(strip_turn_id("answer_x_1_3"), "answer_x_1");
        assert_eq!(strip_turn_id("nounderscore"), "");
    }

    fn question(sessions: Vec<HaystackSession>) -> Question {
        Question {
            namespace: evicortex::Namespace::new("q").unwrap(),
            question_type: crate::datasets::longmemeval::QuestionType::SingleSessionAssistant,
            abstention: false,
            question: "which restaurant did you recommend?".into(),
            question_date: NaiveDateTime::default(),
            answer: crate::datasets::longmemeval::Answer::Text("Miss Bee".into()),
            answer_session_ids: vec!["answer_y".into()],
            sessions,
        }
    }

    /// An assistant-side evidence turn is no gold turn of the released retrieval metrics (the
    /// question is excluded from them), but it is evidence the oracle hands the reader.
    #[test]
    fn assistant_evidence_is_the_oracles_but_not_a_gold_turn() {
        let (u, a) = (Role::User, Role::Assistant);
        let filler = session("sharegpt_abc_0", &[(u, None), (a, None)]);
        let assistant_only = session("answer_y", &[(u, Some(false)), (a, Some(true))]);
        let keys = EvidenceKeys::of(&question(vec![filler.clone(), assistant_only]));
        assert!(keys.gold_turns.is_empty());
        assert_eq!(keys.exclusion, Some(Exclusion::NoUserEvidence));
        assert_eq!(keys.evidence_turns, ["answer_y_2".to_owned()].into());

        let both = session("answer_z", &[(u, Some(true)), (a, Some(true)), (u, Some(false))]);
        let keys = EvidenceKeys::of(&question(vec![filler, both]));
        assert_eq!(keys.gold_turns, ["answer_z_1".to_owned()].into());
        assert_eq!(keys.evidence_turns, ["answer_z_1".to_owned(), "answer_z_2".to_owned()].into());
        assert_eq!(keys.exclusion, None);
    }
}
