//! Strict LongMemEval adapter: reads `.json` or `.json.gz` in one streaming pass, checks every
//! field of every record, and digests the decompressed bytes on the way.
//!
//! Rules enforced (a violation is a [`DatasetError::InvalidRecord`] naming question and field):
//! - `question_id` is a valid, unique namespace; `_abs` suffix marks an abstention question.
//! - `question_type` is one of the six published types.
//! - `answer` is a string or an integer.
//! - `question_date` and every `haystack_dates` entry match `%Y/%m/%d (%a) %H:%M` exactly, with the
//!   weekday agreeing with the date.
//! - `haystack_dates`, `haystack_session_ids` and `haystack_sessions` have equal length.
//! - every `answer_session_ids` entry is in the haystack, and every haystack id containing
//!   `answer` is listed there (the released protocol keys gold evidence on that substring).
//! - turns have role `user` or `assistant` and a string `content`; `has_answer` appears only in
//!   answer sessions and on every turn there.
//! - a session id repeated inside one question is allowed only for filler sessions with identical
//!   content (13 questions of S); each occurrence is kept, numbered, and counted.
//!
//! As-of policy: the dataset orders sessions by day only (times of day are random, and 1,475 S
//! sessions fall later on the question's day than `question_date`), so a question's as-of time is
//! the END of its day ([`AS_OF_POLICY`]). The adapter counts the sessions this keeps that a
//! minute-exact filter would drop, and the sessions it excludes.

mod record;

use std::{collections::HashMap, path::Path};

use chrono::{Datelike, NaiveDate, NaiveDateTime, NaiveTime};
use evicortex::{Namespace, Role};
use serde::{
    Serialize,
    de::{DeserializeSeed, SeqAccess, Visitor},
};
use serde_json::Value;

use self::record::validate;
use crate::{ArtifactIdentity, DatasetError, artifact::DigestingReader};

const DATASET: &str = "longmemeval";

/// The explicit as-of policy for day-granular timestamps.
pub const AS_OF_POLICY: &str = "as-of = 23:59:59 of the question's date (timestamps have no \
     timezone and are read as UTC); sessions later than that are excluded";

/// The LongMemEval timestamp format.
pub const TIMESTAMP_FORMAT: &str = "%Y/%m/%d (%a) %H:%M";

/// The six published question types (abstention questions keep their base type).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QuestionType {
    /// `single-session-user`
    SingleSessionUser,
    /// `single-session-assistant`
    SingleSessionAssistant,
    /// `single-session-preference`
    SingleSessionPreference,
    /// `multi-session`
    MultiSession,
    /// `temporal-reasoning`
    TemporalReasoning,
    /// `knowledge-update`
    KnowledgeUpdate,
}

impl QuestionType {
    /// Every type, in the order reports list them.
    pub const ALL: [QuestionType; 6] = [
        QuestionType::SingleSessionUser,
        QuestionType::SingleSessionAssistant,
        QuestionType::SingleSessionPreference,
        QuestionType::MultiSession,
        QuestionType::TemporalReasoning,
        QuestionType::KnowledgeUpdate,
    ];

    /// The name used in the dataset.
    pub const fn as_str(self) -> &'static str {
        match self {
            QuestionType::SingleSessionUser => "single-session-user",
            QuestionType::SingleSessionAssistant => "single-session-assistant",
            QuestionType::SingleSessionPreference => "single-session-preference",
            QuestionType::MultiSession => "multi-session",
            QuestionType::TemporalReasoning => "temporal-reasoning",
            QuestionType::KnowledgeUpdate => "knowledge-update",
        }
    }

    /// Parses a dataset name.
    pub fn parse(raw: &str) -> Option<QuestionType> {
        QuestionType::ALL.into_iter().find(|t| t.as_str() == raw)
    }
}

/// The gold answer: the dataset gives a string in most records and an integer in some.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Answer {
    /// A text answer.
    Text(String),
    /// An integer answer.
    Integer(i64),
}

/// One turn of a haystack session, verbatim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaystackTurn {
    /// `user` or `assistant`.
    pub role: Role,
    /// The text, verbatim (may be empty: 12 turns of S are).
    pub content: String,
    /// The evidence label; present exactly on the turns of answer sessions.
    pub has_answer: Option<bool>,
}

/// One haystack session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HaystackSession {
    /// The session id as the dataset gives it (the key of the released metrics).
    pub id: String,
    /// 1 for the first occurrence of this id in the question, 2 for a repeated filler session.
    pub occurrence: u32,
    /// The session's timestamp (no timezone in the source).
    pub date: NaiveDateTime,
    /// The turns in order.
    pub turns: Vec<HaystackTurn>,
}

impl HaystackSession {
    /// A session id that is unique inside the question: the source id, suffixed `#n` for the n-th
    /// occurrence of a repeated filler session (n >= 2).
    pub fn unique_id(&self) -> String {
        if self.occurrence == 1 {
            self.id.clone()
        } else {
            format!("{}#{}", self.id, self.occurrence)
        }
    }

    /// Whether this is an answer (evidence) session.
    pub fn is_answer_session(&self) -> bool {
        self.id.starts_with("answer_")
    }
}

/// One validated LongMemEval question with its haystack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// The question id, which is also its namespace.
    pub namespace: Namespace,
    /// The question type.
    pub question_type: QuestionType,
    /// True for `_abs` questions (no answer in the haystack).
    pub abstention: bool,
    /// The question text.
    pub question: String,
    /// When the question is asked.
    pub question_date: NaiveDateTime,
    /// The gold answer.
    pub answer: Answer,
    /// Ids of the evidence sessions.
    pub answer_session_ids: Vec<String>,
    /// The haystack, in dataset order.
    pub sessions: Vec<HaystackSession>,
}

impl Question {
    /// The question id.
    pub fn id(&self) -> &str {
        self.namespace.as_str()
    }

    /// The as-of instant under [`AS_OF_POLICY`].
    pub fn as_of(&self) -> NaiveDateTime {
        end_of_day(self.question_date.date())
    }
}

/// Counts the adapter reports about what it read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LongMemEvalStats {
    /// Records in the file.
    pub records: usize,
    /// Records kept by the selection.
    pub selected: usize,
    /// Abstention (`_abs`) questions among the selected.
    pub abstention: usize,
    /// Integer answers among all records.
    pub integer_answers: usize,
    /// Sessions and turns among the selected.
    pub sessions: usize,
    /// Turns among the selected.
    pub turns: usize,
    /// Turns with empty content among the selected.
    pub empty_turns: usize,
    /// Questions (all records) with a repeated filler session id.
    pub questions_with_repeated_sessions: usize,
    /// Repeated filler sessions (second and later occurrences, all records), kept as their own
    /// sessions with a `#n` suffix on their unique id.
    pub repeated_sessions: usize,
    /// Sessions (selected) dated later in the day than `question_date`: kept by the as-of policy,
    /// dropped by a minute-exact filter.
    pub sessions_after_question_time_same_day: usize,
    /// Sessions (selected) dated after the question's day: excluded by the as-of policy.
    pub sessions_after_as_of: usize,
}

/// A LongMemEval file read and validated.
#[derive(Clone, Debug)]
pub struct LongMemEvalDataset {
    /// Path and digest, official or not.
    pub artifact: ArtifactIdentity,
    /// The selected questions, in file order.
    pub questions: Vec<Question>,
    /// What the adapter counted.
    pub stats: LongMemEvalStats,
}

impl LongMemEvalDataset {
    /// Reads every record of `path` and keeps those for which `select(question_id)` is true.
    /// Every record is validated, selected or not.
    pub fn read(
        path: &Path,
        select: &dyn Fn(&str) -> bool,
    ) -> Result<LongMemEvalDataset, DatasetError> {
        let mut reader = DigestingReader::open(path)?;
        let mut state = ReadState {
            select,
            questions: Vec::new(),
            stats: LongMemEvalStats::default(),
            seen: HashMap::new(),
            error: None,
        };
        let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::with_capacity(
            1 << 20,
            &mut reader,
        ));
        let parsed = RecordsSeed { state: &mut state }.deserialize(&mut de);
        if let Some(err) = state.error.take() {
            return Err(err);
        }
        parsed.map_err(|source| DatasetError::Json { path: path.to_owned(), source })?;
        de.end().map_err(|source| DatasetError::Json { path: path.to_owned(), source })?;
        drop(de);
        let artifact = reader.finish()?;
        Ok(LongMemEvalDataset { artifact, questions: state.questions, stats: state.stats })
    }
}

/// Parses a LongMemEval timestamp, checking the weekday against the date and the exact layout.
pub fn parse_timestamp(raw: &str) -> Result<NaiveDateTime, String> {
    let parsed = NaiveDateTime::parse_from_str(raw, TIMESTAMP_FORMAT)
        .map_err(|e| format!("{raw:?} does not match {TIMESTAMP_FORMAT:?}: {e}"))?;
    let canonical = parsed.format(TIMESTAMP_FORMAT).to_string();
    if canonical != raw {
        return Err(format!(
            "{raw:?} is not in canonical form {canonical:?} (weekday {} for {})",
            parsed.weekday(),
            parsed.date()
        ));
    }
    Ok(parsed)
}

fn end_of_day(date: NaiveDate) -> NaiveDateTime {
    date.and_time(NaiveTime::from_hms_opt(23, 59, 59).expect("23:59:59 is a valid time"))
}

struct ReadState<'a> {
    select: &'a dyn Fn(&str) -> bool,
    questions: Vec<Question>,
    stats: LongMemEvalStats,
    seen: HashMap<String, usize>,
    error: Option<DatasetError>,
}

struct RecordsSeed<'s, 'a> {
    state: &'s mut ReadState<'a>,
}

impl<'de> DeserializeSeed<'de> for RecordsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RecordsSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON array of LongMemEval records")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(record) = seq.next_element::<Value>()? {
            let index = self.state.stats.records;
            self.state.stats.records += 1;
            if let Err(err) = self.state.accept(index, record) {
                self.state.error = Some(err);
                return Err(serde::de::Error::custom("invalid record"));
            }
        }
        Ok(())
    }
}

impl ReadState<'_> {
    fn accept(&mut self, index: usize, record: Value) -> Result<(), DatasetError> {
        let question = validate(index, record, &mut self.stats)?;
        if let Some(first) = self.seen.insert(question.id().to_owned(), index) {
            return Err(DatasetError::invalid(
                DATASET,
                question.id(),
                "question_id",
                format!("repeats the id of record {first}"),
            ));
        }
        if let Answer::Integer(_) = question.answer {
            self.stats.integer_answers += 1;
        }
        if !(self.select)(question.id()) {
            return Ok(());
        }
        let stats = &mut self.stats;
        stats.selected += 1;
        stats.abstention += usize::from(question.abstention);
        stats.sessions += question.sessions.len();
        let as_of = question.as_of();
        for session in &question.sessions {
            stats.turns += session.turns.len();
            stats.empty_turns += session.turns.iter().filter(|t| t.content.is_empty()).count();
            if session.date > as_of {
                stats.sessions_after_as_of += 1;
            } else if session.date > question.question_date {
                stats.sessions_after_question_time_same_day += 1;
            }
        }
        self.questions.push(question);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
