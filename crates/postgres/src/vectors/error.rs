//! Why the vector store refused or failed. Every refusal names what it concerns: the encoder,
//! the namespace and the record.

use evicortex_core::{Namespace, TurnId};

/// Why a [`crate::PgVectors`] operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VectorStoreError {
    /// A failure reported by PostgreSQL or the connection to it.
    #[error("PostgreSQL vector store at {url}: {op}: {source}")]
    Database {
        /// The connection string, without its password.
        url: String,
        /// What was being done.
        op: &'static str,
        /// The client's error.
        #[source]
        source: postgres::Error,
    },
    /// The connection string's TLS parameters, the CA file it names, or the TLS handshake.
    #[error(transparent)]
    Tls(crate::TlsError),
    /// The database has no `vector` extension, or one without HNSW indexes.
    #[error(
        "the database at {url} has {found}; the vector store needs the vector extension 0.5 or \
         later (CREATE EXTENSION vector, run by a role allowed to)"
    )]
    Extension {
        /// The connection string, without its password.
        url: String,
        /// What was found: no extension, or its version.
        found: String,
    },
    /// The encoder is registered with another dimension: its vectors are refused rather than
    /// mixed with the stored ones.
    #[error(
        "encoder {identity} is stored with dimension {stored}, refusing dimension {requested}: \
         vectors of two encoders are never mixed"
    )]
    EncoderMismatch {
        /// The encoder identity.
        identity: String,
        /// The dimension the store holds for it.
        stored: usize,
        /// The dimension asked for.
        requested: usize,
    },
    /// No vectors of this encoder were ever registered in the store.
    #[error("encoder {identity} is not registered in the vector store")]
    UnknownEncoder {
        /// The encoder identity.
        identity: String,
    },
    /// A vector (or the query, when `record` is `None`) of the wrong dimension.
    #[error(
        "{} of namespace {namespace} has dimension {got}; encoder {identity} has {expected}",
        what(*record)
    )]
    Dimension {
        /// The encoder identity.
        identity: String,
        /// The namespace.
        namespace: Namespace,
        /// The record, or `None` for the query.
        record: Option<TurnId>,
        /// Its dimension.
        got: usize,
        /// The encoder's dimension.
        expected: usize,
    },
    /// A vector (or the query) that cannot be scaled to unit length.
    #[error("{} of namespace {namespace} is not a usable vector: {reason}", what(*record))]
    InvalidVector {
        /// The namespace.
        namespace: Namespace,
        /// The record, or `None` for the query.
        record: Option<TurnId>,
        /// All zeros, or a component that is NaN or infinite.
        reason: &'static str,
    },
    /// The record already has a vector of this encoder (the batch is rolled back).
    #[error("record {record} of namespace {namespace} already has a vector of encoder {identity}")]
    DuplicateRecord {
        /// The encoder identity.
        identity: String,
        /// The namespace.
        namespace: Namespace,
        /// The record.
        record: TurnId,
    },
    /// A parameter out of range.
    #[error("vector store parameter {field} {reason}")]
    InvalidParameter {
        /// The parameter.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// Removed vectors are gone from every search, but the partition holding them could not be
    /// rewritten yet, so their bytes may still be in its files. The rewrite stays pending:
    /// [`crate::PgVectors::scrub`], the next removal and the next connect retry it.
    #[error("the removed vectors' partition {partition} is not rewritten yet: {detail}")]
    ScrubIncomplete {
        /// The partition (table) still holding the bytes.
        partition: String,
        /// Why it was not rewritten.
        detail: String,
    },
    /// A write sent to a read replica (a hot standby): vectors are stored on the primary.
    #[error(
        "the vector store at {url} is a read replica: vectors are stored (and removed) on the \
         primary, whose writes the replica replays"
    )]
    ReadOnlyReplica {
        /// The connection string, without its password.
        url: String,
    },
    /// The tables found do not match what the store records about them (left unchanged).
    #[error("the vector store at {url} is inconsistent: {detail}")]
    Inconsistent {
        /// The connection string, without its password.
        url: String,
        /// What does not match.
        detail: String,
    },
}

fn what(record: Option<TurnId>) -> String {
    match record {
        Some(record) => format!("the vector of record {record}"),
        None => "the query".to_owned(),
    }
}
