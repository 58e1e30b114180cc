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
    row::{RawRecord, StoredBody, StoredRecord},
    store::{self, RECORD_COLUMNS, sql_err},
    table::Head,
};

/// What a successful verify checked.
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

/// [`crate::EvidenceLedger::verify_with_progress`] on the embedded ledger, on a reader's
/// snapshot.
pub(crate) fn verify_with_progress(
    ledger: &Ledger,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, VerifyError> {
    let mut conn = ledger.reader()?;
    let tx = conn.transaction().map_err(sql_err(ledger.path()))?;
    verify_on(&tx, ledger.path(), Format::V2, progress)
}

/// The verify of the ledger at `path` on `conn` (inside a transaction, for one snapshot), for a ledger of
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
    let mut check = ChainCheck::in_format(format);
    while let Some(row) = rows.next().map_err(&sql)? {
        let raw = store::raw_record(row).map_err(&sql)?;
        let record = check.next(&raw)?;
        visit(&raw, &record)?;
        if check.records().is_multiple_of(PROGRESS_EVERY) {
            progress(check.records(), total);
        }
    }
    let report = check.finish(&recorded)?;
    progress(report.records, total);
    Ok(report)
}

/// The check of a whole ledger, fed its records in position order by any store: every record
/// decoded and its digest recomputed, the chain followed, positions running 1..n without gaps
/// and each namespace's numbers 1..k, every redaction against the turns it erased, and at the
/// end the recorded head against the last record. Names the first bad record.
#[derive(Debug)]
pub struct ChainCheck {
    format: Format,
    report: VerifyReport,
    /// Erased records waiting for the redaction that names them: redaction -> records.
    pending: HashMap<LedgerPosition, BTreeMap<TurnId, EvidenceDigest>>,
    /// The last number of each namespace (a version-1 ledger has none yet).
    last_numbers: HashMap<String, i64>,
}

impl Default for ChainCheck {
    fn default() -> ChainCheck {
        ChainCheck::in_format(Format::V2)
    }
}

impl ChainCheck {
    pub(crate) fn in_format(format: Format) -> ChainCheck {
        ChainCheck {
            format,
            report: VerifyReport {
                records: 0,
                turns: 0,
                erased_turns: 0,
                redactions: 0,
                head: None,
                chain_head: ChainHash::GENESIS,
            },
            pending: HashMap::new(),
            last_numbers: HashMap::new(),
        }
    }

    /// Records checked so far.
    pub fn records(&self) -> u64 {
        self.report.records
    }

    /// Checks the next record; returns it decoded.
    pub fn next(&mut self, raw: &RawRecord) -> Result<StoredRecord, VerifyError> {
        let position = raw.position();
        let bad = |detail: String| VerifyError::BadRecord { position, detail };
        let expected = LedgerPosition::from_raw(self.report.records + 1);
        if position != expected {
            return Err(if position > expected {
                VerifyError::BadRecord {
                    position: expected,
                    detail: format!("record is missing (the next record is #{})", position.raw()),
                }
            } else {
                bad(format!("out-of-order sequence number, expected #{}", expected.raw()))
            });
        }
        let record = raw.decode_in(self.format).map_err(|c| bad(c.detail))?;
        if self.format != Format::V1 {
            let namespace = raw.namespace.clone().unwrap_or_default();
            let last = self.last_numbers.entry(namespace).or_insert(0);
            match raw.number {
                Some(n) if n == *last + 1 => *last = n,
                found => {
                    return Err(bad(format!(
                        "record number {} where its namespace's next is {}",
                        found.map_or("(missing)".to_owned(), |n| n.to_string()),
                        *last + 1
                    )));
                }
            }
        }
        let digest = match &record.body {
            StoredBody::Turn(_) => {
                self.report.turns += 1;
                raw.recompute_turn_digest_in(self.format).map_err(|c| bad(c.detail))?
            }
            StoredBody::ErasedTurn { erased_by } => {
                self.report.erased_turns += 1;
                self.pending.entry(*erased_by).or_default().insert(raw.seq_id(), record.digest);
                raw.recompute_turn_digest_in(self.format).map_err(|c| bad(c.detail))?
            }
            StoredBody::Redaction { target, erased } => {
                self.report.redactions += 1;
                let waiting = self.pending.remove(&position).unwrap_or_default();
                let mut listed: Vec<(TurnId, EvidenceDigest)> = Vec::with_capacity(erased.len());
                for erased_id in erased {
                    match waiting.get(erased_id) {
                        Some(d) => listed.push((*erased_id, *d)),
                        None => {
                            return Err(bad(format!(
                                "lists {erased_id} as erased, but that record is not an \
                                 earlier turn erased by this redaction"
                            )));
                        }
                    }
                }
                if let Some((&stray, _)) = waiting.iter().find(|(w, _)| !erased.contains(w)) {
                    return Err(VerifyError::BadRecord {
                        position: LedgerPosition::from_raw(stray.raw()),
                        detail: format!(
                            "marked erased by #{}, which does not list it",
                            position.raw()
                        ),
                    });
                }
                redaction_digest_in(self.format, target, record.ingest_utc_micros, &listed)
            }
        };
        if digest != record.digest {
            return Err(bad("digest mismatch: the record's content was altered".to_owned()));
        }
        let chain = self.report.chain_head.link(&digest);
        if chain != record.chain {
            return Err(bad(
                "chain hash mismatch: records were altered, reordered or lost".to_owned()
            ));
        }
        self.report.chain_head = chain;
        self.report.head = Some(position);
        self.report.records += 1;
        Ok(record)
    }

    /// The report over every record checked; an erased turn whose redaction never came, or a
    /// `recorded` head that is not the last record's, is an error.
    pub fn finish(self, recorded: &Head) -> Result<VerifyReport, VerifyError> {
        let report = self.finish_records()?;
        if recorded.last != report.head || recorded.chain != report.chain_head {
            return Err(VerifyError::BadHead {
                detail: format!(
                    "metadata records head {} with chain {}, the records end at {} with chain {}",
                    recorded.last.map_or("(empty)".to_owned(), |h| h.to_string()),
                    recorded.chain,
                    report.head.map_or("(empty)".to_owned(), |h| h.to_string()),
                    report.chain_head,
                ),
            });
        }
        Ok(report)
    }

    /// The report over every record checked, for records no metadata describes (a copy being
    /// made); an erased turn whose redaction never came is an error.
    pub fn finish_records(self) -> Result<VerifyReport, VerifyError> {
        if let Some(stray) = self.pending.values().flat_map(|m| m.keys()).min() {
            return Err(VerifyError::BadRecord {
                position: LedgerPosition::from_raw(stray.raw()),
                detail: "marked erased by a record that is not a redaction listing it".to_owned(),
            });
        }
        Ok(self.report)
    }
}
