//! Append-only, hash-chained evidence ledger on embedded SQLite.
//!
//! The ledger is EviCortex's only source of truth: every conversation turn, verbatim, in one
//! SQLite file opened in WAL mode with `synchronous=FULL`. [`Ledger::append`] writes a batch
//! atomically and durably; every record carries the BLAKE3 digest of a canonical encoding and a
//! chain hash linking it to its predecessor, so [`Ledger::verify`] proves nothing was altered,
//! reordered or lost. [`Ledger::erase`] removes texts physically while the chain still verifies,
//! and what an erased record keeps confirms no guessed text (its content digest is salted, and
//! the salt is erased with the text). Reads serve only records that match their digests.
//! [`Ledger::migrate`] upgrades a ledger of an older format version. Store files are private to
//! their owner (see [`create_private_dir`]). See `docs/ledger-format.md` for the bytes on disk.
//!
//! ```
//! use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
//! use evicortex_ledger::Ledger;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let ledger = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
//! let turn = Turn {
//!     namespace: Namespace::new("alice").unwrap(),
//!     session: SessionId::new("s1").unwrap(),
//!     turn: TurnIndex::new(0),
//!     role: Role::User,
//!     speaker: None,
//!     text: "I moved to Lisbon in May.".to_owned(),
//!     time: EventTime::parse_rfc3339("2024-05-02T10:00:00+01:00").unwrap(),
//!     meta: serde_json::Map::new(),
//! };
//! let receipt = ledger.append(std::slice::from_ref(&turn)).unwrap();
//! assert_eq!(receipt.appended(), 1);
//! // Appending the same turn again is a no-op.
//! assert_eq!(ledger.append(&[turn]).unwrap().appended(), 0);
//! assert_eq!(ledger.verify().unwrap().turns, 1);
//! ```
#![warn(missing_docs)]

mod append;
mod canonical_json;
mod erase;
mod error;
mod export;
mod hash_chain;
mod ledger;
mod migrate;
mod position;
mod private_files;
mod read;
mod record;
mod store;
mod verify;

pub use crate::{
    append::{AppendOutcome, AppendReceipt, AppendStatus, validate_turn},
    canonical_json::canonical_json,
    erase::{EraseReceipt, EraseTarget, ErasedTurn},
    error::{
        AppendError, ConflictingRecord, EraseError, MigrateError, OpenError, ReadError,
        StorageError, VerifyError,
    },
    export::{StoredRecordExport, StoredRecordKind},
    hash_chain::ChainHash,
    ledger::{Ledger, OpenMode},
    migrate::MigrationReport,
    position::LedgerPosition,
    private_files::{
        PRIVATE_DIR_MODE, PRIVATE_FILE_MODE, create_private_dir, restrict_sqlite_files,
    },
    read::LedgerStats,
    record::{
        ContentSalt, FORMAT_VERSION, TurnParts, redaction_digest, salted_content_digest,
        turn_digest, turn_digest_from_parts,
    },
    verify::VerifyReport,
};
