//! What a turn says to every index: the one document definition that BM25 indexes, the encoder
//! embeds (the embedding cache is keyed by its digest) and lexical coverage reads.
//!
//! `<speaker>: <text>` where the source names the speaker, else the text. Questions name people
//! ("When did Caroline give a talk?") while speakers rarely name themselves, so without the name
//! a turn addressing Caroline outranks what Caroline said, lexically and in the vector alike.
//! Sources without speaker names (assistant chats) keep the bare text, so their documents and
//! cached vectors are those of the text.

use std::borrow::Cow;

use evicortex_core::Turn;

/// The document of `turn`: `<speaker>: <text>`, or the text alone when there is no speaker name.
pub fn turn_document(turn: &Turn) -> Cow<'_, str> {
    match &turn.speaker {
        Some(speaker) => Cow::Owned(format!("{speaker}: {}", turn.text)),
        None => Cow::Borrowed(&turn.text),
    }
}

#[cfg(test)]
mod tests {
    use evicortex_core::{EventTime, Namespace, Role, SessionId, TurnIndex};

    use super::*;

    fn turn(speaker: Option<&str>) -> Turn {
        Turn {
            namespace: Namespace::new("n").unwrap(),
            session: SessionId::new("s").unwrap(),
            turn: TurnIndex::new(0),
            role: Role::User,
            speaker: speaker.map(str::to_owned),
            text: "The race was great.".into(),
            time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
            meta: Default::default(),
        }
    }

    #[test]
    fn the_speaker_name_leads_the_document_when_known() {
        assert_eq!(turn_document(&turn(Some("Melanie"))), "Melanie: The race was great.");
        assert!(matches!(turn_document(&turn(None)), Cow::Borrowed("The race was great.")));
    }
}
