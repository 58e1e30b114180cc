//! The embedded ledger as an [`EvidenceLedger`], and its reads: the evidence of a namespace,
//! heads, where erasures are, statistics.

use std::{ops::ControlFlow, path::Path};

use evicortex_core::{Evidence, Namespace, Turn, TurnId};
use rusqlite::params;

use crate::{
    AppendError, AppendReceipt, ChainHash, EraseError, EraseReceipt, EraseTarget, EvidenceLedger,
    EvidenceScan, FORMAT_VERSION, Ledger, LedgerPosition, ReadError, ScanOrder, StorageError,
    VerifyError, VerifyReport,
    row::{KIND_REDACTION, KIND_TURN, stored_head},
    store::{self, PREV_CHAIN, RECORD_COLUMNS, sql_err},
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

/// The embedded ledger as every store of the ledger is used: writes on its writer connection,
/// reads on pooled reader connections of their own.
impl EvidenceLedger for Ledger {
    fn location(&self) -> &Path {
        self.path()
    }

    fn open_problem(&self) -> Option<&str> {
        self.open_problem.as_deref()
    }

    fn append_group(
        &self,
        batches: &[&[Turn]],
    ) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
        crate::append::append_group(self, batches)
    }

    fn check_append(&self, turns: &[Turn]) -> Result<usize, AppendError> {
        crate::append::check_append(self, turns)
    }

    fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        crate::erase::erase(self, target)
    }

    fn erase_unscrubbed(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        crate::erase::erase_unscrubbed(self, target)
    }

    fn scrub_erased(&self) -> Result<(), EraseError> {
        crate::erase::scrub_erased(self)
    }

    fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError> {
        crate::verify::verify_with_progress(self, progress)
    }

    fn scan_evidence(
        &self,
        scan: EvidenceScan<'_>,
        visit: &mut dyn FnMut(LedgerPosition, Evidence) -> ControlFlow<()>,
    ) -> Result<u64, ReadError> {
        let (namespace, order, after) = scan.bounds();
        let selection = match order {
            ScanOrder::Number => "namespace = ?1 AND number > ?2 ORDER BY number",
            ScanOrder::Position => "(?1 IS NULL OR namespace = ?1) AND seq > ?2 ORDER BY seq",
        };
        let conn = self.reader()?;
        let sql = sql_err(self.path());
        let query = format!(
            "SELECT {RECORD_COLUMNS}, {PREV_CHAIN} FROM records WHERE kind = {KIND_TURN} \
             AND erased_by IS NULL AND {selection}"
        );
        let tx = conn.unchecked_transaction().map_err(&sql)?;
        let mut stmt = tx.prepare_cached(&query).map_err(&sql)?;
        let mut rows =
            stmt.query(params![namespace.map(Namespace::as_str), after]).map_err(&sql)?;
        let mut n = 0;
        while let Some(row) = rows.next().map_err(&sql)? {
            let (position, evidence) = store::chained_row(row).map_err(&sql)?.checked_evidence()?;
            if visit(position, evidence).is_break() {
                break;
            }
            n += 1;
        }
        Ok(n)
    }

    /// The last record's position, if any.
    fn head(&self) -> Result<Option<LedgerPosition>, ReadError> {
        self.with_reader(|conn| {
            let last = store::last_record(conn).map_err(sql_err(self.path()))?;
            Ok(last.map(|(seq, _)| LedgerPosition::from_raw(seq as u64)))
        })
    }

    /// The number of the last record (turn or redaction) of `namespace`, if any.
    fn namespace_head(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        self.with_reader(|conn| {
            let last =
                store::last_number(conn, namespace.as_str()).map_err(sql_err(self.path()))?;
            Ok(last.map(TurnId::from_raw))
        })
    }

    /// Whether any erasure was recorded after ledger position `after` (`None`: ever). Reads only
    /// the records after it, so derived data can tell "appends only since I was built" from
    /// "rebuild" at the cost of what is new.
    fn erased_after(&self, after: Option<LedgerPosition>) -> Result<bool, ReadError> {
        self.with_reader(|conn| {
            let after = after.map_or(0, |id| id.raw() as i64);
            let erased = conn
                .prepare_cached(&format!(
                    "SELECT EXISTS (SELECT 1 FROM records WHERE seq > ?1 AND kind = {KIND_REDACTION})"
                ))
                .and_then(|mut stmt| stmt.query_row([after], |r| r.get(0)))
                .map_err(sql_err(self.path()))?;
            Ok(erased)
        })
    }

    /// The number of the redaction record of the latest erasure in `namespace` (`None`: none
    /// ever erased anything there). Derived data covering the namespace only up to a number
    /// below it may hold erased turns.
    fn last_erasure(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        self.with_reader(|conn| {
            let last: Option<i64> = conn
                .prepare_cached(&format!(
                    "SELECT max(number) FROM records WHERE kind = {KIND_REDACTION} \
                     AND namespace = ?1"
                ))
                .and_then(|mut stmt| stmt.query_row([namespace.as_str()], |r| r.get(0)))
                .map_err(sql_err(self.path()))?;
            Ok(last.map(|seq| TurnId::from_raw(seq as u64)))
        })
    }

    /// The namespaces with at least one live turn, sorted.
    fn namespaces(&self) -> Result<Vec<Namespace>, ReadError> {
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
                        position: LedgerPosition::from_raw(0),
                        detail: format!("stored namespace {n:?}: {e}"),
                    })
                })
                .collect()
        })
    }

    /// Counts over the whole ledger, from one snapshot.
    fn stats(&self) -> Result<LedgerStats, ReadError> {
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
            let (head, chain_head) = stored_head(last)?;
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
}

impl Ledger {
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
