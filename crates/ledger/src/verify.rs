//! The full integrity check: every digest, the whole chain, every redaction, the head.

use std::{
    collections::{BTreeMap, HashMap},
    path::Path,
};

use evicortex_core::{EvidenceDigest, TurnId};
use rusqlite::Connection;

use crate::{
    ChainHash, Ledger, LedgerPosition, VerifyError,
    record::{Format, redaction_digest_in},
    store::{self, RECORD_COLUMNS, RawRecord, StoredBody, StoredRecord, sql_err},
};

/// What a successful [`Ledger::verify`] checked.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VerifyReport {
    /// Records checked (turns, erased turns, redactions).
    pub records: u64,
    /// Live turns.
    pub turns: u64,
    /// Erased turns (digest kept, text gone).
    pub erased_turns: u64,
    /// Redaction records.
    pub redactions: u64,
    /// The last record's position in the ledger (operators' view; tenants see record numbers).
    pub head: Option<LedgerPosition>,
    /// The chain hash of the last record.
    pub chain_head: ChainHash,
}

/// How often the progress callback is called, in records.
const PROGRESS_EVERY: u64 = 4096;

impl Ledger {
    /// Recomputes every record's digest and the whole chain, checks every redaction against the
    /// records it erased and the recorded head against the last record. Names the first bad
    /// record.
    pub fn verify(&self) -> Result<VerifyReport, VerifyError> {
        self.verify_with_progress(&mut |_, _| {})
    }

    /// [`Ledger::verify`], calling `progress(done, total)` every few thousand records.
    pub fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError> {
        let mut conn = self.reader()?;
        let tx = conn.transaction().map_err(sql_err(self.path()))?;
        verify_on(&tx, self.path(), Format::V2, progress)
    }
}

/// [`Ledger::verify`] on `conn` (inside a transaction, for one snapshot), for a ledger of
/// `format`.
pub(crate) fn verify_on(
    tx: &Connection,
    path: &Path,
    format: Format,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, VerifyError> {
    verify_visiting(tx, path, format, progress, &mut |_, _| Ok::<(), VerifyError>(()))
}

/// [`verify_on`], calling `visit` with each record, in ledger order, once its digest and its
/// chain link are checked. The checks that span records (a redaction against the turns it
/// erased, the head) end later: a caller keeping what it was shown must discard it if this
/// fails.
pub(crate) fn verify_visiting<E: From<VerifyError>>(
    tx: &Connection,
    path: &Path,
    format: Format,
    progress: &mut dyn FnMut(u64, u64),
    visit: &mut dyn FnMut(&RawRecord, &StoredRecord) -> Result<(), E>,
) -> Result<VerifyReport, E> {
    let sql = |e| VerifyError::from(sql_err(path)(e));
    let tables: i64 = tx
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' \
                 AND name IN ('ledger_meta', 'records')",
            [],
            |r| r.get(0),
        )
        .map_err(&sql)?;
    if tables != 2 {
        return Err(VerifyError::BadHead {
            detail: "the ledger_meta or records table is missing".to_owned(),
        }
        .into());
    }
    let meta = store::read_meta(tx).map_err(&sql)?;
    let recorded = meta.parse().map_err(|detail| VerifyError::BadHead { detail })?;
    let total: i64 =
        tx.query_row("SELECT count(*) FROM records", [], |r| r.get(0)).map_err(&sql)?;
    let total = total as u64;

    let mut stmt =
        tx.prepare(&format!("SELECT {RECORD_COLUMNS} FROM records ORDER BY seq")).map_err(&sql)?;
    let mut rows = stmt.query([]).map_err(&sql)?;
    let mut report = VerifyReport {
        records: 0,
        turns: 0,
        erased_turns: 0,
        redactions: 0,
        head: None,
        chain_head: ChainHash::GENESIS,
    };
    // Erased records waiting for the redaction that names them: redaction seq -> records.
    let mut pending: HashMap<TurnId, BTreeMap<TurnId, EvidenceDigest>> = HashMap::new();
    let mut expected = TurnId::from_raw(1);
    let mut last: Option<TurnId> = None;
    // Record numbers count each namespace's records from 1, in ledger order; a version-1
    // ledger has none yet.
    let mut last_numbers: HashMap<String, i64> = HashMap::new();
    while let Some(row) = rows.next().map_err(&sql)? {
        let raw = RawRecord::from_row(row).map_err(&sql)?;
        let id = raw.id();
        let bad = |detail: String| VerifyError::BadRecord { turn_id: id, detail };
        if id != expected {
            return Err(if id > expected {
                VerifyError::BadRecord {
                    turn_id: expected,
                    detail: format!("record is missing (the next record is {id})"),
                }
            } else {
                bad(format!("out-of-order sequence number, expected {expected}"))
            }
            .into());
        }
        let record = raw.decode(format).map_err(|c| bad(c.detail))?;
        if format != Format::V1 {
            let namespace = raw.namespace.clone().unwrap_or_default();
            let last = last_numbers.entry(namespace).or_insert(0);
            match raw.number {
                Some(n) if n == *last + 1 => *last = n,
                found => {
                    return Err(bad(format!(
                        "record number {} where its namespace's next is {}",
                        found.map_or("(missing)".to_owned(), |n| n.to_string()),
                        *last + 1
                    ))
                    .into());
                }
            }
        }
        let digest = match &record.body {
            StoredBody::Turn(_) => {
                report.turns += 1;
                raw.recompute_turn_digest(format).map_err(|c| bad(c.detail))?
            }
            StoredBody::ErasedTurn { erased_by } => {
                report.erased_turns += 1;
                pending.entry(*erased_by).or_default().insert(id, record.digest);
                raw.recompute_turn_digest(format).map_err(|c| bad(c.detail))?
            }
            StoredBody::Redaction { target, erased } => {
                report.redactions += 1;
                let waiting = pending.remove(&id).unwrap_or_default();
                let mut listed: Vec<(TurnId, EvidenceDigest)> = Vec::with_capacity(erased.len());
                for erased_id in erased {
                    match waiting.get(erased_id) {
                        Some(d) => listed.push((*erased_id, *d)),
                        None => {
                            return Err(bad(format!(
                                "lists {erased_id} as erased, but that record is not an \
                                     earlier turn erased by this redaction"
                            ))
                            .into());
                        }
                    }
                }
                if let Some((&stray, _)) = waiting.iter().find(|(w, _)| !erased.contains(w)) {
                    return Err(VerifyError::BadRecord {
                        turn_id: stray,
                        detail: format!("marked erased by {id}, which does not list it"),
                    }
                    .into());
                }
                redaction_digest_in(format, target, record.ingest_utc_micros, &listed)
            }
        };
        if digest != record.digest {
            return Err(bad("digest mismatch: the record's content was altered".to_owned()).into());
        }
        let chain = report.chain_head.link(&digest);
        if chain != record.chain {
            return Err(bad(
                "chain hash mismatch: records were altered, reordered or lost".to_owned()
            )
            .into());
        }
        visit(&raw, &record)?;
        report.chain_head = chain;
        last = Some(id);
        report.records += 1;
        expected = id.next();
        if report.records.is_multiple_of(PROGRESS_EVERY) {
            progress(report.records, total);
        }
    }
    if let Some(stray) = pending.values().flat_map(|m| m.keys()).min() {
        return Err(VerifyError::BadRecord {
            turn_id: *stray,
            detail: "marked erased by a record that is not a redaction listing it".to_owned(),
        }
        .into());
    }
    report.head = last.map(|seq| LedgerPosition::from_raw(seq.raw()));
    if recorded.last != last || recorded.chain != report.chain_head {
        return Err(VerifyError::BadHead {
            detail: format!(
                "metadata records head {} with chain {}, the records end at {} with chain {}",
                recorded.last.map_or("(empty)".to_owned(), |h| format!("position {}", h.raw())),
                recorded.chain,
                report.head.map_or("(empty)".to_owned(), |h| h.to_string()),
                report.chain_head,
            ),
        }
        .into());
    }
    progress(report.records, total);
    Ok(report)
}
