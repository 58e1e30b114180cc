//! What every process on one database derives the same way, kept in the database so that
//! every server sees one copy: the API keys (hashed: the plaintext never reaches the server),
//! the store's settings (its encoder list, the overlength policy its vectors were embedded
//! with) and the embedding cache (`shared_embeddings`).
//!
//! The tables are derived from nothing: they are created idempotently beside the ledger's,
//! under their own advisory lock, by the first process that opens them on the primary (a
//! database made before they existed gets them then); a hot standby reads what the primary
//! wrote and refuses writes before sending anything.

use crate::{
    ConnectError, DatabaseError,
    client_pool::{ClientGuard, ClientPool, Setup},
    connect::connect,
    redact_password,
};

/// The advisory lock serialising the creation of these tables ("EVSH"; transaction-scoped).
const SHARED_SCHEMA_LOCK: i64 = 0x4556_5348;

const CREATE: &str = "
CREATE TABLE IF NOT EXISTS api_keys (
    key_hash   BYTEA PRIMARY KEY CHECK (length(key_hash) = 32),
    key_id     TEXT NOT NULL,
    namespace  TEXT,
    admin      BOOLEAN NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS store_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS embedding_identities (
    digest    BYTEA PRIMARY KEY CHECK (length(digest) = 32),
    canonical TEXT NOT NULL,
    dimension BIGINT NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS embedding_writes;
CREATE TABLE IF NOT EXISTS embedding_vectors (
    identity     BYTEA NOT NULL,
    text_digest  BYTEA NOT NULL CHECK (length(text_digest) = 32),
    window_index BIGINT NOT NULL,
    token_count  BIGINT NOT NULL,
    token_start  BIGINT NOT NULL,
    token_end    BIGINT NOT NULL,
    vector       BYTEA NOT NULL,
    generation   BIGINT NOT NULL,
    PRIMARY KEY (identity, text_digest, window_index)
);
CREATE INDEX IF NOT EXISTS embedding_vectors_by_text ON embedding_vectors (text_digest);
CREATE INDEX IF NOT EXISTS embedding_vectors_by_generation ON embedding_vectors (generation);
CREATE TABLE IF NOT EXISTS embedding_refusals (
    identity    BYTEA NOT NULL,
    text_digest BYTEA NOT NULL CHECK (length(text_digest) = 32),
    token_count BIGINT NOT NULL,
    generation  BIGINT NOT NULL,
    PRIMARY KEY (identity, text_digest)
);
CREATE INDEX IF NOT EXISTS embedding_refusals_by_text ON embedding_refusals (text_digest);
CREATE INDEX IF NOT EXISTS embedding_refusals_by_generation ON embedding_refusals (generation);
";

/// One stored API key: its hash and scope, never its secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredKey {
    /// BLAKE3 of the secret.
    pub key_hash: [u8; 32],
    /// The public id that names the key in listings.
    pub key_id: String,
    /// The namespace a non-admin key is scoped to.
    pub namespace: Option<String>,
    /// Whether the key is an admin key.
    pub admin: bool,
    /// RFC 3339 creation time (UTC).
    pub created_at: String,
}

/// Why a shared-data call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SharedDataError {
    /// The server failed or refused the statement.
    #[error(transparent)]
    Database(#[from] DatabaseError),
    /// A write on a hot standby: it goes to the primary.
    #[error("the database at {url} is a read replica (a hot standby): {what} goes to the primary")]
    ReadOnlyReplica {
        /// The connection string, without its password.
        url: String,
        /// What was refused.
        what: &'static str,
    },
    /// A stored row is not what this build writes: the table was altered outside it.
    #[error("the database at {url}: {table}: {detail}")]
    Corrupted {
        /// The connection string, without its password.
        url: String,
        /// The table.
        table: &'static str,
        /// What is wrong.
        detail: String,
    },
}

/// The shared tables of one database. `Send + Sync`: calls run on a small pool of connections
/// of their own (as [`crate::PgLedger`]'s), so a server's concurrent key checks do not queue.
pub struct PgShared {
    pub(crate) client: ClientPool,
    pub(crate) url: String,
    replica: bool,
}

impl std::fmt::Debug for PgShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgShared").field("url", &self.url).finish_non_exhaustive()
    }
}

impl PgShared {
    /// Connects to the database `url` names (TLS as for [`crate::PgLedger::connect`]) and, on
    /// a primary, creates the shared tables if missing. Nothing else is checked or written:
    /// the ledger's own checks are [`crate::PgLedger::connect`]'s.
    pub fn connect(url: &str) -> Result<PgShared, ConnectError> {
        let shown = redact_password(url);
        let mut client =
            connect(url, &shown).map_err(|failure| crate::error::connect_error(failure, &shown))?;
        let db = |op| {
            let url = shown.clone();
            move |source| DatabaseError { url, op, source }
        };
        let replica: bool = client
            .query_one("SELECT pg_is_in_recovery()", &[])
            .map_err(db("asking whether the server is a standby"))?
            .get(0);
        if !replica {
            crate::ledger::durable_commit(&mut client).map_err(db("setting synchronous_commit"))?;
            let mut tx = client.transaction().map_err(db("starting the shared tables' check"))?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SHARED_SCHEMA_LOCK])
                .map_err(db("locking the shared tables' creation"))?;
            tx.batch_execute(CREATE).map_err(db("creating the shared tables"))?;
            tx.commit().map_err(db("committing the shared tables"))?;
        }
        let setup: Setup = if replica { |_| Ok(()) } else { crate::ledger::durable_commit };
        let client = ClientPool::new(client, url, &shown, setup);
        Ok(PgShared { client, url: shown, replica })
    }

    /// Whether the database is a hot standby (reads only).
    pub fn is_replica(&self) -> bool {
        self.replica
    }

    /// The connection string, without its password.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Stores `key`, committed (and flushed, as the server's commits are) when this returns;
    /// whether it was new (a key of the same hash is kept as it is).
    pub fn insert_key(&self, key: &StoredKey) -> Result<bool, SharedDataError> {
        self.check_writable("storing a key")?;
        let inserted = self
            .client()
            .execute(
                "INSERT INTO api_keys (key_hash, key_id, namespace, admin, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key_hash) DO NOTHING",
                &[
                    &key.key_hash.as_slice(),
                    &key.key_id,
                    &key.namespace,
                    &key.admin,
                    &key.created_at,
                ],
            )
            .map_err(self.db("storing a key"))?;
        Ok(inserted == 1)
    }

    /// The stored key whose hash is `key_hash`, if any. The comparison is the database's, on
    /// hashes, so its timing says nothing about a secret.
    pub fn find_key(&self, key_hash: &[u8; 32]) -> Result<Option<StoredKey>, SharedDataError> {
        if !self.tables_present()? {
            return Ok(None);
        }
        let row = self
            .client()
            .query_opt(
                "SELECT key_hash, key_id, namespace, admin, created_at FROM api_keys \
                 WHERE key_hash = $1",
                &[&key_hash.as_slice()],
            )
            .map_err(self.db("looking a key up"))?;
        row.map(|row| self.key_of(&row)).transpose()
    }

    /// Every stored key, oldest first.
    pub fn list_keys(&self) -> Result<Vec<StoredKey>, SharedDataError> {
        if !self.tables_present()? {
            return Ok(Vec::new());
        }
        let rows = self
            .client()
            .query(
                "SELECT key_hash, key_id, namespace, admin, created_at FROM api_keys \
                 ORDER BY created_at, key_id",
                &[],
            )
            .map_err(self.db("listing the keys"))?;
        rows.iter().map(|row| self.key_of(row)).collect()
    }

    /// Deletes the keys whose public id is `key_id`; how many there were.
    pub fn delete_key(&self, key_id: &str) -> Result<u64, SharedDataError> {
        self.check_writable("revoking a key")?;
        self.client()
            .execute("DELETE FROM api_keys WHERE key_id = $1", &[&key_id])
            .map_err(self.db("revoking a key"))
            .map_err(SharedDataError::from)
    }

    /// The setting `key`, if set.
    pub fn setting(&self, key: &str) -> Result<Option<String>, SharedDataError> {
        if !self.tables_present()? {
            return Ok(None);
        }
        Ok(self
            .client()
            .query_opt("SELECT value FROM store_settings WHERE key = $1", &[&key])
            .map_err(self.db("reading a store setting"))?
            .map(|row| row.get(0)))
    }

    /// Sets `key` to `value` (replacing it), committed when this returns.
    pub fn set_setting(&self, key: &str, value: &str) -> Result<(), SharedDataError> {
        self.check_writable("changing a store setting")?;
        self.client()
            .execute(
                "INSERT INTO store_settings (key, value) VALUES ($1, $2) \
                 ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                &[&key, &value],
            )
            .map_err(self.db("writing a store setting"))?;
        Ok(())
    }

    /// Sets `key` to `value` unless it is set already; whether this call set it.
    pub fn set_setting_if_absent(&self, key: &str, value: &str) -> Result<bool, SharedDataError> {
        self.check_writable("recording a store setting")?;
        let inserted = self
            .client()
            .execute(
                "INSERT INTO store_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING",
                &[&key, &value],
            )
            .map_err(self.db("recording a store setting"))?;
        Ok(inserted == 1)
    }

    /// On a standby the primary may not have made the tables yet: then nothing is stored.
    fn tables_present(&self) -> Result<bool, SharedDataError> {
        if !self.replica {
            return Ok(true);
        }
        let present: bool = self
            .client()
            .query_one(
                "SELECT to_regclass('api_keys') IS NOT NULL AND to_regclass('store_settings') IS NOT NULL",
                &[],
            )
            .map_err(self.db("looking for the shared tables"))?
            .get(0);
        Ok(present)
    }

    fn key_of(&self, row: &postgres::Row) -> Result<StoredKey, SharedDataError> {
        let key_id: String = row.get(1);
        let hash: Vec<u8> = row.get(0);
        let key_hash =
            <[u8; 32]>::try_from(hash.as_slice()).map_err(|_| SharedDataError::Corrupted {
                url: self.url.clone(),
                table: "api_keys",
                detail: format!("key {key_id}: a hash of {} bytes", hash.len()),
            })?;
        Ok(StoredKey {
            key_hash,
            key_id,
            namespace: row.get(2),
            admin: row.get(3),
            created_at: row.get(4),
        })
    }

    pub(crate) fn check_writable(&self, what: &'static str) -> Result<(), SharedDataError> {
        if self.replica {
            return Err(SharedDataError::ReadOnlyReplica { url: self.url.clone(), what });
        }
        Ok(())
    }

    pub(crate) fn client(&self) -> ClientGuard<'_> {
        self.client.lock()
    }

    pub(crate) fn db(&self, op: &'static str) -> impl Fn(postgres::Error) -> DatabaseError + '_ {
        move |source| DatabaseError { url: self.url.clone(), op, source }
    }
}
