//! [`EvidenceLedger`]: what every store of the ledger offers (the embedded [`crate::Ledger`],
//! `evicortex-postgres`'s `PgLedger`), with the same semantics and errors, so that a caller
//! holds `&dyn EvidenceLedger` and never asks which store it talks to.

use std::{ops::ControlFlow, path::Path};

use evicortex_core::{Evidence, Namespace, Turn, TurnId};

use crate::{
    AppendError, AppendReceipt, EraseError, EraseReceipt, EraseTarget, LedgerPosition, LedgerStats,
    ReadError, VerifyError, VerifyReport,
};

/// Which live turns a scan reads, each checked against its digest and chain link first.
#[derive(Debug, Clone, Copy)]
pub enum EvidenceScan<'a> {
    /// The live turns of a namespace numbered after the given record (all when `None`), in
    /// number order.
    Namespace(&'a Namespace, Option<TurnId>),
    /// The live turns (of the namespace, if given, else of every namespace) recorded after the
    /// given ledger position (all when `None`), in ledger order: for watermarks across
    /// namespaces.
    Since(Option<&'a Namespace>, Option<LedgerPosition>),
}

/// The order a scan reads in, and what its bound counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanOrder {
    /// One namespace's records by number (its `(namespace, number)` index serves both the
    /// filter and the order: a namespace's new turns cost what they are).
    Number,
    /// Ledger positions, across namespaces unless one is given.
    Position,
}

impl EvidenceScan<'_> {
    /// The namespace the scan keeps to (`None`: every one), its order, and the number or
    /// position it reads after (0: from the first record).
    pub fn bounds(&self) -> (Option<&Namespace>, ScanOrder, i64) {
        match *self {
            EvidenceScan::Namespace(namespace, after) => {
                (Some(namespace), ScanOrder::Number, after.map_or(0, |a| a.raw() as i64))
            }
            EvidenceScan::Since(namespace, after) => {
                (namespace, ScanOrder::Position, after.map_or(0, |a| a.raw() as i64))
            }
        }
    }
}

/// The evidence ledger on one store. `Send + Sync`: concurrent calls are safe; writes are
/// serialised by the store.
pub trait EvidenceLedger: Send + Sync + std::fmt::Debug {
    /// The ledger file; for a database, its connection string without the password (a path
    /// only in type, so that messages naming "the ledger" name the server).
    fn location(&self) -> &Path;

    /// What the open-time check found wrong, for a ledger opened for inspection (one opened to
    /// write is refused instead).
    fn open_problem(&self) -> Option<&str> {
        None
    }

    /// Group commit: appends several independent batches in ONE durable transaction, in order,
    /// each all-or-nothing on its own (see [`crate::storage::append_group_in`]). A turn
    /// identical to a stored one is a no-op; the same key with other content is an
    /// [`AppendError::Conflict`]. When the transaction itself fails, nothing is stored and the
    /// outer `Err` says why.
    fn append_group(
        &self,
        batches: &[&[Turn]],
    ) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError>;

    /// Appends `turns` as one atomic, durable transaction: when this returns `Ok`, the batch is
    /// stored; when it returns `Err`, nothing of it is. The records the append builds on (the
    /// last record, and every stored turn it answers as already present) are checked against
    /// their digests and chain links first.
    fn append(&self, turns: &[Turn]) -> Result<AppendReceipt, AppendError> {
        let mut results = self.append_group(&[turns])?;
        results.pop().expect("one result per batch")
    }

    /// Checks `turns` exactly as [`EvidenceLedger::append`] would against one snapshot,
    /// writing nothing; returns how many turns would be new. A caller that commits a long
    /// input in several batches checks it whole first, so that a conflict near its end refuses
    /// it before anything is stored.
    fn check_append(&self, turns: &[Turn]) -> Result<usize, AppendError>;

    /// Erases `target` (see [`crate::storage::erase_in`]) and scrubs the old bytes from every
    /// file of the store; the chain still verifies afterwards.
    fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError>;

    /// [`EvidenceLedger::erase`] without its scrub: the erasure is committed, and marked so that
    /// the next open scrubs should the process end first, but the old bytes may stay in the
    /// files until [`EvidenceLedger::scrub_erased`]. A caller that holds a lock across the
    /// erasure scrubs after releasing it, so that erasures waiting meanwhile share one scrub.
    fn erase_unscrubbed(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        self.erase(target)
    }

    /// Returns once the old bytes of every erasure committed through this handle before the
    /// call are scrubbed from the files; erasures that wait together share one scrub (on the
    /// embedded store a scrub rewrites the whole file). A store whose erase leaves nothing to
    /// scrub does nothing.
    fn scrub_erased(&self) -> Result<(), EraseError> {
        Ok(())
    }

    /// Recomputes every record's digest and the whole chain, checks every redaction against
    /// the records it erased and the recorded head against the last record, from one snapshot,
    /// calling `progress(done, total)` every few thousand records. Names the first bad record.
    fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError>;

    /// [`EvidenceLedger::verify_with_progress`] without progress.
    fn verify(&self) -> Result<VerifyReport, VerifyError> {
        self.verify_with_progress(&mut |_, _| {})
    }

    /// Counts over the whole ledger, from one snapshot.
    fn stats(&self) -> Result<LedgerStats, ReadError>;

    /// Calls `visit` with every live turn `scan` selects, with its position, from one
    /// snapshot, until it breaks; returns how many it saw. Every turn is checked against its
    /// digest and its chain link before `visit` sees it: a record altered behind the ledger's
    /// back is a [`ReadError::Corrupted`] naming it, never served. `visit` runs while the
    /// store's connection is busy: it must not call this ledger.
    fn scan_evidence(
        &self,
        scan: EvidenceScan<'_>,
        visit: &mut dyn FnMut(LedgerPosition, Evidence) -> ControlFlow<()>,
    ) -> Result<u64, ReadError>;

    /// The live turns of `namespace`, in ledger order.
    fn evidence(&self, namespace: &Namespace) -> Result<Vec<Evidence>, ReadError> {
        let mut out = Vec::new();
        self.scan_evidence(EvidenceScan::Namespace(namespace, None), &mut |_, e| {
            out.push(e);
            ControlFlow::Continue(())
        })?;
        Ok(out)
    }

    /// The last record's position, if any.
    fn head(&self) -> Result<Option<LedgerPosition>, ReadError>;

    /// The number of the last record (turn or redaction) of `namespace`, if any.
    fn namespace_head(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError>;

    /// The namespaces with at least one live turn, sorted by their UTF-8 bytes.
    fn namespaces(&self) -> Result<Vec<Namespace>, ReadError>;

    /// Whether any erasure was recorded after ledger position `after` (`None`: ever). Reads
    /// only the records after it, so derived data can tell "appends only since I was built"
    /// from "rebuild" at the cost of what is new.
    fn erased_after(&self, after: Option<LedgerPosition>) -> Result<bool, ReadError>;

    /// The number of the redaction record of the latest erasure in `namespace` (`None`: none
    /// ever erased anything there). Derived data covering the namespace only up to a number
    /// below it may hold erased turns.
    fn last_erasure(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError>;
}

/// [`EvidenceLedger::scan_evidence`] with a visitor that may fail with the caller's own error.
pub trait ScanEvidence: EvidenceLedger {
    /// Calls `f` with every live turn of `namespace` numbered after `after` (if given), in
    /// ledger order, from one snapshot; returns how many were seen. The first error of `f`
    /// ends the scan and is returned.
    fn for_each_evidence<E: From<ReadError>>(
        &self,
        namespace: &Namespace,
        after: Option<TurnId>,
        mut f: impl FnMut(Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        scan_with(self, EvidenceScan::Namespace(namespace, after), |_, e| f(e))
    }

    /// Calls `f` with every live turn (of `namespace` if given, else of every namespace)
    /// recorded after ledger position `after` (if given), with its position, in ledger order;
    /// checked as [`ScanEvidence::for_each_evidence`] checks.
    fn for_each_evidence_since<E: From<ReadError>>(
        &self,
        namespace: Option<&Namespace>,
        after: Option<LedgerPosition>,
        f: impl FnMut(LedgerPosition, Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        scan_with(self, EvidenceScan::Since(namespace, after), f)
    }
}

impl<T: EvidenceLedger + ?Sized> ScanEvidence for T {}

fn scan_with<L: EvidenceLedger + ?Sized, E: From<ReadError>>(
    ledger: &L,
    scan: EvidenceScan<'_>,
    mut f: impl FnMut(LedgerPosition, Evidence) -> Result<(), E>,
) -> Result<u64, E> {
    let mut failed = None;
    let seen = ledger.scan_evidence(scan, &mut |at, e| match f(at, e) {
        Ok(()) => ControlFlow::Continue(()),
        Err(err) => {
            failed = Some(err);
            ControlFlow::Break(())
        }
    });
    match failed {
        Some(err) => Err(err),
        None => seen.map_err(E::from),
    }
}
