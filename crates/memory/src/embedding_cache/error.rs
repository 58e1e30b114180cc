//! Why an embedding-cache operation failed, and the class of each failure.

use super::*;

/// Why an embedding-cache operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingCacheError {
    /// SQLite failed.
    #[error("{path}: {source}")]
    Sqlite {
        /// The cache file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// The cache file could not be made private to its owner.
    #[error("{path}: {source}")]
    Io {
        /// The cache file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The cache holds data that fails an integrity check.
    #[error("{path}: corrupted embedding cache: {detail}")]
    Corrupted {
        /// The cache file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// A vector does not have its identity's dimension.
    #[error("{path}: vector of dimension {got} under an identity of dimension {expected}")]
    Dimension {
        /// The cache file.
        path: PathBuf,
        /// The vector's dimension.
        got: usize,
        /// The identity's.
        expected: usize,
    },
    /// The rows of erased texts are deleted, but another connection's read snapshot kept the
    /// WAL, which still holds them, from being checkpointed; erasing again retries.
    #[error(
        "{path}: the erased texts' vectors are deleted, but a reader kept them in the write-ahead \
         log; erase the same target again to finish"
    )]
    ScrubIncomplete {
        /// The cache file.
        path: PathBuf,
    },
    /// Reading the ledger (to reconcile) failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The database holding a PostgreSQL store's cache failed.
    #[error(transparent)]
    Shared(#[from] SharedDataError),
}

impl EmbeddingCacheError {
    /// What kind of failure this is: corrupted cache data is an integrity failure.
    pub fn class(&self) -> ErrorClass {
        match self {
            EmbeddingCacheError::Corrupted { .. } => ErrorClass::Integrity,
            EmbeddingCacheError::Dimension { .. } => ErrorClass::Internal,
            EmbeddingCacheError::Io { .. } | EmbeddingCacheError::ScrubIncomplete { .. } => {
                ErrorClass::Io
            }
            EmbeddingCacheError::Sqlite { source, .. } => match source.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase) => {
                    ErrorClass::Integrity
                }
                _ => ErrorClass::Io,
            },
            EmbeddingCacheError::Read(e) => crate::error::read_class(e),
            EmbeddingCacheError::Shared(e) => crate::shared_data::shared_data_class(e),
        }
    }
}
