//! Moving an embedded store's ledger to PostgreSQL (the scale-out path): a record-for-record copy
//! into an empty PostgreSQL ledger, then both ledgers verified and their reports compared.

use std::path::Path;

use evicortex_ledger::{Ledger, OpenMode};
use evicortex_postgres::{
    ImportError, ImportReport, MigrationCheck, MigrationCheckError, PgLedger,
};

use crate::{
    ErrorClass, LEDGER_FILE,
    error::{ledger_open_class, postgres_connect_class},
};

/// What [`migrate_to_postgres`] copied and what both verifies reported (the same counts, head
/// and chain head).
#[derive(Debug, Clone)]
pub struct PostgresMigration {
    /// What was copied.
    pub copied: ImportReport,
    /// Both verify reports, equal.
    pub check: MigrationCheck,
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
}

/// Copies the ledger of the store in `from` into the empty PostgreSQL ledger at `to`, then
/// verifies both and compares the reports. `progress` sees (records copied, records in all).
pub fn migrate_to_postgres(
    from: &Path,
    to: &str,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<PostgresMigration, MigrateToPostgresError> {
    let ledger = Ledger::open_with(&from.join(LEDGER_FILE), OpenMode::Inspect)
        .map_err(|source| MigrateToPostgresError::Open { dir: from.to_owned(), source })?;
    let target = PgLedger::connect(to)?;
    let copied = target.import_ledger(&ledger, progress)?;
    let check = evicortex_postgres::verify_migration(&ledger, &target)?;
    Ok(PostgresMigration { copied, check })
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
            MigrateToPostgresError::Import(ImportError::Database(_)) => ErrorClass::Io,
            MigrateToPostgresError::Import(_) | MigrateToPostgresError::Check(_) => {
                ErrorClass::Integrity
            }
        }
    }
}
