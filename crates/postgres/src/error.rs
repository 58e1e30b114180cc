//! The errors of connecting and of the server. A ledger operation fails with the ledger crate's
//! enums (`evicortex_ledger::AppendError`, ...), a server failure inside one as its
//! `StorageError::Database`.

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
    /// An interrupted erasure's scrub (see [`evicortex_ledger::EvidenceLedger::erase`]) could not be finished.
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
    /// The server failed while the head was checked.
    #[error(transparent)]
    Storage(#[from] evicortex_ledger::StorageError),
}

/// A server failure as the ledger's storage failure: the same message, naming the server
/// (password removed) and what was being done.
impl From<DatabaseError> for evicortex_ledger::StorageError {
    fn from(e: DatabaseError) -> evicortex_ledger::StorageError {
        evicortex_ledger::StorageError::Database {
            server: e.url,
            op: e.op,
            source: Box::new(e.source),
        }
    }
}

macro_rules! storage_failure_of {
    ($($ledger_error:ident),*) => {$(
        /// A server failure inside a ledger operation: its storage failure.
        impl From<DatabaseError> for evicortex_ledger::$ledger_error {
            fn from(e: DatabaseError) -> evicortex_ledger::$ledger_error {
                evicortex_ledger::$ledger_error::Storage(e.into())
            }
        }
    )*};
}

storage_failure_of!(AppendError, EraseError, ReadError, VerifyError);

/// What a failure of the database server means for the caller, where it means more than "it
/// failed".
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ServerCondition {
    /// The server's disk is full (SQLSTATE 53100): the transaction was rolled back.
    DiskFull,
    /// The server is out of reach for now: the connection was dropped or refused, the server is
    /// shutting down or starting, too many connections, or a statement ran past its timeout.
    /// The transaction was rolled back; the pool reconnects on the next call.
    Unavailable,
}

impl ServerCondition {
    /// The condition `e` reports, when it is a client error ([`postgres::Error`]) that names one.
    pub fn of(e: &(dyn std::error::Error + 'static)) -> Option<ServerCondition> {
        use postgres::error::SqlState;
        let e = e.downcast_ref::<postgres::Error>()?;
        let Some(code) = e.code() else {
            // No SQLSTATE: the client's own failure; the connection's (closed, or a socket
            // error such as a refused connection) is the server being away.
            let socket = std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
            return (e.is_closed() || socket).then_some(ServerCondition::Unavailable);
        };
        let unavailable = [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::QUERY_CANCELED,
            SqlState::TOO_MANY_CONNECTIONS,
        ];
        if *code == SqlState::DISK_FULL {
            Some(ServerCondition::DiskFull)
        } else if code.code().starts_with("08") || unavailable.contains(code) {
            Some(ServerCondition::Unavailable)
        } else {
            None
        }
    }
}

/// A failed connection as [`ConnectError`]: the string, TLS, or the server (refused or silent).
pub(crate) fn connect_error(failure: crate::connect::ConnectFailure, shown: &str) -> ConnectError {
    use crate::connect::ConnectFailure;
    let url = shown.to_owned();
    match failure {
        ConnectFailure::InvalidUrl(source) => ConnectError::InvalidUrl { url, source },
        ConnectFailure::Tls(e) => ConnectError::Tls(e),
        ConnectFailure::Server(source) if source.as_db_error().is_some() => {
            ConnectError::Refused { url, source }
        }
        ConnectFailure::Server(source) => ConnectError::Unreachable { url, source },
    }
}
