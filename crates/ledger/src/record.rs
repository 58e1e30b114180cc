//! The canonical encoding of a record and its digest (format version 2; version 1 is still
//! computed, for verifying a version-1 ledger before migrating it).
//!
//! The digest is BLAKE3 over a length-prefixed, versioned byte string, never over SQLite's own
//! row format, so it is independent of how SQLite lays out pages. `docs/ledger-format.md` gives
//! the layout byte by byte; change it only together with [`FORMAT_VERSION`].

use evicortex_core::{EvidenceDigest, Role, Turn, TurnId};
use rand::TryRngCore;

use crate::{EraseTarget, canonical_json::canonical_json};

/// The on-disk format version this build reads and writes: 3 is version 2's records and
/// digests with each record's number in its namespace beside them (not digested: `verify`
/// checks that they count each namespace's records from 1 in ledger order).
pub const FORMAT_VERSION: u32 = 3;

const MAGIC: &[u8; 4] = b"EVCX";
const KIND_TURN: u8 = 1;
const KIND_REDACTION: u8 = 2;
const KIND_CONTENT: u8 = 3;
/// Version 2: the content digest of a turn that version 1 had already erased.
const KIND_MIGRATED_ERASED_CONTENT: u8 = 4;

/// A format version whose digests this build computes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// Unsalted content digests; read only to verify a ledger before migrating it.
    V1,
    /// Content digests salted per record (the current format).
    V2,
}

impl Format {
    fn code(self) -> u16 {
        match self {
            Format::V1 => 1,
            Format::V2 => 2,
        }
    }
}

/// 32 random bytes inside a turn's content digest, stored beside the turn and destroyed when it
/// is erased: the digest an erased turn keeps then confirms no guessed text.
#[derive(Copy, Clone, PartialEq, Eq)]
pub struct ContentSalt([u8; 32]);

impl ContentSalt {
    /// A fresh salt from the operating system's random source.
    pub fn random() -> Result<ContentSalt, rand::rand_core::OsError> {
        let mut bytes = [0u8; 32];
        rand::rngs::OsRng.try_fill_bytes(&mut bytes)?;
        Ok(ContentSalt(bytes))
    }

    /// Wraps raw bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> ContentSalt {
        ContentSalt(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

impl std::fmt::Debug for ContentSalt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ContentSalt(..)")
    }
}

/// The digest of a turn record: everything stored about it except its position, with its
/// content salted by `salt`.
pub fn turn_digest(turn: &Turn, ingest_utc_micros: i64, salt: &ContentSalt) -> EvidenceDigest {
    let meta = canonical_json(&serde_json::Value::Object(turn.meta.clone()));
    turn_digest_parts(
        Format::V2,
        &TurnParts {
            namespace: turn.namespace.as_str(),
            session: turn.session.as_str(),
            turn: turn.turn.raw(),
            role: turn.role,
            event_utc_micros: turn.time.utc_micros(),
            event_offset_seconds: turn.time.offset_seconds(),
            ingest_utc_micros,
            content: content_digest(
                Format::V2,
                Some(salt),
                turn.speaker.as_deref(),
                &turn.text,
                &meta,
            ),
        },
    )
}

/// The digest of a redaction record: its target, its time and every record it erased with that
/// record's digest, so the chain keeps committing to what was erased.
pub fn redaction_digest(
    target: &EraseTarget,
    ingest_utc_micros: i64,
    erased: &[(TurnId, EvidenceDigest)],
) -> EvidenceDigest {
    redaction_digest_in(Format::V2, target, ingest_utc_micros, erased)
}

pub(crate) fn redaction_digest_in(
    format: Format,
    target: &EraseTarget,
    ingest_utc_micros: i64,
    erased: &[(TurnId, EvidenceDigest)],
) -> EvidenceDigest {
    let mut h = Encoder::new(format, KIND_REDACTION);
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
/// content (speaker, text, meta) enters only through its content digest
/// ([`salted_content_digest`]), which an erased record keeps so that its remaining fields stay
/// verifiable.
#[derive(Debug, Clone, Copy)]
pub struct TurnParts<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// The session id.
    pub session: &'a str,
    /// The turn's index in its session.
    pub turn: u32,
    /// The role.
    pub role: Role,
    /// The event time, microseconds since the Unix epoch, UTC.
    pub event_utc_micros: i64,
    /// The event time's original UTC offset, seconds east.
    pub event_offset_seconds: i32,
    /// When the record was appended, microseconds since the Unix epoch, UTC.
    pub ingest_utc_micros: i64,
    /// The salted content digest.
    pub content: [u8; 32],
}

/// The digest of a turn record from its stored columns, in the current format: what
/// [`turn_digest`] computes, for a store that checks a row without rebuilding a [`Turn`] (an
/// erased turn keeps only its content digest). Other ledger back ends use it so that their
/// records carry the same digests as this one.
pub fn turn_digest_from_parts(parts: &TurnParts<'_>) -> EvidenceDigest {
    turn_digest_parts(Format::V2, parts)
}

/// The salted content digest of a turn (current format) from its stored columns: `meta_json`
/// is the canonical JSON text exactly as stored. An erased turn keeps this digest in place of
/// its content.
pub fn salted_content_digest(
    salt: &ContentSalt,
    speaker: Option<&str>,
    text: &str,
    meta_json: &str,
) -> [u8; 32] {
    content_digest(Format::V2, Some(salt), speaker, text, meta_json)
}

pub(crate) fn turn_digest_parts(format: Format, p: &TurnParts<'_>) -> EvidenceDigest {
    let mut h = Encoder::new(format, KIND_TURN);
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

/// BLAKE3 of a turn's erasable content: (version 2) its salt, then speaker, text and the
/// canonical JSON of meta. Version 1 has no salt; `salt` is ignored for it.
pub(crate) fn content_digest(
    format: Format,
    salt: Option<&ContentSalt>,
    speaker: Option<&str>,
    text: &str,
    meta_json: &str,
) -> [u8; 32] {
    let mut h = Encoder::new(format, KIND_CONTENT);
    if format == Format::V2 {
        h.bytes(salt.expect("a version-2 content digest is salted").as_bytes());
    }
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

/// The version-2 content digest of a turn that a version-1 ledger had already erased: its
/// version-1 content digest, salted with a salt that is then thrown away, so what the migrated
/// record keeps confirms no guessed text either.
pub(crate) fn migrated_erased_content(salt: &ContentSalt, v1_content: &[u8; 32]) -> [u8; 32] {
    let mut h = Encoder::new(Format::V2, KIND_MIGRATED_ERASED_CONTENT);
    h.bytes(salt.as_bytes());
    h.bytes(v1_content);
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
    fn new(format: Format, kind: u8) -> Encoder {
        let mut hasher = blake3::Hasher::new();
        hasher.update(MAGIC);
        hasher.update(&format.code().to_le_bytes());
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

    const SALT: ContentSalt = ContentSalt::from_bytes([9; 32]);

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

    fn str_(bytes: &mut Vec<u8>, s: &str) {
        bytes.extend_from_slice(&(s.len() as u64).to_le_bytes());
        bytes.extend_from_slice(s.as_bytes());
    }

    /// The record bytes around a content digest, for version `version`.
    fn record_bytes(version: u16, t: &Turn, content: &[u8; 32]) -> Vec<u8> {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(b"EVCX");
        bytes.extend_from_slice(&version.to_le_bytes());
        bytes.push(1);
        str_(&mut bytes, "alice");
        str_(&mut bytes, "s1");
        bytes.extend_from_slice(&3u32.to_le_bytes());
        bytes.push(2);
        bytes.extend_from_slice(&t.time.utc_micros().to_le_bytes());
        bytes.extend_from_slice(&3600i32.to_le_bytes());
        bytes.extend_from_slice(&42i64.to_le_bytes());
        bytes.extend_from_slice(content);
        bytes
    }

    /// The encoding written out by hand: if this test fails, the format changed and
    /// FORMAT_VERSION and docs/ledger-format.md must change with it.
    #[test]
    fn digest_matches_hand_built_encoding() {
        let mut content = Vec::new();
        content.extend_from_slice(b"EVCX");
        content.extend_from_slice(&2u16.to_le_bytes());
        content.push(3);
        content.extend_from_slice(&[9; 32]);
        content.push(1);
        str_(&mut content, "Ada");
        str_(&mut content, "hi");
        str_(&mut content, r#"{"a":[true],"b":1}"#);

        let t = turn("hi");
        let bytes = record_bytes(2, &t, blake3::hash(&content).as_bytes());
        assert_eq!(turn_digest(&t, 42, &SALT).as_bytes(), blake3::hash(&bytes).as_bytes());
    }

    /// Version 1, still computed to verify a ledger before migrating it, pinned as well.
    #[test]
    fn version_1_digest_matches_hand_built_encoding() {
        let mut content = Vec::new();
        content.extend_from_slice(b"EVCX");
        content.extend_from_slice(&1u16.to_le_bytes());
        content.push(3);
        content.push(1);
        str_(&mut content, "Ada");
        str_(&mut content, "hi");
        str_(&mut content, r#"{"a":[true],"b":1}"#);
        let v1_content =
            content_digest(Format::V1, None, Some("Ada"), "hi", r#"{"a":[true],"b":1}"#);
        assert_eq!(&v1_content, blake3::hash(&content).as_bytes());

        let t = turn("hi");
        let parts = parts_of(&t, v1_content);
        let bytes = record_bytes(1, &t, &v1_content);
        assert_eq!(
            turn_digest_parts(Format::V1, &parts).as_bytes(),
            blake3::hash(&bytes).as_bytes()
        );
    }

    /// The stored columns of `t` (one of `turn`'s) appended at 42 µs, with `content`.
    fn parts_of(t: &Turn, content: [u8; 32]) -> TurnParts<'static> {
        TurnParts {
            namespace: "alice",
            session: "s1",
            turn: 3,
            role: Role::Assistant,
            event_utc_micros: t.time.utc_micros(),
            event_offset_seconds: 3600,
            ingest_utc_micros: 42,
            content,
        }
    }

    /// The public pieces other back ends digest stored columns with give `turn_digest`.
    #[test]
    fn digest_from_parts_is_the_turn_digest() {
        let t = turn("hi");
        let meta = canonical_json(&serde_json::Value::Object(t.meta.clone()));
        let parts = parts_of(&t, salted_content_digest(&SALT, Some("Ada"), "hi", &meta));
        assert_eq!(turn_digest_from_parts(&parts), turn_digest(&t, 42, &SALT));
    }

    #[test]
    fn every_field_changes_the_digest() {
        let base = turn("hi");
        let d = turn_digest(&base, 1, &SALT);
        assert_ne!(d, turn_digest(&base, 2, &SALT), "ingest time");
        assert_ne!(d, turn_digest(&base, 1, &ContentSalt::from_bytes([8; 32])), "salt");
        assert_ne!(d, turn_digest(&turn("hi "), 1, &SALT), "text");
        let mut t = base.clone();
        t.speaker = None;
        assert_ne!(d, turn_digest(&t, 1, &SALT), "speaker");
        let mut t = base.clone();
        t.role = Role::User;
        assert_ne!(d, turn_digest(&t, 1, &SALT), "role");
        let mut t = base.clone();
        t.time = EventTime::parse_rfc3339("2024-05-02T09:00:00.5Z").unwrap();
        assert_ne!(d, turn_digest(&t, 1, &SALT), "same instant, other offset");
        let mut t = base;
        t.meta.clear();
        assert_ne!(d, turn_digest(&t, 1, &SALT), "meta");
    }

    #[test]
    fn length_prefixes_keep_field_boundaries() {
        let mut a = turn("x");
        a.session = SessionId::new("s1").unwrap();
        let mut b = a.clone();
        b.namespace = Namespace::new("alices").unwrap();
        b.session = SessionId::new("1").unwrap();
        assert_ne!(turn_digest(&a, 0, &SALT), turn_digest(&b, 0, &SALT));
    }

    #[test]
    fn random_salts_differ() {
        assert_ne!(ContentSalt::random().unwrap(), ContentSalt::random().unwrap());
    }
}
