//! The reader-facing layout: chronological, grouped by session with the session date, each turn
//! prefixed by a citation naming its ledger record.
//!
//! ```text
//! Evidence from memory, oldest first. Cite as [#record].
//!
//! Session s1 (2024-05-02):
//! [#12] 10:00 user: I moved to Lisbon in May.
//! [#13 #57] 10:01 assistant (Ada): Noted.
//! ```
//! A turn on another day than its session header shows its date too (`2024-05-03 09:00`). Copies
//! of the same text are cited together. Turn text is verbatim.

use evicortex_core::{EventTime, Evidence, TurnId};

/// The first line of every non-empty block.
pub const PREAMBLE: &str = "Evidence from memory, oldest first. Cite as [#record].\n";

/// A turn to render, with the records it also stands for.
#[derive(Debug, Clone, Copy)]
pub struct RenderTurn<'e> {
    /// The turn.
    pub evidence: &'e Evidence,
    /// Records with the same text, cited with it.
    pub also_cited: &'e [TurnId],
    /// The part of the turn's text shown, when not the whole of it (a chunk of a chunking
    /// retriever holds parts of turns); `None` shows the text verbatim and whole.
    pub excerpt: Option<&'e str>,
}

impl<'e> RenderTurn<'e> {
    /// The whole turn, citing `also_cited` with it.
    pub fn whole(evidence: &'e Evidence, also_cited: &'e [TurnId]) -> RenderTurn<'e> {
        RenderTurn { evidence, also_cited, excerpt: None }
    }

    /// The text shown.
    pub fn text(&self) -> &'e str {
        self.excerpt.unwrap_or(&self.evidence.turn.text)
    }
}

/// The session header line (with the blank line before it).
pub fn session_header(session: &str, date: &str) -> String {
    format!("\nSession {session} ({date}):\n")
}

/// A turn's line prefix: citation, time (with date when it differs from `session_date`), role and
/// speaker.
pub fn turn_prefix(turn: &RenderTurn<'_>, session_date: &str) -> String {
    let e = turn.evidence;
    let mut citation = format!("#{}", e.id.raw());
    for id in turn.also_cited {
        citation.push_str(&format!(" #{}", id.raw()));
    }
    let time = e.turn.time;
    let date = time.local_date();
    let when = if date == session_date { hhmm(time) } else { format!("{date} {}", hhmm(time)) };
    match &e.turn.speaker {
        Some(speaker) => format!("[{citation}] {when} {} ({speaker}): ", e.turn.role),
        None => format!("[{citation}] {when} {}: ", e.turn.role),
    }
}

/// Renders turns in the chronological-by-session layout. Input order does not matter.
pub fn render_chronological(turns: &[RenderTurn<'_>]) -> String {
    if turns.is_empty() {
        return String::new();
    }
    let mut sorted: Vec<&RenderTurn<'_>> = turns.iter().collect();
    sorted.sort_by_key(|t| turn_order(t.evidence));
    // Sessions in order of their first turn.
    let mut sessions: Vec<(&str, Vec<&RenderTurn<'_>>)> = Vec::new();
    for t in sorted {
        let session = t.evidence.turn.session.as_str();
        match sessions.iter_mut().find(|(s, _)| *s == session) {
            Some((_, members)) => members.push(t),
            None => sessions.push((session, vec![t])),
        }
    }
    let mut out = String::from(PREAMBLE);
    for (session, members) in sessions {
        let date = members[0].evidence.turn.time.local_date();
        out.push_str(&session_header(session, &date));
        for t in members {
            out.push_str(&turn_prefix(t, &date));
            out.push_str(t.text());
            out.push('\n');
        }
    }
    out
}

/// Reading order of turns: event time, then session, turn index and record.
pub(crate) fn turn_order(e: &Evidence) -> (i64, &str, u32, u64) {
    (e.turn.time.utc_micros(), e.turn.session.as_str(), e.turn.turn.raw(), e.id.raw())
}

fn hhmm(time: EventTime) -> String {
    use chrono::Timelike;
    let t = time.as_datetime();
    format!("{:02}:{:02}", t.hour(), t.minute())
}
