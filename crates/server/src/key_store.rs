//! API keys: created once, shown once, stored only as a BLAKE3 hash: in `DIR/keys.sqlite` for
//! a store directory, in the database's `api_keys` table for a PostgreSQL store, so that a key
//! made through one process (`evicortex keys create`, any server) is valid on every server of
//! that database and a revocation reaches them all at their next request.
//!
//! A key is 32 bytes from the operating system's CSPRNG, so an unsalted fast hash is enough: there
//! is nothing to brute-force. The store keeps the hash, the namespace the key is scoped to and
//! whether it is an admin key; the plaintext never touches the disk.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use evicortex::Namespace;
use evicortex::front_end::{PgShared, SharedDataError, StoredKey};
use rand::TryRngCore;
use rusqlite::{Connection, OptionalExtension, params};

/// File name of the key store inside the store directory.
pub const KEY_STORE_FILE: &str = "keys.sqlite";

/// Prefix of every key, so that a leaked key is recognisable by secret scanners.
const KEY_PREFIX: &str = "evk_";

/// What a key may do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyScope {
    /// Everything, in every namespace, including `GET /v1/verify`.
    Admin,
    /// Reads and writes in exactly one namespace.
    Namespace(Namespace),
}

impl KeyScope {
    /// Whether a key of this scope may act on `namespace`.
    pub fn grants(&self, namespace: &Namespace) -> bool {
        match self {
            KeyScope::Admin => true,
            KeyScope::Namespace(own) => own == namespace,
        }
    }
}

/// A freshly created key: the only time its plaintext exists.
#[derive(Debug)]
pub struct NewKey {
    /// The secret to put in `Authorization: Bearer ...`.
    pub secret: String,
    /// A short public id (hash prefix) that names the key in listings without revealing it.
    pub key_id: String,
}

/// One stored key as listed (never with its secret).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyListing {
    /// Public id (hash prefix).
    pub key_id: String,
    /// The namespace named at creation, if any.
    pub namespace: Option<String>,
    /// Whether the key is an admin key.
    pub admin: bool,
    /// RFC 3339 creation time (UTC).
    pub created_at: String,
}

/// Why the key store failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyStoreError {
    /// The SQLite file could not be opened, read or written.
    #[error("key store {path}: {source}")]
    Sqlite {
        /// The key store file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// The store directory or the key file could not be created or made private to its owner.
    #[error("creating or restricting {path}: {source}")]
    CreateDir {
        /// The directory or file.
        path: PathBuf,
        /// The IO error.
        #[source]
        source: std::io::Error,
    },
    /// The operating system's random number generator failed.
    #[error("operating system random number generator: {0}")]
    Random(String),
    /// A stored row does not decode: the file was altered outside this program.
    #[error("key store {path}: row {key_id}: {detail}")]
    Corrupted {
        /// The key store file.
        path: PathBuf,
        /// The row's key id.
        key_id: String,
        /// What is wrong.
        detail: String,
    },
    /// The store's database failed or refused (a PostgreSQL store keeps its keys there).
    #[error("the key table in {0}")]
    Shared(#[source] SharedDataError),
    /// The store could not be located or its database reached.
    #[error("opening the key store of {path}")]
    Open {
        /// The store as given (a PostgreSQL URL without its password).
        path: PathBuf,
        /// Why.
        #[source]
        source: evicortex::OpenError,
    },
    /// `revoke` named no stored key.
    #[error("no key with id {key_id}")]
    UnknownKey {
        /// The id that was given.
        key_id: String,
    },
}

impl KeyStoreError {
    /// What kind of failure this is, for exit codes.
    pub fn class(&self) -> evicortex::ErrorClass {
        match self {
            KeyStoreError::Sqlite { source, .. }
                if matches!(
                    source.sqlite_error_code(),
                    Some(rusqlite::ErrorCode::DatabaseCorrupt | rusqlite::ErrorCode::NotADatabase)
                ) =>
            {
                evicortex::ErrorClass::Integrity
            }
            KeyStoreError::Sqlite { .. } | KeyStoreError::CreateDir { .. } => {
                evicortex::ErrorClass::Io
            }
            KeyStoreError::Random(_) => evicortex::ErrorClass::Internal,
            KeyStoreError::Corrupted { .. } => evicortex::ErrorClass::Integrity,
            KeyStoreError::UnknownKey { .. } => evicortex::ErrorClass::BadInput,
            KeyStoreError::Shared(e) => {
                evicortex::ErrorClass::of(e).unwrap_or(evicortex::ErrorClass::Io)
            }
            KeyStoreError::Open { source, .. } => source.class(),
        }
    }
}

/// The key store of one store. Cheap to share: lookups take a short lock on one SQLite
/// connection, or a connection of the database's pool.
#[derive(Debug)]
pub struct KeyStore {
    path: PathBuf,
    keys: Keys,
}

#[derive(Debug)]
enum Keys {
    File(Mutex<Connection>),
    Database(PgShared),
}

impl KeyStore {
    /// The key store of the store `store` names (as `--store` does): `keys.sqlite` in a store
    /// directory, the database's key table for a PostgreSQL URL. A PostgreSQL store's derived
    /// directory that still holds a `keys.sqlite` of an earlier version has its keys moved
    /// into the database (then the file is removed), so that they keep working on every
    /// server.
    pub fn open_store(store: &Path) -> Result<KeyStore, KeyStoreError> {
        let open = |source| KeyStoreError::Open { path: store.to_owned(), source };
        let Some(shared) = evicortex::front_end::shared_database(store).map_err(open)? else {
            return KeyStore::open(&evicortex::store_files_dir(store).map_err(open)?);
        };
        let keys = KeyStore { path: PathBuf::from(shared.url()), keys: Keys::Database(shared) };
        if !keys.is_replica() {
            let derived = evicortex::store_files_dir(store).map_err(open)?;
            crate::key_import::move_key_file_into(&derived, &keys)?;
        }
        Ok(keys)
    }

    /// Opens (creating if needed) `dir/keys.sqlite`; the directory and the file are made private to
    /// their owner (0700, 0600).
    pub fn open(dir: &Path) -> Result<KeyStore, KeyStoreError> {
        evicortex::front_end::create_private_dir(dir)
            .map_err(|source| KeyStoreError::CreateDir { path: dir.to_owned(), source })?;
        let path = dir.join(KEY_STORE_FILE);
        let sql = |source| KeyStoreError::Sqlite { path: path.clone(), source };
        let conn = Connection::open(&path).map_err(sql)?;
        // Still empty when new: private before a key hash is written, and its WAL follows.
        evicortex::front_end::restrict_sqlite_files(&path)
            .map_err(|source| KeyStoreError::CreateDir { path: path.clone(), source })?;
        conn.pragma_update(None, "journal_mode", "WAL").map_err(sql)?;
        // Every committed key is on disk before `create` returns.
        conn.pragma_update(None, "synchronous", "FULL").map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(10)).map_err(sql)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS api_keys (
                 key_hash   BLOB PRIMARY KEY NOT NULL CHECK (length(key_hash) = 32),
                 key_id     TEXT NOT NULL,
                 namespace  TEXT,
                 admin      INTEGER NOT NULL CHECK (admin IN (0, 1)),
                 created_at TEXT NOT NULL
             ) STRICT;",
        )
        .map_err(sql)?;
        Ok(KeyStore { path, keys: Keys::File(Mutex::new(conn)) })
    }

    fn is_replica(&self) -> bool {
        matches!(&self.keys, Keys::Database(db) if db.is_replica())
    }

    /// Stores a key row as it is (a key moved from a key file); whether it was new.
    pub(crate) fn insert(&self, key: &StoredKey) -> Result<bool, KeyStoreError> {
        match &self.keys {
            Keys::File(conn) => {
                let conn = conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                conn.execute(
                    "INSERT OR IGNORE INTO api_keys (key_hash, key_id, namespace, admin, created_at) \
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![
                        key.key_hash.as_slice(),
                        key.key_id,
                        key.namespace,
                        i64::from(key.admin),
                        key.created_at
                    ],
                )
                .map(|n| n == 1)
                .map_err(|source| self.sqlite(source))
            }
            Keys::Database(db) => db.insert_key(key).map_err(KeyStoreError::Shared),
        }
    }

    /// Creates a key of `scope`, commits its hash, and returns the plaintext once.
    pub fn create(&self, scope: &KeyScope) -> Result<NewKey, KeyStoreError> {
        let mut raw = [0u8; 32];
        rand::rngs::OsRng
            .try_fill_bytes(&mut raw)
            .map_err(|e| KeyStoreError::Random(e.to_string()))?;
        let secret = format!("{KEY_PREFIX}{}", hex(&raw));
        let hash = blake3::hash(secret.as_bytes());
        let key_id = key_id_of(&hash);
        let (namespace, admin) = match scope {
            KeyScope::Admin => (None, true),
            KeyScope::Namespace(ns) => (Some(ns.as_str()), false),
        };
        let created_at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let row = StoredKey {
            key_hash: *hash.as_bytes(),
            key_id: key_id.clone(),
            namespace: namespace.map(str::to_owned),
            admin,
            created_at,
        };
        // 32 random bytes: a hash already stored would mean a broken generator.
        if !self.insert(&row)? {
            return Err(KeyStoreError::Random("the new key's hash is already stored".to_owned()));
        }
        Ok(NewKey { secret, key_id })
    }

    /// The scope of `secret`, or `None` when no such key is stored. The comparison happens on
    /// hashes inside SQLite, so the timing says nothing about the secret.
    pub fn scope_of(&self, secret: &str) -> Result<Option<KeyScope>, KeyStoreError> {
        let hash = blake3::hash(secret.as_bytes());
        let row: Option<(Option<String>, i64)> = match &self.keys {
            Keys::File(_) => self
                .lock()
                .prepare_cached("SELECT namespace, admin FROM api_keys WHERE key_hash = ?1")
                .and_then(|mut stmt| {
                    stmt.query_row(params![hash.as_bytes().as_slice()], |row| {
                        Ok((row.get(0)?, row.get(1)?))
                    })
                })
                .optional()
                .map_err(|source| self.sqlite(source))?,
            Keys::Database(db) => db
                .find_key(hash.as_bytes())
                .map_err(KeyStoreError::Shared)?
                .map(|key| (key.namespace, i64::from(key.admin))),
        };
        let Some((namespace, admin)) = row else { return Ok(None) };
        let corrupted = |detail: String| KeyStoreError::Corrupted {
            path: self.path.clone(),
            key_id: key_id_of(&hash),
            detail,
        };
        match (admin, namespace) {
            (1, _) => Ok(Some(KeyScope::Admin)),
            (0, Some(ns)) => Namespace::new(&ns)
                .map(|ns| Some(KeyScope::Namespace(ns)))
                .map_err(|e| corrupted(format!("namespace: {e}"))),
            (0, None) => Err(corrupted("non-admin key without a namespace".to_owned())),
            (other, _) => Err(corrupted(format!("admin flag {other}"))),
        }
    }

    /// Every stored key, oldest first, without secrets.
    pub fn list(&self) -> Result<Vec<KeyListing>, KeyStoreError> {
        if let Keys::Database(db) = &self.keys {
            let keys = db.list_keys().map_err(KeyStoreError::Shared)?;
            return Ok(keys
                .into_iter()
                .map(|k| KeyListing {
                    key_id: k.key_id,
                    namespace: k.namespace,
                    admin: k.admin,
                    created_at: k.created_at,
                })
                .collect());
        }
        let conn = self.lock();
        let mut stmt = conn
            .prepare("SELECT key_id, namespace, admin, created_at FROM api_keys ORDER BY created_at, key_id")
            .map_err(|source| self.sqlite(source))?;
        let rows = stmt
            .query_map([], |row| {
                Ok(KeyListing {
                    key_id: row.get(0)?,
                    namespace: row.get(1)?,
                    admin: row.get::<_, i64>(2)? == 1,
                    created_at: row.get(3)?,
                })
            })
            .map_err(|source| self.sqlite(source))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|source| self.sqlite(source))
    }

    /// Deletes the key whose public id is `key_id`.
    pub fn revoke(&self, key_id: &str) -> Result<(), KeyStoreError> {
        let deleted = match &self.keys {
            Keys::File(_) => self
                .lock()
                .execute("DELETE FROM api_keys WHERE key_id = ?1", params![key_id])
                .map_err(|source| self.sqlite(source))?,
            Keys::Database(db) => {
                let n = db.delete_key(key_id).map_err(KeyStoreError::Shared)?;
                usize::try_from(n).unwrap_or(usize::MAX)
            }
        };
        if deleted == 0 {
            return Err(KeyStoreError::UnknownKey { key_id: key_id.to_owned() });
        }
        Ok(())
    }

    /// The key store file, or the database (its URL without the password).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The key file's connection; only [`Keys::File`] calls it.
    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        let Keys::File(conn) = &self.keys else {
            unreachable!("only a key file's statements lock its connection")
        };
        // A panic while holding the lock cannot leave the connection half-used: every statement
        // is a single autocommit statement. So a poisoned lock is safe to keep using.
        conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn sqlite(&self, source: rusqlite::Error) -> KeyStoreError {
        KeyStoreError::Sqlite { path: self.path.clone(), source }
    }
}

fn key_id_of(hash: &blake3::Hash) -> String {
    hash.to_hex()[..12].to_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(raw: &str) -> Namespace {
        Namespace::new(raw).expect("valid namespace")
    }

    #[test]
    fn created_key_resolves_to_its_scope_and_is_stored_hashed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = KeyStore::open(dir.path()).expect("open");
        let alice = store.create(&KeyScope::Namespace(ns("alice"))).expect("create");
        let admin = store.create(&KeyScope::Admin).expect("create");
        assert!(alice.secret.starts_with("evk_") && alice.secret.len() == 68);
        assert_eq!(
            store.scope_of(&alice.secret).expect("lookup"),
            Some(KeyScope::Namespace(ns("alice")))
        );
        assert_eq!(store.scope_of(&admin.secret).expect("lookup"), Some(KeyScope::Admin));
        assert_eq!(store.scope_of("evk_not-a-key").expect("lookup"), None);

        let bytes = fs_err::read(store.path()).expect("read");
        let wal = fs_err::read(dir.path().join("keys.sqlite-wal")).unwrap_or_default();
        for file in [&bytes, &wal] {
            assert!(!file.windows(alice.secret.len()).any(|w| w == alice.secret.as_bytes()));
        }
    }

    #[test]
    fn keys_survive_reopen_and_can_be_revoked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = KeyStore::open(dir.path())
            .expect("open")
            .create(&KeyScope::Namespace(ns("bob")))
            .expect("create");
        let store = KeyStore::open(dir.path()).expect("reopen");
        assert_eq!(
            store.scope_of(&key.secret).expect("lookup"),
            Some(KeyScope::Namespace(ns("bob")))
        );
        let listed = store.list().expect("list");
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].key_id, key.key_id);
        store.revoke(&key.key_id).expect("revoke");
        assert_eq!(store.scope_of(&key.secret).expect("lookup"), None);
        assert!(matches!(store.revoke(&key.key_id), Err(KeyStoreError::UnknownKey { .. })));
    }

    #[test]
    fn scope_grants_only_its_namespace() {
        assert!(KeyScope::Namespace(ns("a")).grants(&ns("a")));
        assert!(!KeyScope::Namespace(ns("a")).grants(&ns("b")));
        assert!(KeyScope::Admin.grants(&ns("b")));
    }
}
