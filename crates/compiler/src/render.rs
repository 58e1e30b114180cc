//! The reader-facing layouts: chronological, grouped by session with the session date, each turn
//! prefixed by a citation naming its ledger record. Copies of the same text are cited together.
//! Turn text is verbatim.
//!
//! [`Layout::ChronologicalBySession`] gives every line its time, role and speaker:
//! ```text
//! Evidence from memory, oldest first. Cite as [#record].
//!
//! Session s1 (2024-05-02):
//! [#12] 10:00 user: I moved to Lisbon in May.
//! [#13 #57] 10:01 assistant (Ada): Noted.
//! ```
//! A turn on another day than its session header shows its date too (`2024-05-03 09:00`).
//!
//! [`Layout::Compact`] says the session's date and time once, in its header (without the session's
//! id, which the manifest keeps), and each line only
//! what the header does not: a time where the turn's differs from the header's (with its date
//! where that differs too), and the speaker's name alone for a named user (`Caroline:`), the role
//! for an unnamed speaker (`assistant:`), both for a named speaker of another role
//! (`Ada (assistant):`):
//! ```text
//! Evidence from memory, oldest first. Cite as [#record].
//!
//! Session 2024-05-02 10:00:
//! [#12] user: I moved to Lisbon in May.
//! [#13 #57] 10:01 Ada (assistant): Noted.
//! ```

use evicortex_core::{EventTime, Evidence, Role, TurnId};

use crate::{Excerpt, Layout};

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
    /// Where `excerpt` lies in the turn, when the compiler cut it from a long turn: the line
    /// cites the character range with the record and marks each cut end with an ellipsis.
    pub cut: Option<Excerpt>,
}

/// What marks a cut end of an excerpt.
const ELLIPSIS: &str = "\u{2026}";

impl<'e> RenderTurn<'e> {
    /// The whole turn, citing `also_cited` with it.
    pub fn whole(evidence: &'e Evidence, also_cited: &'e [TurnId]) -> RenderTurn<'e> {
        RenderTurn { evidence, also_cited, excerpt: None, cut: None }
    }

    /// Writes the text shown, with an ellipsis at each end a compiler's cut left open.
    pub(crate) fn write_text(&self, out: &mut String) {
        let (start, end, of) = self.cut.map_or((0, 0, 0), |c| (c.start, c.end, c.turn_chars));
        if start > 0 {
            out.push_str(ELLIPSIS);
        }
        out.push_str(self.text());
        if end < of {
            out.push_str(ELLIPSIS);
        }
    }

    /// Writes the citation: the record, its character range when cut, the copies cited with it.
    fn write_citation(&self, out: &mut String) {
        use std::fmt::Write;
        let _ = write!(out, "[#{}", self.evidence.id.raw());
        if let Some(cut) = self.cut {
            let _ = write!(out, " chars {}-{}", cut.start, cut.end);
        }
        for id in self.also_cited {
            let _ = write!(out, " #{}", id.raw());
        }
        out.push_str("] ");
    }

    /// The text shown.
    pub fn text(&self) -> &'e str {
        self.excerpt.unwrap_or(&self.evidence.turn.text)
    }
}

/// The session header line (with the blank line before it) of the chronological layout.
pub fn session_header(session: &str, date: &str) -> String {
    format!("\nSession {session} ({date}):\n")
}

/// A turn's line prefix in the chronological layout: citation, time (with date when it differs
/// from `session_date`), role and speaker.
pub fn turn_prefix(turn: &RenderTurn<'_>, session_date: &str) -> String {
    let mut out = String::new();
    let show_date = turn.evidence.turn.time.local_date() != session_date;
    write_turn_prefix(&mut out, turn, show_date);
    out
}

/// The session header of `layout` for a session whose first rendered turn was said at `first`
/// (the compact layout names the session by its date and time alone: the id is in the manifest,
/// and ids such as `sharegpt_yywfIrx_0` cost the reader a dozen tokens a session).
pub fn layout_header(layout: Layout, session: &str, first: EventTime) -> String {
    match layout {
        Layout::ChronologicalBySession => session_header(session, &first.local_date()),
        Layout::Compact => {
            let t = first.as_datetime();
            format!("\nSession {} {}:\n", first.local_date(), t.format("%H:%M"))
        }
    }
}

/// A turn's line prefix in `layout`, under a session header made for a first turn said at
/// `header_time`.
pub fn layout_prefix(layout: Layout, turn: &RenderTurn<'_>, header_time: EventTime) -> String {
    match layout {
        Layout::ChronologicalBySession => turn_prefix(turn, &header_time.local_date()),
        Layout::Compact => {
            let mut out = String::new();
            write_compact_prefix(&mut out, turn, header_time);
            out
        }
    }
}

/// The compact prefix: citation, the time only where it differs from the header's (with the
/// date where that differs too), and the speaker's label.
fn write_compact_prefix(out: &mut String, turn: &RenderTurn<'_>, header_time: EventTime) {
    use std::fmt::Write;
    let e = turn.evidence;
    turn.write_citation(out);
    let time = e.turn.time;
    if time.utc_micros() != header_time.utc_micros() {
        if time.local_date() != header_time.local_date() {
            out.push_str(&time.local_date());
            out.push(' ');
        }
        let _ = write!(out, "{} ", time.as_datetime().format("%H:%M"));
    }
    match (&e.turn.speaker, e.turn.role) {
        (Some(speaker), Role::User) => out.push_str(speaker),
        (Some(speaker), role) => {
            let _ = write!(out, "{speaker} ({role})");
        }
        (None, role) => out.push_str(role.as_str()),
    }
    out.push_str(": ");
}

/// Appends [`turn_prefix`] to `out`, with the turn's date when `show_date`. Written in place: the
/// packer renders every turn of every block it counts.
fn write_turn_prefix(out: &mut String, turn: &RenderTurn<'_>, show_date: bool) {
    use std::fmt::Write;

    use chrono::Timelike;
    let e = turn.evidence;
    turn.write_citation(out);
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
    render_block(turns, Layout::ChronologicalBySession)
}

/// Renders turns in `layout`: sessions in order of their first turn, turns in time order inside.
/// Input order does not matter.
pub fn render_block(turns: &[RenderTurn<'_>], layout: Layout) -> String {
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
        if layout == Layout::Compact {
            out.push_str(&layout_header(layout, session, first));
            for t in members {
                write_compact_prefix(&mut out, t, first);
                t.write_text(&mut out);
                out.push('\n');
            }
            continue;
        }
        out.push_str(&session_header(session, &first.local_date()));
        // Dates in the turns' own offsets, as `local_date` writes them.
        let session_date = first.as_datetime().date_naive();
        for t in members {
            let show_date = t.evidence.turn.time.as_datetime().date_naive() != session_date;
            write_turn_prefix(&mut out, t, show_date);
            t.write_text(&mut out);
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

    #[test]
    fn the_compact_layout_says_the_session_time_once_and_names_speakers_alone() {
        let mut ada = said(4, "s1", 1, "2024-05-03T00:30:00+02:00", "Noted.");
        (ada.turn.role, ada.turn.speaker) = (Role::Assistant, Some("Ada".to_owned()));
        let mut caroline = said(5, "s1", 2, "2024-05-03T00:30:00+02:00", "Same minute.");
        caroline.turn.speaker = Some("Caroline".to_owned());
        let turns = [
            said(9, "s2", 0, "2024-05-02T12:00:00Z", "Later, elsewhere."),
            ada,
            said(3, "s1", 0, "2024-05-02T10:05:00+01:00", "I moved to Lisbon."),
            caroline,
            said(10, "s2", 1, "2024-05-02T12:00:00Z", "Same time as the header."),
        ];
        let render: Vec<RenderTurn<'_>> = turns.iter().map(|e| RenderTurn::whole(e, &[])).collect();
        let expected = "Evidence from memory, oldest first. Cite as [#record].\n\
            \nSession 2024-05-02 10:05:\n\
            [#3] user: I moved to Lisbon.\n\
            [#4] 2024-05-03 00:30 Ada (assistant): Noted.\n\
            [#5] 2024-05-03 00:30 Caroline: Same minute.\n\
            \nSession 2024-05-02 12:00:\n\
            [#9] user: Later, elsewhere.\n\
            [#10] user: Same time as the header.\n";
        assert_eq!(render_block(&render, Layout::Compact), expected);
        let header_time = turns[2].turn.time;
        assert_eq!(layout_prefix(Layout::Compact, &render[2], header_time), "[#3] user: ");
        let cut = RenderTurn {
            excerpt: Some("moved to"),
            cut: Some(Excerpt { start: 2, end: 10, turn_chars: 18, bytes: (2, 10) }),
            ..render[2]
        };
        assert_eq!(
            render_block(&[cut], Layout::Compact),
            "Evidence from memory, oldest first. Cite as [#record].\n\
             \nSession 2024-05-02 10:05:\n[#3 chars 2-10] user: \u{2026}moved to\u{2026}\n"
        );
        assert_eq!(
            layout_header(Layout::Compact, "s1", header_time),
            "\nSession 2024-05-02 10:05:\n"
        );
    }
}
