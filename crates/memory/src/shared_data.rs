//! What the processes of one PostgreSQL store share through its database rather than keep on
//! their own machine: the API keys and the store's settings (`evicortex_postgres::PgShared`).
//! An embedded store has no such database: its directory is the one place for everything.

use std::{path::Path, sync::Mutex};

use evicortex_embed::Overlength;
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

/// The key of the overlength policy a PostgreSQL store's turns were last embedded with, in
/// `store_settings` (what front ends open the store with when no policy is given).
pub(crate) const LAST_OVERLENGTH_SETTING: &str = "last_overlength";

/// Records in the database the overlength policy each catch-up embeds with, so that a server
/// opened elsewhere without a policy embeds and compiles as this one does. Written when it
/// changes, not on every catch-up.
#[derive(Debug)]
pub(crate) struct SharedOverlength {
    db: PgShared,
    recorded: Mutex<Option<Overlength>>,
}

impl SharedOverlength {
    /// On the primary of the store `url` (a standby embeds nothing it could record).
    pub(crate) fn connect(url: &str) -> Result<Option<SharedOverlength>, OpenError> {
        let db = PgShared::connect(url)?;
        Ok((!db.is_replica()).then(|| SharedOverlength { db, recorded: Mutex::new(None) }))
    }

    /// Records `policy` as the one the store was last embedded with.
    pub(crate) fn record(&self, policy: Overlength) -> Result<(), SharedDataError> {
        let mut recorded = self.recorded.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if *recorded != Some(policy) {
            self.db.set_setting(LAST_OVERLENGTH_SETTING, &policy.to_string())?;
            *recorded = Some(policy);
        }
        Ok(())
    }
}

/// The overlength policy the store `store` was last embedded with, as its database records
/// it: `None` for a directory, or a database where none is recorded yet.
pub(crate) fn recorded_overlength(store: &Path) -> Result<Option<Overlength>, String> {
    let Some(db) = shared_database(store).map_err(|e| format!("{e:#}"))? else {
        return Ok(None);
    };
    let Some(text) = db.setting(LAST_OVERLENGTH_SETTING).map_err(|e| format!("{e:#}"))? else {
        return Ok(None);
    };
    text.parse().map(Some).map_err(|e| {
        format!("{}: store_settings.{LAST_OVERLENGTH_SETTING} is {text:?}: {e}", db.url())
    })
}
