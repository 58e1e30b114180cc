//! The check of an import's copied rows, read back inside its transaction, record after record,
//! with the ledger crate's [`ChainCheck`] (what every verify runs): nothing commits unless the
//! copy verifies as the source did.

use evicortex_ledger::{StoredRecordExport, VerifyReport, storage::ChainCheck, storage::RawRecord};

/// What the copied rows checked so far add up to.
#[derive(Debug, Default)]
pub(crate) struct ImportCheck {
    chain: ChainCheck,
}

impl ImportCheck {
    /// Records checked so far.
    pub(crate) fn records(&self) -> u64 {
        self.chain.records()
    }

    /// Checks the next copied row against its position, number, digest and chain link, and
    /// against the record it was copied from.
    pub(crate) fn record(
        &mut self,
        raw: &RawRecord,
        exported: &StoredRecordExport,
    ) -> Result<(), String> {
        let expected = self.chain.records() + 1;
        if raw.seq != expected as i64 || raw.position() != exported.position {
            return Err(format!(
                "read back at position {} where {expected} (copied from {}) was due",
                raw.seq, exported.position
            ));
        }
        let record = self.chain.next(raw).map_err(|e| e.to_string())?;
        if record.digest != exported.digest || record.chain != exported.chain {
            return Err("the stored digest or chain hash differs from the source's".to_owned());
        }
        if raw.number != Some(exported.number.raw() as i64) {
            return Err(format!(
                "record number {:?} where the source's is {}",
                raw.number,
                exported.number.raw()
            ));
        }
        Ok(())
    }

    /// The report of the whole copy; an erased turn whose redaction never came is an error
    /// naming its position.
    pub(crate) fn finish(self) -> Result<VerifyReport, (u64, String)> {
        self.chain.finish_records().map_err(|e| match e {
            evicortex_ledger::VerifyError::BadRecord { position, detail } => {
                (position.raw(), detail)
            }
            other => (0, other.to_string()),
        })
    }
}
