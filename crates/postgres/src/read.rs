//! Reading back: the evidence of a namespace, heads, namespaces. Every turn served is checked
//! against its digest and chain link first, as the embedded ledger checks.

use evicortex_core::{Evidence, Namespace, TurnId};
use evicortex_ledger::LedgerPosition;
use postgres::{fallible_iterator::FallibleIterator, types::ToSql};

use crate::{
    PgLedger, ReadError,
    record_row::{Corrupt, PREV_CHAIN, PREV_CHAIN_COLUMN, RECORD_COLUMNS, RawRecord, StoredBody},
    schema::KIND_TURN,
};

impl PgLedger {
    /// The live turns of `namespace`, in ledger order.
    pub fn evidence(&self, namespace: &Namespace) -> Result<Vec<Evidence>, ReadError> {
        let mut out = Vec::new();
        self.for_each_evidence(namespace, None, |e| {
            out.push(e);
            Ok::<(), ReadError>(())
        })?;
        Ok(out)
    }

    /// Calls `f` with every live turn of `namespace` numbered after `after` (if given), in
    /// ledger order, from one snapshot; returns how many were seen. Every turn is checked
    /// against its digest and its chain link before `f` sees it: a record altered behind the
    /// ledger's back is a [`ReadError::Corrupted`] naming it, never served. `f` runs while the
    /// handle's connection is busy: it must not call this handle.
    pub fn for_each_evidence<E: From<ReadError>>(
        &self,
        namespace: &Namespace,
        after: Option<TurnId>,
        mut f: impl FnMut(Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        let after = after.map_or(0, |a| a.raw() as i64);
        // Numbers grow with positions within a namespace, so the (namespace, number) index
        // serves both the filter and the order.
        let selection = "namespace = $1 AND number > $2 ORDER BY number";
        self.scan_evidence(Some(namespace), selection, after, |_, e| f(e))
    }

    /// Calls `f` with every live turn (of `namespace` if given, else of every namespace)
    /// recorded after ledger position `after` (if given), with its position, in ledger order;
    /// checked as [`PgLedger::for_each_evidence`] checks. For watermarks across namespaces.
    pub fn for_each_evidence_since<E: From<ReadError>>(
        &self,
        namespace: Option<&Namespace>,
        after: Option<LedgerPosition>,
        f: impl FnMut(LedgerPosition, Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        let after = after.map_or(0, |a| a.raw() as i64);
        let selection = "($1::text IS NULL OR namespace = $1) AND seq > $2 ORDER BY seq";
        self.scan_evidence(namespace, selection, after, f)
    }

    fn scan_evidence<E: From<ReadError>>(
        &self,
        namespace: Option<&Namespace>,
        selection: &str,
        after: i64,
        mut f: impl FnMut(LedgerPosition, Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        let db = |op| {
            let db = self.db(op);
            move |e| E::from(ReadError::Database(db(e)))
        };
        let mut client = self.client();
        let mut tx =
            crate::client_pool::read_snapshot(&mut client).map_err(db("starting a read"))?;
        let query = format!(
            "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records WHERE kind = {KIND_TURN} \
             AND erased_by IS NULL AND {selection}"
        );
        let namespace = namespace.map(Namespace::as_str);
        let params: [&(dyn ToSql + Sync); 2] = [&namespace, &after];
        let mut rows = tx.query_raw(&query, params).map_err(db("reading evidence"))?;
        let mut n = 0;
        while let Some(row) = rows.next().map_err(db("reading evidence"))? {
            let raw = RawRecord::from_row(&row).map_err(db("decoding evidence"))?;
            let prev_chain: Option<Vec<u8>> =
                row.try_get(PREV_CHAIN_COLUMN).map_err(db("decoding evidence"))?;
            let corrupted = |c: Corrupt| {
                E::from(ReadError::Corrupted { position: c.position, detail: c.detail })
            };
            let record = raw.decode().map_err(corrupted)?;
            raw.check_turn(&record, prev_chain.as_deref()).map_err(corrupted)?;
            let number = raw.number().map_err(corrupted)?;
            let StoredBody::Turn(turn) = record.body else {
                return Err(corrupted(raw.corrupt("a live turn row did not decode as a turn")));
            };
            f(raw.position(), Evidence { id: number, digest: record.digest, turn })?;
            n += 1;
        }
        drop(rows);
        tx.commit().map_err(db("ending a read"))?;
        Ok(n)
    }

    /// The last record's position, if any.
    pub fn head(&self) -> Result<Option<LedgerPosition>, ReadError> {
        let mut client = self.client();
        let last: Option<i64> = client
            .query_one("SELECT max(seq) FROM records", &[])
            .map_err(self.db("reading the head"))?
            .get(0);
        Ok(last.map(|seq| LedgerPosition::from_raw(seq as u64)))
    }

    /// The number of the last record (turn or redaction) of `namespace`, if any.
    pub fn namespace_head(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        let mut client = self.client();
        let last: Option<i64> = client
            .query_one(
                "SELECT max(number) FROM records WHERE namespace = $1",
                &[&namespace.as_str()],
            )
            .map_err(self.db("reading a namespace's head"))?
            .get(0);
        Ok(last.map(|n| TurnId::from_raw(n as u64)))
    }

    /// The namespaces with at least one live turn, sorted by their UTF-8 bytes (as the embedded
    /// ledger sorts them, whatever the database's collation).
    pub fn namespaces(&self) -> Result<Vec<Namespace>, ReadError> {
        let mut client = self.client();
        let rows = client
            .query(
                &format!(
                    "SELECT DISTINCT namespace COLLATE \"C\" AS ns FROM records \
                     WHERE kind = {KIND_TURN} AND erased_by IS NULL ORDER BY ns"
                ),
                &[],
            )
            .map_err(self.db("listing namespaces"))?;
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
}
