//! A `records` row read into the ledger crate's [`RawRecord`], which decodes and checks it.

use evicortex_ledger::storage::{ChainedRow, RawRecord};

/// The columns every record query selects, in [`RawRecord`]'s field order.
pub(crate) const RECORD_COLUMNS: &str = "seq, kind, namespace, session, turn, role, speaker, \
     text, event_utc_us, event_offset_s, ingest_utc_us, meta::text, target_record, erased_seqs, \
     erased_by, content_digest, digest, chain, salt, number";

/// The chain hash of the record before each selected one, selected after [`RECORD_COLUMNS`]
/// (column [`PREV_CHAIN_COLUMN`]); NULL for the first record.
pub(crate) const PREV_CHAIN: &str =
    "(SELECT p.chain FROM records AS p WHERE p.seq = records.seq - 1)";

/// The index of [`PREV_CHAIN`] in a row.
pub(crate) const PREV_CHAIN_COLUMN: usize = 20;

/// A row selected with [`RECORD_COLUMNS`]. PostgreSQL enforces the column types, so every
/// column the schema requires is present; the rest (lengths, ranges, which columns a kind may
/// hold) is the ledger crate's check.
pub(crate) fn raw_record(row: &postgres::Row) -> Result<RawRecord, postgres::Error> {
    Ok(RawRecord {
        seq: row.try_get(0)?,
        kind: Some(i64::from(row.try_get::<_, i16>(1)?)),
        namespace: Some(row.try_get(2)?),
        session: row.try_get(3)?,
        turn: row.try_get(4)?,
        role: row.try_get(5)?,
        speaker: row.try_get(6)?,
        text: row.try_get(7)?,
        event_utc_us: row.try_get(8)?,
        event_offset_s: row.try_get::<_, Option<i32>>(9)?.map(i64::from),
        ingest_utc_us: Some(row.try_get(10)?),
        meta: row.try_get(11)?,
        target_record: row.try_get(12)?,
        erased_seqs: row.try_get(13)?,
        erased_by: row.try_get(14)?,
        content_digest: row.try_get(15)?,
        digest: Some(row.try_get(16)?),
        chain: Some(row.try_get(17)?),
        salt: row.try_get(18)?,
        number: Some(row.try_get(19)?),
        type_errors: Vec::new(),
    })
}

/// A row selected with [`RECORD_COLUMNS`] and [`PREV_CHAIN`].
pub(crate) fn chained_row(row: &postgres::Row) -> Result<ChainedRow, postgres::Error> {
    Ok(ChainedRow { raw: raw_record(row)?, prev_chain: row.try_get(PREV_CHAIN_COLUMN)? })
}
