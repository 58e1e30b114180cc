//! The reads the facade needs beside the records themselves: counts, where erasures are, and a
//! verification that reports progress. Semantics are the embedded ledger's.

use evicortex_core::{Namespace, TurnId};
use evicortex_ledger::{ChainHash, FORMAT_VERSION, LedgerPosition, LedgerStats, VerifyReport};

use crate::{
    PgLedger, ReadError, VerifyError,
    schema::{KIND_REDACTION, KIND_TURN},
};

impl PgLedger {
    /// Counts over the whole ledger, from one snapshot. `bytes_on_disk` is what the server
    /// reports for the two ledger tables with their indexes and TOAST data.
    pub fn stats(&self) -> Result<LedgerStats, ReadError> {
        let mut client = self.client();
        let mut tx = crate::client_pool::read_snapshot(&mut client)
            .map_err(self.db("starting a stats read"))?;
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
        let row = tx.query_one(&query, &[]).map_err(self.db("counting records"))?;
        let count = |i: usize| row.get::<_, i64>(i) as u64;
        let last = tx
            .query_opt("SELECT seq, chain FROM records ORDER BY seq DESC LIMIT 1", &[])
            .map_err(self.db("reading the last record"))?;
        let (head, chain_head) = match last {
            Some(last) => {
                let seq: i64 = last.get(0);
                let chain: Vec<u8> = last.get(1);
                let position = LedgerPosition::from_raw(seq as u64);
                let chain = <[u8; 32]>::try_from(chain.as_slice())
                    .map(ChainHash::from_bytes)
                    .map_err(|_| ReadError::Corrupted {
                        position,
                        detail: "column chain is not 32 bytes".to_owned(),
                    })?;
                (Some(position), chain)
            }
            None => (None, ChainHash::GENESIS),
        };
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
        tx.commit().map_err(self.db("ending a stats read"))?;
        Ok(stats)
    }

    /// Whether any erasure was recorded after ledger position `after` (`None`: ever).
    pub fn erased_after(&self, after: Option<LedgerPosition>) -> Result<bool, ReadError> {
        let after = after.map_or(0, |p| p.raw() as i64);
        let mut client = self.client();
        let erased: bool = client
            .query_one(
                &format!(
                    "SELECT EXISTS (SELECT 1 FROM records WHERE seq > $1 \
                     AND kind = {KIND_REDACTION})"
                ),
                &[&after],
            )
            .map_err(self.db("looking for erasures"))?
            .get(0);
        Ok(erased)
    }

    /// The number of the redaction record of the latest erasure in `namespace` (`None`: none).
    pub fn last_erasure(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        let mut client = self.client();
        let last: Option<i64> = client
            .query_one(
                &format!(
                    "SELECT max(number) FROM records WHERE kind = {KIND_REDACTION} \
                     AND namespace = $1"
                ),
                &[&namespace.as_str()],
            )
            .map_err(self.db("reading a namespace's last erasure"))?
            .get(0);
        Ok(last.map(|n| TurnId::from_raw(n as u64)))
    }

    /// [`PgLedger::verify`], calling `progress(done, total)` once it is done: the check runs
    /// as one query over one snapshot, so there is no earlier point to report.
    pub fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError> {
        let report = self.verify()?;
        progress(report.records, report.records);
        Ok(report)
    }
}
