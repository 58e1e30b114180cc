//! One LongMemEval record checked field by field (the rules in the module docs of
//! [`longmemeval`](super)) into a [`Question`]: a violation names the question and the field.

use std::collections::HashMap;

use evicortex::{Namespace, Role, SessionId};
use serde_json::Value;

use super::{
    Answer, DATASET, HaystackSession, HaystackTurn, LongMemEvalStats, Question, QuestionType,
    parse_timestamp,
};
use crate::DatasetError;

struct Fields<'r> {
    record: String,
    map: &'r serde_json::Map<String, Value>,
}

impl<'r> Fields<'r> {
    fn err(&self, field: impl Into<String>, reason: impl Into<String>) -> DatasetError {
        DatasetError::invalid(DATASET, self.record.clone(), field, reason)
    }
    fn get(&self, field: &str) -> Result<&'r Value, DatasetError> {
        self.map.get(field).ok_or_else(|| self.err(field, "is missing"))
    }
    fn str(&self, field: &str) -> Result<&'r str, DatasetError> {
        self.get(field)?.as_str().ok_or_else(|| {
            self.err(field, format!("must be a string, found {}", kind(self.map.get(field))))
        })
    }
    fn array(&self, field: &str) -> Result<&'r Vec<Value>, DatasetError> {
        self.get(field)?.as_array().ok_or_else(|| {
            self.err(field, format!("must be an array, found {}", kind(self.map.get(field))))
        })
    }
    fn strings(&self, field: &str) -> Result<Vec<&'r str>, DatasetError> {
        self.array(field)?
            .iter()
            .enumerate()
            .map(|(i, v)| {
                v.as_str().ok_or_else(|| {
                    self.err(
                        format!("{field}[{i}]"),
                        format!("must be a string, found {}", kind(Some(v))),
                    )
                })
            })
            .collect()
    }
}

fn kind(v: Option<&Value>) -> &'static str {
    match v {
        None => "nothing",
        Some(Value::Null) => "null",
        Some(Value::Bool(_)) => "a boolean",
        Some(Value::Number(_)) => "a number",
        Some(Value::String(_)) => "a string",
        Some(Value::Array(_)) => "an array",
        Some(Value::Object(_)) => "an object",
    }
}

const FIELDS: [&str; 9] = [
    "question_id",
    "question_type",
    "question",
    "question_date",
    "answer",
    "answer_session_ids",
    "haystack_dates",
    "haystack_session_ids",
    "haystack_sessions",
];

/// Validates record `index` into a question, counting its repeated filler sessions in `stats`.
pub(super) fn validate(
    index: usize,
    record: Value,
    stats: &mut LongMemEvalStats,
) -> Result<Question, DatasetError> {
    let Value::Object(map) = &record else {
        return Err(DatasetError::invalid(
            DATASET,
            format!("#{index}"),
            "record",
            format!("must be an object, found {}", kind(Some(&record))),
        ));
    };
    let provisional = Fields { record: format!("#{index}"), map };
    let id = provisional.str("question_id")?;
    let namespace = Namespace::new(id)
        .map_err(|e| provisional.err("question_id", format!("is not a valid namespace: {e}")))?;
    let f = Fields { record: id.to_owned(), map };
    if let Some(unknown) = map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(f.err(unknown.as_str(), "is not a LongMemEval field"));
    }
    let type_raw = f.str("question_type")?;
    let question_type = QuestionType::parse(type_raw)
        .ok_or_else(|| f.err("question_type", format!("unknown type {type_raw:?}")))?;
    let question = f.str("question")?.to_owned();
    let question_date = parse_timestamp(f.str("question_date")?)
        .map_err(|reason| f.err("question_date", reason))?;
    let answer = answer(&f)?;
    let answer_session_ids: Vec<String> =
        f.strings("answer_session_ids")?.into_iter().map(str::to_owned).collect();
    let (sessions, repeated) = haystack(&f, &answer_session_ids)?;
    if repeated > 0 {
        stats.questions_with_repeated_sessions += 1;
        stats.repeated_sessions += repeated;
    }
    Ok(Question {
        abstention: id.ends_with("_abs"),
        namespace,
        question_type,
        question,
        question_date,
        answer,
        answer_session_ids,
        sessions,
    })
}

/// The `answer`: a string or an integer.
fn answer(f: &Fields<'_>) -> Result<Answer, DatasetError> {
    Ok(match f.get("answer")? {
        Value::String(s) => Answer::Text(s.clone()),
        Value::Number(n) => Answer::Integer(
            n.as_i64().ok_or_else(|| f.err("answer", format!("number {n} is not an integer")))?,
        ),
        other => {
            return Err(f.err(
                "answer",
                format!("must be a string or an integer, found {}", kind(Some(other))),
            ));
        }
    })
}

/// The haystack's sessions in order, and how many repeat an earlier one: its three lists of
/// equal length, every evidence session in it and named as one, a repeated id only for a
/// filler session with the same turns.
fn haystack(
    f: &Fields<'_>,
    answer_session_ids: &[String],
) -> Result<(Vec<HaystackSession>, usize), DatasetError> {
    let dates = f.strings("haystack_dates")?;
    let ids = f.strings("haystack_session_ids")?;
    let sessions_raw = f.array("haystack_sessions")?;
    if dates.len() != ids.len() || ids.len() != sessions_raw.len() {
        return Err(f.err(
            "haystack_sessions",
            format!(
                "haystack_dates ({}), haystack_session_ids ({}) and haystack_sessions ({}) differ in length",
                dates.len(),
                ids.len(),
                sessions_raw.len()
            ),
        ));
    }
    for (i, a) in answer_session_ids.iter().enumerate() {
        if !ids.contains(&a.as_str()) {
            return Err(f.err(
                format!("answer_session_ids[{i}]"),
                format!("{a:?} is not in haystack_session_ids"),
            ));
        }
    }
    let mut sessions: Vec<HaystackSession> = Vec::with_capacity(ids.len());
    let mut occurrences: HashMap<&str, (u32, usize)> = HashMap::new();
    let mut repeated = 0;
    for (s, ((&sid, &date_raw), turns_raw)) in ids.iter().zip(&dates).zip(sessions_raw).enumerate()
    {
        if sid.is_empty() {
            return Err(f.err(format!("haystack_session_ids[{s}]"), "is empty"));
        }
        let is_answer = sid.starts_with("answer_");
        if sid.contains("answer") && !answer_session_ids.iter().any(|a| a == sid) {
            return Err(f.err(
                format!("haystack_session_ids[{s}]"),
                format!("{sid:?} contains `answer` but is not in answer_session_ids"),
            ));
        }
        if answer_session_ids.iter().any(|a| a == sid) && !is_answer {
            return Err(f.err(
                format!("haystack_session_ids[{s}]"),
                format!("evidence session {sid:?} does not start with `answer_`"),
            ));
        }
        let date =
            parse_timestamp(date_raw).map_err(|r| f.err(format!("haystack_dates[{s}]"), r))?;
        let turns = session_turns(f, s, sid, is_answer, turns_raw)?;
        let occurrence = match occurrences.get_mut(sid) {
            None => {
                occurrences.insert(sid, (1, sessions.len()));
                1
            }
            Some((count, first)) => {
                if is_answer {
                    return Err(f.err(
                        format!("haystack_session_ids[{s}]"),
                        format!("evidence session {sid:?} appears twice"),
                    ));
                }
                if sessions[*first].turns != turns {
                    return Err(f.err(
                        format!("haystack_session_ids[{s}]"),
                        format!("{sid:?} repeats with different content"),
                    ));
                }
                *count += 1;
                repeated += 1;
                *count
            }
        };
        let session = HaystackSession { id: sid.to_owned(), occurrence, date, turns };
        // The ledger's session id is the unique id: refuse here, naming the field, what the
        // store would refuse at ingest.
        SessionId::new(&session.unique_id())
            .map_err(|e| f.err(format!("haystack_session_ids[{s}]"), e.to_string()))?;
        sessions.push(session);
    }
    Ok((sessions, repeated))
}

/// The turns of haystack session `s` (id `sid`): a role, a string content, and `has_answer`
/// on every turn of an answer session and on no other.
fn session_turns(
    f: &Fields<'_>,
    s: usize,
    sid: &str,
    is_answer: bool,
    turns_raw: &Value,
) -> Result<Vec<HaystackTurn>, DatasetError> {
    let turns_arr = turns_raw.as_array().ok_or_else(|| {
        f.err(
            format!("haystack_sessions[{s}]"),
            format!("must be an array, found {}", kind(Some(turns_raw))),
        )
    })?;
    let mut turns = Vec::with_capacity(turns_arr.len());
    for (t, turn) in turns_arr.iter().enumerate() {
        let field = |name: &str| format!("haystack_sessions[{s}][{t}].{name}");
        let Value::Object(tm) = turn else {
            return Err(f.err(format!("haystack_sessions[{s}][{t}]"), "must be an object"));
        };
        if let Some(unknown) =
            tm.keys().find(|k| !matches!(k.as_str(), "role" | "content" | "has_answer"))
        {
            return Err(f.err(field(unknown), "is not a LongMemEval turn field"));
        }
        let role = match tm.get("role").and_then(Value::as_str) {
            Some("user") => Role::User,
            Some("assistant") => Role::Assistant,
            other => {
                return Err(f.err(
                    field("role"),
                    format!("must be \"user\" or \"assistant\", found {other:?}"),
                ));
            }
        };
        let content = tm
            .get("content")
            .and_then(Value::as_str)
            .ok_or_else(|| f.err(field("content"), "must be a string"))?
            .to_owned();
        let has_answer = match tm.get("has_answer") {
            None => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                return Err(f.err(
                    field("has_answer"),
                    format!("must be a boolean, found {}", kind(Some(other))),
                ));
            }
        };
        if has_answer.is_some() && !is_answer {
            return Err(
                f.err(field("has_answer"), format!("appears in non-answer session {sid:?}"))
            );
        }
        if has_answer.is_none() && is_answer {
            return Err(f.err(field("has_answer"), format!("is missing in answer session {sid:?}")));
        }
        turns.push(HaystackTurn { role, content, has_answer });
    }
    Ok(turns)
}
