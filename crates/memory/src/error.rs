//! Errors of the facade, one per operation, and their classification for callers that map
//! failures to exit codes or HTTP statuses.

use std::path::PathBuf;

use crate::{DerivedStoreError, IngestError};

pub use evicortex_ledger::{ReadError, VerifyError};

/// What kind of failure an error is: bad input, I/O, integrity, or a bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// The caller's input is invalid or conflicts with what is stored; nothing changed.
    BadInput,
    /// The file system or storage engine failed.
    Io,
    /// Stored data failed an integrity check (digest, chain, format, identity).
    Integrity,
    /// Anything else: a bug.
    Internal,
}

/// Why [`crate::Memory::open`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The store directory could not be created.
    #[error("creating store directory {path}: {source}")]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The ledger refused to open.
    #[error(transparent)]
    Ledger(#[from] evicortex_ledger::OpenError),
    /// A derived store refused to open.
    #[error(transparent)]
    Derived(#[from] DerivedStoreError),
}

/// Why [`crate::Memory::append`] failed. Nothing of the batch was stored.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AppendError {
    /// The ledger refused the batch.
    #[error(transparent)]
    Ledger(#[from] evicortex_ledger::AppendError),
}

/// Why [`crate::Memory::erase`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EraseError {
    /// The ledger erasure failed (nothing was erased unless the variant says it was committed).
    #[error(transparent)]
    Ledger(#[from] evicortex_ledger::EraseError),
    /// The ledger erasure was committed, but a derived store failed to purge; erasing the same
    /// target again retries the purge.
    #[error("erasure committed in the ledger, but purging derived data failed: {0}")]
    Derived(#[from] DerivedStoreError),
}

/// Why [`crate::Memory::export`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExportError {
    /// Reading the ledger failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing the output failed.
    #[error("writing the export: {0}")]
    Write(#[source] std::io::Error),
}

impl OpenError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        match self {
            OpenError::CreateDir { .. } => ErrorClass::Io,
            OpenError::Ledger(e) => match e {
                evicortex_ledger::OpenError::NotFound { .. } => ErrorClass::BadInput,
                evicortex_ledger::OpenError::UnsupportedFormat { .. }
                | evicortex_ledger::OpenError::Corrupted { .. } => ErrorClass::Integrity,
                evicortex_ledger::OpenError::Storage(s) => storage_class(s),
                _ => ErrorClass::Internal,
            },
            OpenError::Derived(d) => derived_class(d),
        }
    }
}

impl AppendError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        use evicortex_ledger::AppendError as L;
        match self {
            AppendError::Ledger(e) => match e {
                L::InvalidTurn { .. }
                | L::Conflict { .. }
                | L::Erased { .. }
                | L::ReadOnly { .. } => ErrorClass::BadInput,
                L::Corrupted { .. } => ErrorClass::Integrity,
                L::Storage(s) => storage_class(s),
                _ => ErrorClass::Internal,
            },
        }
    }
}

impl EraseError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        use evicortex_ledger::EraseError as L;
        match self {
            EraseError::Ledger(e) => match e {
                L::NotFound { .. } | L::WrongNamespace { .. } | L::ReadOnly { .. } => {
                    ErrorClass::BadInput
                }
                L::Corrupted { .. } => ErrorClass::Integrity,
                L::ScrubIncomplete { .. } => ErrorClass::Io,
                L::Storage(s) => storage_class(s),
                _ => ErrorClass::Internal,
            },
            EraseError::Derived(d) => derived_class(d),
        }
    }
}

impl ExportError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        match self {
            ExportError::Read(e) => read_class(e),
            ExportError::Write(_) => ErrorClass::Io,
        }
    }
}

impl IngestError {
    /// What kind of failure this is: always bad input.
    pub fn class(&self) -> ErrorClass {
        ErrorClass::BadInput
    }
}

impl ErrorClass {
    /// The class of a [`ReadError`].
    pub fn of_read(e: &ReadError) -> ErrorClass {
        read_class(e)
    }

    /// The class of a [`VerifyError`].
    pub fn of_verify(e: &VerifyError) -> ErrorClass {
        match e {
            VerifyError::BadRecord { .. } | VerifyError::BadHead { .. } => ErrorClass::Integrity,
            VerifyError::Storage(s) => storage_class(s),
            _ => ErrorClass::Internal,
        }
    }
}

fn read_class(e: &ReadError) -> ErrorClass {
    match e {
        ReadError::Corrupted { .. } => ErrorClass::Integrity,
        ReadError::Storage(s) => storage_class(s),
        _ => ErrorClass::Internal,
    }
}

fn storage_class(s: &evicortex_ledger::StorageError) -> ErrorClass {
    if s.is_corruption() { ErrorClass::Integrity } else { ErrorClass::Io }
}

fn derived_class(d: &DerivedStoreError) -> ErrorClass {
    if d.corrupted { ErrorClass::Integrity } else { ErrorClass::Io }
}
