//! The JSONL input format: one turn per line, every field checked, errors naming file, line and
//! field. Shared by the CLI (`evicortex ingest`) and the HTTP server (field validation).

use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
use serde::de::{Deserialize, Deserializer, MapAccess, Visitor};
use serde_json::{Map, Value};

/// The default limit on a turn's text: 1 MiB of UTF-8.
pub const DEFAULT_MAX_TEXT_BYTES: usize = 1 << 20;

/// The fields a line may have.
const FIELDS: &[&str] =
    &["namespace", "session", "turn", "role", "speaker", "text", "time", "meta"];

/// How input is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestOptions {
    /// The namespace of lines that have no `namespace` field. A line whose own namespace
    /// differs from it is refused.
    pub default_namespace: Option<Namespace>,
    /// Texts longer than this many bytes are refused (never truncated).
    pub max_text_bytes: usize,
}

impl Default for IngestOptions {
    fn default() -> IngestOptions {
        IngestOptions { default_namespace: None, max_text_bytes: DEFAULT_MAX_TEXT_BYTES }
    }
}

/// A line of input that was refused. The whole input is refused with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IngestError {
    /// The line is not valid UTF-8.
    #[error("{file}:{line}: invalid UTF-8 at byte {byte} of the line")]
    InvalidUtf8 {
        /// The input's name (file path).
        file: String,
        /// The 1-based line number.
        line: usize,
        /// The 0-based byte offset inside the line.
        byte: usize,
    },
    /// The line is not one JSON object.
    #[error("{file}:{line}: malformed JSON: {reason}")]
    MalformedJson {
        /// The input's name (file path).
        file: String,
        /// The 1-based line number.
        line: usize,
        /// The parser's complaint.
        reason: String,
    },
    /// A field is missing, mistyped or invalid.
    #[error("{file}:{line}: field `{field}`: {reason}")]
    InvalidField {
        /// The input's name (file path).
        file: String,
        /// The 1-based line number.
        line: usize,
        /// The field.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// A field of one JSON turn object that was refused (no file or line: see [`IngestError`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {reason}")]
pub struct FieldError {
    /// The field.
    pub field: String,
    /// What is wrong with it.
    pub reason: String,
}

/// Parses JSONL `bytes` read from `file` into turns. Blank lines are skipped. The first bad
/// line refuses the whole input.
pub fn parse_jsonl(
    file: &str,
    bytes: &[u8],
    options: &IngestOptions,
) -> Result<Vec<Turn>, IngestError> {
    let mut turns = Vec::new();
    for (i, raw_line) in bytes.split(|&b| b == b'\n').enumerate() {
        let line = i + 1;
        let text = std::str::from_utf8(raw_line).map_err(|e| IngestError::InvalidUtf8 {
            file: file.to_owned(),
            line,
            byte: e.valid_up_to(),
        })?;
        if text.trim().is_empty() {
            continue;
        }
        let object = parse_object(text).map_err(|reason| IngestError::MalformedJson {
            file: file.to_owned(),
            line,
            reason,
        })?;
        let turn = turn_from_json(&object, options).map_err(|e| IngestError::InvalidField {
            file: file.to_owned(),
            line,
            field: e.field,
            reason: e.reason,
        })?;
        turns.push(turn);
    }
    Ok(turns)
}

/// Checks one JSON turn object field by field. Unknown fields are refused (a misspelt
/// `speaker` must not vanish silently); free-form data belongs in `meta`.
pub fn turn_from_json(
    object: &Map<String, Value>,
    options: &IngestOptions,
) -> Result<Turn, FieldError> {
    let err = |field: &str, reason: String| FieldError { field: field.to_owned(), reason };
    if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(err(unknown, format!("unknown field (expected {})", FIELDS.join(", "))));
    }
    let string = |field: &str| -> Result<Option<&str>, FieldError> {
        match object.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(err(field, format!("must be a string, found {}", kind(other)))),
        }
    };
    let required = |field: &str| -> Result<&str, FieldError> {
        string(field)?.ok_or_else(|| err(field, "is missing".to_owned()))
    };

    let namespace = match (string("namespace")?, &options.default_namespace) {
        (Some(given), default) => {
            let ns = Namespace::new(given).map_err(|e| err("namespace", e.to_string()))?;
            if let Some(default) = default
                && *default != ns
            {
                return Err(err(
                    "namespace",
                    format!(
                        "is {:?} but the namespace option says {:?}",
                        ns.as_str(),
                        default.as_str()
                    ),
                ));
            }
            ns
        }
        (None, Some(default)) => default.clone(),
        (None, None) => {
            return Err(err(
                "namespace",
                "is missing (give it per line or with --namespace)".to_owned(),
            ));
        }
    };
    let session =
        SessionId::new(required("session")?).map_err(|e| err("session", e.to_string()))?;
    let turn = match object.get("turn") {
        None => return Err(err("turn", "is missing".to_owned())),
        Some(Value::Number(n)) => match n.as_u64().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => TurnIndex::new(v),
            None => {
                return Err(err(
                    "turn",
                    format!("must be an integer from 0 to {}, found {n}", u32::MAX),
                ));
            }
        },
        Some(other) => {
            return Err(err("turn", format!("must be an integer, found {}", kind(other))));
        }
    };
    let role: Role = required("role")?
        .parse()
        .map_err(|e: evicortex_core::RoleError| err("role", e.to_string()))?;
    let speaker = match object.get("speaker") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s.is_empty() => {
            return Err(err("speaker", "is empty; omit it instead".to_owned()));
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(err("speaker", format!("must be a string, found {}", kind(other))));
        }
    };
    let text = required("text")?;
    if text.len() > options.max_text_bytes {
        return Err(err(
            "text",
            format!(
                "is {} bytes, over the limit of {} bytes (texts are never truncated; raise the limit with --max-text-bytes)",
                text.len(),
                options.max_text_bytes
            ),
        ));
    }
    let time =
        EventTime::parse_rfc3339(required("time")?).map_err(|e| err("time", e.to_string()))?;
    if !time.as_datetime().timestamp_subsec_nanos().is_multiple_of(1_000) {
        return Err(err(
            "time",
            "has sub-microsecond precision; the ledger stores microseconds".to_owned(),
        ));
    }
    let meta = match object.get("meta") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Err(err("meta", format!("must be an object, found {}", kind(other))));
        }
    };
    Ok(Turn { namespace, session, turn, role, speaker, text: text.to_owned(), time, meta })
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

/// Parses one line as a JSON object, refusing duplicate keys (which `serde_json` would resolve
/// silently by keeping the last).
fn parse_object(line: &str) -> Result<Map<String, Value>, String> {
    let mut de = serde_json::Deserializer::from_str(line);
    let object = StrictObject::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(object.0)
}

struct StrictObject(Map<String, Value>);

impl<'de> Deserialize<'de> for StrictObject {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StrictObject, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrictObject;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object (one turn per line)")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<StrictObject, A::Error> {
                let mut map = Map::new();
                while let Some(key) = access.next_key::<String>()? {
                    let value: Value = access.next_value()?;
                    if map.contains_key(&key) {
                        return Err(serde::de::Error::custom(format!("duplicate field `{key}`")));
                    }
                    map.insert(key, value);
                }
                Ok(StrictObject(map))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn check_err(line: &str, expect: &str) {
        let err = parse_jsonl("in.jsonl", line.as_bytes(), &IngestOptions::default()).unwrap_err();
        assert_eq!(err.to_string(), expect);
    }

    const OK: &str = r#"{"namespace":"a","session":"s","turn":1,"role":"user","text":"hi","time":"2024-01-01T00:00:00Z"}"#;

    #[test]
    fn parses_a_full_line_and_skips_blank_lines() {
        let input = format!(
            "\n{OK}\n  \n{}\n",
            r#"{"namespace":"a","session":"s","turn":2,"role":"assistant","speaker":"Bot","text":" x\t","time":"2024-01-01T00:00:00.25+05:30","meta":{"k":[1]}}"#
        );
        let turns = parse_jsonl("f", input.as_bytes(), &IngestOptions::default()).unwrap();
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[1].text, " x\t");
        assert_eq!(turns[1].speaker.as_deref(), Some("Bot"));
        assert_eq!(turns[1].time.offset_seconds(), 19800);
        assert_eq!(turns[1].meta["k"], serde_json::json!([1]));
    }

    #[test]
    fn names_file_line_and_field() {
        check_err(
            "{",
            "in.jsonl:1: malformed JSON: EOF while parsing an object at line 1 column 1",
        );
        check_err(
            "[1]",
            "in.jsonl:1: malformed JSON: invalid type: sequence, expected a JSON object (one turn per line) at line 1 column 0",
        );
        check_err(
            &OK.replace(r#""role":"user""#, r#""role":"narrator""#),
            "in.jsonl:1: field `role`: unknown role \"narrator\", expected one of user, assistant, system, tool",
        );
        check_err(
            &OK.replace(r#""turn":1"#, r#""turn":"1""#),
            "in.jsonl:1: field `turn`: must be an integer, found a string",
        );
        check_err(
            &OK.replace(r#""turn":1"#, r#""turn":-1"#),
            "in.jsonl:1: field `turn`: must be an integer from 0 to 4294967295, found -1",
        );
        check_err(&OK.replace(r#","text":"hi""#, ""), "in.jsonl:1: field `text`: is missing");
        check_err(
            &OK.replace("2024-01-01T00:00:00Z", "2024-01-01T00:00:00"),
            "in.jsonl:1: field `time`: \"2024-01-01T00:00:00\" is not an RFC 3339 time with an explicit offset (e.g. 2024-05-02T10:00:00+01:00): premature end of input",
        );
        check_err(
            &OK.replace(r#""text""#, r#""txet""#),
            "in.jsonl:1: field `txet`: unknown field (expected namespace, session, turn, role, speaker, text, time, meta)",
        );
        check_err(
            &OK.replace(r#""turn":1"#, r#""turn":1,"turn":2"#),
            "in.jsonl:1: malformed JSON: duplicate field `turn` at line 1 column 48",
        );
    }

    #[test]
    fn reports_the_line_of_invalid_utf8() {
        let mut input = format!("{OK}\n").into_bytes();
        input.extend_from_slice(b"{\"text\":\"\xff\"}\n");
        let err = parse_jsonl("f", &input, &IngestOptions::default()).unwrap_err();
        assert_eq!(err, IngestError::InvalidUtf8 { file: "f".into(), line: 2, byte: 9 });
    }

    #[test]
    fn refuses_text_over_the_limit_without_truncating() {
        let options = IngestOptions { max_text_bytes: 1, ..IngestOptions::default() };
        let err = parse_jsonl("f", OK.as_bytes(), &options).unwrap_err();
        assert!(
            matches!(err, IngestError::InvalidField { ref field, .. } if field == "text"),
            "{err}"
        );
    }

    #[test]
    fn default_namespace_fills_in_and_conflicts_are_refused() {
        let no_ns = OK.replace(r#""namespace":"a","#, "");
        check_err(
            &no_ns,
            "in.jsonl:1: field `namespace`: is missing (give it per line or with --namespace)",
        );
        let options = IngestOptions {
            default_namespace: Some(Namespace::new("b").unwrap()),
            ..IngestOptions::default()
        };
        assert_eq!(
            parse_jsonl("f", no_ns.as_bytes(), &options).unwrap()[0].namespace.as_str(),
            "b"
        );
        let err = parse_jsonl("f", OK.as_bytes(), &options).unwrap_err();
        assert!(
            err.to_string()
                .contains("field `namespace`: is \"a\" but the namespace option says \"b\""),
            "{err}"
        );
    }

    #[test]
    fn refuses_sub_microsecond_times() {
        check_err(
            &OK.replace("00:00:00Z", "00:00:00.0000001Z"),
            "in.jsonl:1: field `time`: has sub-microsecond precision; the ledger stores microseconds",
        );
    }
}
