//! Reading back: the evidence of a namespace, every record in order, statistics.

use evicortex_core::{Evidence, Namespace, TurnId};
use rusqlite::params;

use crate::{
    ChainHash, FORMAT_VERSION, Ledger, LedgerPosition, ReadError, StorageError,
    record::Format,
    store::{
        self, KIND_REDACTION, KIND_TURN, PREV_CHAIN, RECORD_COLUMNS, RawRecord, StoredBody, sql_err,
    },
};

/// Counts over the whole ledger.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LedgerStats {
    /// Live (unerased) turns.
    pub turns: u64,
    /// Distinct namespaces with at least one live turn.
    pub namespaces: u64,
    /// Distinct (namespace, session) pairs with at least one live turn.
    pub sessions: u64,
    /// Erased turns (their records remain, without text).
    pub erased_turns: u64,
    /// Redaction records.
    pub redactions: u64,
    /// All records: turns, erased turns and redactions.
    pub records: u64,
    /// The last record's position.
    pub head: Option<LedgerPosition>,
    /// The chain hash of the last record.
    pub chain_head: ChainHash,
    /// The on-disk format version.
    pub format_version: u32,
    /// Bytes of the ledger file plus its WAL and shared-memory files.
    pub bytes_on_disk: u64,
}

impl Ledger {
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
    /// ledger order. Reads one consistent snapshot. Returns how many were seen.
    ///
    /// Every turn is checked against its digest and its chain link to the record before it
    /// before `f` sees it: a record altered behind the ledger's back is a
    /// [`ReadError::Corrupted`] naming it, never served.
    pub fn for_each_evidence<E: From<ReadError>>(
        &self,
        namespace: &Namespace,
        after: Option<TurnId>,
        mut f: impl FnMut(Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        let after = after.map_or(0, |a| a.raw() as i64);
        // Numbers grow with positions within a namespace, so the (namespace, number) index
        // serves both the filter and the order: a namespace's new turns cost what they are.
        let selection = "namespace = ?1 AND number > ?2 ORDER BY number";
        self.scan_evidence(Some(namespace), selection, after, |_, e| f(e))
    }

    /// Calls `f` with every live turn (of `namespace` if given, else of every namespace)
    /// recorded after ledger position `after` (if given), with its position, in ledger order;
    /// checked as [`Ledger::for_each_evidence`] checks. For watermarks across namespaces.
    pub fn for_each_evidence_since<E: From<ReadError>>(
        &self,
        namespace: Option<&Namespace>,
        after: Option<LedgerPosition>,
        f: impl FnMut(LedgerPosition, Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        let after = after.map_or(0, |a| a.raw() as i64);
        let selection = "(?1 IS NULL OR namespace = ?1) AND seq > ?2 ORDER BY seq";
        self.scan_evidence(namespace, selection, after, f)
    }

    fn scan_evidence<E: From<ReadError>>(
        &self,
        namespace: Option<&Namespace>,
        selection: &str,
        after: i64,
        mut f: impl FnMut(LedgerPosition, Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        let conn = self.reader().map_err(|e| E::from(ReadError::from(e)))?;
        {
            let path = self.path();
            let sql = |e| E::from(ReadError::from(sql_err(path)(e)));
            let query = format!(
                "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records WHERE kind = {KIND_TURN} \
                 AND erased_by IS NULL AND {selection}"
            );
            let tx = conn.unchecked_transaction().map_err(sql)?;
            let mut stmt = tx.prepare(&query).map_err(sql)?;
            let mut rows =
                stmt.query(params![namespace.map(Namespace::as_str), after]).map_err(sql)?;
            let mut n = 0;
            while let Some(row) = rows.next().map_err(sql)? {
                let raw = RawRecord::from_row(row).map_err(sql)?;
                let prev_chain =
                    store::prev_chain_at(row, store::AFTER_RECORD_COLUMNS).map_err(sql)?;
                let corrupted = |c: store::Corrupt| {
                    E::from(ReadError::Corrupted { turn_id: c.turn_id, detail: c.detail })
                };
                let record = raw.decode(Format::V2).map_err(corrupted)?;
                raw.check_turn(&record, prev_chain.as_deref()).map_err(corrupted)?;
                let number = raw.number().map_err(corrupted)?;
                let StoredBody::Turn(turn) = record.body else {
                    return Err(E::from(ReadError::Corrupted {
                        turn_id: record.id,
                        detail: "a live turn row did not decode as a turn".to_owned(),
                    }));
                };
                let position = LedgerPosition::from_raw(record.id.raw());
                f(position, Evidence { id: number, digest: record.digest, turn })?;
                n += 1;
            }
            Ok(n)
        }
    }

    /// The last record's position, if any.
    pub fn head(&self) -> Result<Option<LedgerPosition>, ReadError> {
        self.with_reader(|conn| {
            let last = store::last_record(conn).map_err(sql_err(self.path()))?;
            Ok(last.map(|(seq, _)| LedgerPosition::from_raw(seq as u64)))
        })
    }

    /// The number of the last record (turn or redaction) of `namespace`, if any.
    pub fn namespace_head(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        self.with_reader(|conn| {
            let last: Option<i64> = conn
                .query_row(
                    "SELECT max(number) FROM records WHERE namespace = ?1",
                    [namespace.as_str()],
                    |r| r.get(0),
                )
                .map_err(sql_err(self.path()))?;
            Ok(last.map(|n| TurnId::from_raw(n as u64)))
        })
    }

    /// Whether any erasure was recorded after ledger position `after` (`None`: ever). Reads only
    /// the records after it, so derived data can tell "appends only since I was built" from
    /// "rebuild" at the cost of what is new.
    pub fn erased_after(&self, after: Option<LedgerPosition>) -> Result<bool, ReadError> {
        self.with_reader(|conn| {
            let after = after.map_or(0, |id| id.raw() as i64);
            let erased = conn
                .query_row(
                    &format!(
                        "SELECT EXISTS (SELECT 1 FROM records WHERE seq > ?1 AND kind = {KIND_REDACTION})"
                    ),
                    [after],
                    |r| r.get(0),
                )
                .map_err(sql_err(self.path()))?;
            Ok(erased)
        })
    }

    /// The number of the redaction record of the latest erasure in `namespace` (`None`: none
    /// ever erased anything there). Derived data covering the namespace only up to a number
    /// below it may hold erased turns.
    pub fn last_erasure(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        self.with_reader(|conn| {
            let last: Option<i64> = conn
                .query_row(
                    &format!(
                        "SELECT max(number) FROM records WHERE kind = {KIND_REDACTION} \
                         AND namespace = ?1"
                    ),
                    [namespace.as_str()],
                    |r| r.get(0),
                )
                .map_err(sql_err(self.path()))?;
            Ok(last.map(|seq| TurnId::from_raw(seq as u64)))
        })
    }

    /// The namespaces with at least one live turn, sorted.
    pub fn namespaces(&self) -> Result<Vec<Namespace>, ReadError> {
        self.with_reader(|conn| {
            let sql = sql_err(self.path());
            let mut stmt = conn
                .prepare(&format!(
                    "SELECT DISTINCT namespace FROM records WHERE kind = {KIND_TURN} \
                     AND erased_by IS NULL ORDER BY namespace"
                ))
                .map_err(&sql)?;
            let names: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .map_err(&sql)?
                .collect::<Result<_, _>>()
                .map_err(&sql)?;
            names
                .iter()
                .map(|n| {
                    Namespace::new(n).map_err(|e| ReadError::Corrupted {
                        turn_id: TurnId::from_raw(0),
                        detail: format!("stored namespace {n:?}: {e}"),
                    })
                })
                .collect()
        })
    }

    /// Counts over the whole ledger, from one snapshot.
    pub fn stats(&self) -> Result<LedgerStats, ReadError> {
        self.with_reader(|conn| {
            let sql = sql_err(self.path());
            let tx = conn.unchecked_transaction().map_err(&sql)?;
            let count = |q: &str| -> Result<u64, ReadError> {
                let n: i64 = tx.query_row(q, [], |r| r.get(0)).map_err(&sql)?;
                Ok(n as u64)
            };
            let live = format!("FROM records WHERE kind = {KIND_TURN} AND erased_by IS NULL");
            let turns = count(&format!("SELECT count(*) {live}"))?;
            let namespaces = count(&format!("SELECT count(DISTINCT namespace) {live}"))?;
            let sessions = count(&format!(
                "SELECT count(*) FROM (SELECT DISTINCT namespace, session {live})"
            ))?;
            let erased_turns = count(&format!(
                "SELECT count(*) FROM records WHERE kind = {KIND_TURN} AND erased_by IS NOT NULL"
            ))?;
            let redactions =
                count(&format!("SELECT count(*) FROM records WHERE kind = {KIND_REDACTION}"))?;
            let records = count("SELECT count(*) FROM records")?;
            let last = store::last_record(&tx).map_err(&sql)?;
            let (head, chain_head) = match last {
                Some((seq, chain)) => (
                    Some(LedgerPosition::from_raw(seq as u64)),
                    <[u8; 32]>::try_from(chain.as_slice()).map(ChainHash::from_bytes).map_err(
                        |_| ReadError::Corrupted {
                            turn_id: TurnId::from_raw(seq as u64),
                            detail: "column chain is not 32 bytes".to_owned(),
                        },
                    )?,
                ),
                None => (None, ChainHash::GENESIS),
            };
            drop(tx);
            Ok(LedgerStats {
                turns,
                namespaces,
                sessions,
                erased_turns,
                redactions,
                records,
                head,
                chain_head,
                format_version: FORMAT_VERSION,
                bytes_on_disk: self.bytes_on_disk()?,
            })
        })
    }

    /// Bytes of the ledger file and its `-wal` and `-shm` companions.
    pub fn bytes_on_disk(&self) -> Result<u64, StorageError> {
        let mut total = 0;
        for path in self.files() {
            match fs_err::metadata(&path) {
                Ok(m) => total += m.len(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(StorageError::Io { op: "reading metadata of", path, source });
                }
            }
        }
        Ok(total)
    }

    /// The ledger file and its `-wal` and `-shm` companions (which may not exist).
    pub fn files(&self) -> Vec<std::path::PathBuf> {
        let base = self.path().as_os_str().to_owned();
        let with = |suffix: &str| {
            let mut p = base.clone();
            p.push(suffix);
            std::path::PathBuf::from(p)
        };
        vec![self.path().to_owned(), with("-wal"), with("-shm")]
    }
}
