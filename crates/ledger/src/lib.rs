//! Append-only, hash-chained evidence ledger on embedded SQLite.
//!
//! The ledger is EviCortex's only source of truth: every conversation turn, verbatim, in one
//! SQLite file opened in WAL mode with `synchronous=FULL`. [`EvidenceLedger::append`] writes a
//! batch atomically and durably; every record carries the BLAKE3 digest of a canonical encoding
//! and a chain hash linking it to its predecessor, so [`EvidenceLedger::verify`] proves nothing
//! was altered, reordered or lost. [`EvidenceLedger::erase`] removes texts physically while the
//! chain still verifies,
//! and what an erased record keeps confirms no guessed text (its content digest is salted, and
//! the salt is erased with the text). Reads serve only records that match their digests.
//! [`Ledger::migrate`] upgrades a ledger of an older format version. Store files are private to
//! their owner (see [`create_private_dir`]). See `docs/ledger-format.md` for the bytes on disk.
//!
//! ```
//! use evicortex_core::{EventTime, Namespace, Role, SessionId, Turn, TurnIndex};
//! use evicortex_ledger::{EvidenceLedger, Ledger};
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
mod evidence_ledger;
mod export;
mod hash_chain;
mod ledger;
mod migrate;
mod position;
mod private_files;
mod read;
mod record;
mod row;
mod store;
mod table;
mod verify;

/// What another store of the ledger implements ([`storage::RecordTable`]: the records table
/// inside one transaction) and the logic written once over it: appending, erasing, the check of
/// the head every write builds on, reading a row back checked, and verifying the whole chain.
/// The embedded ledger is one such store; `evicortex-postgres` is another.
pub mod storage {
    pub use crate::{
        append::{append_group_in, canonical_metas, check_append_in},
        erase::erase_in,
        row::{
            ChainedRow, Corrupt, KIND_REDACTION, KIND_TURN, RECORD_COLUMN_NAMES, RawRecord,
            StoredBody, StoredRecord, stored_head,
        },
        store::raw_record,
        table::{Head, NewRedaction, NewTurn, RecordTable, TurnKey, check_last_record},
        verify::ChainCheck,
    };
}

pub use crate::{
    append::{AppendOutcome, AppendReceipt, AppendStatus, validate_turn},
    canonical_json::canonical_json,
    erase::{EraseReceipt, EraseTarget, ErasedTurn},
    error::{
        AppendError, ConflictingRecord, EraseError, MigrateError, OpenError, ReadError,
        StorageError, VerifyError,
    },
    evidence_ledger::{EvidenceLedger, EvidenceScan, ScanEvidence, ScanOrder},
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
