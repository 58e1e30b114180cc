//! Errors, one enum per operation. Corruption is always its own variant, apart from I/O.

use std::path::PathBuf;

use evicortex_core::{Namespace, SessionId, TurnId, TurnIndex};

use crate::LedgerPosition;

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
    /// An earlier write on this handle failed with an I/O error (a failed fsync or write), so
    /// what is on disk is unknown to this process; it refuses further writes rather than carry
    /// on as if that write had not happened. Opening the ledger again clears it.
    #[error(
        "ledger {path} refuses writes after an earlier write failed with an I/O error ({cause}); \
         whether that write reached the disk is unknown: reopen the store (restart the server), \
         then run `evicortex verify`"
    )]
    Poisoned {
        /// The ledger file.
        path: PathBuf,
        /// The failure that poisoned it.
        cause: String,
    },
    /// A database server holding the ledger (PostgreSQL) or the connection to it failed.
    #[error("PostgreSQL ledger at {server}: {op}: {source}")]
    Database {
        /// The server's connection string, without its password.
        server: String,
        /// What was being done.
        op: &'static str,
        /// The client's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
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
            StorageError::Io { .. }
            | StorageError::Poisoned { .. }
            | StorageError::Database { .. } => false,
        }
    }

    /// Whether the operating system failed a read, write or fsync (`SQLITE_IOERR` and its
    /// extended codes). A full disk (`SQLITE_FULL`) is not one: SQLite rolls back cleanly.
    pub fn is_io_failure(&self) -> bool {
        match self {
            StorageError::Sqlite { source, .. } => {
                source.sqlite_error_code() == Some(rusqlite::ErrorCode::SystemIoFailure)
            }
            StorageError::Io { .. }
            | StorageError::Poisoned { .. }
            | StorageError::Database { .. } => false,
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
    /// The file is a ledger of a format this build does not read (it may migrate it: see
    /// `remedy`).
    #[error(
        "{path} has ledger format version {found}, this build reads version {supported}: {remedy}"
    )]
    UnsupportedFormat {
        /// The ledger file.
        path: PathBuf,
        /// The version found in the file.
        found: String,
        /// The version this build reads and writes.
        supported: u32,
        /// What to do about it.
        remedy: String,
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

impl OpenError {
    pub(crate) fn unsupported_format(path: &std::path::Path, found: String) -> OpenError {
        let store = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(".".as_ref());
        let remedy = if found == "1" {
            format!(
                "upgrade it once with `evicortex migrate --store {}`, which verifies it, \
                 re-digests every record with a fresh salt and numbers each namespace's records \
                 (see docs/ledger-format.md)",
                store.display()
            )
        } else if found == "2" {
            format!(
                "upgrade it once with `evicortex migrate --store {}`, which numbers each \
                 namespace's records from 1 (ids change for all but the first namespace \
                 written) and verifies it (see docs/ledger-format.md)",
                store.display()
            )
        } else {
            "it was written by another EviCortex build; open it with a build that reads that \
             version"
                .to_owned()
        };
        OpenError::UnsupportedFormat {
            path: path.to_owned(),
            found,
            supported: crate::FORMAT_VERSION,
            remedy,
        }
    }
}

/// Why [`crate::EvidenceLedger::append`] refused a batch. A refused batch changes nothing.
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
        "conflict: namespace {namespace} session \"{session}\" turn {turn} {existing} with a \
         different {field}"
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
    /// The ledger is a read replica of another store (a PostgreSQL hot standby): it serves
    /// reads of what it has replayed; appends and erasures go to its primary. Nothing was sent.
    #[error(
        "ledger {server} is a read replica (a hot standby): appends and erasures go to the \
         primary; nothing was written"
    )]
    ReadOnlyReplica {
        /// The replica's connection string, without its password.
        server: String,
    },
    /// A stored record the append had to read is malformed.
    #[error("ledger is corrupted at record #{}: {detail}", position.raw())]
    Corrupted {
        /// The record's position.
        position: LedgerPosition,
        /// What is wrong with it.
        detail: String,
    },
    /// The operating system's random source failed, so no content salt could be drawn;
    /// nothing of the batch was stored.
    #[error("drawing a random content salt: {detail}")]
    NoRandomness {
        /// The failure.
        detail: String,
    },
    /// The storage engine failed; nothing of the batch was stored.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl AppendError {
    /// The position in the batch of the turn this error is about, if it is about one.
    pub fn batch_index(&self) -> Option<usize> {
        match self {
            AppendError::InvalidTurn { index, .. }
            | AppendError::Conflict { index, .. }
            | AppendError::Erased { index, .. } => Some(*index),
            _ => None,
        }
    }

    /// For a conflict between two turns of the batch, the position of the earlier one.
    pub fn earlier_in_batch(&self) -> Option<usize> {
        match self {
            AppendError::Conflict { existing: ConflictingRecord::InBatch(first), .. } => {
                Some(*first)
            }
            _ => None,
        }
    }
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
            ConflictingRecord::Stored(id) => write!(f, "is already stored as record {id}"),
            ConflictingRecord::InBatch(index) => {
                write!(f, "is given earlier in the same batch (at position {index})")
            }
        }
    }
}

/// Why [`crate::EvidenceLedger::verify`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// A record does not match its digest, its chain hash or its neighbours; it is the first bad
    /// record in ledger order.
    #[error("record #{} is corrupted: {detail}", position.raw())]
    BadRecord {
        /// The first bad record's position.
        position: LedgerPosition,
        /// What does not match.
        detail: String,
    },
    /// The recorded head (the metadata) does not match the records.
    #[error("ledger head is corrupted: {detail}")]
    BadHead {
        /// What does not match.
        detail: String,
    },
    /// The storage engine failed (or SQLite itself found its file malformed).
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why [`crate::EvidenceLedger::erase`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EraseError {
    /// Nothing in the ledger matches the target (it never existed).
    #[error("nothing to erase: {target} matches no record")]
    NotFound {
        /// The target, described.
        target: String,
    },
    /// The record of the namespace with this number is not a turn (it records an erasure).
    #[error("record {turn_id} of namespace {namespace} is not a turn")]
    NotATurn {
        /// The record's number in its namespace.
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
    /// The ledger is a read replica of another store (a PostgreSQL hot standby): it serves
    /// reads of what it has replayed; appends and erasures go to its primary. Nothing was sent.
    #[error(
        "ledger {server} is a read replica (a hot standby): appends and erasures go to the \
         primary; nothing was written"
    )]
    ReadOnlyReplica {
        /// The replica's connection string, without its password.
        server: String,
    },
    /// A stored record is malformed or does not match its digest or chain link; it was not
    /// served.
    #[error("ledger is corrupted at record #{}: {detail}", position.raw())]
    Corrupted {
        /// The record's position.
        position: LedgerPosition,
        /// What is wrong with it.
        detail: String,
    },
    /// The server is configured to keep bytes an erasure must remove (old write-ahead log
    /// segments, an archive, statement logs with parameters), so the erased texts would
    /// outlive the erasure; nothing was erased.
    #[error(
        "refusing to erase: the server would keep the erased texts in its files: {}; \
         nothing was erased",
        problems.join("; ")
    )]
    ServerRetainsBytes {
        /// Each setting at fault, with what to change.
        problems: Vec<String>,
    },
    /// The redaction is committed, but the old bytes could not yet be scrubbed from the files
    /// (for example another process holds a read snapshot). Erasing the same target again
    /// (or opening the store again) retries the scrub.
    #[error("erasure committed but {path} could not be scrubbed: {detail}")]
    ScrubIncomplete {
        /// The file, or the server's connection string without its password.
        path: PathBuf,
        /// Why.
        detail: String,
    },
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl EraseError {
    /// This error as it stands once the erasure's redaction has committed (the scrub of `store`
    /// failed, or what came after it): a scrub failure as it is, anything else a
    /// [`EraseError::ScrubIncomplete`] saying that erasing the same target again retries it.
    pub fn after_commit(self, store: &std::path::Path) -> EraseError {
        match self {
            EraseError::ScrubIncomplete { .. } => self,
            other => EraseError::ScrubIncomplete {
                path: store.to_owned(),
                detail: format!("{other}; erasing the same target again retries the scrub"),
            },
        }
    }
}

/// Why a read ([`crate::EvidenceLedger::evidence`], [`crate::EvidenceLedger::stats`], ...) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A stored record is malformed or does not match its digest or chain link; it was not
    /// served.
    #[error("ledger is corrupted at record #{}: {detail}", position.raw())]
    Corrupted {
        /// The record's position.
        position: LedgerPosition,
        /// What is wrong with it.
        detail: String,
    },
    /// The storage engine failed.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Why [`crate::Ledger::migrate`] failed. Unless the variant says otherwise, nothing changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// The file is missing or is not a ledger.
    #[error(transparent)]
    Open(OpenError),
    /// The ledger has a format version this build cannot migrate.
    #[error(
        "{path} has ledger format version {found}; this build migrates versions 1 and 2 to version {}",
        crate::FORMAT_VERSION
    )]
    UnsupportedFormat {
        /// The ledger file.
        path: PathBuf,
        /// The version found in the file.
        found: String,
    },
    /// The version-1 ledger failed verification, so it was not migrated.
    #[error("{path} was not migrated: it failed verification as a version-1 ledger: {source}")]
    Unverified {
        /// The ledger file.
        path: PathBuf,
        /// What verification found.
        #[source]
        source: VerifyError,
    },
    /// The migration could not complete as it should (the detail says whether it committed).
    #[error("migrating {path}: {detail}")]
    Internal {
        /// The ledger file.
        path: PathBuf,
        /// What happened.
        detail: String,
    },
    /// The storage engine failed; nothing was migrated.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<crate::row::Corrupt> for ReadError {
    fn from(c: crate::row::Corrupt) -> ReadError {
        ReadError::Corrupted { position: c.position, detail: c.detail }
    }
}
