//! Errors of the facade, one per operation, and the one classification every front end maps to
//! its own vocabulary (exit codes, HTTP statuses): [`ErrorClass::of`].
//!
//! Where the facade adds nothing to a lower crate's error, that error is re-exported unchanged
//! (`AppendError`, `ReadError`, `VerifyError` from the ledger; `EmbedError` from the encoder), so
//! callers match on its variants without depending on the lower crate.

use std::{error::Error, path::PathBuf};

use evicortex_embed::{ArtifactError, EmbedError, FetchError};
use evicortex_ledger::StorageError;

use crate::{DerivedStoreError, EmbeddingCacheError, IngestError};

pub use evicortex_ledger::{AppendError, ReadError, VerifyError};

/// What kind of failure an error is. Front ends derive their exit codes and statuses from this
/// alone, in one `match` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorClass {
    /// The caller's input is invalid or conflicts with what is stored; nothing changed.
    BadInput,
    /// The file system or storage engine failed.
    Io,
    /// Stored data failed an integrity check (digest, chain, format, identity).
    Integrity,
    /// A model the operation needs is not installed (`evicortex model fetch` installs it).
    ModelMissing,
    /// Anything else: a bug.
    Internal,
}

/// Why [`crate::Memory`] failed to open.
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
    /// Another process holds the store's writer lock ([`crate::MemoryBuilder::lock_store`]).
    #[error(transparent)]
    Locked(#[from] crate::StoreLockError),
    /// The ledger refused to open.
    #[error(transparent)]
    Ledger(#[from] evicortex_ledger::OpenError),
    /// The embedding cache refused to open or to reconcile with the ledger.
    #[error(transparent)]
    EmbeddingCache(#[from] EmbeddingCacheError),
    /// A background thread (the embedder or the indexer) could not be started.
    #[error("starting the background {what}: {source}")]
    Background {
        /// Which thread.
        what: &'static str,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
    /// Reconciling the vector index files with the ledger failed.
    #[error("vector index files: {source}")]
    IndexFile {
        /// The failure.
        #[source]
        source: evicortex_vector::IndexFileError,
    },
    /// Reading the ledger while reconciling derived data failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The encoders given cannot be fused (duplicates, too many, further ones without a first).
    #[error("encoders: {0}")]
    Encoders(String),
    /// The PostgreSQL ledger could not be connected to (no server, refused login, another
    /// schema, failed integrity check): the store is not available, and no other is used.
    #[error(transparent)]
    Postgres(#[from] evicortex_postgres::ConnectError),
    /// The vector store beside a PostgreSQL ledger could not be opened (no pgvector and no
    /// right to create it, an encoder stored with another dimension, a server failure).
    #[error("vector store: {0}")]
    VectorStore(evicortex_postgres::VectorStoreError),
    /// The local directory of a PostgreSQL store's derived files cannot be used for it.
    #[error("derived files of the PostgreSQL store {url}: {detail}")]
    DerivedDir {
        /// The store's connection string, without its password.
        url: String,
        /// What is wrong.
        detail: String,
    },
}

/// Why [`crate::Memory::erase`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EraseError {
    /// The ledger erasure failed (nothing was erased unless the variant says it was committed).
    #[error(transparent)]
    Ledger(#[from] evicortex_ledger::EraseError),
    /// Reading the turns to erase failed; nothing was erased.
    #[error("reading the turns to erase: {0}")]
    Read(#[source] ReadError),
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

/// Why [`crate::Memory::catch_up`] failed. Chunks committed before the failure stay committed;
/// running it again resumes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatchUpError {
    /// The memory was opened without an encoder.
    #[error("this memory has no encoder: open it with one to embed turns")]
    NoEncoder,
    /// The memory was opened beside the store's writer
    /// ([`crate::MemoryBuilder::beside_writer`]): only the writer stores vectors.
    #[error(
        "this memory was opened beside the store's writer: only the process holding the store \
         embeds its turns"
    )]
    BesideWriter,
    /// Reading the ledger failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The encoder failed.
    #[error("embedding turns: {0}")]
    Embed(#[from] EmbedError),
    /// The embedding cache failed.
    #[error(transparent)]
    Cache(#[from] EmbeddingCacheError),
    /// A PostgreSQL store's database failed while the overlength policy was recorded.
    #[error("recording the overlength policy in the store's database")]
    Shared(#[source] Box<evicortex_postgres::SharedDataError>),
}

/// A storage failure that front ends report apart from other I/O failures (HTTP: 507 and 503;
/// the CLI's exit code stays that of [`ErrorClass::Io`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum StorageCondition {
    /// The disk (or the user's quota) is full: the write was rolled back, nothing of it is
    /// stored, and the same request succeeds once space is freed.
    DiskFull,
    /// The ledger refuses writes after an earlier write failed with an I/O error, until the store
    /// is opened again (the server restarted); reads still work.
    WritesRefused,
    /// The database server of a PostgreSQL store is out of reach for now: the connection was
    /// dropped or refused, the server is shutting down or starting, or a statement ran past its
    /// timeout. The transaction was rolled back; the same request succeeds once the server
    /// answers (the connection pool reconnects).
    DatabaseUnavailable,
}

impl StorageCondition {
    /// The condition of the first error in `err`'s chain that names one, if any.
    pub fn of(err: &(dyn Error + 'static)) -> Option<StorageCondition> {
        let mut cause = Some(err);
        while let Some(e) = cause {
            let condition = match ledger_storage_error(e) {
                Some(StorageError::Poisoned { .. }) => Some(StorageCondition::WritesRefused),
                Some(StorageError::Sqlite { source, .. }) => sqlite_condition(source),
                Some(StorageError::Io { source, .. }) => io_condition(source),
                Some(_) => None,
                None => e
                    .downcast_ref::<rusqlite::Error>()
                    .and_then(sqlite_condition)
                    .or_else(|| postgres_condition(e))
                    .or_else(|| e.downcast_ref::<std::io::Error>().and_then(io_condition)),
            };
            if condition.is_some() {
                return condition;
            }
            cause = e.source();
        }
        None
    }
}

/// The ledger's storage error in `e`, also where a ledger error wraps it transparently (whose
/// `source()` skips it).
fn ledger_storage_error<'e>(e: &'e (dyn Error + 'static)) -> Option<&'e StorageError> {
    use evicortex_ledger as ledger;
    if let Some(s) = e.downcast_ref::<StorageError>() {
        Some(s)
    } else if let Some(ledger::AppendError::Storage(s)) = e.downcast_ref() {
        Some(s)
    } else if let Some(ledger::EraseError::Storage(s)) = e.downcast_ref() {
        Some(s)
    } else if let Some(ledger::OpenError::Storage(s)) = e.downcast_ref() {
        Some(s)
    } else if let Some(ledger::ReadError::Storage(s)) = e.downcast_ref() {
        Some(s)
    } else if let Some(ledger::VerifyError::Storage(s)) = e.downcast_ref() {
        Some(s)
    } else if let Some(ledger::MigrateError::Storage(s)) = e.downcast_ref() {
        Some(s)
    } else {
        None
    }
}

fn sqlite_condition(e: &rusqlite::Error) -> Option<StorageCondition> {
    (e.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull))
        .then_some(StorageCondition::DiskFull)
}

fn postgres_condition(e: &(dyn Error + 'static)) -> Option<StorageCondition> {
    evicortex_postgres::ServerCondition::of(e).map(|condition| match condition {
        evicortex_postgres::ServerCondition::DiskFull => StorageCondition::DiskFull,
        evicortex_postgres::ServerCondition::Unavailable => StorageCondition::DatabaseUnavailable,
    })
}

fn io_condition(e: &std::io::Error) -> Option<StorageCondition> {
    (e.kind() == std::io::ErrorKind::StorageFull).then_some(StorageCondition::DiskFull)
}

impl ErrorClass {
    /// The class of the first error in `err`'s chain (itself, then its sources) that the facade
    /// knows, or `None` when no cause is one of its errors.
    pub fn of(err: &(dyn Error + 'static)) -> Option<ErrorClass> {
        let mut cause = Some(err);
        while let Some(e) = cause {
            if let Some(class) = direct_class(e) {
                return Some(class);
            }
            cause = e.source();
        }
        None
    }
}

/// The class of `e` itself, if it is an error type the facade's API can return.
fn direct_class(e: &(dyn Error + 'static)) -> Option<ErrorClass> {
    macro_rules! try_types {
        ($($ty:ty => $class:expr),* $(,)?) => {
            $(if let Some(e) = e.downcast_ref::<$ty>() { return Some($class(e)); })*
        };
    }
    try_types! {
        OpenError => OpenError::class,
        AppendError => append_class,
        EraseError => EraseError::class,
        ExportError => ExportError::class,
        IngestError => IngestError::class,
        crate::CompileError => crate::CompileError::class,
        crate::CompileOptionsError => crate::CompileOptionsError::class,
        crate::StoreLockError => crate::StoreLockError::class,
        crate::StoreEncodersError => crate::StoreEncodersError::class,
        crate::AnswerError => crate::AnswerError::class,
        evicortex_reader::ReadError => crate::answer::read_error_class,
        evicortex_reader::ReaderModelError => reader_model_class,
        CatchUpError => CatchUpError::class,
        ReadError => read_class,
        VerifyError => verify_class,
        evicortex_ledger::OpenError => ledger_open_class,
        evicortex_ledger::EraseError => ledger_erase_class,
        StorageError => storage_class,
        EmbeddingCacheError => EmbeddingCacheError::class,
        DerivedStoreError => DerivedStoreError::class,
        EmbedError => embed_class,
        ArtifactError => artifact_class,
        FetchError => fetch_class,
        evicortex_ledger::MigrateError => ErrorClass::of_migrate,
        crate::MigrateToPostgresError => crate::MigrateToPostgresError::class,
        evicortex_postgres::SharedDataError => crate::shared_data::shared_data_class,
        evicortex_core::IdError => |_| ErrorClass::BadInput,
        evicortex_core::TimeError => |_| ErrorClass::BadInput,
        evicortex_compiler::ReaderTokenizerError => |_| ErrorClass::BadInput,
        std::io::Error => |_| ErrorClass::Io,
    }
    None
}

impl OpenError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        match self {
            OpenError::CreateDir { .. } => ErrorClass::Io,
            OpenError::Locked(e) => e.class(),
            OpenError::Ledger(e) => ledger_open_class(e),
            OpenError::EmbeddingCache(e) => e.class(),
            OpenError::Background { .. } => ErrorClass::Internal,
            OpenError::IndexFile { .. } => ErrorClass::Io,
            OpenError::Read(e) => read_class(e),
            OpenError::Encoders(_) => ErrorClass::BadInput,
            OpenError::Postgres(e) => postgres_connect_class(e),
            OpenError::DerivedDir { .. } => ErrorClass::BadInput,
            OpenError::VectorStore(e) => vector_store_class(e),
        }
    }
}

impl EraseError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        match self {
            EraseError::Ledger(e) => ledger_erase_class(e),
            EraseError::Read(e) => read_class(e),
            EraseError::Derived(d) => d.class(),
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

impl CatchUpError {
    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        match self {
            CatchUpError::NoEncoder => ErrorClass::BadInput,
            CatchUpError::BesideWriter => ErrorClass::Io,
            CatchUpError::Read(e) => read_class(e),
            CatchUpError::Embed(e) => embed_class(e),
            CatchUpError::Cache(e) => e.class(),
            CatchUpError::Shared(e) => crate::shared_data::shared_data_class(e),
        }
    }
}

/// The class of an append failure.
pub(crate) fn append_class(e: &AppendError) -> ErrorClass {
    match e {
        AppendError::InvalidTurn { .. }
        | AppendError::Conflict { .. }
        | AppendError::Erased { .. }
        | AppendError::ReadOnly { .. }
        | AppendError::ReadOnlyReplica { .. } => ErrorClass::BadInput,
        AppendError::Corrupted { .. } => ErrorClass::Integrity,
        AppendError::NoRandomness { .. } => ErrorClass::Io,
        AppendError::Storage(s) => storage_class(s),
        _ => ErrorClass::Internal,
    }
}

pub(crate) fn read_class(e: &ReadError) -> ErrorClass {
    match e {
        ReadError::Corrupted { .. } => ErrorClass::Integrity,
        ReadError::Storage(s) => storage_class(s),
        _ => ErrorClass::Internal,
    }
}

fn verify_class(e: &VerifyError) -> ErrorClass {
    match e {
        VerifyError::BadRecord { .. } | VerifyError::BadHead { .. } => ErrorClass::Integrity,
        VerifyError::Storage(s) => storage_class(s),
        _ => ErrorClass::Internal,
    }
}

pub(crate) fn ledger_open_class(e: &evicortex_ledger::OpenError) -> ErrorClass {
    use evicortex_ledger::OpenError as L;
    match e {
        L::NotFound { .. } => ErrorClass::BadInput,
        L::UnsupportedFormat { .. } | L::Corrupted { .. } => ErrorClass::Integrity,
        L::Storage(s) => storage_class(s),
        _ => ErrorClass::Internal,
    }
}

fn ledger_erase_class(e: &evicortex_ledger::EraseError) -> ErrorClass {
    use evicortex_ledger::EraseError as L;
    match e {
        L::NotFound { .. }
        | L::NotATurn { .. }
        | L::ReadOnly { .. }
        | L::ReadOnlyReplica { .. } => ErrorClass::BadInput,
        L::Corrupted { .. } => ErrorClass::Integrity,
        // The server's settings would keep the erased texts: nothing was erased, and the
        // operator changes the server, not the request.
        L::ServerRetainsBytes { .. } | L::ScrubIncomplete { .. } => ErrorClass::Io,
        L::Storage(s) => storage_class(s),
        _ => ErrorClass::Internal,
    }
}

pub(crate) fn postgres_connect_class(e: &evicortex_postgres::ConnectError) -> ErrorClass {
    use evicortex_postgres::ConnectError as C;
    match e {
        C::InvalidUrl { .. } | C::ReplicaWithoutLedger { .. } => ErrorClass::BadInput,
        C::UnsupportedSchema { .. } | C::Corrupted { .. } => ErrorClass::Integrity,
        C::Unreachable { .. } | C::Refused { .. } | C::ScrubPending { .. } | C::Database(_) => {
            ErrorClass::Io
        }
        C::Tls(e) => postgres_tls_class(e),
        C::Storage(s) => storage_class(s),
        _ => ErrorClass::Internal,
    }
}

/// A TLS parameter or CA file the user wrote wrong is bad input; a handshake the server or
/// network failed (untrusted certificate, no TLS offered) or an unreadable CA file is I/O.
pub(crate) fn postgres_tls_class(e: &evicortex_postgres::TlsError) -> ErrorClass {
    if e.is_configuration() { ErrorClass::BadInput } else { ErrorClass::Io }
}

fn storage_class(s: &StorageError) -> ErrorClass {
    if s.is_corruption() { ErrorClass::Integrity } else { ErrorClass::Io }
}

pub(crate) fn embed_class(e: &EmbedError) -> ErrorClass {
    match e {
        EmbedError::Artifact(a) => artifact_class(a),
        EmbedError::IdentityMismatch { .. } => ErrorClass::Integrity,
        EmbedError::Overlength { .. }
        | EmbedError::Tokenizer { .. }
        | EmbedError::InvalidConfig { .. } => ErrorClass::BadInput,
        _ => ErrorClass::Internal,
    }
}

fn reader_model_class(e: &evicortex_reader::ReaderModelError) -> ErrorClass {
    use evicortex_reader::ReaderModelError as E;
    match e {
        E::UnknownModel { .. } => ErrorClass::BadInput,
        E::ModelMissing { .. } | E::LocalReaderNotBuilt { .. } => ErrorClass::ModelMissing,
        E::Io { .. } => ErrorClass::Io,
        E::Download(f) => fetch_class(f),
        E::DigestMismatch { .. } | E::BadGguf { .. } | E::MetadataMismatch { .. } => {
            ErrorClass::Integrity
        }
        _ => ErrorClass::Internal,
    }
}

fn artifact_class(e: &ArtifactError) -> ErrorClass {
    match e {
        ArtifactError::ModelMissing { .. } => ErrorClass::ModelMissing,
        _ if e.is_integrity_failure() => ErrorClass::Integrity,
        ArtifactError::Io { .. } => ErrorClass::Io,
        _ => ErrorClass::BadInput,
    }
}

fn fetch_class(e: &FetchError) -> ErrorClass {
    match e {
        FetchError::Artifact(a) => artifact_class(a),
        _ if e.is_integrity_failure() => ErrorClass::Integrity,
        _ => ErrorClass::Io,
    }
}

/// What kind of failure a vector store error is.
pub(crate) fn vector_store_class(e: &evicortex_postgres::VectorStoreError) -> ErrorClass {
    match e {
        evicortex_postgres::VectorStoreError::Database { .. }
        | evicortex_postgres::VectorStoreError::ScrubIncomplete { .. } => ErrorClass::Io,
        evicortex_postgres::VectorStoreError::Extension { .. }
        | evicortex_postgres::VectorStoreError::ReadOnlyReplica { .. }
        | evicortex_postgres::VectorStoreError::UnknownEncoder { .. } => ErrorClass::BadInput,
        evicortex_postgres::VectorStoreError::EncoderMismatch { .. }
        | evicortex_postgres::VectorStoreError::Inconsistent { .. } => ErrorClass::Integrity,
        evicortex_postgres::VectorStoreError::Tls(e) => postgres_tls_class(e),
        _ => ErrorClass::Internal,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_class_is_found_anywhere_in_the_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("wrapping")]
        struct Wrapper(#[source] ExportError);
        let inner = ExportError::Write(std::io::Error::other("disk full"));
        assert_eq!(ErrorClass::of(&Wrapper(inner)), Some(ErrorClass::Io));
        let missing = EmbedError::Artifact(ArtifactError::ModelMissing {
            model: "m".into(),
            dir: "/nowhere".into(),
            fetch_name: "m".into(),
        });
        assert_eq!(ErrorClass::of(&missing), Some(ErrorClass::ModelMissing));
        #[derive(Debug, thiserror::Error)]
        #[error("unknown")]
        struct Unknown;
        assert_eq!(ErrorClass::of(&Unknown), None);
    }
}
