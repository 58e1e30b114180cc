//! Export: live turns as JSONL that `parse_jsonl` takes back, texts byte for byte.

use evicortex_core::Turn;
use serde::Serialize;

/// What an export wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExportSummary {
    /// Turns written.
    pub turns: u64,
}

#[derive(Serialize)]
struct Line<'a> {
    namespace: &'a str,
    session: &'a str,
    turn: u32,
    role: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    speaker: Option<&'a str>,
    text: &'a str,
    time: String,
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    meta: &'a serde_json::Map<String, serde_json::Value>,
}

/// One turn as a JSONL line (without the newline), in the input format.
pub fn export_line(turn: &Turn) -> String {
    let line = Line {
        namespace: turn.namespace.as_str(),
        session: turn.session.as_str(),
        turn: turn.turn.raw(),
        role: turn.role.as_str(),
        speaker: turn.speaker.as_deref(),
        text: &turn.text,
        time: turn.time.to_rfc3339(),
        meta: &turn.meta,
    };
    serde_json::to_string(&line).expect("a turn always serialises")
}
