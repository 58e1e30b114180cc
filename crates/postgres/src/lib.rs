//! The evidence ledger on PostgreSQL: the first slice of a scale-out engine.
//!
//! [`PgLedger`] keeps the records the embedded ledger (`evicortex-ledger`, SQLite) keeps, with
//! the same canonical encoding, the same salted digests and the same chain: the digest and chain
//! code, the row checks, and the append, erase and verify logic are the ledger crate's own
//! (`evicortex_ledger::storage`: this crate implements its `RecordTable` over a transaction),
//! never a copy, and so are the error enums. An append is one transaction, all or nothing; concurrent writers (other connections, other processes) are serialised on a table
//! lock, so the ledger stays one chain. Reads serve only records that match their digests and
//! chain links. [`PgLedger`'s `erase`](evicortex_ledger::EvidenceLedger::erase) clears the erased texts and salts and then rewrites the table
//! and retires the write-ahead log, so the texts are left in no file of the server.
//!
//! The schema (tables `ledger_meta` and `records` in the connection's default schema) is
//! described in `schema.rs`; its version is [`SCHEMA_VERSION`]. Each handle keeps a small pool
//! of connections, so concurrent calls do not queue on one, and a connection the server
//! dropped is replaced on its next use: the connection string's `pool_max=N` (1 to 64, this
//! crate's own parameter) caps it; the default is the machine's cores, at least 2, at most 8.
//!
//! Connections honour the connection string's `sslmode` and `sslrootcert` (libpq's names),
//! with one rule: TLS is never unverified and plaintext is never a silent fallback.
//! `disable` is plaintext; `require` and `verify-full` verify the server's certificate
//! against the system's roots, or only the PEM file `sslrootcert=PATH` names, and its host
//! name (libpq's `require` checks neither); `verify-ca` skips the host name and needs a CA
//! file. Without `sslmode` (or with `prefer`), a connection is plaintext when every host is a
//! loopback address, `localhost` or a Unix socket, and `verify-full` otherwise. Failures are
//! [`TlsError`]s naming the server and what failed.
//!
//! ```no_run
//! use evicortex_ledger::EvidenceLedger;
//! use evicortex_postgres::PgLedger;
//!
//! let ledger = PgLedger::connect("postgres://evicortex@db.internal/evicortex").unwrap();
//! let report = ledger.verify().unwrap();
//! println!("{} records, chain head {}", report.records, report.chain_head);
//! ```
#![warn(missing_docs)]

mod append;
mod append_rows;
mod client_pool;
mod connect;
mod erase;
mod error;
mod head;
mod import;
mod import_check;
mod ledger;
mod migration_check;
mod read;
mod record_row;
mod redacted_url;
mod retention_check;
mod schema;
mod shared;
mod shared_embeddings;
mod summary_reads;
mod table;
mod tls;
mod tls_error;
mod tls_params;
mod vectors;
mod verify;

/// The ledger's errors: the embedded ledger's enums, the same for both stores (a server failure
/// is their `Storage` variant, `StorageError::Database`).
pub use evicortex_ledger::{AppendError, EraseError, ReadError, VerifyError};

pub use crate::vectors::{
    EncoderSpace, ExactReason, HnswBuild, PgSearch, PgVectors, ServedBy, StoredVector,
    VectorStoreError,
};
pub use crate::{
    error::{ConnectError, DatabaseError, ServerCondition},
    import::{ImportError, ImportReport},
    ledger::PgLedger,
    migration_check::{MigrationCheck, MigrationCheckError, verify_migration},
    redacted_url::{database_identity, redact_password},
    schema::SCHEMA_VERSION,
    shared::{PgShared, SharedDataError, StoredKey},
    shared_embeddings::{CachedWindow, EmbeddingWrite},
    tls_error::{TlsError, TlsFailure},
};
