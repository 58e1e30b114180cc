//! What differs between the stores that keep a ledger: [`RecordTable`], the records table and
//! its metadata as one transaction sees them. The logic over it (appending, erasing, checking
//! the head) is written once, in this crate, for every store.

use std::collections::HashMap;

use evicortex_core::{EvidenceDigest, Turn, TurnId};

use crate::{
    AppendError, ChainHash, EraseTarget, LedgerPosition, StorageError,
    row::{ChainedRow, Corrupt, RawRecord, StoredBody},
};

/// A turn's key: namespace, session, turn index.
pub type TurnKey<'a> = (&'a str, &'a str, u32);

/// The head a store's metadata records: the last record's position and its chain hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Head {
    /// The last record's position (`None`: the ledger is empty).
    pub last: Option<LedgerPosition>,
    /// Its chain hash ([`ChainHash::GENESIS`] for an empty ledger).
    pub chain: ChainHash,
}

impl Head {
    /// Parses the head as stored: the last position (`head_seq`, `0` for none, in decimal) and
    /// the chain hash (`chain_head`, 64 lowercase hex digits). Only the form the stores write is
    /// accepted: another spelling of the same values (`0005`, `+5`, upper case) is an edit made
    /// outside the store, and verify must not pass it. `Err` says what is missing or malformed.
    pub fn parse(seq: Option<&str>, chain: Option<&str>) -> Result<Head, String> {
        let seq_text = seq.ok_or("metadata lacks head_seq")?;
        let seq: u64 = seq_text
            .parse()
            .ok()
            .filter(|seq: &u64| seq.to_string() == seq_text)
            .ok_or_else(|| format!("metadata head_seq {seq_text:?} is not a decimal number"))?;
        let chain_text = chain.ok_or("metadata lacks chain_head")?;
        let chain = ChainHash::from_hex(chain_text)
            .filter(|chain| chain.to_hex() == chain_text)
            .ok_or_else(|| {
                format!("metadata chain_head {chain_text:?} is not 64 lowercase hex digits")
            })?;
        Ok(Head { last: (seq > 0).then(|| LedgerPosition::from_raw(seq)), chain })
    }

    /// The position the next record takes.
    pub fn next_position(&self) -> LedgerPosition {
        LedgerPosition::from_raw(self.last.map_or(1, |p| p.raw() + 1))
    }
}

/// One new turn record, all but `kind` and the batch's ingest time.
#[derive(Debug, Clone, Copy)]
pub struct NewTurn<'a> {
    /// Its position.
    pub position: LedgerPosition,
    /// Its number in its namespace.
    pub number: TurnId,
    /// The turn.
    pub turn: &'a Turn,
    /// Its meta as canonical JSON.
    pub meta: &'a str,
    /// Its digest.
    pub digest: EvidenceDigest,
    /// Its chain hash.
    pub chain: ChainHash,
    /// Its content salt.
    pub salt: [u8; 32],
}

/// A new redaction record.
#[derive(Debug, Clone)]
pub struct NewRedaction<'a> {
    /// Its position.
    pub position: LedgerPosition,
    /// Its number in the target's namespace.
    pub number: TurnId,
    /// The target's namespace.
    pub namespace: &'a str,
    /// The targeted session, if the target is one.
    pub session: Option<&'a str>,
    /// The targeted record's position, if the target is one record.
    pub target_record: Option<LedgerPosition>,
    /// When it was recorded.
    pub ingest_utc_micros: i64,
    /// The erased records' positions, each a little-endian `u64`.
    pub erased_seqs: Vec<u8>,
    /// Its digest.
    pub digest: EvidenceDigest,
    /// Its chain hash.
    pub chain: ChainHash,
}

/// The records table of a ledger and its metadata, inside one transaction of the store (a
/// write transaction that holds the store's writer lock for appends and erasures; a read
/// snapshot is enough for [`crate::storage::check_append_in`]). Every failure is the store's own
/// [`StorageError`]; what the rows mean is decided by the caller, never here.
pub trait RecordTable {
    /// Refuses what this store cannot hold of a turn the ledger accepts (`index`: its position
    /// in the batch), before any transaction starts.
    fn refuse_unstorable(index: usize, turn: &Turn) -> Result<(), AppendError> {
        let _ = (index, turn);
        Ok(())
    }

    /// The head the metadata records; `Ok(Err(_))` says what is missing or malformed.
    fn recorded_head(&mut self) -> Result<Result<Head, String>, StorageError>;

    /// Records `head` in the metadata.
    fn write_head(&mut self, head: Head) -> Result<(), StorageError>;

    /// The record with the highest position, if any.
    fn last_record(&mut self) -> Result<Option<ChainedRow>, StorageError>;

    /// The digest of the turn at `position`, if the redaction at `redaction` erased it.
    fn erased_digest(
        &mut self,
        position: LedgerPosition,
        redaction: LedgerPosition,
    ) -> Result<Option<Vec<u8>>, StorageError>;

    /// The stored turn rows (live or erased) with one of `keys`, by key.
    fn stored_turns(
        &mut self,
        keys: &[TurnKey<'_>],
    ) -> Result<HashMap<(String, String, u32), ChainedRow>, StorageError>;

    /// The number the next record of `namespace` takes.
    fn next_number(&mut self, namespace: &str) -> Result<TurnId, StorageError>;

    /// Inserts new turn records, stamped with `ingest_utc_micros`.
    fn insert_turns(
        &mut self,
        rows: &[NewTurn<'_>],
        ingest_utc_micros: i64,
    ) -> Result<(), StorageError>;

    /// Starts a savepoint inside the transaction.
    fn savepoint(&mut self) -> Result<(), StorageError>;

    /// Keeps what was written since the savepoint.
    fn release_savepoint(&mut self) -> Result<(), StorageError>;

    /// Undoes what was written since the savepoint.
    fn rollback_to_savepoint(&mut self) -> Result<(), StorageError>;

    /// The turn records (live or erased) an erasure of `target` matches, in position order; for
    /// a record target, the record with that number whatever its kind.
    fn erase_candidates(&mut self, target: &EraseTarget) -> Result<Vec<ChainedRow>, StorageError>;

    /// Inserts a redaction record.
    fn insert_redaction(&mut self, row: &NewRedaction<'_>) -> Result<(), StorageError>;

    /// Clears text, speaker, meta and salt of each erased record (its position), keeping its
    /// content digest, and marks it erased by `redaction`.
    fn clear_erased(
        &mut self,
        redaction: LedgerPosition,
        erased: &[(&RawRecord, [u8; 32])],
    ) -> Result<(), StorageError>;

    /// Records, in the erasing transaction, that the scrub of the redaction at `redaction` has
    /// not finished: the next opening of the store finishes it.
    fn mark_scrub_pending(&mut self, redaction: LedgerPosition) -> Result<(), StorageError>;
}

/// The head as the metadata records it, with the last record checked: the one every write
/// builds on. `corrupted` turns what is wrong into the caller's error.
pub(crate) fn checked_head<T: RecordTable + ?Sized, E: From<StorageError>>(
    table: &mut T,
    corrupted: impl Fn(Corrupt) -> E,
) -> Result<Head, E> {
    let head = table
        .recorded_head()?
        .map_err(|detail| corrupted(Corrupt { position: LedgerPosition::from_raw(0), detail }))?;
    check_last_record(table, &head)?.map_err(corrupted)?;
    Ok(head)
}

/// Checks the record that an append or an erasure builds on: the last one must be the head the
/// metadata records, match its digest and link to the record before it. `Ok(Err(_))` names
/// what is wrong.
pub fn check_last_record<T: RecordTable + ?Sized>(
    table: &mut T,
    head: &Head,
) -> Result<Result<(), Corrupt>, StorageError> {
    let ChainedRow { raw, prev_chain } = match (head.last, table.last_record()?) {
        (None, None) => return Ok(Ok(())),
        (Some(_), Some(found)) => found,
        (None, Some(found)) => {
            return Ok(Err(found
                .raw
                .corrupt("metadata says the ledger is empty, but it holds records")));
        }
        (Some(position), None) => {
            return Ok(Err(Corrupt {
                position,
                detail: "metadata names this record as the head, but there are no records"
                    .to_owned(),
            }));
        }
    };
    if Some(raw.position()) != head.last {
        return Ok(Err(raw.corrupt(format!(
            "metadata says the head is record #{}, the last record is this one",
            head.last.map_or(0, LedgerPosition::raw)
        ))));
    }
    let record = match raw.decode() {
        Ok(record) => record,
        Err(c) => return Ok(Err(c)),
    };
    let digest = match &record.body {
        StoredBody::Turn(_) | StoredBody::ErasedTurn { .. } => match raw.recompute_turn_digest() {
            Ok(d) => d,
            Err(c) => return Ok(Err(c)),
        },
        StoredBody::Redaction { target, erased } => {
            let mut listed = Vec::with_capacity(erased.len());
            for id in erased {
                let digest =
                    table.erased_digest(LedgerPosition::from_raw(id.raw()), raw.position())?;
                match digest.and_then(|d| <[u8; 32]>::try_from(d.as_slice()).ok()) {
                    Some(d) => listed.push((*id, EvidenceDigest::from_bytes(d))),
                    None => {
                        return Ok(Err(raw.corrupt(format!(
                            "lists {id} as erased, but that record is not a turn it erased"
                        ))));
                    }
                }
            }
            crate::redaction_digest(target, record.ingest_utc_micros, &listed)
        }
    };
    if let Err(c) = raw.check_digest_and_link(&record, &digest, prev_chain.as_deref()) {
        return Ok(Err(c));
    }
    if record.chain != head.chain {
        return Ok(Err(raw.corrupt("its chain hash does not match the recorded chain head")));
    }
    Ok(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_head_is_read_only_as_the_stores_write_it() {
        let chain = ChainHash::from_hex(&"ab".repeat(32)).unwrap();
        let head = Head::parse(Some("5"), Some(&chain.to_hex())).unwrap();
        assert_eq!(head, Head { last: Some(LedgerPosition::from_raw(5)), chain });
        assert_eq!(Head::parse(Some("0"), Some(&chain.to_hex())).unwrap().last, None);
        for seq in ["0005", "+5", " 5", "5 ", "00"] {
            let refused = Head::parse(Some(seq), Some(&chain.to_hex())).unwrap_err();
            assert!(refused.contains("head_seq"), "{seq:?}: {refused}");
        }
        let upper = chain.to_hex().to_uppercase();
        assert!(Head::parse(Some("5"), Some(&upper)).unwrap_err().contains("chain_head"));
    }
}
