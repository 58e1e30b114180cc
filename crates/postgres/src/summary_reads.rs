//! The reads the facade needs beside the records themselves: counts and where erasures are.
//! Semantics are the embedded ledger's.

use evicortex_core::{Namespace, TurnId};
use evicortex_ledger::{
    FORMAT_VERSION, LedgerPosition, LedgerStats, ReadError, storage::stored_head,
};

use crate::{
    PgLedger,
    schema::{KIND_REDACTION, KIND_TURN},
};

/// Counts over the whole ledger, from one snapshot. `bytes_on_disk` is what the server reports
/// for the two ledger tables with their indexes and TOAST data.
pub(crate) fn stats(ledger: &PgLedger) -> Result<LedgerStats, ReadError> {
    let mut client = ledger.client();
    let mut tx = crate::client_pool::read_snapshot(&mut client)
        .map_err(ledger.db("starting a stats read"))?;
    let live = format!("FROM records WHERE kind = {KIND_TURN} AND erased_by IS NULL");
    let query = format!(
        "SELECT (SELECT count(*) {live}), \
                    (SELECT count(DISTINCT namespace) {live}), \
                    (SELECT count(*) FROM (SELECT DISTINCT namespace, session {live}) s), \
                    (SELECT count(*) FROM records WHERE kind = {KIND_TURN} \
                        AND erased_by IS NOT NULL), \
                    (SELECT count(*) FROM records WHERE kind = {KIND_REDACTION}), \
                    (SELECT count(*) FROM records), \
                    pg_total_relation_size('records') + pg_total_relation_size('ledger_meta')"
    );
    let row = tx.query_one(&query, &[]).map_err(ledger.db("counting records"))?;
    let count = |i: usize| row.get::<_, i64>(i) as u64;
    let last = tx
        .query_opt("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1", &[])
        .map_err(ledger.db("reading the last record"))?;
    let (head, chain_head) = stored_head(last.map(|row| (row.get(0), row.get(1))))?;
    let stats = LedgerStats {
        turns: count(0),
        namespaces: count(1),
        sessions: count(2),
        erased_turns: count(3),
        redactions: count(4),
        records: count(5),
        head,
        chain_head,
        format_version: FORMAT_VERSION,
        bytes_on_disk: count(6),
    };
    tx.commit().map_err(ledger.db("ending a stats read"))?;
    Ok(stats)
}

/// Whether any erasure was recorded after ledger position `after` (`None`: ever).
pub(crate) fn erased_after(
    ledger: &PgLedger,
    after: Option<LedgerPosition>,
) -> Result<bool, ReadError> {
    let after = after.map_or(0, |p| p.raw() as i64);
    let mut client = ledger.client();
    let erased: bool = client
        .query_one(
            &format!(
                "SELECT EXISTS (SELECT 1 FROM records WHERE seq > $1 \
                     AND kind = {KIND_REDACTION})"
            ),
            &[&after],
        )
        .map_err(ledger.db("looking for erasures"))?
        .get(0);
    Ok(erased)
}

/// The number of the redaction record of the latest erasure in `namespace` (`None`: none).
pub(crate) fn last_erasure(
    ledger: &PgLedger,
    namespace: &Namespace,
) -> Result<Option<TurnId>, ReadError> {
    let mut client = ledger.client();
    let last: Option<i64> = client
        .query_one(
            &format!(
                "SELECT max(number) FROM records WHERE kind = {KIND_REDACTION} \
                     AND namespace = $1"
            ),
            &[&namespace.as_str()],
        )
        .map_err(ledger.db("reading a namespace's last erasure"))?
        .get(0);
    Ok(last.map(|n| TurnId::from_raw(n as u64)))
}
