//! The ANN audit's namespace: real LongMemEval S text in one namespace, in a fixed order, so that
//! every size audited is a prefix of the next.
//!
//! Order (each text once: a text already taken is skipped wherever it comes again):
//! 1. every non-empty turn of the dev questions' haystacks (questions in file order, sessions in
//!    haystack order, turns in order), verbatim;
//! 2. the sentence pieces of those turns;
//! 3. the sentence pieces of the other questions' haystack turns, until the target is reached.
//!
//! A sentence piece is a UAX #29 sentence of a turn, cut again at line breaks and trimmed, kept
//! when it has at least [`MIN_PIECE_WORDS`] words. Only dev questions are ever asked of the
//! namespace; the other haystacks contribute sentences, never their whole turns (which would
//! cost far more encoder time per vector).
//!
//! Each turn keeps its role and its session's date (read as UTC, as the evaluation does); turns
//! are in session `<question id>/<session id>`, pieces in `<question id>/<session id>/<turn>`
//! numbered from 0.

use std::collections::HashSet;

use evicortex::{EventTime, Namespace, SessionId, Turn, TurnIndex};
use evicortex_eval::datasets::longmemeval::{HaystackSession, LongMemEvalDataset, Question};
use unicode_segmentation::UnicodeSegmentation;

/// The namespace the audit set is written to.
pub const AUDIT_NAMESPACE: &str = "ann-audit";

/// A sentence piece needs this many whitespace-separated words.
pub const MIN_PIECE_WORDS: usize = 4;

/// Which part of the order a turn comes from.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Part {
    /// A dev haystack turn.
    DevTurn,
    /// A sentence of a dev haystack turn.
    DevPiece,
    /// A sentence of another question's haystack turn.
    OtherPiece,
}

/// Calls `emit` with the audit set's turns in order until it returns `false`.
pub fn for_each_turn(
    data: &LongMemEvalDataset,
    is_dev: &dyn Fn(&str) -> bool,
    emit: &mut dyn FnMut(Part, Turn) -> bool,
) -> anyhow::Result<()> {
    let namespace = Namespace::new(AUDIT_NAMESPACE)?;
    let (dev, other): (Vec<&Question>, Vec<&Question>) =
        data.questions.iter().partition(|q| is_dev(q.id()));
    let mut seen: HashSet<&str> = HashSet::new();
    for q in &dev {
        for session in &q.sessions {
            let id = SessionId::new(&format!("{}/{}", q.id(), session.unique_id()))?;
            for (i, turn) in session.turns.iter().enumerate() {
                if turn.content.trim().is_empty() || !seen.insert(&turn.content) {
                    continue;
                }
                let turn = Turn {
                    namespace: namespace.clone(),
                    session: id.clone(),
                    turn: TurnIndex::new(u32::try_from(i)?),
                    role: turn.role,
                    speaker: None,
                    text: turn.content.clone(),
                    time: session_time(session),
                    meta: serde_json::Map::new(),
                };
                if !emit(Part::DevTurn, turn) {
                    return Ok(());
                }
            }
        }
    }
    for (part, questions) in [(Part::DevPiece, &dev), (Part::OtherPiece, &other)] {
        for q in questions {
            for session in &q.sessions {
                for (i, turn) in session.turns.iter().enumerate() {
                    let id = SessionId::new(&format!("{}/{}/{i}", q.id(), session.unique_id()))?;
                    let mut index = 0u32;
                    for piece in sentence_pieces(&turn.content) {
                        if !seen.insert(piece) {
                            continue;
                        }
                        let turn = Turn {
                            namespace: namespace.clone(),
                            session: id.clone(),
                            turn: TurnIndex::new(index),
                            role: turn.role,
                            speaker: None,
                            text: piece.to_owned(),
                            time: session_time(session),
                            meta: serde_json::Map::new(),
                        };
                        index += 1;
                        if !emit(part, turn) {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }
    Ok(())
}

/// The sentence pieces of `text`, in order (repeats included).
pub fn sentence_pieces(text: &str) -> impl Iterator<Item = &str> {
    text.split_sentence_bounds()
        .flat_map(|sentence| sentence.split('\n'))
        .map(str::trim)
        .filter(|piece| piece.split_whitespace().count() >= MIN_PIECE_WORDS)
}

fn session_time(session: &HaystackSession) -> EventTime {
    evicortex_eval::eval_store::event_time(session.date)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_sentences_and_lines_with_enough_words() {
        let text = "I moved to Lisbon in May. Great!\nHere is a list:\n1. pack the boxes early\n\
                    2. book the van. Then we drove there on Monday night.";
        let pieces: Vec<&str> = sentence_pieces(text).collect();
        assert_eq!(
            pieces,
            vec![
                "I moved to Lisbon in May.",
                "Here is a list:",
                "1. pack the boxes early",
                "2. book the van.",
                "Then we drove there on Monday night."
            ]
        );
    }
}
