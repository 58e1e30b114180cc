//! What the processes of one PostgreSQL store share through its database rather than keep on
//! their own machine: the API keys and the store's settings (`evicortex_postgres::PgShared`).
//! An embedded store has no such database: its directory is the one place for everything.

use std::path::Path;

use evicortex_postgres::{PgShared, SharedDataError};

use crate::{ErrorClass, OpenError, StoreLocation};

/// The database `store` shares with every process that opens it, when `store` is a PostgreSQL
/// URL (its shared tables created on the primary if missing); `None` for a directory.
pub fn shared_database(store: &Path) -> Result<Option<PgShared>, OpenError> {
    match StoreLocation::parse(store)? {
        StoreLocation::Directory(_) => Ok(None),
        StoreLocation::Postgres { url, .. } => Ok(Some(PgShared::connect(&url)?)),
    }
}

/// The class of a shared-data failure: the server's is I/O, a write sent to a standby bad
/// input (it goes to the primary), a row this build did not write an integrity failure.
pub(crate) fn shared_data_class(e: &SharedDataError) -> ErrorClass {
    match e {
        SharedDataError::ReadOnlyReplica { .. } => ErrorClass::BadInput,
        SharedDataError::Corrupted { .. } => ErrorClass::Integrity,
        _ => ErrorClass::Io,
    }
}
