//! The ledger behind a [`crate::Memory`]: the embedded SQLite file or a PostgreSQL database.
//! Every method has the embedded ledger's signature and errors, so the rest of the facade (and
//! every front end's error classification) does not know which one it talks to: a PostgreSQL
//! failure becomes the embedded enum's variant of the same class (a refusal stays a refusal,
//! a corruption a corruption, a server failure a storage failure naming the server, and a
//! write sent to a read replica the embedded enum's `ReadOnlyReplica` refusal).

use std::path::Path;

use evicortex_core::{Evidence, Namespace, Turn, TurnId};
use evicortex_ledger::{
    AppendError, AppendReceipt, EraseError, EraseReceipt, EraseTarget, Ledger, LedgerPosition,
    LedgerStats, ReadError, StorageError, VerifyError, VerifyReport,
};
use evicortex_postgres::{DatabaseError, PgLedger};

/// Which store holds the ledger.
#[derive(Debug)]
pub(crate) enum LedgerBackend {
    /// `ledger.sqlite` in the store directory.
    Embedded(Ledger),
    /// A PostgreSQL database; the derived stores stay in a local directory.
    Postgres(PgLedger),
}

/// A read error of either ledger, or the caller's own, while a PostgreSQL scan runs a callback
/// whose error type only converts from the embedded ledger's [`ReadError`].
enum ScanError<E> {
    Caller(E),
    Ledger(evicortex_postgres::ReadError),
}

impl<E> From<evicortex_postgres::ReadError> for ScanError<E> {
    fn from(e: evicortex_postgres::ReadError) -> Self {
        ScanError::Ledger(e)
    }
}

impl<E: From<ReadError>> ScanError<E> {
    fn into_caller(self) -> E {
        match self {
            ScanError::Caller(e) => e,
            ScanError::Ledger(e) => E::from(read_error(e)),
        }
    }
}

impl LedgerBackend {
    /// The ledger file; for PostgreSQL, the connection string without its password (a path
    /// only in type, so that callers naming "the ledger" in messages name the server).
    pub(crate) fn path(&self) -> &Path {
        match self {
            LedgerBackend::Embedded(l) => l.path(),
            LedgerBackend::Postgres(p) => Path::new(p.url()),
        }
    }

    /// What the open-time check found wrong, for a ledger opened for inspection. A PostgreSQL
    /// ledger that fails its check refuses to connect, so it never has one.
    pub(crate) fn open_problem(&self) -> Option<&str> {
        match self {
            LedgerBackend::Embedded(l) => l.open_problem(),
            LedgerBackend::Postgres(_) => None,
        }
    }

    pub(crate) fn append(&self, turns: &[Turn]) -> Result<AppendReceipt, AppendError> {
        match self {
            LedgerBackend::Embedded(l) => l.append(turns),
            LedgerBackend::Postgres(p) => p.append(turns).map_err(append_error),
        }
    }

    pub(crate) fn append_group(
        &self,
        batches: &[&[Turn]],
    ) -> Result<Vec<Result<AppendReceipt, AppendError>>, AppendError> {
        match self {
            LedgerBackend::Embedded(l) => l.append_group(batches),
            LedgerBackend::Postgres(p) => p
                .append_group(batches)
                .map(|results| results.into_iter().map(|r| r.map_err(append_error)).collect())
                .map_err(append_error),
        }
    }

    pub(crate) fn check_append(&self, turns: &[Turn]) -> Result<usize, AppendError> {
        match self {
            LedgerBackend::Embedded(l) => l.check_append(turns),
            LedgerBackend::Postgres(p) => p.check_append(turns).map_err(append_error),
        }
    }

    pub(crate) fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        match self {
            LedgerBackend::Embedded(l) => l.erase(target),
            LedgerBackend::Postgres(p) => p.erase(target).map_err(|e| erase_error(e, p.url())),
        }
    }

    pub(crate) fn verify(&self) -> Result<VerifyReport, VerifyError> {
        self.verify_with_progress(&mut |_, _| {})
    }

    pub(crate) fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError> {
        match self {
            LedgerBackend::Embedded(l) => l.verify_with_progress(progress),
            LedgerBackend::Postgres(p) => p.verify_with_progress(progress).map_err(verify_error),
        }
    }

    pub(crate) fn stats(&self) -> Result<LedgerStats, ReadError> {
        match self {
            LedgerBackend::Embedded(l) => l.stats(),
            LedgerBackend::Postgres(p) => p.stats().map_err(read_error),
        }
    }

    pub(crate) fn evidence(&self, namespace: &Namespace) -> Result<Vec<Evidence>, ReadError> {
        match self {
            LedgerBackend::Embedded(l) => l.evidence(namespace),
            LedgerBackend::Postgres(p) => p.evidence(namespace).map_err(read_error),
        }
    }

    pub(crate) fn for_each_evidence<E: From<ReadError>>(
        &self,
        namespace: &Namespace,
        after: Option<TurnId>,
        mut f: impl FnMut(Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        match self {
            LedgerBackend::Embedded(l) => l.for_each_evidence(namespace, after, f),
            LedgerBackend::Postgres(p) => p
                .for_each_evidence(namespace, after, |e| f(e).map_err(ScanError::Caller))
                .map_err(ScanError::into_caller),
        }
    }

    pub(crate) fn for_each_evidence_since<E: From<ReadError>>(
        &self,
        namespace: Option<&Namespace>,
        after: Option<LedgerPosition>,
        mut f: impl FnMut(LedgerPosition, Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        match self {
            LedgerBackend::Embedded(l) => l.for_each_evidence_since(namespace, after, f),
            LedgerBackend::Postgres(p) => p
                .for_each_evidence_since(namespace, after, |at, e| {
                    f(at, e).map_err(ScanError::Caller)
                })
                .map_err(ScanError::into_caller),
        }
    }

    pub(crate) fn head(&self) -> Result<Option<LedgerPosition>, ReadError> {
        match self {
            LedgerBackend::Embedded(l) => l.head(),
            LedgerBackend::Postgres(p) => p.head().map_err(read_error),
        }
    }

    pub(crate) fn namespace_head(
        &self,
        namespace: &Namespace,
    ) -> Result<Option<TurnId>, ReadError> {
        match self {
            LedgerBackend::Embedded(l) => l.namespace_head(namespace),
            LedgerBackend::Postgres(p) => p.namespace_head(namespace).map_err(read_error),
        }
    }

    pub(crate) fn namespaces(&self) -> Result<Vec<Namespace>, ReadError> {
        match self {
            LedgerBackend::Embedded(l) => l.namespaces(),
            LedgerBackend::Postgres(p) => p.namespaces().map_err(read_error),
        }
    }

    pub(crate) fn erased_after(&self, after: Option<LedgerPosition>) -> Result<bool, ReadError> {
        match self {
            LedgerBackend::Embedded(l) => l.erased_after(after),
            LedgerBackend::Postgres(p) => p.erased_after(after).map_err(read_error),
        }
    }

    pub(crate) fn last_erasure(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        match self {
            LedgerBackend::Embedded(l) => l.last_erasure(namespace),
            LedgerBackend::Postgres(p) => p.last_erasure(namespace).map_err(read_error),
        }
    }
}

/// A server failure as the embedded ledger's storage failure: class I/O, naming the server
/// (password removed) where the embedded one names its file.
fn storage(e: DatabaseError) -> StorageError {
    StorageError::Io { op: e.op, path: e.url.into(), source: std::io::Error::other(e.source) }
}

/// A failure this build's conversions do not know (the PostgreSQL enums are non-exhaustive):
/// still a storage failure, with its message.
fn unknown(url: &str, e: impl std::fmt::Display) -> StorageError {
    StorageError::Io {
        op: "PostgreSQL ledger",
        path: url.into(),
        source: std::io::Error::other(e.to_string()),
    }
}

/// Positions and record numbers share one counter in messages: the embedded ledger names a
/// corrupted record by its position too.
fn record_at(position: LedgerPosition) -> TurnId {
    TurnId::from_raw(position.raw())
}

pub(crate) fn read_error(e: evicortex_postgres::ReadError) -> ReadError {
    use evicortex_postgres::ReadError as P;
    match e {
        P::Corrupted { position, detail } => {
            ReadError::Corrupted { turn_id: record_at(position), detail }
        }
        P::Database(d) => ReadError::Storage(storage(d)),
        other => ReadError::Storage(unknown("", other)),
    }
}

fn append_error(e: evicortex_postgres::AppendError) -> AppendError {
    use evicortex_postgres::AppendError as P;
    match e {
        P::InvalidTurn { index, field, reason } => {
            AppendError::InvalidTurn { index, field, reason }
        }
        P::Conflict { index, namespace, session, turn, existing, field } => {
            AppendError::Conflict { index, namespace, session, turn, existing, field }
        }
        P::Erased { index, namespace, session, turn, existing } => {
            AppendError::Erased { index, namespace, session, turn, existing }
        }
        P::Corrupted { position, detail } => {
            AppendError::Corrupted { turn_id: record_at(position), detail }
        }
        P::ReadOnlyReplica { url } => AppendError::ReadOnlyReplica { server: url },
        P::Database(d) => AppendError::Storage(storage(d)),
        other => AppendError::Storage(unknown("", other)),
    }
}

fn verify_error(e: evicortex_postgres::VerifyError) -> VerifyError {
    use evicortex_postgres::VerifyError as P;
    match e {
        P::BadRecord { position, detail } => {
            VerifyError::BadRecord { turn_id: record_at(position), detail }
        }
        P::BadHead { detail } => VerifyError::BadHead { detail },
        P::Database(d) => VerifyError::Storage(storage(d)),
        other => VerifyError::Storage(unknown("", other)),
    }
}

fn erase_error(e: evicortex_postgres::EraseError, url: &str) -> EraseError {
    use evicortex_postgres::EraseError as P;
    match e {
        P::NotFound { target } => EraseError::NotFound { target },
        P::NotATurn { turn_id, namespace } => EraseError::WrongNamespace { turn_id, namespace },
        P::Corrupted { position, detail } => {
            EraseError::Corrupted { turn_id: record_at(position), detail }
        }
        P::ScrubIncomplete { detail } => EraseError::ScrubIncomplete { path: url.into(), detail },
        P::ReadOnlyReplica { url } => EraseError::ReadOnlyReplica { server: url },
        P::Database(d) => EraseError::Storage(storage(d)),
        // The server's settings would keep the texts (nothing was erased): a storage refusal,
        // with the settings to change in its message.
        other => EraseError::Storage(unknown(url, other)),
    }
}
