//! A corpus for the unit tests of the selection stages: one turn per given session name.

use evicortex_core::{
    EventTime, Evidence, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnId, TurnIndex,
};

use crate::Corpus;

/// Records 1..=n of namespace `n`, record i+1 in session `sessions[i]`, all said at one time.
pub(crate) fn corpus(sessions: &[&str]) -> Corpus {
    let ns = Namespace::new("n").unwrap();
    let evidence = sessions
        .iter()
        .enumerate()
        .map(|(i, s)| Evidence {
            id: TurnId::from_raw(i as u64 + 1),
            digest: EvidenceDigest::from_bytes([i as u8; 32]),
            turn: Turn {
                namespace: ns.clone(),
                session: SessionId::new(s).unwrap(),
                turn: TurnIndex::new(i as u32),
                role: Role::User,
                speaker: None,
                text: format!("turn {i}"),
                time: EventTime::parse_rfc3339("2024-05-02T10:00:00Z").unwrap(),
                meta: Default::default(),
            },
        })
        .collect();
    Corpus::new(ns, evidence, []).unwrap()
}
