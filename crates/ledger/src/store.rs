//! The SQLite schema, connection settings, the metadata table and row decoding.

use std::path::Path;

use evicortex_core::{
    EventTime, EvidenceDigest, Namespace, Role, SessionId, Turn, TurnId, TurnIndex,
};
use rusqlite::{Connection, OptionalExtension, types::ValueRef};

use crate::{
    ChainHash, EraseTarget, StorageError,
    record::{ContentSalt, Format, TurnParts, content_digest, turn_digest_parts},
};

/// `PRAGMA application_id` of a ledger file: "EVCX".
pub(crate) const APPLICATION_ID: i32 = 0x4556_4358;

/// `records.kind` of a turn.
pub(crate) const KIND_TURN: i64 = 1;
/// `records.kind` of a redaction.
pub(crate) const KIND_REDACTION: i64 = 2;

pub(crate) const SCHEMA: &str = "
CREATE TABLE ledger_meta (
    key   TEXT PRIMARY KEY NOT NULL,
    value TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE records (
    seq            INTEGER PRIMARY KEY,
    kind           INTEGER NOT NULL,
    namespace      TEXT NOT NULL,
    session        TEXT,
    turn           INTEGER,
    role           TEXT,
    speaker        TEXT,
    text           TEXT,
    event_utc_us   INTEGER,
    event_offset_s INTEGER,
    ingest_utc_us  INTEGER NOT NULL,
    meta           TEXT,
    target_record  INTEGER,
    erased_seqs    BLOB,
    erased_by      INTEGER,
    content_digest BLOB,
    digest         BLOB NOT NULL,
    chain          BLOB NOT NULL,
    salt           BLOB,
    number         INTEGER,
    UNIQUE (namespace, session, turn)
);
CREATE UNIQUE INDEX records_number ON records (namespace, number);
";

/// What a version-1 ledger gains on migration: the column added last, so that a migrated and a
/// new ledger have the same columns in the same order.
pub(crate) const ADD_SALT_COLUMN: &str = "ALTER TABLE records ADD COLUMN salt BLOB";

/// What a version-2 ledger gains on migration: each record's number in its namespace (the id
/// every tenant-facing answer uses), filled in ledger order, then unique per namespace.
pub(crate) const ADD_NUMBER_COLUMN: &str = "ALTER TABLE records ADD COLUMN number INTEGER";
pub(crate) const FILL_NUMBERS: &str = "UPDATE records SET number = (SELECT n FROM \
     (SELECT seq AS s, row_number() OVER (PARTITION BY namespace ORDER BY seq) AS n FROM records) \
     WHERE s = records.seq); \
     CREATE UNIQUE INDEX records_number ON records (namespace, number);";

/// The columns every record query selects, in [`RawRecord::from_row`] order.
pub(crate) const RECORD_COLUMNS: &str = "seq, kind, namespace, session, turn, role, speaker, \
     text, event_utc_us, event_offset_s, ingest_utc_us, meta, target_record, erased_seqs, \
     erased_by, content_digest, digest, chain, salt, number";

/// The index of the first column after [`RECORD_COLUMNS`] (where [`PREV_CHAIN`] goes).
pub(crate) const AFTER_RECORD_COLUMNS: usize = 20;

/// The next record number of `namespace`: numbers count the namespace's own records only, so
/// no tenant learns from its ids how much others write.
pub(crate) fn next_number(conn: &Connection, namespace: &str) -> rusqlite::Result<TurnId> {
    let last: Option<i64> =
        conn.query_row("SELECT max(number) FROM records WHERE namespace = ?1", [namespace], |r| {
            r.get(0)
        })?;
    Ok(TurnId::from_raw(last.map_or(1, |n| n as u64 + 1)))
}

/// Maps a rusqlite error to a [`StorageError`] naming the ledger file.
pub(crate) fn sql_err(path: &Path) -> impl Fn(rusqlite::Error) -> StorageError + '_ {
    move |source| StorageError::Sqlite { path: path.to_owned(), source }
}

/// Per-connection settings: durability, erasure hygiene and lock waiting.
pub(crate) fn configure(conn: &Connection, path: &Path) -> Result<(), StorageError> {
    conn.busy_timeout(std::time::Duration::from_secs(30)).map_err(sql_err(path))?;
    conn.execute_batch(
        "PRAGMA synchronous = FULL;
         PRAGMA secure_delete = ON;
         PRAGMA cell_size_check = ON;
         PRAGMA trusted_schema = OFF;",
    )
    .map_err(sql_err(path))
}

/// The head as recorded in the metadata table.
#[derive(Debug, Clone)]
pub(crate) struct MetaHead {
    pub format_version: Option<String>,
    pub head_seq: Option<String>,
    pub chain_head: Option<String>,
}

pub(crate) fn read_meta(conn: &Connection) -> rusqlite::Result<MetaHead> {
    let get = |key: &str| -> rusqlite::Result<Option<String>> {
        conn.query_row("SELECT value FROM ledger_meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
    };
    Ok(MetaHead {
        format_version: get("format_version")?,
        head_seq: get("head_seq")?,
        chain_head: get("chain_head")?,
    })
}

/// The head parsed: the last record and its chain hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    pub last: Option<TurnId>,
    pub chain: ChainHash,
}

impl MetaHead {
    pub(crate) fn parse(&self) -> Result<Head, String> {
        let seq_text = self.head_seq.as_deref().ok_or("metadata lacks head_seq")?;
        let seq: u64 = seq_text
            .parse()
            .map_err(|_| format!("metadata head_seq {seq_text:?} is not a number"))?;
        let chain_text = self.chain_head.as_deref().ok_or("metadata lacks chain_head")?;
        let chain = ChainHash::from_hex(chain_text)
            .ok_or_else(|| format!("metadata chain_head {chain_text:?} is not 64 hex digits"))?;
        Ok(Head { last: (seq > 0).then(|| TurnId::from_raw(seq)), chain })
    }
}

pub(crate) fn write_head(conn: &Connection, head: Head) -> rusqlite::Result<()> {
    let seq = head.last.map_or(0, TurnId::raw).to_string();
    conn.execute("UPDATE ledger_meta SET value = ?1 WHERE key = 'head_seq'", [seq])?;
    conn.execute(
        "UPDATE ledger_meta SET value = ?1 WHERE key = 'chain_head'",
        [head.chain.to_hex()],
    )?;
    Ok(())
}

/// The `ledger_meta` key set in the transaction of an erasure and removed once its scrub has
/// finished: while present, old bytes of erased records may still be in the files (a crash came
/// between the commit and the end of the scrub), and the next read-write open scrubs.
pub(crate) const SCRUB_PENDING: &str = "scrub_pending";

/// Records that the erasure committing in `conn`'s transaction (redaction `seq`) has not been
/// scrubbed yet.
pub(crate) fn mark_scrub_pending(conn: &Connection, seq: u64) -> rusqlite::Result<()> {
    conn.execute(
        "INSERT OR REPLACE INTO ledger_meta (key, value) VALUES (?1, ?2)",
        [SCRUB_PENDING, &seq.to_string()],
    )?;
    Ok(())
}

/// The redaction whose scrub an interrupted erasure left unfinished, if any.
pub(crate) fn scrub_pending(conn: &Connection) -> rusqlite::Result<Option<String>> {
    conn.query_row("SELECT value FROM ledger_meta WHERE key = ?1", [SCRUB_PENDING], |r| r.get(0))
        .optional()
}

pub(crate) fn clear_scrub_pending(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute("DELETE FROM ledger_meta WHERE key = ?1", [SCRUB_PENDING])?;
    Ok(())
}

/// The last record's sequence number and chain hash, straight from the records table.
pub(crate) fn last_record(conn: &Connection) -> rusqlite::Result<Option<(i64, Vec<u8>)>> {
    // Cached: every compile asks for the head (is the namespace's index current?).
    conn.prepare_cached("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1")?
        .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// A record row as stored, before any interpretation. Every column is read loosely so that a
/// row edited behind the ledger's back decodes into a [`Corrupt`] naming it, not a panic.
#[derive(Debug, Clone)]
pub(crate) struct RawRecord {
    pub seq: i64,
    pub kind: Option<i64>,
    pub namespace: Option<String>,
    pub session: Option<String>,
    pub turn: Option<i64>,
    pub role: Option<String>,
    pub speaker: Option<String>,
    pub text: Option<String>,
    pub event_utc_us: Option<i64>,
    pub event_offset_s: Option<i64>,
    pub ingest_utc_us: Option<i64>,
    pub meta: Option<String>,
    pub target_record: Option<i64>,
    pub erased_seqs: Option<Vec<u8>>,
    pub erased_by: Option<i64>,
    pub content_digest: Option<Vec<u8>>,
    pub digest: Option<Vec<u8>>,
    pub chain: Option<Vec<u8>>,
    pub salt: Option<Vec<u8>>,
    /// The record's number in its namespace (NULL only while a version-2 ledger migrates).
    pub number: Option<i64>,
    /// Columns whose stored type was not the expected one.
    pub type_errors: Vec<&'static str>,
}

/// A record that cannot be interpreted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Corrupt {
    pub turn_id: TurnId,
    pub detail: String,
}

impl RawRecord {
    pub(crate) fn from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRecord> {
        let mut type_errors = Vec::new();
        let mut int = |idx: usize, name: &'static str| -> rusqlite::Result<Option<i64>> {
            Ok(match row.get_ref(idx)? {
                ValueRef::Null => None,
                ValueRef::Integer(v) => Some(v),
                _ => {
                    type_errors.push(name);
                    None
                }
            })
        };
        let seq = int(0, "seq")?.unwrap_or(0);
        let kind = int(1, "kind")?;
        let turn = int(4, "turn")?;
        let event_utc_us = int(8, "event_utc_us")?;
        let event_offset_s = int(9, "event_offset_s")?;
        let ingest_utc_us = int(10, "ingest_utc_us")?;
        let target_record = int(12, "target_record")?;
        let erased_by = int(14, "erased_by")?;
        let number = int(19, "number")?;
        let mut text = |idx: usize, name: &'static str| -> rusqlite::Result<Option<String>> {
            Ok(match row.get_ref(idx)? {
                ValueRef::Null => None,
                ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
                    Ok(s) => Some(s.to_owned()),
                    Err(_) => {
                        type_errors.push(name);
                        None
                    }
                },
                _ => {
                    type_errors.push(name);
                    None
                }
            })
        };
        let namespace = text(2, "namespace")?;
        let session = text(3, "session")?;
        let role = text(5, "role")?;
        let speaker = text(6, "speaker")?;
        let text_col = text(7, "text")?;
        let meta = text(11, "meta")?;
        let mut blob = |idx: usize, name: &'static str| -> rusqlite::Result<Option<Vec<u8>>> {
            Ok(match row.get_ref(idx)? {
                ValueRef::Null => None,
                ValueRef::Blob(bytes) => Some(bytes.to_vec()),
                _ => {
                    type_errors.push(name);
                    None
                }
            })
        };
        let erased_seqs = blob(13, "erased_seqs")?;
        let content_digest = blob(15, "content_digest")?;
        let digest = blob(16, "digest")?;
        let chain = blob(17, "chain")?;
        let salt = blob(18, "salt")?;
        Ok(RawRecord {
            seq,
            kind,
            namespace,
            session,
            turn,
            role,
            speaker,
            text: text_col,
            event_utc_us,
            event_offset_s,
            ingest_utc_us,
            meta,
            target_record,
            erased_seqs,
            erased_by,
            content_digest,
            digest,
            chain,
            salt,
            number,
            type_errors,
        })
    }

    /// The record's ledger sequence number (its position in the chain; internal to the ledger).
    pub(crate) fn id(&self) -> TurnId {
        TurnId::from_raw(u64::try_from(self.seq).unwrap_or(0))
    }

    /// The record's number in its namespace: the id callers see.
    pub(crate) fn number(&self) -> Result<TurnId, Corrupt> {
        match self.number {
            Some(n) if n > 0 => Ok(TurnId::from_raw(n as u64)),
            Some(n) => Err(self.corrupt(format!("record number {n} is not positive"))),
            None => Err(self.corrupt("column number is missing")),
        }
    }

    fn corrupt(&self, detail: impl Into<String>) -> Corrupt {
        Corrupt { turn_id: self.id(), detail: detail.into() }
    }

    fn require<'a, T>(&self, value: &'a Option<T>, column: &str) -> Result<&'a T, Corrupt> {
        value.as_ref().ok_or_else(|| self.corrupt(format!("column {column} is missing")))
    }

    /// Decodes the row of a ledger of `format`; every structural problem is a [`Corrupt`]
    /// naming the column.
    pub(crate) fn decode(&self, format: Format) -> Result<StoredRecord, Corrupt> {
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
        let live_turn = self.kind == Some(KIND_TURN) && self.erased_by.is_none();
        match (format, live_turn, &self.salt) {
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
            other => return Err(self.corrupt(format!("unknown record kind {other:?}"))),
        };
        Ok(StoredRecord { id: self.id(), ingest_utc_micros, digest, chain, body })
    }

    fn hash32(&self, value: &Option<Vec<u8>>, column: &str) -> Result<[u8; 32], Corrupt> {
        let bytes = self.require(value, column)?;
        <[u8; 32]>::try_from(bytes.as_slice())
            .map_err(|_| self.corrupt(format!("column {column} is {} bytes, not 32", bytes.len())))
    }

    fn decode_turn(&self, namespace: Namespace) -> Result<StoredBody, Corrupt> {
        let session = SessionId::new(self.require(&self.session, "session")?)
            .map_err(|e| self.corrupt(format!("column session: {e}")))?;
        let turn_raw = *self.require(&self.turn, "turn")?;
        let turn = u32::try_from(turn_raw)
            .map(TurnIndex::new)
            .map_err(|_| self.corrupt(format!("column turn {turn_raw} is out of range")))?;
        let role: Role = self
            .require(&self.role, "role")?
            .parse()
            .map_err(|e| self.corrupt(format!("column role: {e}")))?;
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
                .filter(|&b| b > self.id().raw())
                .map(TurnId::from_raw)
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

    /// Recomputes a turn record's digest in `format` from its columns exactly as stored: for a
    /// live turn from its salt and content, for an erased one from the content digest it kept.
    pub(crate) fn recompute_turn_digest(&self, format: Format) -> Result<EvidenceDigest, Corrupt> {
        let content = match self.erased_by {
            None => {
                let salt = match format {
                    Format::V1 => None,
                    Format::V2 => Some(ContentSalt::from_bytes(self.hash32(&self.salt, "salt")?)),
                };
                content_digest(
                    format,
                    salt.as_ref(),
                    self.speaker.as_deref(),
                    self.require(&self.text, "text")?,
                    self.require(&self.meta, "meta")?,
                )
            }
            Some(_) => self.hash32(&self.content_digest, "content_digest")?,
        };
        let role: Role = self
            .require(&self.role, "role")?
            .parse()
            .map_err(|e| self.corrupt(format!("column role: {e}")))?;
        let turn = *self.require(&self.turn, "turn")?;
        let offset = *self.require(&self.event_offset_s, "event_offset_s")?;
        Ok(turn_digest_parts(
            format,
            &TurnParts {
                namespace: self.require(&self.namespace, "namespace")?,
                session: self.require(&self.session, "session")?,
                turn: u32::try_from(turn)
                    .map_err(|_| self.corrupt("column turn is out of range"))?,
                role,
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
    /// a read serves or an append builds on is what the chain committed to.
    pub(crate) fn check_turn(
        &self,
        record: &StoredRecord,
        prev_chain: Option<&[u8]>,
    ) -> Result<(), Corrupt> {
        let digest = self.recompute_turn_digest(Format::V2)?;
        self.check_digest_and_link(record, &digest, prev_chain)
    }

    fn check_digest_and_link(
        &self,
        record: &StoredRecord,
        digest: &EvidenceDigest,
        prev_chain: Option<&[u8]>,
    ) -> Result<(), Corrupt> {
        if *digest != record.digest {
            return Err(self.corrupt("digest mismatch: the record's content was altered"));
        }
        let prev = match prev_chain {
            None if record.id.raw() == 1 => ChainHash::GENESIS,
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

/// The chain hash of the record before each selected one (column [`AFTER_RECORD_COLUMNS`] after
/// [`RECORD_COLUMNS`]); NULL for the first record.
pub(crate) const PREV_CHAIN: &str =
    "(SELECT p.chain FROM records AS p WHERE p.seq = records.seq - 1)";

/// Reads the [`PREV_CHAIN`] column at `idx`; a value of the wrong type comes back as an empty
/// blob, which the check reports as corruption.
pub(crate) fn prev_chain_at(
    row: &rusqlite::Row<'_>,
    idx: usize,
) -> rusqlite::Result<Option<Vec<u8>>> {
    Ok(match row.get_ref(idx)? {
        ValueRef::Null => None,
        ValueRef::Blob(bytes) => Some(bytes.to_vec()),
        _ => Some(Vec::new()),
    })
}

/// Checks the record that an append or an erasure builds on: the last one must be the head the
/// metadata records, match its digest and link to the record before it. `Ok(Err(_))` names
/// what is wrong.
pub(crate) fn check_last_record(
    conn: &Connection,
    head: &Head,
) -> rusqlite::Result<Result<(), Corrupt>> {
    let last = conn
        .query_row(
            &format!(
                "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records ORDER BY seq DESC LIMIT 1"
            ),
            [],
            |r| Ok((RawRecord::from_row(r)?, prev_chain_at(r, AFTER_RECORD_COLUMNS)?)),
        )
        .optional()?;
    let (raw, prev) = match (head.last, last) {
        (None, None) => return Ok(Ok(())),
        (Some(_), Some(found)) => found,
        (None, Some((raw, _))) => {
            return Ok(Err(raw.corrupt("metadata says the ledger is empty, but it holds records")));
        }
        (Some(id), None) => {
            return Ok(Err(Corrupt {
                turn_id: id,
                detail: "metadata names this record as the head, but there are no records"
                    .to_owned(),
            }));
        }
    };
    if Some(raw.id()) != head.last {
        return Ok(Err(raw.corrupt(format!(
            "metadata says the head is record {}, the last record is this one",
            head.last.map_or(0, TurnId::raw)
        ))));
    }
    let record = match raw.decode(Format::V2) {
        Ok(record) => record,
        Err(c) => return Ok(Err(c)),
    };
    let digest = match &record.body {
        StoredBody::Turn(_) | StoredBody::ErasedTurn { .. } => {
            match raw.recompute_turn_digest(Format::V2) {
                Ok(d) => d,
                Err(c) => return Ok(Err(c)),
            }
        }
        StoredBody::Redaction { target, erased } => {
            let mut listed = Vec::with_capacity(erased.len());
            for id in erased {
                let digest: Option<Vec<u8>> = conn
                    .query_row(
                        "SELECT digest FROM records WHERE seq = ?1 AND erased_by = ?2",
                        [id.raw() as i64, raw.seq],
                        |r| r.get(0),
                    )
                    .optional()?;
                match digest.and_then(|d| <[u8; 32]>::try_from(d.as_slice()).ok()) {
                    Some(d) => listed.push((*id, EvidenceDigest::from_bytes(d))),
                    None => {
                        return Ok(Err(raw.corrupt(format!(
                            "lists {id} as erased, but that record is not a turn it erased"
                        ))));
                    }
                }
            }
            crate::record::redaction_digest_in(
                Format::V2,
                target,
                record.ingest_utc_micros,
                &listed,
            )
        }
    };
    if let Err(c) = raw.check_digest_and_link(&record, &digest, prev.as_deref()) {
        return Ok(Err(c));
    }
    if record.chain != head.chain {
        return Ok(Err(raw.corrupt("its chain hash does not match the recorded chain head")));
    }
    Ok(Ok(()))
}

/// A decoded record.
#[derive(Debug, Clone)]
pub(crate) struct StoredRecord {
    pub id: TurnId,
    pub ingest_utc_micros: i64,
    pub digest: EvidenceDigest,
    pub chain: ChainHash,
    pub body: StoredBody,
}

#[derive(Debug, Clone)]
pub(crate) enum StoredBody {
    Turn(Turn),
    ErasedTurn { erased_by: TurnId },
    Redaction { target: EraseTarget, erased: Vec<TurnId> },
}
