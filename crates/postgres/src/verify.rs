//! The full integrity check: every digest, the whole chain, every redaction, the head.

use std::collections::{BTreeMap, HashMap};

use evicortex_core::{EvidenceDigest, TurnId};
use evicortex_ledger::{ChainHash, LedgerPosition, VerifyReport, redaction_digest};
use postgres::fallible_iterator::FallibleIterator;

use crate::{
    PgLedger, VerifyError, head,
    record_row::{RECORD_COLUMNS, RawRecord, StoredBody},
};

impl PgLedger {
    /// Recomputes every record's digest (with the embedded ledger's code) and the whole chain,
    /// checks that positions run 1..n without gaps and each namespace's numbers 1..k, every
    /// redaction against the records it erased, and the head in `ledger_meta` against the last
    /// record; from one snapshot. Fails naming the first bad record in ledger order.
    pub fn verify(&self) -> Result<VerifyReport, VerifyError> {
        let mut client = self.client();
        let mut tx =
            crate::client_pool::read_snapshot(&mut client).map_err(self.db("starting verify"))?;
        let recorded = head::read_head(&mut tx)
            .map_err(self.db("reading the head"))?
            .map_err(|detail| VerifyError::BadHead { detail })?;
        let query = format!("SELECT {RECORD_COLUMNS} FROM records ORDER BY seq");
        let no_params: [i64; 0] = [];
        let mut rows = tx.query_raw(&query, no_params).map_err(self.db("reading records"))?;
        let mut report = VerifyReport {
            records: 0,
            turns: 0,
            erased_turns: 0,
            redactions: 0,
            head: None,
            chain_head: ChainHash::GENESIS,
        };
        // Erased records waiting for the redaction that names them: redaction -> records.
        let mut pending: HashMap<u64, BTreeMap<TurnId, EvidenceDigest>> = HashMap::new();
        let mut expected: u64 = 1;
        let mut last_numbers: HashMap<String, i64> = HashMap::new();
        while let Some(row) = rows.next().map_err(self.db("reading records"))? {
            let raw = RawRecord::from_row(&row).map_err(self.db("decoding records"))?;
            let position = raw.position();
            let bad = |detail: String| VerifyError::BadRecord { position, detail };
            if raw.seq != expected as i64 {
                return Err(if raw.seq > expected as i64 {
                    VerifyError::BadRecord {
                        position: LedgerPosition::from_raw(expected),
                        detail: format!("record is missing (the next record is at {position})"),
                    }
                } else {
                    bad(format!("out-of-order position, expected {expected}"))
                });
            }
            let record = raw.decode().map_err(|c| bad(c.detail))?;
            let last_number = last_numbers.entry(raw.namespace.clone()).or_insert(0);
            if raw.number != *last_number + 1 {
                return Err(bad(format!(
                    "record number {} where its namespace's next is {}",
                    raw.number,
                    *last_number + 1
                )));
            }
            *last_number = raw.number;
            let digest = match &record.body {
                StoredBody::Turn(_) => {
                    report.turns += 1;
                    raw.recompute_turn_digest().map_err(|c| bad(c.detail))?
                }
                StoredBody::ErasedTurn { erased_by } => {
                    report.erased_turns += 1;
                    pending.entry(*erased_by).or_default().insert(raw.seq_id(), record.digest);
                    raw.recompute_turn_digest().map_err(|c| bad(c.detail))?
                }
                StoredBody::Redaction { target, erased } => {
                    report.redactions += 1;
                    let waiting = pending.remove(&position.raw()).unwrap_or_default();
                    let mut listed = Vec::with_capacity(erased.len());
                    for erased_id in erased {
                        match waiting.get(erased_id) {
                            Some(d) => listed.push((*erased_id, *d)),
                            None => {
                                return Err(bad(format!(
                                    "lists position {} as erased, but that record is not an \
                                     earlier turn erased by this redaction",
                                    erased_id.raw()
                                )));
                            }
                        }
                    }
                    if let Some((&stray, _)) = waiting.iter().find(|(w, _)| !erased.contains(w)) {
                        return Err(VerifyError::BadRecord {
                            position: LedgerPosition::from_raw(stray.raw()),
                            detail: format!("marked erased by {position}, which does not list it"),
                        });
                    }
                    redaction_digest(target, raw.ingest_utc_us, &listed)
                }
            };
            if digest != record.digest {
                return Err(bad("digest mismatch: the record's content was altered".to_owned()));
            }
            let chain = report.chain_head.link(&digest);
            if chain != record.chain {
                return Err(bad(
                    "chain hash mismatch: records were altered, reordered or lost".to_owned()
                ));
            }
            report.chain_head = chain;
            report.head = Some(position);
            report.records += 1;
            expected += 1;
        }
        drop(rows);
        if let Some(stray) = pending.values().flat_map(|m| m.keys()).min() {
            return Err(VerifyError::BadRecord {
                position: LedgerPosition::from_raw(stray.raw()),
                detail: "marked erased by a record that is not a redaction listing it".to_owned(),
            });
        }
        if recorded.last != report.head || recorded.chain != report.chain_head {
            return Err(VerifyError::BadHead {
                detail: format!(
                    "ledger_meta records head {} with chain {}, the records end at {} with \
                     chain {}",
                    recorded.last.map_or("(empty)".to_owned(), |h| h.to_string()),
                    recorded.chain,
                    report.head.map_or("(empty)".to_owned(), |h| h.to_string()),
                    report.chain_head,
                ),
            });
        }
        tx.commit().map_err(self.db("ending verify"))?;
        Ok(report)
    }
}
