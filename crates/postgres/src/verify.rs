//! The full integrity check: the ledger crate's [`ChainCheck`] over every record, in order,
//! from one snapshot.

use evicortex_ledger::{VerifyError, VerifyReport, storage::ChainCheck};
use postgres::fallible_iterator::FallibleIterator;

use crate::{
    PgLedger, head,
    record_row::{RECORD_COLUMNS, raw_record},
};

/// Recomputes every record's digest (with the ledger crate's code) and the whole chain, checks
/// that positions run 1..n without gaps and each namespace's numbers 1..k, every redaction
/// against the records it erased, and the head in `ledger_meta` against the last record; from
/// one snapshot, calling `progress(done, total)` every few thousand records (`total` as the
/// snapshot's head counts them). Fails naming the first bad record in ledger order.
pub(crate) fn verify_with_progress(
    ledger: &PgLedger,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<VerifyReport, VerifyError> {
    let mut client = ledger.client();
    let mut tx =
        crate::client_pool::read_snapshot(&mut client).map_err(ledger.db("starting verify"))?;
    let recorded = head::read_head(&mut tx)
        .map_err(ledger.db("reading the head"))?
        .map_err(|detail| VerifyError::BadHead { detail })?;
    let total = recorded.last.map_or(0, |p| p.raw());
    let query = format!("SELECT {RECORD_COLUMNS} FROM records ORDER BY seq");
    let no_params: [i64; 0] = [];
    let mut rows = tx.query_raw(&query, no_params).map_err(ledger.db("reading records"))?;
    let mut check = ChainCheck::default();
    while let Some(row) = rows.next().map_err(ledger.db("reading records"))? {
        check.next(&raw_record(&row).map_err(ledger.db("decoding records"))?)?;
        if check.records().is_multiple_of(4096) {
            progress(check.records(), total);
        }
    }
    drop(rows);
    let report = check.finish(&recorded)?;
    tx.commit().map_err(ledger.db("ending verify"))?;
    progress(report.records, total);
    Ok(report)
}
