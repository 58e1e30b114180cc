//! A corpus for the unit tests of the selection stages: one turn per given session name.

use evicortex_core::{
    EventTime, Evidence, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnId, TurnIndex,
};

use crate::Corpus;

/// Records 1..=n of namespace `n`, record i+1 in session `sessions[i]`, all said at one time.
pub(crate) fn corpus(sessions: &[&str]) -> Corpus {
    let evidence = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mut e = record(i as u64 + 1, s, i as u32, &format!("turn {i}"));
            e.digest = EvidenceDigest::from_bytes([i as u8; 32]);
            e
        })
        .collect();
    Corpus::new(Namespace::new("n").unwrap(), evidence, []).unwrap()
}

/// Record `id` of namespace `n`: turn `index` of `session`, a user's `text` said at
/// 2024-05-02 10:00 UTC, no speaker named.
pub(crate) fn record(id: u64, session: &str, index: u32, text: &str) -> Evidence {
    Evidence {
        id: TurnId::from_raw(id),
        digest: EvidenceDigest::from_bytes([0; 32]),
        turn: Turn {
            namespace: Namespace::new("n").unwrap(),
            session: SessionId::new(session).unwrap(),
            turn: TurnIndex::new(index),
            role: Role::User,
            speaker: None,
            text: text.to_owned(),
            time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
            meta: Default::default(),
        },
    }
}
