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
    Ok(parse_jsonl_numbered(file, bytes, options)?.into_iter().map(|(_, turn)| turn).collect())
}

/// [`parse_jsonl`], each turn with its 1-based line number (for errors found later, such as
/// conflicts with stored turns).
pub fn parse_jsonl_numbered(
    file: &str,
    bytes: &[u8],
    options: &IngestOptions,
) -> Result<Vec<(usize, Turn)>, IngestError> {
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
        turns.push((line, turn));
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
        let expected = FIELDS.join(", ");
        // A key that is empty or holds characters JSON escapes (control characters, quotes) is
        // named in its JSON form (`""`, `"a\fb"`): printed raw it would name nothing or hide.
        let json_form = serde_json::to_string(unknown).expect("a string serialises");
        return Err(match unknown.as_str() {
            "" => {
                err(&json_form, format!("unknown field with an empty name (expected {expected})"))
            }
            name if json_form[1..json_form.len() - 1] != *name => {
                err(&json_form, format!("unknown field (expected {expected})"))
            }
            name => err(name, format!("unknown field (expected {expected})")),
        });
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
    let time_text = required("time")?;
    // RFC 3339 gives "-00:00" its own meaning (UTC, but the local offset is unknown), which an
    // explicit-offset event time cannot keep: it would come back as "Z".
    if time_text.ends_with("-00:00") {
        return Err(err(
            "time",
            format!(
                "{time_text:?} has the offset -00:00 (RFC 3339: local offset unknown), which \
                 would be stored as Z; give the real offset, or Z if UTC is meant"
            ),
        ));
    }
    let time = EventTime::parse_rfc3339(time_text).map_err(|e| err("time", e.to_string()))?;
    let nanos = time.as_datetime().timestamp_subsec_nanos();
    if nanos >= 1_000_000_000 {
        return Err(err(
            "time",
            format!(
                "{time_text:?} is a leap second (:60), which the ledger cannot store: it would \
                 become the next second"
            ),
        ));
    }
    if !nanos.is_multiple_of(1_000) {
        return Err(err(
            "time",
            "has sub-microsecond precision; the ledger stores microseconds".to_owned(),
        ));
    }
    let meta = match object.get("meta") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => {
            check_numbers("meta", &Value::Object(m.clone()))?;
            m.clone()
        }
        Some(other) => {
            return Err(err("meta", format!("must be an object, found {}", kind(other))));
        }
    };
    Ok(Turn { namespace, session, turn, role, speaker, text: text.to_owned(), time, meta })
}

/// Refuses numbers that parsing has already rounded: a JSON integer beyond the 64-bit range
/// arrives as the nearest `f64` and would be stored and exported changed. Numbers of that
/// magnitude are refused whatever their spelling (`1e30` too): once parsed, the two cannot be
/// told apart, and the HTTP and MCP servers only see parsed values.
fn check_numbers(path: &str, value: &Value) -> Result<(), FieldError> {
    match value {
        Value::Number(n) if n.is_f64() => {
            let v = n.as_f64().unwrap_or(f64::NAN);
            // Every integer literal from -2^63 to 2^64 - 1 parses exactly (as i64 or u64); one
            // outside rounds to a double at or beyond those bounds.
            if v <= -9_223_372_036_854_775_808.0 || v >= 18_446_744_073_709_551_616.0 {
                return Err(FieldError {
                    field: path.to_owned(),
                    reason: format!(
                        "{n} is outside the 64-bit integer range, where JSON numbers lose \
                         precision when parsed; give it as a string"
                    ),
                });
            }
            Ok(())
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .try_for_each(|(i, v)| check_numbers(&format!("{path}[{i}]"), v)),
        Value::Object(map) => {
            map.iter().try_for_each(|(k, v)| check_numbers(&format!("{path}.{k}"), v))
        }
        _ => Ok(()),
    }
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

/// Parses one line as a JSON object, refusing duplicate keys at any depth (which `serde_json`
/// would resolve silently by keeping the last).
fn parse_object(line: &str) -> Result<Map<String, Value>, String> {
    let mut de = serde_json::Deserializer::from_str(line);
    let object = StrictObject::deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())?;
    Ok(object.0)
}

/// For `#[serde(deserialize_with = ...)]` on a list of turn objects received over HTTP: the
/// same duplicate-key refusal, at any depth, as the JSONL reader.
pub fn deserialize_turn_objects<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Vec<Map<String, Value>>, D::Error> {
    let objects: Vec<StrictObject> = Vec::deserialize(d)?;
    Ok(objects.into_iter().map(|o| o.0).collect())
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
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<StrictObject, A::Error> {
                strict_map(access).map(StrictObject)
            }
        }
        d.deserialize_map(V)
    }
}

/// Any JSON value, refusing an object that repeats a key anywhere inside it.
struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<StrictValue, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = StrictValue;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::String(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::String(v)))
            }
            fn visit_unit<E>(self) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::Null))
            }
            fn visit_none<E>(self) -> Result<StrictValue, E> {
                Ok(StrictValue(Value::Null))
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<StrictValue, D::Error> {
                StrictValue::deserialize(d)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut access: A,
            ) -> Result<StrictValue, A::Error> {
                let mut items = Vec::new();
                while let Some(StrictValue(item)) = access.next_element()? {
                    items.push(item);
                }
                Ok(StrictValue(Value::Array(items)))
            }
            fn visit_map<A: MapAccess<'de>>(self, access: A) -> Result<StrictValue, A::Error> {
                strict_map(access).map(|m| StrictValue(Value::Object(m)))
            }
        }
        d.deserialize_any(V)
    }
}

fn strict_map<'de, A: MapAccess<'de>>(mut access: A) -> Result<Map<String, Value>, A::Error> {
    let mut map = Map::new();
    while let Some(key) = access.next_key::<String>()? {
        let StrictValue(value) = access.next_value()?;
        if map.contains_key(&key) {
            return Err(serde::de::Error::custom(format!("duplicate field `{key}`")));
        }
        map.insert(key, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests;
