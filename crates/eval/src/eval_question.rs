//! The benchmark-neutral input every system receives for one question: the same turns,
//! timestamps, namespace, query, as-of time and evidence keys.

use chrono::NaiveDateTime;
use evicortex::{Namespace, Role, SessionId, Turn, TurnIndex};

use crate::{
    datasets::{
        locomo::{Category, Conversation},
        longmemeval::Question,
    },
    protocol::{EvidenceKeys, Exclusion},
    ranking::TurnRef,
};

/// One turn as every system sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalTurn {
    /// Position in the question's haystack.
    pub at: TurnRef,
    /// A session id unique inside the question (repeated filler sessions are suffixed `#n`).
    pub session: String,
    /// Who said it.
    pub role: Role,
    /// The speaker's name, where the source gives one.
    pub speaker: Option<String>,
    /// Verbatim text.
    pub text: String,
    /// When the session took place (no timezone in either benchmark: read as UTC).
    pub time: NaiveDateTime,
}

impl EvalTurn {
    /// The turn as the memory stores it in `namespace` (no timezone in either benchmark: the
    /// session time read as UTC).
    pub fn stored(&self, namespace: &Namespace) -> anyhow::Result<Turn> {
        Ok(Turn {
            namespace: namespace.clone(),
            session: SessionId::new(&self.session)?,
            turn: TurnIndex::new(self.at.turn as u32),
            role: self.role,
            speaker: self.speaker.clone(),
            text: self.text.clone(),
            time: crate::eval_store::event_time(self.time),
            meta: serde_json::Map::new(),
        })
    }
}

/// What the reader stage scores an answer against.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GoldAnswer {
    /// The gold answer, as text (LoCoMo's adversarial answer for category 5).
    pub answer: String,
    /// When the question is asked, as LongMemEval writes it (`2023/05/30 (Tue) 23:40`).
    pub question_date: Option<String>,
    /// LoCoMo's category number.
    pub locomo_category: Option<u32>,
}

/// One question with its haystack, ready for any system.
#[derive(Clone, Debug)]
pub struct EvalQuestion {
    /// Question id (LongMemEval id, or `<conversation>#q<index>` for LoCoMo).
    pub id: String,
    /// The namespace its haystack lives in.
    pub namespace: Namespace,
    /// The query text.
    pub query: String,
    /// The as-of instant (turns after it are not evidence); `None` for no limit.
    pub as_of: Option<NaiveDateTime>,
    /// Question type (LongMemEval) or category (LoCoMo), for breakdowns.
    pub kind: String,
    /// Whether this is an abstention case (`_abs`, or LoCoMo category 5).
    pub abstention: bool,
    /// Every turn, sessions in haystack order, turns in session order.
    pub turns: Vec<EvalTurn>,
    /// Evidence keys and gold labels.
    pub keys: EvidenceKeys,
    /// The gold answer, for the reader stage.
    pub gold: GoldAnswer,
}

impl EvalQuestion {
    /// The turns admitted by the as-of time.
    pub fn admitted(&self) -> impl Iterator<Item = &EvalTurn> {
        self.turns.iter().filter(|t| self.as_of.is_none_or(|as_of| t.time <= as_of))
    }

    /// The turn at `at`.
    pub fn turn(&self, at: TurnRef) -> Option<&EvalTurn> {
        self.turns.iter().find(|t| t.at == at)
    }

    /// From a LongMemEval question (as-of: end of the question's day).
    pub fn from_longmemeval(q: &Question) -> EvalQuestion {
        let turns = q
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(s, session)| {
                session.turns.iter().enumerate().map(move |(t, turn)| EvalTurn {
                    at: TurnRef { session: s, turn: t },
                    session: session.unique_id(),
                    role: turn.role,
                    speaker: None,
                    text: turn.content.clone(),
                    time: session.date,
                })
            })
            .collect();
        EvalQuestion {
            id: q.id().to_owned(),
            namespace: q.namespace.clone(),
            query: q.question.clone(),
            as_of: Some(q.as_of()),
            kind: q.question_type.as_str().to_owned(),
            abstention: q.abstention,
            turns,
            keys: EvidenceKeys::of(q),
            gold: GoldAnswer {
                answer: match &q.answer {
                    crate::datasets::longmemeval::Answer::Text(text) => text.clone(),
                    crate::datasets::longmemeval::Answer::Integer(n) => n.to_string(),
                },
                question_date: Some(q.question_date.format("%Y/%m/%d (%a) %H:%M").to_string()),
                locomo_category: None,
            },
        }
    }

    /// The questions of a LoCoMo conversation (no as-of limit: questions follow the whole
    /// conversation). Turn keys are `D<s>_<t>` so that the session widening strips them to `D<s>`
    /// (non-evidence turns of a question's evidence sessions are keyed `noev-D<s>_<t>`);
    /// user-side and assistant-side are the two speakers, both `user` role (there is no assistant).
    /// A turn that shares an image carries its caption in its text
    /// ([`crate::datasets::locomo::DialogueTurn::stored_text`]).
    pub fn from_locomo(conv: &Conversation) -> Vec<EvalQuestion> {
        let turns: Vec<EvalTurn> = conv
            .sessions
            .iter()
            .enumerate()
            .flat_map(|(s, session)| {
                session.turns.iter().enumerate().map(move |(t, turn)| EvalTurn {
                    at: TurnRef { session: s, turn: t },
                    session: format!("session_{}", session.number),
                    role: Role::User,
                    speaker: Some(turn.speaker.clone()),
                    text: turn.stored_text(),
                    time: session.date,
                })
            })
            .collect();
        let session_keys: Vec<String> =
            conv.sessions.iter().map(|s| format!("D{}", s.number)).collect();
        let turn_keys: Vec<Vec<String>> = conv
            .sessions
            .iter()
            .map(|s| (0..s.turns.len()).map(|t| format!("D{}_{}", s.number, t + 1)).collect())
            .collect();
        conv.questions
            .iter()
            .map(|q| {
                let gold_turns = q
                    .evidence
                    .iter()
                    .map(|&(s, t)| turn_keys[s][t].clone())
                    .collect::<std::collections::HashSet<_>>();
                let gold_sessions = q
                    .evidence
                    .iter()
                    .map(|&(s, _)| session_keys[s].clone())
                    .collect::<std::collections::HashSet<_>>();
                // As the released LongMemEval protocol relabels non-evidence turns of evidence
                // sessions (`noans`), non-evidence turns of this question's evidence sessions get
                // a `noev-` key, so only evidence turns widen to a gold session.
                let evidence_sessions: std::collections::HashSet<usize> =
                    q.evidence.iter().map(|&(s, _)| s).collect();
                let turn_keys: Vec<Vec<String>> = turn_keys
                    .iter()
                    .enumerate()
                    .map(|(s, keys)| {
                        keys.iter()
                            .enumerate()
                            .map(|(t, k)| {
                                if evidence_sessions.contains(&s) && !q.evidence.contains(&(s, t)) {
                                    format!("noev-{k}")
                                } else {
                                    k.clone()
                                }
                            })
                            .collect()
                    })
                    .collect();
                let (widened_relevant_user_turns, widened_relevant_all_turns) =
                    crate::protocol::widened_counts(
                        &gold_turns,
                        turn_keys.iter().flatten().map(|k| (true, k.as_str())),
                    );
                let abstention = q.category == Category::Adversarial;
                let exclusion = if abstention {
                    Some(Exclusion::Abstention)
                } else if gold_turns.is_empty() {
                    Some(Exclusion::NoUserEvidence)
                } else {
                    None
                };
                EvalQuestion {
                    id: format!("{}#q{}", conv.namespace, q.index),
                    namespace: conv.namespace.clone(),
                    query: q.question.clone(),
                    as_of: None,
                    kind: q.category.as_str().to_owned(),
                    abstention,
                    turns: turns.clone(),
                    keys: EvidenceKeys {
                        session_keys: session_keys.clone(),
                        turn_keys: turn_keys.clone(),
                        relevant_user_turns: gold_turns.len(),
                        relevant_sessions: gold_sessions.len(),
                        widened_relevant_user_turns,
                        widened_relevant_all_turns,
                        gold_sessions,
                        evidence_turns: gold_turns.clone(),
                        gold_turns,
                        exclusion,
                    },
                    gold: GoldAnswer {
                        answer: q.answer.clone(),
                        question_date: None,
                        locomo_category: Some(q.category.number()),
                    },
                }
            })
            .collect()
    }
}
