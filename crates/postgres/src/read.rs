//! Reading back: the evidence of a namespace, heads, namespaces. Every turn served is checked
//! against its digest and chain link first, as the embedded ledger checks.

use std::ops::ControlFlow;

use evicortex_core::{Evidence, Namespace, TurnId};
use evicortex_ledger::{EvidenceScan, LedgerPosition, ReadError, ScanOrder};
use postgres::{fallible_iterator::FallibleIterator, types::ToSql};

use crate::{
    PgLedger,
    record_row::{PREV_CHAIN, RECORD_COLUMNS, chained_row},
    schema::KIND_TURN,
};

/// The live turns `scan` selects, from one snapshot, each checked against its digest and chain
/// link before `visit` sees it.
pub(crate) fn scan_evidence(
    ledger: &PgLedger,
    scan: EvidenceScan<'_>,
    visit: &mut dyn FnMut(LedgerPosition, Evidence) -> ControlFlow<()>,
) -> Result<u64, ReadError> {
    let (namespace, order, after) = scan.bounds();
    let selection = match order {
        ScanOrder::Number => "namespace = $1 AND number > $2 ORDER BY number",
        ScanOrder::Position => "($1::text IS NULL OR namespace = $1) AND seq > $2 ORDER BY seq",
    };
    let mut client = ledger.client();
    let mut tx =
        crate::client_pool::read_snapshot(&mut client).map_err(ledger.db("starting a read"))?;
    let query = format!(
        "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records WHERE kind = {KIND_TURN} \
         AND erased_by IS NULL AND {selection}"
    );
    let namespace = namespace.map(Namespace::as_str);
    let params: [&(dyn ToSql + Sync); 2] = [&namespace, &after];
    let mut rows = tx.query_raw(&query, params).map_err(ledger.db("reading evidence"))?;
    let mut n = 0;
    while let Some(row) = rows.next().map_err(ledger.db("reading evidence"))? {
        let (position, evidence) =
            chained_row(&row).map_err(ledger.db("decoding evidence"))?.checked_evidence()?;
        if visit(position, evidence).is_break() {
            break;
        }
        n += 1;
    }
    drop(rows);
    tx.commit().map_err(ledger.db("ending a read"))?;
    Ok(n)
}

/// The last record's position, if any.
pub(crate) fn head(ledger: &PgLedger) -> Result<Option<LedgerPosition>, ReadError> {
    let mut client = ledger.client();
    let last: Option<i64> = client
        .query_one("SELECT max(seq) FROM records", &[])
        .map_err(ledger.db("reading the head"))?
        .get(0);
    Ok(last.map(|seq| LedgerPosition::from_raw(seq as u64)))
}

/// The number of the last record (turn or redaction) of `namespace`, if any.
pub(crate) fn namespace_head(
    ledger: &PgLedger,
    namespace: &Namespace,
) -> Result<Option<TurnId>, ReadError> {
    let mut client = ledger.client();
    let last: Option<i64> = client
        .query_one("SELECT max(number) FROM records WHERE namespace = $1", &[&namespace.as_str()])
        .map_err(ledger.db("reading a namespace's head"))?
        .get(0);
    Ok(last.map(|n| TurnId::from_raw(n as u64)))
}

/// The namespaces with at least one live turn, sorted by their UTF-8 bytes (as the embedded
/// ledger sorts them, whatever the database's collation).
pub(crate) fn namespaces(ledger: &PgLedger) -> Result<Vec<Namespace>, ReadError> {
    let mut client = ledger.client();
    let rows = client
        .query(
            &format!(
                "SELECT DISTINCT namespace COLLATE \"C\" AS ns FROM records \
                 WHERE kind = {KIND_TURN} AND erased_by IS NULL ORDER BY ns"
            ),
            &[],
        )
        .map_err(ledger.db("listing namespaces"))?;
    rows.iter()
        .map(|row| {
            let name: String = row.get(0);
            Namespace::new(&name).map_err(|e| ReadError::Corrupted {
                position: LedgerPosition::from_raw(0),
                detail: format!("stored namespace {name:?}: {e}"),
            })
        })
        .collect()
}
