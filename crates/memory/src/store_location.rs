//! Where a store lives: a directory holding the ledger and everything derived from it, or a
//! PostgreSQL database holding the ledger with the derived files in a local directory.

use std::path::{Path, PathBuf};

use crate::OpenError;

/// Overrides where the derived files of a PostgreSQL store are kept.
pub const DERIVED_DIR_ENV: &str = "EVICORTEX_DERIVED_DIR";

/// The file in a derived directory naming the database it derives from.
pub const DERIVED_FROM_FILE: &str = "derived-from";

/// A store as given to [`crate::Memory::builder`]: a directory, or a `postgres://` /
/// `postgresql://` URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreLocation {
    /// The ledger (`ledger.sqlite`) and the derived files in one directory.
    Directory(PathBuf),
    /// The ledger in a PostgreSQL database (with the embedding cache, keys and settings every
    /// server shares); the local derived files (index files, a standby's embedding cache) in
    /// `derived`, rebuilt from the database when lost.
    Postgres {
        /// The connection string as given (it may hold a password: never shown).
        url: String,
        /// The local directory of the derived files.
        derived: PathBuf,
    },
}

impl StoreLocation {
    /// Reads `store`: a PostgreSQL URL when it starts with `postgres://` or `postgresql://`,
    /// else a directory. For a URL the derived directory is [`DERIVED_DIR_ENV`] when set, else
    /// `${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/derived/<BLAKE3 of the URL without its
    /// password and its pool_max>`.
    pub fn parse(store: &Path) -> Result<StoreLocation, OpenError> {
        let Some(url) = store.to_str().filter(|s| is_postgres_url(s)) else {
            return Ok(StoreLocation::Directory(store.to_owned()));
        };
        let derived = match std::env::var_os(DERIVED_DIR_ENV).filter(|v| !v.is_empty()) {
            Some(dir) => PathBuf::from(dir),
            None => default_derived_dir(url)?,
        };
        Ok(StoreLocation::Postgres { url: url.to_owned(), derived })
    }

    /// The directory the derived files are kept in (for a directory store, the store itself).
    pub fn derived_dir(&self) -> &Path {
        match self {
            StoreLocation::Directory(dir) => dir,
            StoreLocation::Postgres { derived, .. } => derived,
        }
    }
}

/// Whether `store` names a PostgreSQL database rather than a directory.
pub fn is_postgres_url(store: &str) -> bool {
    store.starts_with("postgres://") || store.starts_with("postgresql://")
}

/// The directory where a front end keeps the files of the store `store` names (`encoders.json`,
/// keys, locks): the store directory itself, or a PostgreSQL store's derived directory, created
/// and claimed for its database first (as opening the store does), so that a file written
/// there before the first open (a key, a lock) does not leave it unclaimed.
pub fn store_files_dir(store: &Path) -> Result<PathBuf, OpenError> {
    match StoreLocation::parse(store)? {
        StoreLocation::Directory(dir) => Ok(dir),
        StoreLocation::Postgres { url, derived } => {
            claim_derived_dir(&derived, &url)?;
            Ok(derived)
        }
    }
}

fn default_derived_dir(url: &str) -> Result<PathBuf, OpenError> {
    let cache = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".cache"),
            None => {
                return Err(OpenError::DerivedDir {
                    url: evicortex_postgres::redact_password(url),
                    detail: format!(
                        "neither XDG_CACHE_HOME nor HOME is set: set {DERIVED_DIR_ENV}"
                    ),
                });
            }
        },
    };
    let shown = evicortex_postgres::database_identity(url);
    let digest = blake3::hash(shown.as_bytes()).to_hex();
    Ok(cache.join("evicortex").join("derived").join(digest.as_str()))
}

/// Creates the derived directory of the database `url` (owner-only) and checks that it is
/// that database's: a directory recorded for another database, or holding an embedded ledger,
/// is refused, so one database's vectors and indexes never answer for another's.
/// Then removes the temporary files nobody holds: the copy of an embedding cache that a
/// migration killed while carrying it left (its vectors, which no erasure would reach).
pub(crate) fn claim_derived_dir(derived: &Path, url: &str) -> Result<(), OpenError> {
    claim(derived, url)?;
    evicortex_vector::remove_abandoned_temporaries(derived)
        .map_err(|source| OpenError::IndexFile { source })?;
    Ok(())
}

fn claim(derived: &Path, url: &str) -> Result<(), OpenError> {
    let shown = evicortex_postgres::redact_password(url);
    let refuse = |detail: String| OpenError::DerivedDir { url: shown.clone(), detail };
    evicortex_ledger::create_private_dir(derived)
        .map_err(|source| OpenError::CreateDir { path: derived.to_owned(), source })?;
    if derived.join(crate::LEDGER_FILE).exists() {
        return Err(refuse(format!(
            "the derived directory {} holds an embedded ledger: it is a store of its own",
            derived.display()
        )));
    }
    let record = derived.join(DERIVED_FROM_FILE);
    let wanted = format!("{}\n", evicortex_postgres::database_identity(url));
    match fs_err::read_to_string(&record) {
        Ok(found) if found == wanted => Ok(()),
        Ok(found) => Err(refuse(format!(
            "the derived directory {} derives from {}, not from this database: set {DERIVED_DIR_ENV} \
             to another directory",
            derived.display(),
            found.trim_end()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if fs_err::read_dir(derived).map_err(io(derived))?.next().is_some() {
                return Err(refuse(format!(
                    "the derived directory {} is not empty and records no database ({} is \
                     missing)",
                    derived.display(),
                    DERIVED_FROM_FILE
                )));
            }
            fs_err::write(&record, wanted).map_err(io(&record))?;
            // Like every store file, readable by its owner only (it names the server).
            evicortex_ledger::restrict_sqlite_files(&record).map_err(io(&record))
        }
        Err(e) => Err(io(&record)(e)),
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> OpenError + '_ {
    move |source| OpenError::CreateDir { path: path.to_owned(), source }
}
