//! A `records` row as stored, decoded and checked against its digest and chain link.

use evicortex_core::{
    EventTime, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnId, TurnIndex,
};
use evicortex_ledger::{
    ChainHash, ContentSalt, EraseTarget, LedgerPosition, TurnParts, salted_content_digest,
    turn_digest_from_parts,
};

use crate::schema::{KIND_REDACTION, KIND_TURN};

/// The columns every record query selects, in [`RawRecord::from_row`] order.
pub(crate) const RECORD_COLUMNS: &str = "seq, kind, namespace, session, turn, role, speaker, \
     text, event_utc_us, event_offset_s, ingest_utc_us, meta::text, target_record, erased_seqs, \
     erased_by, content_digest, digest, chain, salt, number";

/// The chain hash of the record before each selected one, selected after [`RECORD_COLUMNS`]
/// (column [`PREV_CHAIN_COLUMN`]); NULL for the first record.
pub(crate) const PREV_CHAIN: &str =
    "(SELECT p.chain FROM records AS p WHERE p.seq = records.seq - 1)";

/// The index of [`PREV_CHAIN`] in a row.
pub(crate) const PREV_CHAIN_COLUMN: usize = 20;

/// A record row before any interpretation: PostgreSQL enforces the column types, the rest
/// (lengths, ranges, which columns a kind may hold) is checked by [`RawRecord::decode`] so that
/// a row edited behind the ledger's back is reported, naming it, never served.
#[derive(Debug, Clone)]
pub(crate) struct RawRecord {
    pub seq: i64,
    pub kind: i16,
    pub namespace: String,
    pub session: Option<String>,
    pub turn: Option<i64>,
    pub role: Option<String>,
    pub speaker: Option<String>,
    pub text: Option<String>,
    pub event_utc_us: Option<i64>,
    pub event_offset_s: Option<i32>,
    pub ingest_utc_us: i64,
    pub meta: Option<String>,
    pub target_record: Option<i64>,
    pub erased_seqs: Option<Vec<u8>>,
    pub erased_by: Option<i64>,
    pub content_digest: Option<Vec<u8>>,
    pub digest: Vec<u8>,
    pub chain: Vec<u8>,
    pub salt: Option<Vec<u8>>,
    pub number: i64,
}

/// A record that cannot be interpreted or does not match its digest or chain link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Corrupt {
    pub position: LedgerPosition,
    pub detail: String,
}

/// A decoded record.
#[derive(Debug, Clone)]
pub(crate) struct StoredRecord {
    pub digest: EvidenceDigest,
    pub chain: ChainHash,
    pub body: StoredBody,
}

#[derive(Debug, Clone)]
pub(crate) enum StoredBody {
    Turn(Turn),
    /// An erased turn and the position of the redaction that erased it.
    ErasedTurn {
        erased_by: u64,
    },
    /// A redaction: its target as the chain names it (a record by its position) and the
    /// positions of the records it erased.
    Redaction {
        target: EraseTarget,
        erased: Vec<TurnId>,
    },
}

impl RawRecord {
    pub(crate) fn from_row(row: &postgres::Row) -> Result<RawRecord, postgres::Error> {
        Ok(RawRecord {
            seq: row.try_get(0)?,
            kind: row.try_get(1)?,
            namespace: row.try_get(2)?,
            session: row.try_get(3)?,
            turn: row.try_get(4)?,
            role: row.try_get(5)?,
            speaker: row.try_get(6)?,
            text: row.try_get(7)?,
            event_utc_us: row.try_get(8)?,
            event_offset_s: row.try_get(9)?,
            ingest_utc_us: row.try_get(10)?,
            meta: row.try_get(11)?,
            target_record: row.try_get(12)?,
            erased_seqs: row.try_get(13)?,
            erased_by: row.try_get(14)?,
            content_digest: row.try_get(15)?,
            digest: row.try_get(16)?,
            chain: row.try_get(17)?,
            salt: row.try_get(18)?,
            number: row.try_get(19)?,
        })
    }

    /// The record's position in the ledger (its `seq`).
    pub(crate) fn position(&self) -> LedgerPosition {
        LedgerPosition::from_raw(u64::try_from(self.seq).unwrap_or(0))
    }

    /// The position as the chain names records (redaction digests list positions as ids).
    pub(crate) fn seq_id(&self) -> TurnId {
        TurnId::from_raw(self.position().raw())
    }

    /// The record's number in its namespace: the id callers see.
    pub(crate) fn number(&self) -> Result<TurnId, Corrupt> {
        u64::try_from(self.number)
            .ok()
            .filter(|&n| n > 0)
            .map(TurnId::from_raw)
            .ok_or_else(|| self.corrupt(format!("record number {} is not positive", self.number)))
    }

    pub(crate) fn corrupt(&self, detail: impl Into<String>) -> Corrupt {
        Corrupt { position: self.position(), detail: detail.into() }
    }

    fn require<'a, T>(&self, value: &'a Option<T>, column: &str) -> Result<&'a T, Corrupt> {
        value.as_ref().ok_or_else(|| self.corrupt(format!("column {column} is missing")))
    }

    fn hash32(&self, value: &[u8], column: &str) -> Result<[u8; 32], Corrupt> {
        <[u8; 32]>::try_from(value)
            .map_err(|_| self.corrupt(format!("column {column} is {} bytes, not 32", value.len())))
    }

    fn opt_hash32(&self, value: &Option<Vec<u8>>, column: &str) -> Result<[u8; 32], Corrupt> {
        self.hash32(self.require(value, column)?, column)
    }

    pub(crate) fn is_live_turn(&self) -> bool {
        self.kind == KIND_TURN && self.erased_by.is_none()
    }

    /// Decodes the row; every structural problem is a [`Corrupt`] naming the column.
    pub(crate) fn decode(&self) -> Result<StoredRecord, Corrupt> {
        if self.seq <= 0 {
            return Err(self.corrupt(format!("sequence number {} is not positive", self.seq)));
        }
        let digest = EvidenceDigest::from_bytes(self.hash32(&self.digest, "digest")?);
        let chain = ChainHash::from_bytes(self.hash32(&self.chain, "chain")?);
        let namespace = Namespace::new(&self.namespace)
            .map_err(|e| self.corrupt(format!("column namespace: {e}")))?;
        match (self.is_live_turn(), &self.salt) {
            (true, _) => {
                self.opt_hash32(&self.salt, "salt")?;
            }
            (false, Some(_)) => {
                return Err(self.corrupt("an erased turn or a redaction still holds a salt"));
            }
            (false, None) => {}
        }
        let body = match self.kind {
            KIND_TURN => self.decode_turn(namespace)?,
            KIND_REDACTION => self.decode_redaction(namespace)?,
            other => return Err(self.corrupt(format!("unknown record kind {other}"))),
        };
        Ok(StoredRecord { digest, chain, body })
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
        let offset = *self.require(&self.event_offset_s, "event_offset_s")?;
        let time = EventTime::from_parts(utc, offset)
            .map_err(|e| self.corrupt(format!("event time: {e}")))?;
        if self.target_record.is_some() || self.erased_seqs.is_some() {
            return Err(self.corrupt("a turn record holds redaction columns"));
        }
        if let Some(by) = self.erased_by {
            if self.text.is_some() || self.speaker.is_some() || self.meta.is_some() {
                return Err(self.corrupt("an erased record still holds text, speaker or meta"));
            }
            self.opt_hash32(&self.content_digest, "content_digest")?;
            let erased_by =
                u64::try_from(by).ok().filter(|&b| b > self.position().raw()).ok_or_else(|| {
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

    fn role(&self) -> Result<Role, Corrupt> {
        self.require(&self.role, "role")?
            .parse()
            .map_err(|e| self.corrupt(format!("column role: {e}")))
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

    /// The salt of a live turn.
    pub(crate) fn content_salt(&self) -> Result<ContentSalt, Corrupt> {
        Ok(ContentSalt::from_bytes(self.opt_hash32(&self.salt, "salt")?))
    }

    /// The salted content digest of a live turn, from its stored columns.
    pub(crate) fn live_content_digest(&self) -> Result<[u8; 32], Corrupt> {
        Ok(salted_content_digest(
            &self.content_salt()?,
            self.speaker.as_deref(),
            self.require(&self.text, "text")?,
            self.require(&self.meta, "meta")?,
        ))
    }

    /// Recomputes a turn record's digest from its columns exactly as stored: for a live turn
    /// from its salt and content, for an erased one from the content digest it kept.
    pub(crate) fn recompute_turn_digest(&self) -> Result<EvidenceDigest, Corrupt> {
        let content = match self.erased_by {
            None => self.live_content_digest()?,
            Some(_) => self.opt_hash32(&self.content_digest, "content_digest")?,
        };
        let turn = *self.require(&self.turn, "turn")?;
        Ok(turn_digest_from_parts(&TurnParts {
            namespace: &self.namespace,
            session: self.require(&self.session, "session")?,
            turn: u32::try_from(turn).map_err(|_| self.corrupt("column turn is out of range"))?,
            role: self.role()?,
            event_utc_micros: *self.require(&self.event_utc_us, "event_utc_us")?,
            event_offset_seconds: *self.require(&self.event_offset_s, "event_offset_s")?,
            ingest_utc_micros: self.ingest_utc_us,
            content,
        }))
    }

    /// Checks a turn record (live or erased) against its stored digest and, given the chain hash
    /// of the record before it (`None` for the first record), its stored chain hash.
    pub(crate) fn check_turn(
        &self,
        record: &StoredRecord,
        prev_chain: Option<&[u8]>,
    ) -> Result<(), Corrupt> {
        let digest = self.recompute_turn_digest()?;
        self.check_digest_and_link(record, &digest, prev_chain)
    }

    /// Checks `digest` (recomputed) against the stored one, and the stored chain hash against
    /// the link from the record before.
    pub(crate) fn check_digest_and_link(
        &self,
        record: &StoredRecord,
        digest: &EvidenceDigest,
        prev_chain: Option<&[u8]>,
    ) -> Result<(), Corrupt> {
        if *digest != record.digest {
            return Err(self.corrupt("digest mismatch: the record's content was altered"));
        }
        let prev = match prev_chain {
            None if self.seq == 1 => ChainHash::GENESIS,
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
