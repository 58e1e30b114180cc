//! A `records` row as a store reads it, decoded and checked against its digest and chain link:
//! the one definition of what a record may hold, shared by every store (SQLite here,
//! PostgreSQL in `evicortex-postgres`).

use evicortex_core::{
    EventTime, Evidence, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnId, TurnIndex,
};

use crate::{
    ChainHash, EraseTarget, LedgerPosition,
    record::{ContentSalt, Format, TurnParts, content_digest, turn_digest_parts},
};

/// `records.kind` of a turn.
pub const KIND_TURN: i64 = 1;
/// `records.kind` of a redaction.
pub const KIND_REDACTION: i64 = 2;

/// The columns every record query selects, in [`RawRecord`]'s field order (a store may cast a
/// column to the type it reads, as PostgreSQL reads `meta` as text).
pub const RECORD_COLUMN_NAMES: [&str; 20] = [
    "seq",
    "kind",
    "namespace",
    "session",
    "turn",
    "role",
    "speaker",
    "text",
    "event_utc_us",
    "event_offset_s",
    "ingest_utc_us",
    "meta",
    "target_record",
    "erased_seqs",
    "erased_by",
    "content_digest",
    "digest",
    "chain",
    "salt",
    "number",
];

/// A record row as stored, before any interpretation. Every column is optional, and a column
/// whose stored type was not the expected one is listed in `type_errors`, so that a row edited
/// behind the ledger's back decodes into a [`Corrupt`] naming it, never a panic. (A store that
/// enforces column types, like PostgreSQL, fills every column it read and lists nothing.)
#[derive(Debug, Clone, Default)]
pub struct RawRecord {
    /// The record's position in the chain.
    pub seq: i64,
    /// [`KIND_TURN`] or [`KIND_REDACTION`].
    pub kind: Option<i64>,
    /// A turn's namespace, or the namespace a redaction targets.
    pub namespace: Option<String>,
    /// A turn's session, or the session a redaction targets.
    pub session: Option<String>,
    /// A turn's index in its session.
    pub turn: Option<i64>,
    /// A turn's role.
    pub role: Option<String>,
    /// A live turn's speaker.
    pub speaker: Option<String>,
    /// A live turn's text.
    pub text: Option<String>,
    /// A turn's event time, microseconds since the Unix epoch, UTC.
    pub event_utc_us: Option<i64>,
    /// A turn's UTC offset, seconds east.
    pub event_offset_s: Option<i64>,
    /// When the record was appended.
    pub ingest_utc_us: Option<i64>,
    /// A live turn's meta, canonical JSON text.
    pub meta: Option<String>,
    /// The position of the record a redaction of one record targets.
    pub target_record: Option<i64>,
    /// The positions a redaction erased, each a little-endian `u64`.
    pub erased_seqs: Option<Vec<u8>>,
    /// The position of the redaction that erased this turn.
    pub erased_by: Option<i64>,
    /// The salted content digest an erased turn kept.
    pub content_digest: Option<Vec<u8>>,
    /// The record's digest.
    pub digest: Option<Vec<u8>>,
    /// The record's chain hash.
    pub chain: Option<Vec<u8>>,
    /// A live turn's content salt.
    pub salt: Option<Vec<u8>>,
    /// The record's number in its namespace (NULL only while a version-2 ledger migrates).
    pub number: Option<i64>,
    /// Columns whose stored type was not the expected one.
    pub type_errors: Vec<&'static str>,
}

/// A record row with the chain hash of the record before it (`None` for the first record), as
/// reads and writes select it to check the record's link.
#[derive(Debug, Clone)]
pub struct ChainedRow {
    /// The row.
    pub raw: RawRecord,
    /// The chain hash of the record at the position before.
    pub prev_chain: Option<Vec<u8>>,
}

/// A record that cannot be interpreted or does not match its digest or chain link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Corrupt {
    /// The record's position.
    pub position: LedgerPosition,
    /// What is wrong with it.
    pub detail: String,
}

/// A decoded record.
#[derive(Debug, Clone)]
pub struct StoredRecord {
    /// Its position in the chain.
    pub position: LedgerPosition,
    /// When it was appended.
    pub ingest_utc_micros: i64,
    /// Its stored digest.
    pub digest: EvidenceDigest,
    /// Its stored chain hash.
    pub chain: ChainHash,
    /// What it records.
    pub body: StoredBody,
}

/// What a record records.
#[derive(Debug, Clone)]
pub enum StoredBody {
    /// A live turn.
    Turn(Turn),
    /// An erased turn and the position of the redaction that erased it.
    ErasedTurn {
        /// The redaction's position.
        erased_by: LedgerPosition,
    },
    /// A redaction: its target as the chain names it (a record by its position) and the
    /// positions of the records it erased.
    Redaction {
        /// The target.
        target: EraseTarget,
        /// The erased records' positions.
        erased: Vec<TurnId>,
    },
}

impl RawRecord {
    /// The record's position in the ledger (its `seq`).
    pub fn position(&self) -> LedgerPosition {
        LedgerPosition::from_raw(u64::try_from(self.seq).unwrap_or(0))
    }

    /// The position as the chain names records (redaction digests list positions as ids).
    pub fn seq_id(&self) -> TurnId {
        TurnId::from_raw(self.position().raw())
    }

    /// Whether the row is a turn that was not erased.
    pub fn is_live_turn(&self) -> bool {
        self.kind == Some(KIND_TURN) && self.erased_by.is_none()
    }

    /// The record's number in its namespace: the id callers see.
    pub fn number(&self) -> Result<TurnId, Corrupt> {
        match self.number {
            Some(n) if n > 0 => Ok(TurnId::from_raw(n as u64)),
            Some(n) => Err(self.corrupt(format!("record number {n} is not positive"))),
            None => Err(self.corrupt("column number is missing")),
        }
    }

    /// A [`Corrupt`] naming this record.
    pub fn corrupt(&self, detail: impl Into<String>) -> Corrupt {
        Corrupt { position: self.position(), detail: detail.into() }
    }

    fn require<'a, T>(&self, value: &'a Option<T>, column: &str) -> Result<&'a T, Corrupt> {
        value.as_ref().ok_or_else(|| self.corrupt(format!("column {column} is missing")))
    }

    fn hash32(&self, value: &Option<Vec<u8>>, column: &str) -> Result<[u8; 32], Corrupt> {
        let bytes = self.require(value, column)?;
        <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| self.corrupt(format!("column {column} is {} bytes, not 32", bytes.len())))
    }

    /// Decodes the row of a ledger in the current format; every structural problem is a
    /// [`Corrupt`] naming the column.
    pub fn decode(&self) -> Result<StoredRecord, Corrupt> {
        self.decode_in(Format::V2)
    }

    pub(crate) fn decode_in(&self, format: Format) -> Result<StoredRecord, Corrupt> {
        if let Some(column) = self.type_errors.first() {
            return Err(self.corrupt(format!("column {column} has the wrong storage type")));
        }
        if self.seq <= 0 {
            return Err(self.corrupt(format!("sequence number {} is not positive", self.seq)));
        }
        let digest = EvidenceDigest::from_bytes(self.hash32(&self.digest, "digest")?);
        let chain = ChainHash::from_bytes(self.hash32(&self.chain, "chain")?);
        let ingest_utc_micros = *self.require(&self.ingest_utc_us, "ingest_utc_us")?;
        let namespace_text = self.require(&self.namespace, "namespace")?;
        let namespace = Namespace::new(namespace_text)
            .map_err(|e| self.corrupt(format!("column namespace: {e}")))?;
        match (format, self.is_live_turn(), &self.salt) {
            (Format::V2, true, _) => {
                self.hash32(&self.salt, "salt")?;
            }
            (Format::V2, false, Some(_)) => {
                return Err(self.corrupt("an erased turn or a redaction still holds a salt"));
            }
            (Format::V1, _, Some(_)) => {
                return Err(self.corrupt("a version-1 record holds a salt"));
            }
            _ => {}
        }
        let body = match self.kind {
            Some(KIND_TURN) => self.decode_turn(namespace)?,
            Some(KIND_REDACTION) => self.decode_redaction(namespace)?,
            Some(other) => return Err(self.corrupt(format!("unknown record kind {other}"))),
            None => return Err(self.corrupt("column kind is missing")),
        };
        Ok(StoredRecord { position: self.position(), ingest_utc_micros, digest, chain, body })
    }

    fn role(&self) -> Result<Role, Corrupt> {
        self.require(&self.role, "role")?
            .parse()
            .map_err(|e| self.corrupt(format!("column role: {e}")))
    }

    fn decode_turn(&self, namespace: Namespace) -> Result<StoredBody, Corrupt> {
        let session = SessionId::new(self.require(&self.session, "session")?)
            .map_err(|e| self.corrupt(format!("column session: {e}")))?;
        let turn_raw = *self.require(&self.turn, "turn")?;
        let turn = u32::try_from(turn_raw)
            .map(TurnIndex::new)
            .map_err(|_| self.corrupt(format!("column turn {turn_raw} is out of range")))?;
        let role = self.role()?;
        let utc = *self.require(&self.event_utc_us, "event_utc_us")?;
        let offset_raw = *self.require(&self.event_offset_s, "event_offset_s")?;
        let offset = i32::try_from(offset_raw).map_err(|_| {
            self.corrupt(format!("column event_offset_s {offset_raw} is out of range"))
        })?;
        let time = EventTime::from_parts(utc, offset)
            .map_err(|e| self.corrupt(format!("event time: {e}")))?;
        if self.target_record.is_some() || self.erased_seqs.is_some() {
            return Err(self.corrupt("a turn record holds redaction columns"));
        }
        if let Some(by) = self.erased_by {
            if self.text.is_some() || self.speaker.is_some() || self.meta.is_some() {
                return Err(self.corrupt("an erased record still holds text, speaker or meta"));
            }
            self.hash32(&self.content_digest, "content_digest")?;
            let erased_by = u64::try_from(by)
                .ok()
                .filter(|&b| b > self.position().raw())
                .map(LedgerPosition::from_raw)
                .ok_or_else(|| {
                    self.corrupt(format!("erased_by {by} does not follow the record"))
                })?;
            return Ok(StoredBody::ErasedTurn { erased_by });
        }
        if self.content_digest.is_some() {
            return Err(self.corrupt("a live turn holds an erased record's content digest"));
        }
        let text = self.require(&self.text, "text")?.clone();
        let meta_text = self.require(&self.meta, "meta")?;
        let Ok(serde_json::Value::Object(meta)) = serde_json::from_str(meta_text) else {
            return Err(self.corrupt("column meta is not a JSON object"));
        };
        Ok(StoredBody::Turn(Turn {
            namespace,
            session,
            turn,
            role,
            speaker: self.speaker.clone(),
            text,
            time,
            meta,
        }))
    }

    fn decode_redaction(&self, namespace: Namespace) -> Result<StoredBody, Corrupt> {
        // A redaction's digest covers only the columns it uses: every other one must be NULL, or
        // an edit of it would verify.
        let turn_columns = [
            ("turn", self.turn.is_some()),
            ("role", self.role.is_some()),
            ("speaker", self.speaker.is_some()),
            ("text", self.text.is_some()),
            ("event_utc_us", self.event_utc_us.is_some()),
            ("event_offset_s", self.event_offset_s.is_some()),
            ("meta", self.meta.is_some()),
            ("erased_by", self.erased_by.is_some()),
            ("content_digest", self.content_digest.is_some()),
        ];
        if let Some((column, _)) = turn_columns.iter().find(|(_, set)| *set) {
            return Err(self.corrupt(format!("a redaction record holds the turn column {column}")));
        }
        let target = match (&self.session, self.target_record) {
            (None, None) => EraseTarget::Namespace(namespace),
            (Some(session), None) => EraseTarget::Session(
                namespace,
                SessionId::new(session)
                    .map_err(|e| self.corrupt(format!("column session: {e}")))?,
            ),
            (None, Some(record)) => EraseTarget::Record(
                namespace,
                TurnId::from_raw(u64::try_from(record).map_err(|_| {
                    self.corrupt(format!("column target_record {record} is negative"))
                })?),
            ),
            (Some(_), Some(_)) => {
                return Err(self.corrupt("a redaction names both a session and a record"));
            }
        };
        let blob = self.require(&self.erased_seqs, "erased_seqs")?;
        if blob.len() % 8 != 0 {
            return Err(self.corrupt("column erased_seqs is not a whole number of u64"));
        }
        let erased = blob
            .chunks_exact(8)
            .map(|c| TurnId::from_raw(u64::from_le_bytes(c.try_into().expect("chunk of 8"))))
            .collect();
        Ok(StoredBody::Redaction { target, erased })
    }

    /// The salted content digest of a live turn, from its stored columns.
    pub fn live_content_digest(&self) -> Result<[u8; 32], Corrupt> {
        let salt = ContentSalt::from_bytes(self.hash32(&self.salt, "salt")?);
        Ok(content_digest(
            Format::V2,
            Some(&salt),
            self.speaker.as_deref(),
            self.require(&self.text, "text")?,
            self.require(&self.meta, "meta")?,
        ))
    }

    /// Recomputes a turn record's digest in the current format from its columns exactly as
    /// stored: for a live turn from its salt and content, for an erased one from the content
    /// digest it kept.
    pub fn recompute_turn_digest(&self) -> Result<EvidenceDigest, Corrupt> {
        self.recompute_turn_digest_in(Format::V2)
    }

    pub(crate) fn recompute_turn_digest_in(
        &self,
        format: Format,
    ) -> Result<EvidenceDigest, Corrupt> {
        let content = match (self.erased_by, format) {
            (None, Format::V2) => self.live_content_digest()?,
            (None, Format::V1) => content_digest(
                Format::V1,
                None,
                self.speaker.as_deref(),
                self.require(&self.text, "text")?,
                self.require(&self.meta, "meta")?,
            ),
            (Some(_), _) => self.hash32(&self.content_digest, "content_digest")?,
        };
        let turn = *self.require(&self.turn, "turn")?;
        let offset = *self.require(&self.event_offset_s, "event_offset_s")?;
        Ok(turn_digest_parts(
            format,
            &TurnParts {
                namespace: self.require(&self.namespace, "namespace")?,
                session: self.require(&self.session, "session")?,
                turn: u32::try_from(turn)
                    .map_err(|_| self.corrupt("column turn is out of range"))?,
                role: self.role()?,
                event_utc_micros: *self.require(&self.event_utc_us, "event_utc_us")?,
                event_offset_seconds: i32::try_from(offset)
                    .map_err(|_| self.corrupt("column event_offset_s is out of range"))?,
                ingest_utc_micros: *self.require(&self.ingest_utc_us, "ingest_utc_us")?,
                content,
            },
        ))
    }

    /// Checks a turn record (live or erased) against its stored digest and, given the chain
    /// hash of the record before it (`None` for the first record), its stored chain hash: what
    /// a read serves or a write builds on is what the chain committed to.
    pub fn check_turn(
        &self,
        record: &StoredRecord,
        prev_chain: Option<&[u8]>,
    ) -> Result<(), Corrupt> {
        let digest = self.recompute_turn_digest()?;
        self.check_digest_and_link(record, &digest, prev_chain)
    }

    /// Checks `digest` (recomputed) against the stored one, and the stored chain hash against
    /// the link from the record before.
    pub fn check_digest_and_link(
        &self,
        record: &StoredRecord,
        digest: &EvidenceDigest,
        prev_chain: Option<&[u8]>,
    ) -> Result<(), Corrupt> {
        if *digest != record.digest {
            return Err(self.corrupt("digest mismatch: the record's content was altered"));
        }
        let prev = match prev_chain {
            None if record.position.raw() == 1 => ChainHash::GENESIS,
            None => return Err(self.corrupt("the record before it is missing")),
            Some(bytes) => ChainHash::from_bytes(<[u8; 32]>::try_from(bytes).map_err(|_| {
                self.corrupt("the chain hash of the record before it is not 32 bytes")
            })?),
        };
        if prev.link(digest) != record.chain {
            return Err(
                self.corrupt("chain hash mismatch: records were altered, reordered or lost")
            );
        }
        Ok(())
    }
}

impl ChainedRow {
    /// The live turn this row holds, decoded and checked against its digest and chain link,
    /// with its position: what every read serves.
    pub fn checked_evidence(&self) -> Result<(LedgerPosition, Evidence), Corrupt> {
        let raw = &self.raw;
        let record = raw.decode()?;
        raw.check_turn(&record, self.prev_chain.as_deref())?;
        let number = raw.number()?;
        let StoredBody::Turn(turn) = record.body else {
            return Err(raw.corrupt("a live turn row did not decode as a turn"));
        };
        Ok((record.position, Evidence { id: number, digest: record.digest, turn }))
    }
}

/// The position and chain hash of a ledger's last record as stored, checked to be a hash: what
/// `stats` reports as the head.
pub fn stored_head(
    last: Option<(i64, Vec<u8>)>,
) -> Result<(Option<LedgerPosition>, ChainHash), Corrupt> {
    let Some((seq, chain)) = last else { return Ok((None, ChainHash::GENESIS)) };
    let position = LedgerPosition::from_raw(seq as u64);
    let chain = <[u8; 32]>::try_from(chain.as_slice())
        .map(ChainHash::from_bytes)
        .map_err(|_| Corrupt { position, detail: "column chain is not 32 bytes".to_owned() })?;
    Ok((Some(position), chain))
}
