//! The check of an import's copied rows, read back inside its transaction, record after record,
//! with the row decoding and digest code this crate's verify uses: nothing commits unless the
//! copy verifies as the source did.

use std::collections::{BTreeMap, HashMap};

use evicortex_core::{EvidenceDigest, TurnId};
use evicortex_ledger::{ChainHash, StoredRecordExport, VerifyReport, redaction_digest};

use crate::record_row::{RawRecord, StoredBody};

/// What the copied rows checked so far add up to.
#[derive(Debug)]
pub(crate) struct ImportCheck {
    report: VerifyReport,
    /// Erased turns waiting for the redaction that names them: redaction -> turns.
    pending: HashMap<u64, BTreeMap<TurnId, EvidenceDigest>>,
    last_numbers: HashMap<String, i64>,
}

impl Default for ImportCheck {
    fn default() -> ImportCheck {
        ImportCheck {
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
}

impl ImportCheck {
    /// Records checked so far.
    pub(crate) fn records(&self) -> u64 {
        self.report.records
    }

    /// Checks the next copied row against its position, number, digest and chain link, and
    /// against the record it was copied from.
    pub(crate) fn record(
        &mut self,
        raw: &RawRecord,
        exported: &StoredRecordExport,
    ) -> Result<(), String> {
        let expected = self.report.records + 1;
        if raw.seq != expected as i64 || raw.position() != exported.position {
            return Err(format!(
                "read back at position {} where {expected} (copied from {}) was due",
                raw.seq, exported.position
            ));
        }
        let record = raw.decode().map_err(|c| c.detail)?;
        if record.digest != exported.digest || record.chain != exported.chain {
            return Err("the stored digest or chain hash differs from the source's".to_owned());
        }
        let last_number = self.last_numbers.entry(raw.namespace.clone()).or_insert(0);
        if raw.number != *last_number + 1 || raw.number as u64 != exported.number.raw() {
            return Err(format!(
                "record number {} where its namespace's next is {}",
                raw.number,
                *last_number + 1
            ));
        }
        *last_number = raw.number;
        let digest = match &record.body {
            StoredBody::Turn(_) => {
                self.report.turns += 1;
                raw.recompute_turn_digest().map_err(|c| c.detail)?
            }
            StoredBody::ErasedTurn { erased_by } => {
                self.report.erased_turns += 1;
                self.pending.entry(*erased_by).or_default().insert(raw.seq_id(), record.digest);
                raw.recompute_turn_digest().map_err(|c| c.detail)?
            }
            StoredBody::Redaction { target, erased } => {
                self.report.redactions += 1;
                let waiting = self.pending.remove(&raw.position().raw()).unwrap_or_default();
                let mut listed = Vec::with_capacity(erased.len());
                for id in erased {
                    match waiting.get(id) {
                        Some(d) => listed.push((*id, *d)),
                        None => {
                            return Err(format!(
                                "lists position {} as erased, but that record is not an earlier \
                                 turn erased by this redaction",
                                id.raw()
                            ));
                        }
                    }
                }
                if waiting.keys().any(|w| !erased.contains(w)) {
                    return Err(
                        "an erased turn names this redaction, which does not list it".to_owned()
                    );
                }
                redaction_digest(target, raw.ingest_utc_us, &listed)
            }
        };
        let prev = self.report.chain_head;
        let prev_bytes = (expected > 1).then_some(prev.as_bytes().as_slice());
        raw.check_digest_and_link(&record, &digest, prev_bytes).map_err(|c| c.detail)?;
        self.report.chain_head = record.chain;
        self.report.head = Some(raw.position());
        self.report.records += 1;
        Ok(())
    }

    /// The report of the whole copy; an erased turn whose redaction never came is an error
    /// naming its position.
    pub(crate) fn finish(self) -> Result<VerifyReport, (u64, String)> {
        if let Some(stray) = self.pending.values().flat_map(|m| m.keys()).min() {
            return Err((
                stray.raw(),
                "marked erased by a record that is not a redaction listing it".to_owned(),
            ));
        }
        Ok(self.report)
    }
}
