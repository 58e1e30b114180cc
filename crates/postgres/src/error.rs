//! Errors, one enum per operation as in the embedded ledger. Corruption is always its own
//! variant, apart from the database's failures; every corruption names the record's position.

use evicortex_core::{Namespace, SessionId, TurnId, TurnIndex};
use evicortex_ledger::{ConflictingRecord, LedgerPosition};

/// A failure reported by PostgreSQL or the connection to it, with the server it concerns
/// (password removed) and what was being done.
#[derive(Debug, thiserror::Error)]
#[error("PostgreSQL ledger at {url}: {op}: {source}")]
pub struct DatabaseError {
    /// The connection string, without its password.
    pub url: String,
    /// What was being done.
    pub op: &'static str,
    /// The client's error (for a server error, its SQLSTATE is in `source.code()`).
    #[source]
    pub source: postgres::Error,
}

/// The client's error with its cause: its own message is only the kind ("invalid connection
/// string"), the cause says which option.
fn with_cause(error: &postgres::Error) -> String {
    match std::error::Error::source(error) {
        Some(cause) => format!("{error}: {cause}"),
        None => error.to_string(),
    }
}

/// Why [`crate::PgLedger::connect`] failed. Nothing is left half-created: the schema is created
/// in one transaction.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The connection string does not parse.
    #[error("invalid PostgreSQL connection string {url}: {}", with_cause(source))]
    InvalidUrl {
        /// The connection string, without its password.
        url: String,
        /// Why it does not parse.
        #[source]
        source: postgres::Error,
    },
    /// No server answered (refused, unreachable, timed out): the ledger is not available, and
    /// nothing may act as if it were.
    #[error("no PostgreSQL server answers at {url}: {source}")]
    Unreachable {
        /// The connection string, without its password.
        url: String,
        /// The connection failure.
        #[source]
        source: postgres::Error,
    },
    /// A server answered but refused the connection (authentication, unknown database, ...).
    #[error("the PostgreSQL server at {url} refused the connection: {source}")]
    Refused {
        /// The connection string, without its password.
        url: String,
        /// The server's error.
        #[source]
        source: postgres::Error,
    },
    /// The database holds a ledger schema of another version, or tables named like ours that
    /// are not a ledger. It is left exactly as it was: never altered to fit.
    #[error("the database at {url} holds {what}; this build reads {expected}: left unchanged")]
    UnsupportedSchema {
        /// The connection string, without its password.
        url: String,
        /// What was found.
        what: String,
        /// What this build reads.
        expected: String,
    },
    /// The stored head does not match the last record, or is unreadable.
    #[error("the ledger at {url} failed its integrity check on connect: {detail}")]
    Corrupted {
        /// The connection string, without its password.
        url: String,
        /// What did not match.
        detail: String,
    },
    /// An interrupted erasure's scrub (see [`crate::PgLedger::erase`]) could not be finished.
    #[error("the ledger at {url} has an unfinished erasure scrub that failed again: {detail}")]
    ScrubPending {
        /// The connection string, without its password.
        url: String,
        /// Why the scrub failed.
        detail: String,
    },
    /// The server is a hot standby whose database holds no ledger tables: a replica cannot
    /// create them, and its primary has none yet (or the standby has not replayed them).
    #[error(
        "the database at {url} is on a read replica (a hot standby) and the replica has no \
         ledger yet; create it on the primary"
    )]
    ReplicaWithoutLedger {
        /// The connection string, without its password.
        url: String,
    },
    /// The connection string's TLS parameters, the CA file it names, or the TLS handshake
    /// (the server does not offer TLS, its certificate is not trusted or names another host).
    #[error(transparent)]
    Tls(#[from] crate::TlsError),
    /// The server failed while the schema was checked or created.
    #[error(transparent)]
    Database(#[from] DatabaseError),
}

/// Why [`crate::PgLedger::append`] refused a batch. A refused batch changes nothing. The
/// refusals are the embedded ledger's, with the same fields.
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
        "namespace {namespace} session \"{session}\" turn {turn} was erased (record {existing}); \
         erased turns cannot be re-ingested"
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
        /// The erased record's number in its namespace.
        existing: TurnId,
    },
    /// A stored record the append had to read is malformed.
    #[error("ledger is corrupted at the record at {position}: {detail}")]
    Corrupted {
        /// The record's position in the ledger.
        position: LedgerPosition,
        /// What is wrong with it.
        detail: String,
    },
    /// The handle is connected to a read replica (see [`crate::PgLedger::is_replica`]):
    /// nothing was sent to the server.
    #[error(
        "the PostgreSQL ledger at {url} is a read replica (a hot standby): appends and erasures \
         go to the primary; nothing was written"
    )]
    ReadOnlyReplica {
        /// The connection string, without its password.
        url: String,
    },
    /// The operating system's random source failed, so no content salt could be drawn;
    /// nothing of the batch was stored.
    #[error("drawing a random content salt: {detail}")]
    NoRandomness {
        /// The failure.
        detail: String,
    },
    /// The server failed; nothing of the batch was stored.
    #[error(transparent)]
    Database(#[from] DatabaseError),
}

/// Why a read ([`crate::PgLedger::evidence`], [`crate::PgLedger::head`], ...) failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// A stored record is malformed or does not match its digest or chain link; it was not
    /// served.
    #[error("ledger is corrupted at the record at {position}: {detail}")]
    Corrupted {
        /// The record's position in the ledger.
        position: LedgerPosition,
        /// What is wrong with it.
        detail: String,
    },
    /// The server failed.
    #[error(transparent)]
    Database(#[from] DatabaseError),
}

/// Why [`crate::PgLedger::verify`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum VerifyError {
    /// The first record, in ledger order, that does not match its digest, its chain hash or its
    /// neighbours.
    #[error("the record at {position} is corrupted: {detail}")]
    BadRecord {
        /// The first bad record's position.
        position: LedgerPosition,
        /// What does not match.
        detail: String,
    },
    /// The recorded head (`ledger_meta`) does not match the records.
    #[error("ledger head is corrupted: {detail}")]
    BadHead {
        /// What does not match.
        detail: String,
    },
    /// The server failed.
    #[error(transparent)]
    Database(#[from] DatabaseError),
}

/// Why [`crate::PgLedger::erase`] failed.
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
    /// A stored record is malformed.
    #[error("ledger is corrupted at the record at {position}: {detail}")]
    Corrupted {
        /// The record's position in the ledger.
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
    /// The handle is connected to a read replica (see [`crate::PgLedger::is_replica`]):
    /// nothing was sent to the server.
    #[error(
        "the PostgreSQL ledger at {url} is a read replica (a hot standby): appends and erasures \
         go to the primary; nothing was written"
    )]
    ReadOnlyReplica {
        /// The connection string, without its password.
        url: String,
    },
    /// The redaction is committed, but the old bytes could not yet be scrubbed from the
    /// server's files. Erasing the same target again, or connecting again, retries the scrub.
    #[error("erasure committed but the server's files could not be scrubbed: {detail}")]
    ScrubIncomplete {
        /// Why.
        detail: String,
    },
    /// The server failed; nothing was erased.
    #[error(transparent)]
    Database(#[from] DatabaseError),
}
