//! Per-question outcomes: one JSON line per system, budget and question, written beside the
//! report as `questions.jsonl`. The report's means say how well a system did; these lines say on
//! which questions, so failures can be read on the dev split.

use std::io::Write;

use serde::Serialize;

use crate::{
    eval_question::EvalQuestion, protocol::Exclusion, scoring::LevelScores, systems::SystemOutput,
};

/// What one system did on one question at one budget.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QuestionOutcome {
    /// The system's report name.
    pub system: String,
    /// The budget in reader tokens (`None`: no budget).
    pub budget: Option<usize>,
    /// The question id.
    pub question: String,
    /// Question type or category.
    pub kind: String,
    /// Why the question is not scored, if it is not.
    pub excluded: Option<Exclusion>,
    /// Whether the system abstained (`None`: it never abstains).
    pub abstained: Option<bool>,
    /// The support score behind the abstention decision, where the system has one.
    pub support: Option<f32>,
    /// Reader tokens of the packed context.
    pub tokens_used: usize,
    /// Gold turn keys, sorted.
    pub gold_turns: Vec<String>,
    /// Keys of the packed turns, in the system's rank order.
    pub packed_turns: Vec<String>,
    /// The question's scores (`None` when it is excluded).
    pub scores: Option<LevelScores>,
    /// The shared reader's answer from the packed context, and its scores (with `--reader`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub answer: Option<crate::reader_stage::AnswerOutcome>,
}

impl QuestionOutcome {
    /// The outcome of `output` on `question`, scored as `scores`.
    pub fn new(
        system: &str,
        budget: Option<usize>,
        question: &EvalQuestion,
        output: &SystemOutput,
        scores: Option<LevelScores>,
    ) -> QuestionOutcome {
        let keys = &question.keys;
        let mut gold_turns: Vec<String> = keys.gold_turns.iter().cloned().collect();
        gold_turns.sort();
        let packed_turns =
            output.ranking.turns.iter().map(|&r| keys.turn_key(r).to_owned()).collect();
        QuestionOutcome {
            system: system.to_owned(),
            budget,
            question: question.id.clone(),
            kind: question.kind.clone(),
            excluded: keys.exclusion,
            abstained: output.abstained,
            support: output.support,
            tokens_used: output.tokens_used,
            gold_turns,
            packed_turns,
            scores,
            answer: None,
        }
    }
}

/// Writes `outcomes` as JSON lines.
pub fn write_jsonl(outcomes: &[QuestionOutcome], out: impl Write) -> std::io::Result<()> {
    let mut out = std::io::BufWriter::new(out);
    for o in outcomes {
        serde_json::to_writer(&mut out, o).map_err(std::io::Error::other)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        ranking::{Ranking, RankingCorpus, TurnRef},
        systems::SystemOutput,
    };

    /// Two sessions of two turns each; the second session's first turn is gold.
    fn two_session_question() -> EvalQuestion {
        let key = |s: usize, t: usize| format!("s{s}_{t}");
        EvalQuestion {
            id: "q1".into(),
            namespace: evicortex::Namespace::new("q1").unwrap(),
            query: "where did I move?".into(),
            as_of: None,
            kind: "single-session-user".into(),
            abstention: false,
            turns: Vec::new(),
            keys: crate::protocol::EvidenceKeys {
                session_keys: vec!["s0".into(), "s1".into()],
                turn_keys: vec![vec![key(0, 0), key(0, 1)], vec![key(1, 0), key(1, 1)]],
                gold_sessions: ["s1".to_owned()].into(),
                gold_turns: [key(1, 0)].into(),
                evidence_turns: [key(1, 0)].into(),
                relevant_user_turns: 1,
                relevant_sessions: 1,
                widened_relevant_user_turns: 1,
                widened_relevant_all_turns: 2,
                exclusion: None,
            },
            gold: Default::default(),
        }
    }

    fn output(turns: Vec<TurnRef>) -> SystemOutput {
        SystemOutput {
            ranking: Ranking { turns, sessions: None, corpus: RankingCorpus::AllTurns },
            tokens_used: 42,
            abstained: Some(false),
            support: Some(0.5),
            stages: Vec::new(),
            text: String::new(),
            compiled: None,
        }
    }

    #[test]
    fn an_outcome_names_the_packed_turns_by_their_keys_in_rank_order() {
        let question = two_session_question();
        let out = output(vec![TurnRef { session: 1, turn: 0 }, TurnRef { session: 0, turn: 1 }]);
        let o = QuestionOutcome::new("bm25", Some(512), &question, &out, None);
        let expected: Vec<String> =
            vec![question.keys.turn_keys[1][0].clone(), question.keys.turn_keys[0][1].clone()];
        assert_eq!(o.packed_turns, expected);
        assert_eq!(o.question, question.id);
        assert_eq!(o.tokens_used, 42);
        let mut gold: Vec<String> = question.keys.gold_turns.iter().cloned().collect();
        gold.sort();
        assert_eq!(o.gold_turns, gold);
    }

    #[test]
    fn outcomes_are_written_one_json_object_per_line() {
        let question = two_session_question();
        let out = output(vec![TurnRef { session: 0, turn: 0 }]);
        let outcomes = vec![
            QuestionOutcome::new("a", Some(512), &question, &out, None),
            QuestionOutcome::new("b", None, &question, &out, None),
        ];
        let mut bytes = Vec::new();
        write_jsonl(&outcomes, &mut bytes).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["system"], "a");
        assert_eq!(lines[0]["budget"], 512);
        assert_eq!(lines[1]["budget"], serde_json::Value::Null);
        assert_eq!(lines[1]["packed_turns"][0], question.keys.turn_keys[0][0].as_str());
    }
}
