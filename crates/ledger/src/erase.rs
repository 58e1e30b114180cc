//! Erasure: a redaction record in the chain, and the erased text scrubbed from every file.

use std::sync::{
    Mutex, PoisonError,
    atomic::{AtomicBool, AtomicU64, Ordering},
};

use evicortex_core::{EvidenceDigest, Namespace, SessionId, TextDigest, TurnId};
use rusqlite::{Connection, TransactionBehavior};

use crate::{
    EraseError, Ledger, LedgerPosition,
    record::redaction_digest,
    row::{ChainedRow, Corrupt, KIND_TURN},
    store::{self, SqliteTable, sql_err},
    table::{Head, NewRedaction, RecordTable, checked_head},
};

/// What to erase. Every target names its namespace, so an erasure never crosses namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EraseTarget {
    /// Every turn of a namespace.
    Namespace(Namespace),
    /// Every turn of one session of a namespace.
    Session(Namespace, SessionId),
    /// One record, by its number in the namespace; it must be a turn.
    Record(Namespace, TurnId),
}

impl EraseTarget {
    /// The namespace the target lies in.
    pub fn namespace(&self) -> &Namespace {
        match self {
            EraseTarget::Namespace(ns)
            | EraseTarget::Session(ns, _)
            | EraseTarget::Record(ns, _) => ns,
        }
    }
}

impl std::fmt::Display for EraseTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EraseTarget::Namespace(ns) => write!(f, "namespace {ns}"),
            EraseTarget::Session(ns, s) => write!(f, "namespace {ns} session {:?}", s.as_str()),
            EraseTarget::Record(ns, id) => write!(f, "namespace {ns} record {id}"),
        }
    }
}

/// What an erasure did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EraseReceipt {
    /// The number (in the target's namespace) of the redaction record appended, or `None` when every matching turn was already erased
    /// (the scrub of the files is still redone).
    pub redaction: Option<TurnId>,
    /// The turns erased by this call.
    pub erased: Vec<ErasedTurn>,
    /// Turns matching the target that an earlier erasure had already erased.
    pub already_erased: usize,
    /// Digests of the erased texts, sorted: derived stores keyed by text (embedding caches)
    /// must drop these. A live turn may hold the same text: what was derived from it is then
    /// computed again when next needed (telling would cost a read of every live turn).
    pub erased_texts: Vec<TextDigest>,
}

/// One turn erased by an [`EraseReceipt`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErasedTurn {
    /// The erased record's number in its namespace.
    pub id: TurnId,
    /// Its digest, still kept in the chain.
    pub digest: EvidenceDigest,
    /// The digest of its former text, for purging derived data keyed by text.
    pub text_digest: TextDigest,
    /// Its namespace.
    pub namespace: Namespace,
}

/// Erases `target` inside `table`'s write transaction, which the caller commits on `Ok` and then
/// scrubs: appends a redaction record naming every erased record (by position) and its digest,
/// clears text, speaker, meta and content salt of those records (each keeps its salted content
/// digest, which confirms no guessed text once the salt is gone) and marks the scrub pending. A
/// target whose turns were all erased before appends nothing. The last record and every erased
/// record are checked against their digests and chain links first.
pub fn erase_in<T: RecordTable + ?Sized>(
    table: &mut T,
    target: &EraseTarget,
) -> Result<EraseReceipt, EraseError> {
    let corrupted = |c: Corrupt| EraseError::Corrupted { position: c.position, detail: c.detail };
    let head = checked_head(table, corrupted)?;
    let matches = table.erase_candidates(target)?;
    if matches.is_empty() {
        return Err(EraseError::NotFound { target: target.to_string() });
    }
    let ns = target.namespace().as_str();
    if let EraseTarget::Record(namespace, id) = target
        && matches
            .iter()
            .any(|m| m.raw.kind != Some(KIND_TURN) || m.raw.namespace.as_deref() != Some(ns))
    {
        return Err(EraseError::NotATurn { turn_id: *id, namespace: namespace.clone() });
    }
    // The chain commits to ledger positions: the redaction names its target record and the
    // records it erased by position, while the receipt speaks the namespace's numbers.
    let chained_target = match target {
        EraseTarget::Record(namespace, _) => {
            EraseTarget::Record(namespace.clone(), matches[0].raw.seq_id())
        }
        other => other.clone(),
    };
    let already_erased = matches.iter().filter(|m| m.raw.erased_by.is_some()).count();
    let mut live = Vec::new();
    let mut listed: Vec<(TurnId, EvidenceDigest)> = Vec::new();
    let mut cleared = Vec::new();
    for ChainedRow { raw, prev_chain } in matches.iter().filter(|m| m.raw.erased_by.is_none()) {
        // What the redaction lists must be what the chain committed to.
        let record = raw.decode().map_err(corrupted)?;
        raw.check_turn(&record, prev_chain.as_deref()).map_err(corrupted)?;
        let (Some(text), Some(_), Some(_)) = (&raw.text, &raw.meta, &raw.salt) else {
            return Err(corrupted(raw.corrupt("a live turn lacks its text, meta or salt")));
        };
        cleared.push((raw, raw.live_content_digest().map_err(corrupted)?));
        listed.push((raw.seq_id(), record.digest));
        live.push(ErasedTurn {
            id: raw.number().map_err(corrupted)?,
            digest: record.digest,
            text_digest: TextDigest::of(text),
            namespace: target.namespace().clone(),
        });
    }
    if live.is_empty() {
        return Ok(EraseReceipt {
            redaction: None,
            erased: live,
            already_erased,
            erased_texts: Vec::new(),
        });
    }
    let position = head.next_position();
    let number = table.next_number(ns)?;
    let ingest_utc_micros = chrono::Utc::now().timestamp_micros();
    let digest = redaction_digest(&chained_target, ingest_utc_micros, &listed);
    let chain = head.chain.link(&digest);
    let (session, target_record) = match &chained_target {
        EraseTarget::Namespace(_) => (None, None),
        EraseTarget::Session(_, s) => (Some(s.as_str()), None),
        EraseTarget::Record(_, seq) => (None, Some(LedgerPosition::from_raw(seq.raw()))),
    };
    table.insert_redaction(&NewRedaction {
        position,
        number,
        namespace: ns,
        session,
        target_record,
        ingest_utc_micros,
        erased_seqs: listed.iter().flat_map(|(id, _)| id.raw().to_le_bytes()).collect(),
        digest,
        chain,
    })?;
    table.clear_erased(position, &cleared)?;
    table.write_head(Head { last: Some(position), chain })?;
    // A crash after the commit and before the scrub ends leaves old bytes in the files: the
    // next opening of the store sees the mark and scrubs.
    table.mark_scrub_pending(position)?;
    let mut erased_texts: Vec<TextDigest> = live.iter().map(|e| e.text_digest).collect();
    erased_texts.sort();
    erased_texts.dedup();
    Ok(EraseReceipt { redaction: Some(number), erased: live, already_erased, erased_texts })
}

/// [`crate::EvidenceLedger::erase`] on the embedded ledger: one durable transaction, then the
/// scrub of every file of the ledger (WAL checkpoint with truncation; a rewrite of the main
/// file too when a cleared record may have moved).
pub(crate) fn erase(ledger: &Ledger, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
    let receipt = erase_unscrubbed(ledger, target)?;
    scrub_erased(ledger)?;
    Ok(receipt)
}

/// The erasures committed through a ledger handle and how many of them the last scrub covered:
/// erasures that wait for a scrub together share it.
#[derive(Debug, Default)]
pub(crate) struct ScrubQueue {
    committed: AtomicU64,
    /// Set when an erasure not yet scrubbed may have left old bytes in the main file.
    rewrite: AtomicBool,
    scrubbed: Mutex<u64>,
    /// Scrubs run, and of them whole-file rewrites (for tests).
    runs: AtomicU64,
    rewrites: AtomicU64,
}

/// [`crate::EvidenceLedger::erase_unscrubbed`] on the embedded ledger.
pub(crate) fn erase_unscrubbed(
    ledger: &Ledger,
    target: &EraseTarget,
) -> Result<EraseReceipt, EraseError> {
    let receipt = ledger.with_writer(
        |path| EraseError::ReadOnly { path },
        |conn| {
            let sql = sql_err(ledger.path());
            let tx =
                conn.transaction_with_behavior(TransactionBehavior::Immediate).map_err(&sql)?;
            let mut table = SqliteTable::new(&tx, ledger.path());
            let receipt = erase_in(&mut table, target)?;
            let rewrite = table.cells_may_move();
            tx.commit().map_err(&sql)?;
            if rewrite {
                ledger.scrubs.rewrite.store(true, Ordering::Release);
            }
            Ok(receipt)
        },
    )?;
    // Counted even when nothing was newly erased: the files are scrubbed again all the same.
    ledger.scrubs.committed.fetch_add(1, Ordering::AcqRel);
    Ok(receipt)
}

/// [`crate::EvidenceLedger::scrub_erased`] on the embedded ledger: returns once a scrub that
/// began after every erasure committed through `ledger` before the call has ended. Callers
/// that wait while another scrubs find their erasures covered by the next scrub, or by that one
/// when they committed before it began.
pub(crate) fn scrub_erased(ledger: &Ledger) -> Result<(), EraseError> {
    let wanted = ledger.scrubs.committed.load(Ordering::Acquire);
    let mut scrubbed = ledger.scrubs.scrubbed.lock().unwrap_or_else(PoisonError::into_inner);
    if *scrubbed >= wanted {
        return Ok(());
    }
    let covers = ledger.scrubs.committed.load(Ordering::Acquire);
    let rewrite = ledger.scrubs.rewrite.swap(false, Ordering::AcqRel);
    // The redactions are committed: a failure from here on must say so.
    let scrubbed_files = ledger.scrub_files(rewrite);
    if let Err(e) = scrubbed_files {
        ledger.scrubs.rewrite.fetch_or(rewrite, Ordering::AcqRel);
        return Err(e.after_commit(ledger.path()));
    }
    ledger.scrubs.runs.fetch_add(1, Ordering::Relaxed);
    ledger.scrubs.rewrites.fetch_add(u64::from(rewrite), Ordering::Relaxed);
    *scrubbed = covers;
    Ok(())
}

#[cfg(test)]
impl ScrubQueue {
    /// Scrubs run through this handle so far.
    pub(crate) fn runs(&self) -> u64 {
        self.runs.load(Ordering::Relaxed)
    }

    /// Of those, the scrubs that rewrote the whole file.
    pub(crate) fn rewrites(&self) -> u64 {
        self.rewrites.load(Ordering::Relaxed)
    }
}

impl Ledger {
    /// Removes every trace of cleared bytes from the files: checkpoint the WAL into the main
    /// file and truncate it, rebuild the main file without free pages (`VACUUM`; with
    /// `secure_delete` freed cells are zeroed as well), and checkpoint again; then clears the
    /// erasure's scrub-pending mark. A read-write open runs it when the mark is set (whatever
    /// the erasure was: the mark does not say whether its records kept their cells).
    pub fn scrub(&self) -> Result<(), EraseError> {
        self.scrub_files(true)
    }

    /// The scrub; without `rewrite`, for erasures whose records all kept their cells
    /// ([`crate::store::cell_stays_put`]), no `VACUUM`: the main file holds no old byte of
    /// them (cleared in place, zeroed by `secure_delete`), the WAL does (the pages as they were
    /// appended), so checkpointing it into the main file and truncating it is enough. Cost:
    /// the WAL written since the last checkpoint, not the store.
    fn scrub_files(&self, rewrite: bool) -> Result<(), EraseError> {
        self.with_writer(
            |path| EraseError::ReadOnly { path },
            |conn| {
                let sql = sql_err(self.path());
                checkpoint_truncate(conn, self)?;
                if rewrite {
                    conn.execute_batch("VACUUM;").map_err(&sql)?;
                    checkpoint_truncate(conn, self)?;
                }
                // Only now are the old bytes gone from both files. The mark's removal stays in
                // the WAL (it holds the metadata page alone): checkpointing it too cost each
                // erasure one more fsync and truncation, holding the writer erasures queue for.
                store::clear_scrub_pending(conn).map_err(&sql)?;
                Ok(())
            },
        )
    }
}

fn checkpoint_truncate(conn: &Connection, ledger: &Ledger) -> Result<(), EraseError> {
    let (busy, _log, _done): (i64, i64, i64) = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(sql_err(ledger.path()))?;
    if busy != 0 {
        return Err(EraseError::ScrubIncomplete {
            path: ledger.path().to_owned(),
            detail: "another connection holds a read snapshot; the WAL could not be checkpointed"
                .to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
