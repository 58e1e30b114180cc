//! The JSONL turn parser (`evicortex ingest`): any bytes. Accepted input round-trips through the
//! export format unchanged; refused input names a line inside the input and, for a field error,
//! a field the line has (or one it must have).

use evicortex::front_end::{export_line, parse_jsonl_numbered};
use evicortex::{IngestError, IngestOptions, Namespace};

const FIELDS: &[&str] =
    &["namespace", "session", "turn", "role", "speaker", "text", "time", "meta"];

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    // The first byte picks whether lines without a namespace get a default one (the CLI's
    // `--namespace`), so both paths are explored.
    let (options, input) = match data.split_first() {
        Some((&flag, rest)) if flag & 1 == 1 => (
            IngestOptions {
                default_namespace: Some(Namespace::new("fuzz").unwrap()),
                ..IngestOptions::default()
            },
            rest,
        ),
        Some((_, rest)) => (IngestOptions::default(), rest),
        None => (IngestOptions::default(), data),
    };
    let lines = input.split(|&b| b == b'\n').count();
    match parse_jsonl_numbered("input.jsonl", input, &options) {
        Ok(turns) => {
            let exported: String = turns.iter().map(|(_, turn)| export_line(turn) + "\n").collect();
            let again = parse_jsonl_numbered("export.jsonl", exported.as_bytes(), &options)
                .unwrap_or_else(|e| panic!("an exported turn is refused: {e}\n{exported}"));
            assert_eq!(turns.len(), again.len());
            for ((_, a), (_, b)) in turns.iter().zip(&again) {
                assert_eq!(a, b, "a turn changed through export and re-import");
            }
        }
        Err(IngestError::InvalidUtf8 { line, .. } | IngestError::MalformedJson { line, .. }) => {
            assert!((1..=lines).contains(&line), "error line {line} outside 1..={lines}");
        }
        Err(IngestError::InvalidField { line, field, reason, .. }) => {
            assert!((1..=lines).contains(&line), "error line {line} outside 1..={lines}");
            assert!(!field.is_empty() && !reason.is_empty(), "an error must name its field");
            let raw = input.split(|&b| b == b'\n').nth(line - 1).unwrap();
            let top = field.split(['.', '[']).next().unwrap();
            // An unknown key is named as it is, or in its JSON form when it needs escaping.
            let keys: Vec<String> =
                serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(raw)
                    .map(|object| object.keys().cloned().collect())
                    .unwrap_or_default();
            let named = FIELDS.contains(&top)
                || keys.iter().any(|k| *k == field || serde_json::to_string(k).unwrap() == field);
            assert!(named, "field `{field}` is neither a known field nor a key of line {line}");
        }
        Err(other) => panic!("unexpected error kind: {other}"),
    }
}
