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

use evicortex_core::{Evidence, TurnId};

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
    let mut out = String::new();
    let show_date = turn.evidence.turn.time.local_date() != session_date;
    write_turn_prefix(&mut out, turn, show_date);
    out
}

/// Appends [`turn_prefix`] to `out`, with the turn's date when `show_date`. Written in place: the
/// packer renders every turn of every block it counts.
fn write_turn_prefix(out: &mut String, turn: &RenderTurn<'_>, show_date: bool) {
    use std::fmt::Write;

    use chrono::Timelike;
    let e = turn.evidence;
    // Writing to a `String` cannot fail.
    let _ = write!(out, "[#{}", e.id.raw());
    for id in turn.also_cited {
        let _ = write!(out, " #{}", id.raw());
    }
    out.push_str("] ");
    let time = e.turn.time;
    if show_date {
        out.push_str(&time.local_date());
        out.push(' ');
    }
    let t = time.as_datetime();
    let _ = write!(out, "{:02}:{:02} {}", t.hour(), t.minute(), e.turn.role);
    match &e.turn.speaker {
        Some(speaker) => {
            let _ = write!(out, " ({speaker}): ");
        }
        None => out.push_str(": "),
    }
}

/// Renders turns in the chronological-by-session layout. Input order does not matter.
pub fn render_chronological(turns: &[RenderTurn<'_>]) -> String {
    if turns.is_empty() {
        return String::new();
    }
    let mut sorted: Vec<&RenderTurn<'_>> = turns.iter().collect();
    sorted.sort_by_cached_key(|t| turn_order(t.evidence));
    // Sessions in order of their first turn.
    let mut sessions: Vec<(&str, Vec<&RenderTurn<'_>>)> = Vec::new();
    for t in sorted {
        let session = t.evidence.turn.session.as_str();
        match sessions.iter_mut().find(|(s, _)| *s == session) {
            Some((_, members)) => members.push(t),
            None => sessions.push((session, vec![t])),
        }
    }
    // A line's text, its prefix's usual length and its newline; a session's header.
    let capacity: usize = turns.iter().map(|t| t.text().len() + 40 + 12 * t.also_cited.len()).sum();
    let mut out = String::with_capacity(PREAMBLE.len() + capacity + 64 * sessions.len());
    out.push_str(PREAMBLE);
    for (session, members) in sessions {
        let first = members[0].evidence.turn.time;
        out.push_str(&session_header(session, &first.local_date()));
        // Dates in the turns' own offsets, as `local_date` writes them.
        let session_date = first.as_datetime().date_naive();
        for t in members {
            let show_date = t.evidence.turn.time.as_datetime().date_naive() != session_date;
            write_turn_prefix(&mut out, t, show_date);
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

#[cfg(test)]
mod tests {
    use evicortex_core::{EventTime, Role};

    use super::*;
    use crate::test_corpus::record;

    fn said(id: u64, session: &str, index: u32, time: &str, text: &str) -> Evidence {
        let mut e = record(id, session, index, text);
        e.turn.time = EventTime::parse_rfc3339(time).unwrap();
        e
    }

    #[test]
    fn blocks_group_sessions_and_date_the_turns_of_another_day() {
        let mut ada = said(4, "s1", 1, "2024-05-03T00:30:00+02:00", "Noted.");
        (ada.turn.role, ada.turn.speaker) = (Role::Assistant, Some("Ada".to_owned()));
        let turns = [
            said(9, "s2", 0, "2024-05-02T12:00:00Z", "Later, elsewhere."),
            ada,
            said(3, "s1", 0, "2024-05-02T10:05:00+01:00", "I moved to Lisbon."),
        ];
        let copies = [TurnId::from_raw(7), TurnId::from_raw(12)];
        let render: Vec<RenderTurn<'_>> = vec![
            RenderTurn::whole(&turns[0], &[]),
            RenderTurn::whole(&turns[1], &copies),
            RenderTurn::whole(&turns[2], &[]),
        ];
        // Ada's turn is 2024-05-03 in its own offset, so it shows its date under s1's header.
        let expected = "Evidence from memory, oldest first. Cite as [#record].\n\
            \nSession s1 (2024-05-02):\n\
            [#3] 10:05 user: I moved to Lisbon.\n\
            [#4 #7 #12] 2024-05-03 00:30 assistant (Ada): Noted.\n\
            \nSession s2 (2024-05-02):\n\
            [#9] 12:00 user: Later, elsewhere.\n";
        assert_eq!(render_chronological(&render), expected);
        assert_eq!(
            turn_prefix(&render[1], "2024-05-02"),
            "[#4 #7 #12] 2024-05-03 00:30 assistant (Ada): "
        );
        assert_eq!(turn_prefix(&render[1], "2024-05-03"), "[#4 #7 #12] 00:30 assistant (Ada): ");
        assert_eq!(render_chronological(&[]), "");
    }
}
