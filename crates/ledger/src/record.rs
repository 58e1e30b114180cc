//! The canonical encoding of a record and its digest (format version 1).
//!
//! The digest is BLAKE3 over a length-prefixed, versioned byte string, never over SQLite's own
//! row format, so it is independent of how SQLite lays out pages. `docs/ledger-format.md` gives
//! the layout byte by byte; change it only together with [`FORMAT_VERSION`].

use evicortex_core::{EvidenceDigest, Role, Turn, TurnId};

use crate::{EraseTarget, canonical_json::canonical_json};

/// The on-disk format version this build reads and writes.
pub const FORMAT_VERSION: u32 = 1;

const MAGIC: &[u8; 4] = b"EVCX";
const KIND_TURN: u8 = 1;
const KIND_REDACTION: u8 = 2;
const KIND_CONTENT: u8 = 3;

/// The digest of a turn record: everything stored about it except its position.
pub fn turn_digest(turn: &Turn, ingest_utc_micros: i64) -> EvidenceDigest {
    let meta = canonical_json(&serde_json::Value::Object(turn.meta.clone()));
    turn_digest_parts(&TurnParts {
        namespace: turn.namespace.as_str(),
        session: turn.session.as_str(),
        turn: turn.turn.raw(),
        role: turn.role,
        event_utc_micros: turn.time.utc_micros(),
        event_offset_seconds: turn.time.offset_seconds(),
        ingest_utc_micros,
        content: content_digest(turn.speaker.as_deref(), &turn.text, &meta),
    })
}

/// The digest of a redaction record: its target, its time and every record it erased with that
/// record's digest, so the chain keeps committing to what was erased.
pub fn redaction_digest(
    target: &EraseTarget,
    ingest_utc_micros: i64,
    erased: &[(TurnId, EvidenceDigest)],
) -> EvidenceDigest {
    let mut h = Encoder::new(KIND_REDACTION);
    h.str(target.namespace().as_str());
    match target {
        EraseTarget::Namespace(_) => {
            h.none();
            h.none();
        }
        EraseTarget::Session(_, session) => {
            h.some();
            h.str(session.as_str());
            h.none();
        }
        EraseTarget::Record(_, id) => {
            h.none();
            h.some();
            h.u64(id.raw());
        }
    }
    h.i64(ingest_utc_micros);
    h.u64(erased.len() as u64);
    for (id, digest) in erased {
        h.u64(id.raw());
        h.bytes(digest.as_bytes());
    }
    h.finish()
}

/// The fields of a turn record as stored, borrowed; what [`turn_digest`] encodes. The erasable
/// content (speaker, text, meta) enters only through its [`content_digest`], which an erased
/// record keeps so that its remaining fields stay verifiable.
pub(crate) struct TurnParts<'a> {
    pub namespace: &'a str,
    pub session: &'a str,
    pub turn: u32,
    pub role: Role,
    pub event_utc_micros: i64,
    pub event_offset_seconds: i32,
    pub ingest_utc_micros: i64,
    pub content: [u8; 32],
}

pub(crate) fn turn_digest_parts(p: &TurnParts<'_>) -> EvidenceDigest {
    let mut h = Encoder::new(KIND_TURN);
    h.str(p.namespace);
    h.str(p.session);
    h.u32(p.turn);
    h.u8(role_code(p.role));
    h.i64(p.event_utc_micros);
    h.i32(p.event_offset_seconds);
    h.i64(p.ingest_utc_micros);
    h.bytes(&p.content);
    h.finish()
}

/// BLAKE3 of a turn's erasable content: speaker, text and the canonical JSON of meta.
pub(crate) fn content_digest(speaker: Option<&str>, text: &str, meta_json: &str) -> [u8; 32] {
    let mut h = Encoder::new(KIND_CONTENT);
    match speaker {
        Some(speaker) => {
            h.some();
            h.str(speaker);
        }
        None => h.none(),
    }
    h.str(text);
    h.str(meta_json);
    *h.finish().as_bytes()
}

/// The byte code of a role inside the canonical encoding.
fn role_code(role: Role) -> u8 {
    match role {
        Role::User => 1,
        Role::Assistant => 2,
        Role::System => 3,
        Role::Tool => 4,
    }
}

/// Streams the canonical encoding into BLAKE3. Integers are little-endian with a fixed width;
/// strings are a `u64` byte length followed by the UTF-8 bytes; an optional is a `0x00` byte or a
/// `0x01` byte followed by the value.
struct Encoder(blake3::Hasher);

impl Encoder {
    fn new(kind: u8) -> Encoder {
        let mut hasher = blake3::Hasher::new();
        hasher.update(MAGIC);
        hasher.update(&(FORMAT_VERSION as u16).to_le_bytes());
        hasher.update(&[kind]);
        Encoder(hasher)
    }
    fn u8(&mut self, v: u8) {
        self.0.update(&[v]);
    }
    fn u32(&mut self, v: u32) {
        self.0.update(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.0.update(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.update(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.0.update(&v.to_le_bytes());
    }
    fn bytes(&mut self, v: &[u8]) {
        self.0.update(v);
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.0.update(s.as_bytes());
    }
    fn none(&mut self) {
        self.u8(0);
    }
    fn some(&mut self) {
        self.u8(1);
    }
    fn finish(self) -> EvidenceDigest {
        EvidenceDigest::from_bytes(*self.0.finalize().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use evicortex_core::{EventTime, Namespace, SessionId, TurnIndex};

    use super::*;

    fn turn(text: &str) -> Turn {
        Turn {
            namespace: Namespace::new("alice").unwrap(),
            session: SessionId::new("s1").unwrap(),
            turn: TurnIndex::new(3),
            role: Role::Assistant,
            speaker: Some("Ada".into()),
            text: text.into(),
            time: EventTime::parse_rfc3339("2024-05-02T10:00:00.5+01:00").unwrap(),
            meta: serde_json::from_str(r#"{"b":1,"a":[true]}"#).unwrap(),
        }
    }

    /// The encoding written out by hand: if this test fails, the format changed and
    /// FORMAT_VERSION and docs/ledger-format.md must change with it.
    #[test]
    fn digest_matches_hand_built_encoding() {
        let str_ = |bytes: &mut Vec<u8>, s: &str| {
            bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
            bytes.extend_from_slice(s.as_bytes());
        };
        let mut content = Vec::new();
        content.extend_from_slice(b"EVCX");
        content.extend_from_slice(&1u16.to_le_bytes());
        content.push(3);
        content.push(1);
        str_(&mut content, "Ada");
        str_(&mut content, "hi");
        str_(&mut content, r#"{"a":[true],"b":1}"#);

        let t = turn("hi");
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"EVCX");
        bytes.extend_from_slice(&1u16.to_le_bytes());
        bytes.push(1);
        str_(&mut bytes, "alice");
        str_(&mut bytes, "s1");
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.push(2);
        bytes.extend_from_slice(&t.time.utc_micros().to_le_bytes());
        bytes.extend_from_slice(&3600i32.to_le_bytes());
        bytes.extend_from_slice(&42i64.to_le_bytes());
        bytes.extend_from_slice(blake3::hash(&content).as_bytes());
        assert_eq!(turn_digest(&t, 42).as_bytes(), blake3::hash(&bytes).as_bytes());
    }

    #[test]
    fn every_field_changes_the_digest() {
        let base = turn("hi");
        let d = turn_digest(&base, 1);
        assert_ne!(d, turn_digest(&base, 2), "ingest time");
        assert_ne!(d, turn_digest(&turn("hi "), 1), "text");
        let mut t = base.clone();
        t.speaker = None;
        assert_ne!(d, turn_digest(&t, 1), "speaker");
        let mut t = base.clone();
        t.role = Role::User;
        assert_ne!(d, turn_digest(&t, 1), "role");
        let mut t = base.clone();
        t.time = EventTime::parse_rfc3339("2024-05-02T09:00:00.5Z").unwrap();
        assert_ne!(d, turn_digest(&t, 1), "same instant, other offset");
        let mut t = base;
        t.meta.clear();
        assert_ne!(d, turn_digest(&t, 1), "meta");
    }

    #[test]
    fn length_prefixes_keep_field_boundaries() {
        let mut a = turn("x");
        a.session = SessionId::new("s1").unwrap();
        let mut b = a.clone();
        b.namespace = Namespace::new("alices").unwrap();
        b.session = SessionId::new("1").unwrap();
        assert_ne!(turn_digest(&a, 0), turn_digest(&b, 0));
    }
}
