//! Errors, one enum per operation. Corruption is always its own variant, apart from I/O.

use std::path::PathBuf;

use evicortex_core::{Namespace, SessionId, TurnId, TurnIndex};

/// A failure of the storage engine or the file system, with the file it concerns.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// SQLite reported an error (I/O, full disk, locking, ...).
    #[error("sqlite error on {path}: {source}")]
    Sqlite {
        /// The ledger file.
        path: PathBuf,
        /// SQLite's error.
        #[source]
        source: rusqlite::Error,
    },
    /// A file system operation failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl StorageError {
    /// Whether SQLite found the file itself malformed (`SQLITE_CORRUPT`, `SQLITE_NOTADB`): an
    /// integrity failure rather than an I/O one.
    pub fn is_corruption(&self) -> bool {
        match self {
            StorageError::Sqlite { source, .. } => matches!(
                source.sqlite_error_code(),
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
            ),
            StorageError::Io { .. } => false,
        }
    }
}

/// Why [`crate::Ledger::open`] refused a store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// Opening read-only, but there is no ledger at that path.
    #[error("no ledger at {path}")]
    NotFound {
        /// The ledger file that does not exist.
        path: PathBuf,
    },
    /// The file is a ledger of a format this build does not read.
    #[error("{path} has ledger format version {found}, this build reads version {supported}")]
    UnsupportedFormat {
        /// The ledger file.
        path: PathBuf,
        /// The version found in the file.
        found: String,
        /// The version this build reads and writes.
        supported: u32,
    },
    /// The cheap open-time check failed: missing metadata, or the recorded chain head does not
    /// match the last record. The store may still be inspected read-only (`verify`).
    #[error("ledger {path} failed its integrity check on open: {detail}")]
    Corrupted {
        /// The ledger file.
        path: PathBuf,
        /// What did not match.
        detail: String,
    },
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why [`crate::Ledger::append`] refused a batch. A refused batch changes nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// A turn of the batch cannot be stored faithfully.
    #[error("turn {index} of the batch: {field} {reason}")]
    InvalidTurn {
        /// The position of the turn in the batch (0-based).
        index: usize,
        /// The offending field.
        field: &'static str,
        /// Why it was refused.
        reason: String,
    },
    /// The same (namespace, session, turn) is already stored, or given twice in the batch, with
    /// different content. Turns are immutable: never silently overwritten.
    #[error(
        "conflict: namespace {namespace} session \"{session}\" turn {turn} is already stored as \
         {existing} with a different {field}"
    )]
    Conflict {
        /// The position of the incoming turn in the batch (0-based).
        index: usize,
        /// Its namespace.
        namespace: Namespace,
        /// Its session.
        session: SessionId,
        /// Its turn index.
        turn: TurnIndex,
        /// Where the other version is: a stored record or an earlier turn of the batch.
        existing: ConflictingRecord,
        /// The first field that differs.
        field: &'static str,
    },
    /// The (namespace, session, turn) was stored and later erased; it cannot be stored again.
    #[error(
        "namespace {namespace} session \"{session}\" turn {turn} was erased (record {existing}); erased turns cannot be re-ingested"
    )]
    Erased {
        /// The position of the incoming turn in the batch (0-based).
        index: usize,
        /// Its namespace.
        namespace: Namespace,
        /// Its session.
        session: SessionId,
        /// Its turn index.
        turn: TurnIndex,
        /// The erased record.
        existing: TurnId,
    },
    /// The ledger was opened for inspection only.
    #[error("ledger {path} is open read-only")]
    ReadOnly {
        /// The ledger file.
        path: PathBuf,
    },
    /// A stored record the append had to read is malformed.
    #[error("ledger is corrupted at record {turn_id}: {detail}")]
    Corrupted {
        /// The record.
        turn_id: TurnId,
        /// What is wrong with it.
        detail: String,
    },
    /// The storage engine failed; nothing of the batch was stored.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Where the other side of an [`AppendError::Conflict`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConflictingRecord {
    /// A record already in the ledger.
    Stored(TurnId),
    /// An earlier turn of the same batch (0-based position).
    InBatch(usize),
}

impl std::fmt::Display for ConflictingRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConflictingRecord::Stored(id) => write!(f, "record {id}"),
            ConflictingRecord::InBatch(index) => write!(f, "turn {index} of the same batch"),
        }
    }
}

/// Why [`crate::Ledger::verify`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A record does not match its digest, its chain hash or its neighbours; it is the first bad
    /// record in ledger order.
    #[error("record {turn_id} is corrupted: {detail}")]
    BadRecord {
        /// The first bad record.
        turn_id: TurnId,
        /// What does not match.
        detail: String,
    },
    /// The recorded head (metadata table) does not match the records.
    #[error("ledger head is corrupted: {detail}")]
    BadHead {
        /// What does not match.
        detail: String,
    },
    /// The storage engine failed (or SQLite itself found its file malformed).
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why [`crate::Ledger::erase`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EraseError {
    /// Nothing in the ledger matches the target (it never existed).
    #[error("nothing to erase: {target} matches no record")]
    NotFound {
        /// The target, described.
        target: String,
    },
    /// The record exists but is not a turn of the given namespace.
    #[error("record {turn_id} is not a turn of namespace {namespace}")]
    WrongNamespace {
        /// The record.
        turn_id: TurnId,
        /// The namespace given.
        namespace: Namespace,
    },
    /// The ledger was opened for inspection only.
    #[error("ledger {path} is open read-only")]
    ReadOnly {
        /// The ledger file.
        path: PathBuf,
    },
    /// A stored record is malformed.
    #[error("ledger is corrupted at record {turn_id}: {detail}")]
    Corrupted {
        /// The record.
        turn_id: TurnId,
        /// What is wrong with it.
        detail: String,
    },
    /// The redaction is committed, but the old bytes could not yet be scrubbed from the files
    /// (for example another process holds a read snapshot). Erasing the same target again
    /// retries the scrub.
    #[error("erasure committed but {path} could not be scrubbed: {detail}")]
    ScrubIncomplete {
        /// The file.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why a read ([`crate::Ledger::evidence`], [`crate::Ledger::stats`], ...) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A stored record is malformed.
    #[error("ledger is corrupted at record {turn_id}: {detail}")]
    Corrupted {
        /// The record.
        turn_id: TurnId,
        /// What is wrong with it.
        detail: String,
    },
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}
