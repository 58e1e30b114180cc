//! Copying an embedded ledger into an empty PostgreSQL ledger, record by record: the same
//! positions, numbers, times, salts, digests, chain hashes and redactions.

use evicortex_ledger::{
    ChainHash, EvidenceLedger, Ledger, LedgerPosition, StoredRecordExport, VerifyReport,
    storage::Head,
};
use postgres::{Transaction, types::ToSql};

use crate::{
    DatabaseError, PgLedger, head, import_check::ImportCheck, record_row::raw_record,
    table::LOCK_RECORDS,
};

/// Records inserted per statement: 20 parameters each stays far below PostgreSQL's 65535.
const BATCH: usize = 500;

/// What [`PgLedger::import_ledger`] copied; the counts and head are those of the embedded
/// ledger's verify, checked against the copy before it committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportReport {
    /// Records copied (turns, erased turns, redactions).
    pub records: u64,
    /// Live turns.
    pub turns: u64,
    /// Erased turns (digest kept, text absent in both stores).
    pub erased_turns: u64,
    /// Redaction records.
    pub redactions: u64,
    /// The last record's position.
    pub head: Option<LedgerPosition>,
    /// The chain hash of the last record, the same in both stores.
    pub chain_head: ChainHash,
}

/// Why [`PgLedger::import_ledger`] copied nothing. Every variant leaves the PostgreSQL ledger
/// as it was: the copy is one transaction.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The PostgreSQL ledger already holds records: a copy goes into an empty ledger only.
    #[error(
        "the PostgreSQL ledger at {url} is not empty ({records} records, head at position \
         {head}); a migration copies into an empty ledger only: nothing was written"
    )]
    NotEmpty {
        /// The connection string, without its password.
        url: String,
        /// The records it holds.
        records: u64,
        /// The position its `ledger_meta` records as the head.
        head: u64,
    },
    /// The embedded ledger failed verification (the error names the record): nothing of it is
    /// copied.
    #[error("the embedded ledger failed verification, nothing was written: {0}")]
    Source(#[from] evicortex_ledger::VerifyError),
    /// A record holds what PostgreSQL cannot store as it is (the character U+0000 in text).
    #[error("the record at {position}: {field} {reason}; nothing was written")]
    Unstorable {
        /// The record's position.
        position: LedgerPosition,
        /// The column.
        field: &'static str,
        /// Why.
        reason: String,
    },
    /// A copied record, read back inside the transaction, does not match its digest, chain or
    /// the embedded ledger's report.
    #[error("the copy of the record at {position} does not verify: {detail}; nothing was written")]
    Mismatch {
        /// The record's position (0 for the head).
        position: LedgerPosition,
        /// What does not match.
        detail: String,
    },
    /// The handle is connected to a read replica: nothing was sent to the server; a migration
    /// copies into the primary.
    #[error(
        "the PostgreSQL ledger at {url} is a read replica (a hot standby): a migration copies \
         into the primary; nothing was written"
    )]
    ReadOnlyReplica {
        /// The connection string, without its password.
        url: String,
    },
    /// The server failed; the transaction was rolled back.
    #[error(transparent)]
    Database(#[from] DatabaseError),
}

impl PgLedger {
    /// Copies every record of `source` into this ledger, which must be empty, in ONE
    /// transaction (a failure or a crash leaves it empty). The source is read from one snapshot
    /// and verified as it is read ([`Ledger::for_each_stored_record`]); each batch is read back
    /// inside the transaction and checked with the code this ledger's verify uses (digest,
    /// chain link, number, redaction lists); the copied head must equal the source's verify
    /// report before the head is recorded and the transaction commits. `progress(done, total)`
    /// follows the records copied (`total` as the source's head counts them).
    pub fn import_ledger(
        &self,
        source: &Ledger,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<ImportReport, ImportError> {
        if self.is_replica() {
            return Err(ImportError::ReadOnlyReplica { url: self.url().to_owned() });
        }
        let total = source.head().map_err(|e| {
            ImportError::Source(evicortex_ledger::VerifyError::BadHead { detail: e.to_string() })
        })?;
        let total = total.map_or(0, LedgerPosition::raw);
        let mut client = self.client();
        let mut tx = client.transaction().map_err(self.db("starting the import"))?;
        tx.batch_execute(LOCK_RECORDS).map_err(self.db("locking the records table"))?;
        self.refuse_non_empty(&mut tx)?;
        let mut check = ImportCheck::default();
        let mut batch: Vec<StoredRecordExport> = Vec::with_capacity(BATCH);
        let verified = source.for_each_stored_record(|record| {
            refuse_unstorable(&record)?;
            batch.push(record);
            if batch.len() == BATCH {
                self.copy_batch(&mut tx, &batch, &mut check)?;
                batch.clear();
                progress(check.records(), total);
            }
            Ok::<(), ImportError>(())
        })?;
        self.copy_batch(&mut tx, &batch, &mut check)?;
        progress(check.records(), total);
        let copied = check.finish().map_err(|(position, detail)| ImportError::Mismatch {
            position: LedgerPosition::from_raw(position),
            detail,
        })?;
        compare_heads(&verified, &copied)?;
        head::write_head(&mut tx, Head { last: verified.head, chain: verified.chain_head })
            .map_err(self.db("recording the head"))?;
        tx.commit().map_err(self.db("committing the import"))?;
        Ok(ImportReport {
            records: verified.records,
            turns: verified.turns,
            erased_turns: verified.erased_turns,
            redactions: verified.redactions,
            head: verified.head,
            chain_head: verified.chain_head,
        })
    }

    fn refuse_non_empty(&self, tx: &mut Transaction<'_>) -> Result<(), ImportError> {
        let records: i64 = tx
            .query_one("SELECT count(*) FROM records", &[])
            .map_err(self.db("counting records"))?
            .get(0);
        let recorded = head::read_head(tx).map_err(self.db("reading the head"))?;
        let head = match &recorded {
            Ok(h) => h.last.map_or(0, LedgerPosition::raw),
            Err(_) => u64::MAX,
        };
        if records != 0 || head != 0 {
            return Err(ImportError::NotEmpty {
                url: self.url().to_owned(),
                records: records as u64,
                head,
            });
        }
        Ok(())
    }

    /// Inserts `batch` in one statement, then reads it back and checks every row.
    fn copy_batch(
        &self,
        tx: &mut Transaction<'_>,
        batch: &[StoredRecordExport],
        check: &mut ImportCheck,
    ) -> Result<(), ImportError> {
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else { return Ok(()) };
        let rows = batch.iter().map(Row::from_export).collect::<Vec<_>>();
        let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(rows.len() * Row::COLUMNS);
        for row in &rows {
            row.push_params(&mut params);
        }
        tx.execute(&insert_statement(rows.len()), &params)
            .map_err(self.db("inserting copied records"))?;
        let read_back = tx
            .query(
                &format!(
                    "SELECT {} FROM records WHERE seq BETWEEN $1 AND $2 ORDER BY seq",
                    crate::record_row::RECORD_COLUMNS
                ),
                &[&(first.position.raw() as i64), &(last.position.raw() as i64)],
            )
            .map_err(self.db("reading copied records back"))?;
        for (row, exported) in read_back.iter().zip(batch) {
            let raw = raw_record(row).map_err(self.db("decoding copied records"))?;
            check
                .record(&raw, exported)
                .map_err(|detail| ImportError::Mismatch { position: exported.position, detail })?;
        }
        if read_back.len() != batch.len() {
            return Err(ImportError::Mismatch {
                position: first.position,
                detail: format!("{} rows read back of {} inserted", read_back.len(), batch.len()),
            });
        }
        Ok(())
    }
}

/// PostgreSQL text cannot hold U+0000, which the embedded ledger stores: refused by name
/// rather than failing inside the transaction with the server's encoding error.
fn refuse_unstorable(record: &StoredRecordExport) -> Result<(), ImportError> {
    let nul = |field: &'static str| ImportError::Unstorable {
        position: record.position,
        field,
        reason: "holds the character U+0000, which PostgreSQL text cannot store".to_owned(),
    };
    if record.text.as_deref().is_some_and(|t| t.contains('\0')) {
        return Err(nul("text"));
    }
    if record.speaker.as_deref().is_some_and(|s| s.contains('\0')) {
        return Err(nul("speaker"));
    }
    Ok(())
}

fn compare_heads(verified: &VerifyReport, copied: &VerifyReport) -> Result<(), ImportError> {
    if verified != copied {
        return Err(ImportError::Mismatch {
            position: LedgerPosition::from_raw(0),
            detail: format!("the embedded ledger verifies as {verified:?}, the copy as {copied:?}"),
        });
    }
    Ok(())
}

/// `INSERT` of `n` records, every column given.
fn insert_statement(n: usize) -> String {
    let mut sql = String::from(
        "INSERT INTO records (seq, kind, namespace, session, turn, role, speaker, text, \
         event_utc_us, event_offset_s, ingest_utc_us, meta, target_record, erased_seqs, \
         erased_by, content_digest, digest, chain, salt, number) VALUES ",
    );
    for i in 0..n {
        let p = |k: usize| i * Row::COLUMNS + k;
        if i > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for k in 1..=Row::COLUMNS {
            if k > 1 {
                sql.push_str(", ");
            }
            // meta is `json`: given as text so that its bytes are kept as they are.
            if k == 12 {
                sql.push_str(&format!("${}::text::json", p(k)));
            } else {
                sql.push_str(&format!("${}", p(k)));
            }
        }
        sql.push(')');
    }
    sql
}

/// An exported record in the PostgreSQL column types, in the insert's column order.
struct Row<'a> {
    seq: i64,
    kind: i16,
    namespace: &'a str,
    session: Option<&'a str>,
    turn: Option<i64>,
    role: Option<&'static str>,
    speaker: Option<&'a str>,
    text: Option<&'a str>,
    event_utc_us: Option<i64>,
    event_offset_s: Option<i32>,
    ingest_utc_us: i64,
    meta: Option<&'a str>,
    target_record: Option<i64>,
    erased_seqs: Option<Vec<u8>>,
    erased_by: Option<i64>,
    content_digest: Option<&'a [u8]>,
    digest: &'a [u8],
    chain: &'a [u8],
    salt: Option<&'a [u8]>,
    number: i64,
}

impl<'a> Row<'a> {
    const COLUMNS: usize = 20;

    fn from_export(r: &'a StoredRecordExport) -> Row<'a> {
        let position = |p: LedgerPosition| p.raw() as i64;
        Row {
            seq: position(r.position),
            kind: match r.kind {
                evicortex_ledger::StoredRecordKind::Turn => crate::schema::KIND_TURN,
                evicortex_ledger::StoredRecordKind::Redaction => crate::schema::KIND_REDACTION,
            },
            namespace: r.namespace.as_str(),
            session: r.session.as_ref().map(|s| s.as_str()),
            turn: r.turn.map(|t| i64::from(t.raw())),
            role: r.role.map(|role| role.as_str()),
            speaker: r.speaker.as_deref(),
            text: r.text.as_deref(),
            event_utc_us: r.event_utc_micros,
            event_offset_s: r.event_offset_seconds,
            ingest_utc_us: r.ingest_utc_micros,
            meta: r.meta_json.as_deref(),
            target_record: r.target_record.map(position),
            // As the embedded ledger stores them: each position as a u64, little-endian.
            erased_seqs: r
                .erased
                .as_ref()
                .map(|erased| erased.iter().flat_map(|p| p.raw().to_le_bytes()).collect()),
            erased_by: r.erased_by.map(position),
            content_digest: r.content_digest.as_ref().map(|d| d.as_slice()),
            digest: r.digest.as_bytes().as_slice(),
            chain: r.chain.as_bytes().as_slice(),
            salt: r.salt.as_ref().map(|s| s.as_bytes().as_slice()),
            number: r.number.raw() as i64,
        }
    }

    fn push_params<'r>(&'r self, out: &mut Vec<&'r (dyn ToSql + Sync)>) {
        out.extend_from_slice(&[
            &self.seq,
            &self.kind,
            &self.namespace,
            &self.session,
            &self.turn,
            &self.role,
            &self.speaker,
            &self.text,
            &self.event_utc_us,
            &self.event_offset_s,
            &self.ingest_utc_us,
            &self.meta,
            &self.target_record,
            &self.erased_seqs,
            &self.erased_by,
            &self.content_digest,
            &self.digest,
            &self.chain,
            &self.salt,
            &self.number,
        ]);
    }
}
