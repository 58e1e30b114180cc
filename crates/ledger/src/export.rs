//! A read-only export of every stored record, as stored, for copying the ledger into another
//! store (`evicortex-postgres`) that keeps the same records, digests and chain.

use evicortex_core::{EvidenceDigest, Namespace, Role, SessionId, TurnId, TurnIndex};

use crate::{
    ChainHash, ContentSalt, Ledger, LedgerPosition, VerifyError, VerifyReport,
    record::Format,
    row::{KIND_TURN, RawRecord, StoredBody, StoredRecord},
    store::sql_err,
    verify::verify_visiting,
};

/// Whether a stored record is a turn (live or erased) or a redaction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StoredRecordKind {
    /// A conversation turn (`records.kind` 1); erased when `erased_by` is set.
    Turn,
    /// The record of an erasure (`records.kind` 2).
    Redaction,
}

/// One row of the `records` table exactly as stored (`docs/ledger-format.md`), after its digest
/// and chain link were checked: what another store must keep for the same record to carry the
/// same digest and chain hash. Columns a kind does not use are `None`; an erased turn has no
/// speaker, text, meta or salt, only the content digest it kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRecordExport {
    /// The record's position in the chain (`seq`).
    pub position: LedgerPosition,
    /// The record's number in its namespace (`number`): the id callers see.
    pub number: TurnId,
    /// Turn or redaction (`kind`).
    pub kind: StoredRecordKind,
    /// A turn's namespace, or the namespace a redaction targets.
    pub namespace: Namespace,
    /// A turn's session, or the session a redaction targets.
    pub session: Option<SessionId>,
    /// A turn's index in its session.
    pub turn: Option<TurnIndex>,
    /// A turn's role.
    pub role: Option<Role>,
    /// A live turn's speaker, if it names one.
    pub speaker: Option<String>,
    /// A live turn's verbatim text.
    pub text: Option<String>,
    /// A turn's event time, microseconds since the Unix epoch, UTC (`event_utc_us`).
    pub event_utc_micros: Option<i64>,
    /// A turn's original UTC offset, seconds east (`event_offset_s`).
    pub event_offset_seconds: Option<i32>,
    /// When the record was appended, microseconds since the Unix epoch, UTC (`ingest_utc_us`).
    pub ingest_utc_micros: i64,
    /// A live turn's meta, the canonical JSON text byte for byte as stored (the content digest
    /// covers these bytes, so it is never parsed and printed again).
    pub meta_json: Option<String>,
    /// The position of the record a redaction of one record targets (`target_record`).
    pub target_record: Option<LedgerPosition>,
    /// The positions a redaction erased, in stored order (`erased_seqs`); `None` for a turn.
    pub erased: Option<Vec<LedgerPosition>>,
    /// The position of the redaction that erased this turn (`erased_by`).
    pub erased_by: Option<LedgerPosition>,
    /// The salted content digest an erased turn kept (`content_digest`).
    pub content_digest: Option<[u8; 32]>,
    /// A live turn's content salt (`salt`); erased with the text.
    pub salt: Option<ContentSalt>,
    /// The record's digest (`digest`).
    pub digest: EvidenceDigest,
    /// The record's chain hash (`chain`).
    pub chain: ChainHash,
}

impl Ledger {
    /// Calls `f` with every stored record, in position order, from one snapshot, and returns
    /// what [`crate::EvidenceLedger::verify`] reports for that snapshot. Writes nothing (an
    /// inspected ledger will do).
    ///
    /// This is the verify walking the ledger: `f` sees a record only after its digest and its
    /// chain link were checked, and a record that fails is a [`VerifyError::BadRecord`] naming
    /// it, never exported. Checks spanning records (a redaction against the turns it erased,
    /// the recorded head) can fail only after `f` saw the records involved: when this returns
    /// an error, discard everything `f` was given (a copy into another store is one
    /// transaction, rolled back).
    pub fn for_each_stored_record<E: From<VerifyError>>(
        &self,
        mut f: impl FnMut(StoredRecordExport) -> Result<(), E>,
    ) -> Result<VerifyReport, E> {
        let mut conn = self.reader().map_err(|e| E::from(VerifyError::from(e)))?;
        let tx =
            conn.transaction().map_err(|e| E::from(VerifyError::from(sql_err(self.path())(e))))?;
        verify_visiting(&tx, self.path(), Format::V2, &mut |_, _| {}, &mut |raw, record| {
            let exported = export(raw, record).map_err(|detail| {
                E::from(VerifyError::BadRecord { position: raw.position(), detail })
            })?;
            f(exported)
        })
    }
}

/// The columns of a record that decoded and matched its digest and chain link.
fn export(raw: &RawRecord, record: &StoredRecord) -> Result<StoredRecordExport, String> {
    let number = raw.number().map_err(|c| c.detail)?;
    let position = |seq: i64, column: &str| {
        u64::try_from(seq)
            .map(LedgerPosition::from_raw)
            .map_err(|_| format!("column {column} {seq} is negative"))
    };
    let hash32 = |bytes: &Option<Vec<u8>>, column: &str| -> Result<Option<[u8; 32]>, String> {
        bytes
            .as_deref()
            .map(|b| {
                <[u8; 32]>::try_from(b).map_err(|_| format!("column {column} is not 32 bytes"))
            })
            .transpose()
    };
    let (kind, namespace, erased) = match &record.body {
        StoredBody::Turn(turn) => (StoredRecordKind::Turn, turn.namespace.clone(), None),
        StoredBody::ErasedTurn { .. } => (StoredRecordKind::Turn, namespace_of(raw)?, None),
        StoredBody::Redaction { target, erased } => (
            StoredRecordKind::Redaction,
            target.namespace().clone(),
            Some(erased.iter().map(|id| LedgerPosition::from_raw(id.raw())).collect()),
        ),
    };
    let is_turn = raw.kind == Some(KIND_TURN);
    Ok(StoredRecordExport {
        position: record.position,
        number,
        kind,
        namespace,
        session: raw
            .session
            .as_deref()
            .map(SessionId::new)
            .transpose()
            .map_err(|e| format!("column session: {e}"))?,
        turn: raw
            .turn
            .map(|t| u32::try_from(t).map(TurnIndex::new))
            .transpose()
            .map_err(|_| "column turn is out of range".to_owned())?,
        role: if is_turn {
            raw.role
                .as_deref()
                .map(str::parse::<Role>)
                .transpose()
                .map_err(|e| format!("column role: {e}"))?
        } else {
            None
        },
        speaker: raw.speaker.clone(),
        text: raw.text.clone(),
        event_utc_micros: raw.event_utc_us,
        event_offset_seconds: raw
            .event_offset_s
            .map(i32::try_from)
            .transpose()
            .map_err(|_| "column event_offset_s is out of range".to_owned())?,
        ingest_utc_micros: record.ingest_utc_micros,
        meta_json: raw.meta.clone(),
        target_record: raw.target_record.map(|t| position(t, "target_record")).transpose()?,
        erased,
        erased_by: raw.erased_by.map(|b| position(b, "erased_by")).transpose()?,
        content_digest: hash32(&raw.content_digest, "content_digest")?,
        salt: hash32(&raw.salt, "salt")?.map(ContentSalt::from_bytes),
        digest: record.digest,
        chain: record.chain,
    })
}

fn namespace_of(raw: &RawRecord) -> Result<Namespace, String> {
    Namespace::new(raw.namespace.as_deref().unwrap_or_default())
        .map_err(|e| format!("column namespace: {e}"))
}
