//! LoCoMo adapter: conversations with dated sessions, dialogue turns `D<session>:<turn>`, and
//! questions whose evidence names those turns.
//!
//! Rules: `sample_id` is a valid namespace; `conversation` has `speaker_a`, `speaker_b`, and for
//! every `session_<n>` a `session_<n>_date_time` like `1:56 pm on 8 May, 2023` (read as UTC);
//! every turn has `speaker` (one of the two), `dia_id` equal to `D<n>:<i>` for its own session and
//! unique, and `text`. Date times without a session are counted. Questions have `question`,
//! `category` 1..=5, `evidence` (a list of strings), and `answer` (string or integer) or, for
//! category 5 (adversarial), `adversarial_answer`.
//!
//! Evidence ids are normalised explicitly and each repair is counted: a string holding several ids
//! (`D8:6; D9:17`) is split; `D:11:26` is read as `D11:26`; an id that still does not parse, or names
//! no turn of the conversation, is dropped and counted.

use std::{collections::HashMap, path::Path};

use chrono::NaiveDateTime;
use evicortex::Namespace;
use serde::Serialize;
use serde_json::Value;

use crate::{ArtifactIdentity, DatasetError, artifact::DigestingReader};

const DATASET: &str = "locomo";

/// The LoCoMo date-time format (`1:56 pm on 8 May, 2023`).
pub const LOCOMO_DATE_FORMAT: &str = "%I:%M %p on %d %B, %Y";

/// The published question categories.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    /// 1
    MultiHop,
    /// 2
    Temporal,
    /// 3
    OpenDomain,
    /// 4
    SingleHop,
    /// 5: no answer in the conversation; an abstention case.
    Adversarial,
}

impl Category {
    /// The dataset's number.
    pub const fn number(self) -> u32 {
        match self {
            Category::MultiHop => 1,
            Category::Temporal => 2,
            Category::OpenDomain => 3,
            Category::SingleHop => 4,
            Category::Adversarial => 5,
        }
    }

    /// From the dataset's number.
    pub fn from_number(n: u64) -> Option<Category> {
        Some(match n {
            1 => Category::MultiHop,
            2 => Category::Temporal,
            3 => Category::OpenDomain,
            4 => Category::SingleHop,
            5 => Category::Adversarial,
            _ => return None,
        })
    }
    /// The report name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Category::MultiHop => "multi-hop",
            Category::Temporal => "temporal",
            Category::OpenDomain => "open-domain",
            Category::SingleHop => "single-hop",
            Category::Adversarial => "adversarial",
        }
    }
}

/// One dialogue turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialogueTurn {
    /// `D<session>:<turn>` as in the file.
    pub dia_id: String,
    /// The speaker's name.
    pub speaker: String,
    /// The text, verbatim.
    pub text: String,
    /// The image caption, when the turn shares an image.
    pub image_caption: Option<String>,
}

impl DialogueTurn {
    /// What the turn says as the memory stores it: the text, and for a shared image its caption
    /// (`<text> [shares image: <caption>]`), so the image is part of the turn for every index,
    /// every system and the packed context alike.
    pub fn stored_text(&self) -> String {
        match &self.image_caption {
            Some(caption) => format!("{} [shares image: {caption}]", self.text),
            None => self.text.clone(),
        }
    }
}

/// One dated session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialogueSession {
    /// The session number `n` of `session_<n>`.
    pub number: u32,
    /// When the session took place.
    pub date: NaiveDateTime,
    /// The turns in order.
    pub turns: Vec<DialogueTurn>,
}

/// One question about a conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocomoQuestion {
    /// Index of the question in the conversation's `qa` list.
    pub index: usize,
    /// The question text.
    pub question: String,
    /// The category.
    pub category: Category,
    /// The answer (or the adversarial answer for category 5), as text.
    pub answer: String,
    /// The evidence turns after normalisation, as `(session number, turn position)` in the
    /// conversation (position is the index in the session's turn list).
    pub evidence: Vec<(usize, usize)>,
}

/// One conversation with its questions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conversation {
    /// `sample_id`, the namespace.
    pub namespace: Namespace,
    /// The two speakers.
    pub speakers: [String; 2],
    /// The sessions in number order.
    pub sessions: Vec<DialogueSession>,
    /// The questions.
    pub questions: Vec<LocomoQuestion>,
}

/// What the adapter counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LocomoStats {
    /// Conversations.
    pub conversations: usize,
    /// Sessions.
    pub sessions: usize,
    /// Turns.
    pub turns: usize,
    /// Questions.
    pub questions: usize,
    /// Questions per category name.
    pub questions_by_category: std::collections::BTreeMap<String, usize>,
    /// `session_<n>_date_time` entries with no `session_<n>`.
    pub dates_without_session: usize,
    /// Evidence strings holding several ids, split.
    pub evidence_split: usize,
    /// Evidence ids of the form `D:<s>:<t>`, repaired to `D<s>:<t>`.
    pub evidence_repaired: usize,
    /// Evidence ids that do not parse, dropped.
    pub evidence_unparseable: usize,
    /// Evidence ids naming no turn of the conversation, dropped.
    pub evidence_dangling: usize,
    /// Evidence ids repeated inside one question, merged.
    pub evidence_duplicate: usize,
    /// Non-adversarial questions left with no evidence (not scored for retrieval).
    pub questions_without_evidence: usize,
}

/// A LoCoMo file read and validated.
#[derive(Clone, Debug)]
pub struct LocomoDataset {
    /// Path and digest.
    pub artifact: ArtifactIdentity,
    /// The conversations in file order.
    pub conversations: Vec<Conversation>,
    /// What the adapter counted.
    pub stats: LocomoStats,
}

impl LocomoDataset {
    /// Reads and validates `path` (`.json` or `.json.gz`).
    pub fn read(path: &Path) -> Result<LocomoDataset, DatasetError> {
        let mut reader = DigestingReader::open(path)?;
        let value: Value = serde_json::from_reader(std::io::BufReader::new(&mut reader))
            .map_err(|source| DatasetError::Json { path: path.to_owned(), source })?;
        let artifact = reader.finish()?;
        let Value::Array(records) = value else {
            return Err(DatasetError::invalid(DATASET, "file", "(top level)", "must be an array"));
        };
        let mut stats = LocomoStats::default();
        let mut conversations = Vec::with_capacity(records.len());
        for (i, record) in records.iter().enumerate() {
            let conversation = conversation(i, record, &mut stats)?;
            if conversations.iter().any(|c: &Conversation| c.namespace == conversation.namespace) {
                return Err(DatasetError::invalid(
                    DATASET,
                    conversation.namespace.as_str(),
                    "sample_id",
                    "is repeated",
                ));
            }
            conversations.push(conversation);
        }
        Ok(LocomoDataset { artifact, conversations, stats })
    }
}

/// Parses a LoCoMo date time (`1:56 pm on 8 May, 2023`).
pub fn parse_locomo_date(raw: &str) -> Result<NaiveDateTime, String> {
    NaiveDateTime::parse_from_str(raw, LOCOMO_DATE_FORMAT)
        .map_err(|e| format!("{raw:?} does not match {LOCOMO_DATE_FORMAT:?}: {e}"))
}

/// The outcome of normalising one evidence string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedEvidence {
    /// `(session, turn)` numbers as written (`D<session>:<turn>`).
    pub ids: Vec<(u32, u32)>,
    /// The string held several ids.
    pub split: bool,
    /// Pieces of the form `D:<s>:<t>` that were repaired.
    pub repaired: usize,
    /// Pieces that did not parse.
    pub unparseable: usize,
}

/// Normalises one evidence string (see the module docs).
pub fn parse_evidence(raw: &str) -> ParsedEvidence {
    let pieces: Vec<&str> =
        raw.split([';', ',', ' ']).map(str::trim).filter(|p| !p.is_empty()).collect();
    let mut out =
        ParsedEvidence { ids: Vec::new(), split: pieces.len() > 1, repaired: 0, unparseable: 0 };
    for piece in pieces {
        let (body, repaired) = match piece.strip_prefix("D:") {
            Some(rest) => (rest, true),
            None => match piece.strip_prefix('D') {
                Some(rest) => (rest, false),
                None => {
                    out.unparseable += 1;
                    continue;
                }
            },
        };
        let parsed =
            body.split_once(':').and_then(|(s, t)| Some((s.parse().ok()?, t.parse().ok()?)));
        match parsed {
            Some(id) => {
                out.repaired += usize::from(repaired);
                out.ids.push(id);
            }
            None => out.unparseable += 1,
        }
    }
    out
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A record's field is invalid: `rec` names the record (its `sample_id`, or `#<index>` before
/// that is known).
fn invalid(rec: &str, field: String, reason: String) -> DatasetError {
    DatasetError::invalid(DATASET, rec, field, reason)
}

/// Reads and validates record `index`, adding what it counted to `stats`.
fn conversation(
    index: usize,
    record: &Value,
    stats: &mut LocomoStats,
) -> Result<Conversation, DatasetError> {
    let fallback = format!("#{index}");
    let err = invalid;
    let obj = record.as_object().ok_or_else(|| {
        err(&fallback, "record".into(), format!("must be an object, found {}", kind(record)))
    })?;
    let id = obj
        .get("sample_id")
        .and_then(Value::as_str)
        .ok_or_else(|| err(&fallback, "sample_id".into(), "must be a string".into()))?;
    let namespace =
        Namespace::new(id).map_err(|e| err(&fallback, "sample_id".into(), e.to_string()))?;
    let conv = obj
        .get("conversation")
        .and_then(Value::as_object)
        .ok_or_else(|| err(id, "conversation".into(), "must be an object".into()))?;
    let speaker = |field: &str| -> Result<String, DatasetError> {
        conv.get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| err(id, format!("conversation.{field}"), "must be a string".into()))
    };
    let speakers = [speaker("speaker_a")?, speaker("speaker_b")?];
    let sessions = sessions(id, conv, &speakers, stats)?;
    let positions = turn_positions(id, &sessions)?;
    let qa = obj
        .get("qa")
        .and_then(Value::as_array)
        .ok_or_else(|| err(id, "qa".into(), "must be an array".into()))?;
    let mut questions = Vec::with_capacity(qa.len());
    for (q, item) in qa.iter().enumerate() {
        questions.push(question(id, q, item, &positions, stats)?);
    }
    stats.conversations += 1;
    stats.sessions += sessions.len();
    stats.turns += sessions.iter().map(|s| s.turns.len()).sum::<usize>();
    stats.questions += questions.len();
    Ok(Conversation { namespace, speakers, sessions, questions })
}

/// The dated sessions of conversation `id`, in number order; a date time without its session
/// is counted, any other field but the speakers is refused.
fn sessions(
    id: &str,
    conv: &serde_json::Map<String, Value>,
    speakers: &[String; 2],
    stats: &mut LocomoStats,
) -> Result<Vec<DialogueSession>, DatasetError> {
    let err = invalid;
    let mut sessions = Vec::new();
    for (key, value) in conv {
        if key == "speaker_a" || key == "speaker_b" {
            continue;
        }
        let Some(rest) = key.strip_prefix("session_") else {
            return Err(err(
                id,
                format!("conversation.{key}"),
                "is not a LoCoMo conversation field".into(),
            ));
        };
        if let Some(number) = rest.strip_suffix("_date_time") {
            if number.parse::<u32>().is_err() {
                return Err(err(id, format!("conversation.{key}"), "has no session number".into()));
            }
            if !conv.contains_key(&format!("session_{number}")) {
                stats.dates_without_session += 1;
            }
            continue;
        }
        let number: u32 = rest.parse().map_err(|_| {
            err(id, format!("conversation.{key}"), "is not session_<number>".into())
        })?;
        let date_field = format!("session_{number}_date_time");
        let date_raw = conv.get(&date_field).and_then(Value::as_str).ok_or_else(|| {
            err(id, format!("conversation.{date_field}"), "is missing or not a string".into())
        })?;
        let date = parse_locomo_date(date_raw)
            .map_err(|r| err(id, format!("conversation.{date_field}"), r))?;
        let turns_raw = value.as_array().ok_or_else(|| {
            err(
                id,
                format!("conversation.{key}"),
                format!("must be an array, found {}", kind(value)),
            )
        })?;
        let mut turns = Vec::with_capacity(turns_raw.len());
        for (t, turn) in turns_raw.iter().enumerate() {
            turns.push(dialogue_turn(id, key, number, t, turn, speakers)?);
        }
        sessions.push(DialogueSession { number, date, turns });
    }
    sessions.sort_by_key(|s| s.number);
    Ok(sessions)
}

/// Turn `t` of session `number` (field `key`) of conversation `id`: said by one of the two
/// speakers, its `dia_id` of that session.
fn dialogue_turn(
    id: &str,
    key: &str,
    number: u32,
    t: usize,
    turn: &Value,
    speakers: &[String; 2],
) -> Result<DialogueTurn, DatasetError> {
    let err = invalid;
    let field = |name: &str| format!("conversation.{key}[{t}].{name}");
    let tobj = turn
        .as_object()
        .ok_or_else(|| err(id, format!("conversation.{key}[{t}]"), "must be an object".into()))?;
    let get_str = |name: &str| -> Result<String, DatasetError> {
        tobj.get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| err(id, field(name), "must be a string".into()))
    };
    let speaker = get_str("speaker")?;
    if !speakers.contains(&speaker) {
        return Err(err(
            id,
            field("speaker"),
            format!("{speaker:?} is neither speaker_a nor speaker_b"),
        ));
    }
    let dia_id = get_str("dia_id")?;
    let expected_prefix = format!("D{number}:");
    if dia_id.strip_prefix(&expected_prefix).is_none_or(|n| n.parse::<u32>().is_err()) {
        return Err(err(id, field("dia_id"), format!("{dia_id:?} is not D{number}:<turn>")));
    }
    let text = get_str("text")?;
    let image_caption = match tobj.get("blip_caption") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(err(
                id,
                field("blip_caption"),
                format!("must be a string, found {}", kind(other)),
            ));
        }
    };
    Ok(DialogueTurn { dia_id, speaker, text, image_caption })
}

/// Where each `dia_id` of conversation `id` sits, as `(session index, turn position)`; a
/// repeated `dia_id` is refused.
fn turn_positions<'s>(
    id: &str,
    sessions: &'s [DialogueSession],
) -> Result<HashMap<&'s str, (usize, usize)>, DatasetError> {
    let mut positions: HashMap<&str, (usize, usize)> = HashMap::new();
    for (s, session) in sessions.iter().enumerate() {
        for (t, turn) in session.turns.iter().enumerate() {
            if positions.insert(turn.dia_id.as_str(), (s, t)).is_some() {
                return Err(invalid(
                    id,
                    format!("conversation.session_{}[{t}].dia_id", session.number),
                    format!("{:?} is repeated", turn.dia_id),
                ));
            }
        }
    }
    Ok(positions)
}

/// Question `q` of conversation `id`, its evidence normalised against `positions` (each repair
/// and drop counted in `stats`).
fn question(
    id: &str,
    q: usize,
    item: &Value,
    positions: &HashMap<&str, (usize, usize)>,
    stats: &mut LocomoStats,
) -> Result<LocomoQuestion, DatasetError> {
    let err = invalid;
    let field = |name: &str| format!("qa[{q}].{name}");
    let qobj =
        item.as_object().ok_or_else(|| err(id, format!("qa[{q}]"), "must be an object".into()))?;
    let question = qobj
        .get("question")
        .and_then(Value::as_str)
        .ok_or_else(|| err(id, field("question"), "must be a string".into()))?
        .to_owned();
    let category = qobj
        .get("category")
        .and_then(Value::as_u64)
        .and_then(Category::from_number)
        .ok_or_else(|| err(id, field("category"), "must be an integer 1..=5".into()))?;
    let answer_field =
        if category == Category::Adversarial { "adversarial_answer" } else { "answer" };
    let answer = match qobj.get(answer_field) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => n.to_string(),
        Some(other) => {
            return Err(err(
                id,
                field(answer_field),
                format!("must be a string or an integer, found {}", kind(other)),
            ));
        }
        None => return Err(err(id, field(answer_field), "is missing".into())),
    };
    let evidence_raw = qobj
        .get("evidence")
        .and_then(Value::as_array)
        .ok_or_else(|| err(id, field("evidence"), "must be an array".into()))?;
    let mut evidence = Vec::new();
    for (e, ev) in evidence_raw.iter().enumerate() {
        let raw = ev
            .as_str()
            .ok_or_else(|| err(id, field(&format!("evidence[{e}]")), "must be a string".into()))?;
        let parsed = parse_evidence(raw);
        stats.evidence_split += usize::from(parsed.split);
        stats.evidence_repaired += parsed.repaired;
        stats.evidence_unparseable += parsed.unparseable;
        for (s, t) in parsed.ids {
            match positions.get(format!("D{s}:{t}").as_str()) {
                Some(&pos) if evidence.contains(&pos) => stats.evidence_duplicate += 1,
                Some(&pos) => evidence.push(pos),
                None => stats.evidence_dangling += 1,
            }
        }
    }
    if evidence.is_empty() && category != Category::Adversarial {
        stats.questions_without_evidence += 1;
    }
    *stats.questions_by_category.entry(category.as_str().to_owned()).or_insert(0) += 1;
    Ok(LocomoQuestion { index: q, question, category, answer, evidence })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_parse_in_the_locomo_format() {
        assert_eq!(
            parse_locomo_date("1:56 pm on 8 May, 2023").unwrap().to_string(),
            "2023-05-08 13:56:00"
        );
        assert_eq!(
            parse_locomo_date("12:09 am on 13 September, 2023").unwrap().to_string(),
            "2023-09-13 00:09:00"
        );
        assert!(parse_locomo_date("8 May 2023").is_err());
    }

    #[test]
    fn evidence_ids_are_normalised_and_counted() {
        let p = parse_evidence("D8:6; D9:17");
        assert_eq!(
            (p.ids, p.split, p.repaired, p.unparseable),
            (vec![(8, 6), (9, 17)], true, 0, 0)
        );
        let p = parse_evidence("D:11:26");
        assert_eq!((p.ids, p.repaired), (vec![(11, 26)], 1));
        let p = parse_evidence("D1");
        assert_eq!((p.ids.len(), p.unparseable), (0, 1));
        assert_eq!(parse_evidence("D3:4").ids, vec![(3, 4)]);
    }
}
