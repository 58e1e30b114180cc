//! Migrating a store whose ledger has an older format version (see `docs/ledger-format.md`).

use std::path::Path;

use evicortex_ledger::{Ledger, MigrateError, MigrationReport};

use crate::{ErrorClass, LEDGER_FILE};

/// Migrates the ledger of the store in `dir` to the current format version, in place (see
/// [`Ledger::migrate`]); a store already current is left alone. The store directory is made
/// private to its owner as well.
pub fn migrate_store(dir: &Path) -> Result<MigrationReport, MigrateError> {
    let report = Ledger::migrate(&dir.join(LEDGER_FILE))?;
    evicortex_ledger::create_private_dir(dir).map_err(|source| {
        MigrateError::Storage(evicortex_ledger::StorageError::Io {
            op: "restricting to its owner",
            path: dir.to_owned(),
            source,
        })
    })?;
    Ok(report)
}

impl ErrorClass {
    /// The class of a [`MigrateError`].
    pub fn of_migrate(e: &MigrateError) -> ErrorClass {
        match e {
            MigrateError::Open(evicortex_ledger::OpenError::NotFound { .. }) => {
                ErrorClass::BadInput
            }
            MigrateError::Open(evicortex_ledger::OpenError::Storage(s))
            | MigrateError::Storage(s) => {
                if s.is_corruption() {
                    ErrorClass::Integrity
                } else {
                    ErrorClass::Io
                }
            }
            MigrateError::Open(_)
            | MigrateError::UnsupportedFormat { .. }
            | MigrateError::Unverified { .. } => ErrorClass::Integrity,
            _ => ErrorClass::Internal,
        }
    }
}
