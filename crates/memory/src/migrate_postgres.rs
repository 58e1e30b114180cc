//! Moving an embedded store's ledger to PostgreSQL (the scale-out path): a record-for-record copy
//! into an empty PostgreSQL ledger, then both ledgers verified and their reports compared, and
//! the store's embedding cache and encoder list carried into the database.

use std::path::{Path, PathBuf};

use evicortex_ledger::{Ledger, OpenMode};
use evicortex_postgres::{
    ImportError, ImportReport, MigrationCheck, MigrationCheckError, PgLedger,
};

use crate::{
    ErrorClass, LEDGER_FILE, OpenError, StoreLocation,
    error::{ledger_open_class, postgres_connect_class},
    migrate_local_files::{CarriedFile, CarryError, carry_embedding_cache, carry_store_encoders},
    store_location::claim_derived_dir,
};

/// What [`migrate_to_postgres`] copied and what both verifies reported (the same counts, head
/// and chain head).
#[derive(Debug, Clone)]
pub struct PostgresMigration {
    /// What was copied.
    pub copied: ImportReport,
    /// Both verify reports, equal.
    pub check: MigrationCheck,
    /// The database's derived directory on this machine (`EVICORTEX_DERIVED_DIR`, else the
    /// user's cache), claimed for the local caches the database's servers rebuild there.
    pub derived_dir: PathBuf,
    /// The embedding cache: its rows copied into the database's, so that the vectors and the
    /// overlength policy the store was embedded with serve it without embedding anything again.
    pub embedding_cache: CarriedFile,
    /// The store's encoder list (`encoders.json`), carried into the database's
    /// `store_settings` with the overlength policy the store was last embedded with.
    pub encoders: CarriedFile,
}

/// Why [`migrate_to_postgres`] did not complete. The embedded store is never changed; the
/// PostgreSQL ledger is left empty unless the copy committed (then only the final check failed).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateToPostgresError {
    /// The embedded store's ledger could not be opened.
    #[error("opening the ledger of {dir}: {source}")]
    Open {
        /// The store directory.
        dir: std::path::PathBuf,
        /// Why.
        #[source]
        source: evicortex_ledger::OpenError,
    },
    /// The PostgreSQL server refused or did not answer.
    #[error(transparent)]
    Connect(#[from] evicortex_postgres::ConnectError),
    /// The copy failed; nothing was written.
    #[error(transparent)]
    Import(#[from] ImportError),
    /// The copy committed but the two verifies disagree.
    #[error(transparent)]
    Check(#[from] MigrationCheckError),
    /// The database's derived directory could not be found or claimed; nothing was written.
    #[error(transparent)]
    DerivedDir(#[from] OpenError),
    /// The ledger was copied and verified, but a local file could not be carried over (the
    /// database is a complete store; its first open would compute what is missing).
    #[error("the ledger was copied and both sides verify, but {0}")]
    Carry(#[from] CarryError),
}

/// Copies the ledger of the store in `from` into the empty PostgreSQL ledger at `to`, then
/// verifies both and compares the reports, then carries the store's embedding cache and encoder
/// list into the database (the derived directory found and claimed before anything is written).
/// `progress` sees (records copied, records in all).
pub fn migrate_to_postgres(
    from: &Path,
    to: &str,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PostgresMigration, MigrateToPostgresError> {
    let ledger = Ledger::open_with(&from.join(LEDGER_FILE), OpenMode::Inspect)
        .map_err(|source| MigrateToPostgresError::Open { dir: from.to_owned(), source })?;
    let derived_dir = StoreLocation::parse(Path::new(to))?.derived_dir().to_owned();
    let target = PgLedger::connect(to)?;
    claim_derived_dir(&derived_dir, to)?;
    let copied = target.import_ledger(&ledger, progress)?;
    let check = evicortex_postgres::verify_migration(&ledger, &target)?;
    let embedding_cache = carry_embedding_cache(from, to, &target)?;
    let encoders = carry_store_encoders(from, to)?;
    Ok(PostgresMigration { copied, check, derived_dir, embedding_cache, encoders })
}

impl MigrateToPostgresError {
    /// What kind of failure this is: a non-empty or replica target or an unstorable text is bad
    /// input, a
    /// source that does not verify or two verifies that disagree an integrity failure.
    pub fn class(&self) -> ErrorClass {
        match self {
            MigrateToPostgresError::Open { source, .. } => ledger_open_class(source),
            MigrateToPostgresError::Connect(e) => postgres_connect_class(e),
            MigrateToPostgresError::Import(ImportError::NotEmpty { .. })
            | MigrateToPostgresError::Import(ImportError::Unstorable { .. })
            | MigrateToPostgresError::Import(ImportError::ReadOnlyReplica { .. }) => {
                ErrorClass::BadInput
            }
            MigrateToPostgresError::Import(ImportError::Database(_))
            | MigrateToPostgresError::Carry(_) => ErrorClass::Io,
            MigrateToPostgresError::DerivedDir(e) => e.class(),
            MigrateToPostgresError::Import(_) | MigrateToPostgresError::Check(_) => {
                ErrorClass::Integrity
            }
        }
    }
}
