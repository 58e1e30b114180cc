//! [`PgTable`]: the records table inside one transaction, as the ledger crate's shared logic
//! (append, erase, the head check) sees it.

use std::collections::HashMap;

use evicortex_core::{Turn, TurnId};
use evicortex_ledger::{
    AppendError, EraseTarget, LedgerPosition, StorageError,
    storage::{ChainedRow, Head, NewRedaction, NewTurn, RawRecord, RecordTable, TurnKey},
};
use postgres::{Transaction, types::ToSql};

use crate::{
    PgLedger,
    append_rows::{NewRows, stored_turns},
    head,
    record_row::{PREV_CHAIN, RECORD_COLUMNS, chained_row},
    schema::{KIND_REDACTION, KIND_TURN},
};

/// Taken by every append and erasure before it reads the head: it conflicts with itself and
/// with every row write, not with reads, so writers queue while readers go on reading their
/// snapshots.
pub(crate) const LOCK_RECORDS: &str = "LOCK TABLE records IN EXCLUSIVE MODE";

/// The `ledger_meta` key set in an erasure's transaction and removed once its scrub has
/// finished (value: the redaction's position and the erasing transaction's id): while present,
/// the old bytes may still be in the server's files, and the next connect scrubs.
pub(crate) const SCRUB_PENDING: &str = "scrub_pending";

/// The records table inside `tx`, on `ledger`'s server.
pub(crate) struct PgTable<'t, 'c> {
    tx: &'t mut Transaction<'c>,
    ledger: &'t PgLedger,
}

impl<'t, 'c> PgTable<'t, 'c> {
    pub(crate) fn new(tx: &'t mut Transaction<'c>, ledger: &'t PgLedger) -> PgTable<'t, 'c> {
        PgTable { tx, ledger }
    }

    fn db(&self, op: &'static str) -> impl Fn(postgres::Error) -> StorageError + '_ {
        let db = self.ledger.db(op);
        move |e| db(e).into()
    }

    fn chained_rows(
        &mut self,
        selection: &str,
        params: &[&(dyn ToSql + Sync)],
        op: &'static str,
    ) -> Result<Vec<ChainedRow>, StorageError> {
        let query = format!("SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records WHERE {selection}");
        let rows = self.tx.query(&query, params).map_err(self.ledger.db(op))?;
        rows.iter().map(|row| chained_row(row).map_err(self.db(op))).collect()
    }
}

impl RecordTable for PgTable<'_, '_> {
    /// The embedded ledger stores U+0000; PostgreSQL's text type cannot. Refused here, by name,
    /// rather than failing inside the transaction with the server's encoding error.
    fn refuse_unstorable(index: usize, turn: &Turn) -> Result<(), AppendError> {
        let nul = || "holds the character U+0000, which PostgreSQL text cannot store".to_owned();
        if turn.text.contains('\0') {
            return Err(AppendError::InvalidTurn { index, field: "text", reason: nul() });
        }
        if turn.speaker.as_deref().is_some_and(|s| s.contains('\0')) {
            return Err(AppendError::InvalidTurn { index, field: "speaker", reason: nul() });
        }
        Ok(())
    }

    fn recorded_head(&mut self) -> Result<Result<Head, String>, StorageError> {
        head::read_head(self.tx).map_err(self.db("reading the head"))
    }

    fn write_head(&mut self, head: Head) -> Result<(), StorageError> {
        head::write_head(self.tx, head).map_err(self.db("recording the head"))
    }

    fn last_record(&mut self) -> Result<Option<ChainedRow>, StorageError> {
        let selection = "seq = (SELECT max(seq) FROM records)";
        Ok(self.chained_rows(selection, &[], "reading the last record")?.pop())
    }

    fn erased_digest(
        &mut self,
        position: LedgerPosition,
        redaction: LedgerPosition,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        let row = self
            .tx
            .query_opt(
                "SELECT digest FROM records WHERE seq = $1 AND erased_by = $2",
                &[&(position.raw() as i64), &(redaction.raw() as i64)],
            )
            .map_err(self.db("reading an erased record"))?;
        Ok(row.map(|r| r.get(0)))
    }

    fn stored_turns(
        &mut self,
        keys: &[TurnKey<'_>],
    ) -> Result<HashMap<(String, String, u32), ChainedRow>, StorageError> {
        stored_turns(self.tx, keys).map_err(self.db("looking up the stored turns"))
    }

    fn next_number(&mut self, namespace: &str) -> Result<TurnId, StorageError> {
        let last: Option<i64> = self
            .tx
            .query_one("SELECT max(number) FROM records WHERE namespace = $1", &[&namespace])
            .map_err(self.db("numbering a record"))?
            .get(0);
        Ok(TurnId::from_raw(last.map_or(1, |n| n as u64 + 1)))
    }

    fn insert_turns(
        &mut self,
        rows: &[NewTurn<'_>],
        ingest_utc_micros: i64,
    ) -> Result<(), StorageError> {
        let mut new = NewRows::default();
        for row in rows {
            new.push(row);
        }
        new.insert(self.tx, ingest_utc_micros).map_err(self.db("inserting records"))
    }

    fn savepoint(&mut self) -> Result<(), StorageError> {
        self.tx.batch_execute("SAVEPOINT batch").map_err(self.db("starting a batch's savepoint"))
    }

    fn release_savepoint(&mut self) -> Result<(), StorageError> {
        self.tx.batch_execute("RELEASE batch").map_err(self.db("releasing a batch's savepoint"))
    }

    fn rollback_to_savepoint(&mut self) -> Result<(), StorageError> {
        self.tx
            .batch_execute("ROLLBACK TO batch; RELEASE batch")
            .map_err(self.db("rolling a batch back"))
    }

    fn erase_candidates(&mut self, target: &EraseTarget) -> Result<Vec<ChainedRow>, StorageError> {
        let ns = target.namespace().as_str();
        let op = "finding the records to erase";
        match target {
            EraseTarget::Namespace(_) => self.chained_rows(
                &format!("kind = {KIND_TURN} AND namespace = $1 ORDER BY seq"),
                &[&ns],
                op,
            ),
            EraseTarget::Session(_, session) => self.chained_rows(
                &format!("kind = {KIND_TURN} AND namespace = $1 AND session = $2 ORDER BY seq"),
                &[&ns, &session.as_str()],
                op,
            ),
            EraseTarget::Record(_, number) => self.chained_rows(
                "namespace = $1 AND number = $2",
                &[&ns, &(number.raw() as i64)],
                op,
            ),
        }
    }

    fn insert_redaction(&mut self, row: &NewRedaction<'_>) -> Result<(), StorageError> {
        self.tx
            .execute(
                &format!(
                    "INSERT INTO records (seq, kind, namespace, session, ingest_utc_us, \
                     target_record, erased_seqs, digest, chain, number) \
                     VALUES ($1, {KIND_REDACTION}, $2, $3, $4, $5, $6, $7, $8, $9)"
                ),
                &[
                    &(row.position.raw() as i64),
                    &row.namespace,
                    &row.session,
                    &row.ingest_utc_micros,
                    &row.target_record.map(|p| p.raw() as i64),
                    &row.erased_seqs,
                    &row.digest.as_bytes().as_slice(),
                    &row.chain.as_bytes().as_slice(),
                    &(row.number.raw() as i64),
                ],
            )
            .map_err(self.db("inserting the redaction record"))?;
        Ok(())
    }

    fn clear_erased(
        &mut self,
        redaction: LedgerPosition,
        erased: &[(&RawRecord, [u8; 32])],
    ) -> Result<(), StorageError> {
        let clear = self
            .tx
            .prepare(
                "UPDATE records SET text = NULL, speaker = NULL, meta = NULL, salt = NULL, \
                 erased_by = $1, content_digest = $2 WHERE seq = $3",
            )
            .map_err(self.db("preparing the clearing of erased records"))?;
        for (raw, content) in erased {
            let position = raw.position().raw() as i64;
            self.tx
                .execute(&clear, &[&(redaction.raw() as i64), &content.as_slice(), &position])
                .map_err(self.db("clearing an erased record"))?;
        }
        Ok(())
    }

    /// The mark holds the erasing transaction's id too: the scrub waits for every snapshot
    /// older than it.
    fn mark_scrub_pending(&mut self, redaction: LedgerPosition) -> Result<(), StorageError> {
        let xid: String = self
            .tx
            .query_one("SELECT pg_current_xact_id()::text", &[])
            .map_err(self.db("reading the erasure's transaction id"))?
            .get(0);
        self.tx
            .execute(
                "INSERT INTO ledger_meta (key, value) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&SCRUB_PENDING, &format!("{} {xid}", redaction.raw())],
            )
            .map_err(self.db("marking the scrub pending"))?;
        Ok(())
    }
}
