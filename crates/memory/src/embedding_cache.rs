//! `EmbeddingCache`: the content-addressed store of turn vectors, keyed by (encoder identity digest, document digest): a turn's vector is that of its document
//! (`turn_document`), so an identical document under one identity is embedded once across
//! namespaces. Derived data: rebuildable from the ledger and the encoder, purged of the documents
//! erasures orphan, reconciled with the ledger on open after a crash.
//!
//! Where it lives: an embedded store's (and a hot standby's, which cannot write to its database)
//! in `DIR/embeddings.sqlite`; a PostgreSQL store's in its database (`embedding_*` tables,
//! [`evicortex_postgres::PgShared`]), so that no server embeds again what another embedded.
//!
//! Every vector row carries its identity digest, and the identity's canonical encoding is stored
//! beside it; vectors are only ever read back under the identity asked for.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::Mutex,
};

use evicortex_compiler::turn_document;
use evicortex_core::{TextDigest, TurnId};
use evicortex_embed::{
    EmbeddedWindow, EncoderIdentity, EncoderIdentityDigest, Overlength, TextEmbedding,
};
use evicortex_ledger::{EvidenceLedger, ScanEvidence};
use evicortex_postgres::{PgShared, SharedDataError};
use rusqlite::{Connection, OptionalExtension, params};

use crate::{
    DerivedStore, DerivedStoreError, EraseReceipt, ErrorClass, ReadError, RefusedTurn,
    write_log::WriteLog,
};

mod error;
mod in_database;
mod reads;
#[cfg(test)]
mod tests;

pub use error::EmbeddingCacheError;
pub(crate) use in_database::{Keep, live_keep, open_in_database};
pub(crate) use reads::live_documents;
pub use reads::{NamespaceVectors, last_overlength};

/// The first live turn holding a text, for reporting refusals.
#[derive(Clone, Debug)]
pub(crate) struct FirstTurn {
    pub(crate) position: evicortex_ledger::LedgerPosition,
    pub(crate) namespace: evicortex_core::Namespace,
    pub(crate) id: TurnId,
}

/// The embedding cache's file name inside a store directory.
pub const EMBEDDINGS_FILE: &str = "embeddings.sqlite";

/// The cache's [`DerivedStore::name`].
const CACHE_NAME: &str = "embedding cache";

const FORMAT_VERSION: &str = "1";

/// Meta key: the identity of the last catch-up.
const LAST_IDENTITY: &str = "last_identity";

/// The embedding cache of one store.
#[derive(Debug)]
pub struct EmbeddingCache {
    /// The cache file, or the database (its URL without the password) holding the cache.
    path: PathBuf,
    store: CacheStore,
    /// The texts of the committed writes (vectors and refusals) into a cache file, so that a
    /// reader that looked the vectors of some turns up can tell which of them looking again
    /// could find. A database's cache keeps its generations in its rows.
    writes: WriteLog,
}

/// Where the cache's rows are.
#[derive(Debug)]
enum CacheStore {
    Sqlite(Mutex<Connection>),
    Postgres(PgShared),
}

/// The cache's rows, ready to be read or written.
enum Backend<'a> {
    Sqlite(std::sync::MutexGuard<'a, Connection>),
    Postgres(&'a PgShared),
}

impl EmbeddingCache {
    /// Opens (creating if absent) `DIR/embeddings.sqlite`.
    pub(crate) fn open(dir: &Path) -> Result<EmbeddingCache, EmbeddingCacheError> {
        let path = dir.join(EMBEDDINGS_FILE);
        let sql = |source| EmbeddingCacheError::Sqlite { path: dir.join(EMBEDDINGS_FILE), source };
        let conn = Connection::open(&path).map_err(sql)?;
        // Still empty when new: private before anything is written, and its WAL follows its mode.
        evicortex_ledger::restrict_sqlite_files(&path)
            .map_err(|source| EmbeddingCacheError::Io { path: path.clone(), source })?;
        conn.execute_batch(
            "PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             PRAGMA secure_delete = ON;
             CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS identities (
                 digest BLOB PRIMARY KEY, canonical TEXT NOT NULL, dimension INTEGER NOT NULL
             ) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS vectors (
                 identity BLOB NOT NULL, text_digest BLOB NOT NULL, window_index INTEGER NOT NULL,
                 token_count INTEGER NOT NULL, token_start INTEGER NOT NULL, token_end INTEGER NOT NULL,
                 vector BLOB NOT NULL,
                 PRIMARY KEY (identity, text_digest, window_index)
             ) WITHOUT ROWID;
             CREATE INDEX IF NOT EXISTS vectors_by_text ON vectors (text_digest);
             CREATE TABLE IF NOT EXISTS refused (
                 identity BLOB NOT NULL, text_digest BLOB NOT NULL, token_count INTEGER NOT NULL,
                 PRIMARY KEY (identity, text_digest)
             ) WITHOUT ROWID;
             INSERT OR IGNORE INTO meta (key, value) VALUES ('format', '1');",
        )
        .map_err(&sql)?;
        EmbeddingCache::of_file(path, conn)
    }

    /// Opens the existing `DIR/embeddings.sqlite` to read only (a migration's source, which is
    /// left as it is).
    pub(crate) fn open_to_read(dir: &Path) -> Result<EmbeddingCache, EmbeddingCacheError> {
        let path = dir.join(EMBEDDINGS_FILE);
        let conn = Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .map_err(|source| EmbeddingCacheError::Sqlite { path: path.clone(), source })?;
        EmbeddingCache::of_file(path, conn)
    }

    /// The cache in the file `path` opened as `conn`, once its format is checked.
    fn of_file(path: PathBuf, conn: Connection) -> Result<EmbeddingCache, EmbeddingCacheError> {
        let format: String = conn
            .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| r.get(0))
            .map_err(sql_err(&path))?;
        if format != FORMAT_VERSION {
            return Err(EmbeddingCacheError::Corrupted {
                path,
                detail: format!(
                    "format version {format:?} is not the supported {FORMAT_VERSION:?}"
                ),
            });
        }
        let store = CacheStore::Sqlite(Mutex::new(conn));
        Ok(EmbeddingCache { path, store, writes: Default::default() })
    }

    /// The cache in the database `db` (its tables made when it was connected).
    pub(crate) fn in_database(db: PgShared) -> EmbeddingCache {
        let path = PathBuf::from(db.url());
        EmbeddingCache { path, store: CacheStore::Postgres(db), writes: Default::default() }
    }

    /// Drops vectors of texts no live turn holds when the ledger recorded an erasure since the
    /// last reconciliation: a crash between the ledger erasure and the purge, or a vector written
    /// by another process while this one erased, leaves such vectors behind. Purges do not move
    /// the mark, so the first open after any erasure reconciles once.
    pub(crate) fn reconcile(&self, ledger: &dyn EvidenceLedger) -> Result<(), EmbeddingCacheError> {
        let redactions = ledger.stats()?.redactions.to_string();
        let seen = self.meta("reconciled_redactions")?;
        if seen.as_deref() != Some(redactions.as_str()) {
            let _span = tracing::info_span!("reconcile_embedding_cache").entered();
            self.retain_live(ledger)?;
            self.set_meta("reconciled_redactions", &redactions)?;
        }
        Ok(())
    }

    /// Drops the vectors and refusals of every document no live turn holds, now.
    pub(crate) fn retain_live(
        &self,
        ledger: &dyn EvidenceLedger,
    ) -> Result<(), EmbeddingCacheError> {
        if let Backend::Postgres(db) = self.backend() {
            // The live documents are read under the cache's lock: no write lands in between.
            db.retain_embeddings(|| live_documents(ledger).map_err(EmbeddingCacheError::from))?;
            return Ok(());
        }
        let live = live_documents(ledger)?;
        if let Backend::Sqlite(conn) = self.backend() {
            self.retain_texts(conn, &live)?;
        }
        Ok(())
    }

    #[cfg(test)]
    /// The cache file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    fn backend(&self) -> Backend<'_> {
        match &self.store {
            CacheStore::Sqlite(conn) => {
                Backend::Sqlite(conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
            }
            CacheStore::Postgres(db) => Backend::Postgres(db),
        }
    }

    fn meta(&self, key: &str) -> Result<Option<String>, EmbeddingCacheError> {
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => return Ok(db.setting(&in_database::setting_key(key))?),
        };
        conn.query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(sql_err(&self.path))
    }

    /// Records `identity` as the one the store was last caught up with.
    pub(crate) fn set_last_identity(
        &self,
        identity: &EncoderIdentityDigest,
    ) -> Result<(), EmbeddingCacheError> {
        // Every catch-up round records it, the background embedder's too: a write (and its
        // fsync, or a database commit) only when it changes.
        let hex = identity.to_hex();
        if self.meta(LAST_IDENTITY)?.as_deref() == Some(hex.as_str()) {
            return Ok(());
        }
        self.set_meta(LAST_IDENTITY, &hex)
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<(), EmbeddingCacheError> {
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => {
                return Ok(db.set_setting(&in_database::setting_key(key), value)?);
            }
        };
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", [key, value])
            .map_err(sql_err(&self.path))?;
        Ok(())
    }

    /// Records `identity`; fails closed if its digest is already stored with another encoding.
    pub(crate) fn register_identity(
        &self,
        identity: &EncoderIdentity,
    ) -> Result<EncoderIdentityDigest, EmbeddingCacheError> {
        let digest = identity.digest();
        let canonical = identity.canonical_json();
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => {
                let stored = db.register_embedding_identity(
                    digest.as_bytes(),
                    &canonical,
                    identity.dimension,
                )?;
                return self.same_identity(digest, &stored, &canonical);
            }
        };
        let stored: Option<String> = conn
            .query_row(
                "SELECT canonical FROM identities WHERE digest = ?1",
                [digest.as_bytes()],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql_err(&self.path))?;
        match stored {
            Some(stored) => return self.same_identity(digest, &stored, &canonical),
            None => {
                conn.execute(
                    "INSERT INTO identities (digest, canonical, dimension) VALUES (?1, ?2, ?3)",
                    params![digest.as_bytes(), canonical, identity.dimension as i64],
                )
                .map_err(sql_err(&self.path))?;
            }
        }
        Ok(digest)
    }

    /// `digest`, when `stored` (its stored encoding) is `canonical`; fails closed otherwise.
    fn same_identity(
        &self,
        digest: EncoderIdentityDigest,
        stored: &str,
        canonical: &str,
    ) -> Result<EncoderIdentityDigest, EmbeddingCacheError> {
        if stored != canonical {
            return Err(EmbeddingCacheError::Corrupted {
                path: self.path.clone(),
                detail: format!("identity {digest} is stored with a different canonical encoding"),
            });
        }
        Ok(digest)
    }

    /// The stored identity with `digest`, checked against its digest.
    pub(crate) fn identity(
        &self,
        digest: &EncoderIdentityDigest,
    ) -> Result<Option<EncoderIdentity>, EmbeddingCacheError> {
        let canonical: Option<String> = match self.backend() {
            Backend::Sqlite(conn) => conn
                .query_row(
                    "SELECT canonical FROM identities WHERE digest = ?1",
                    [digest.as_bytes()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(sql_err(&self.path))?,
            Backend::Postgres(db) => db.embedding_identity(digest.as_bytes())?,
        };
        let Some(canonical) = canonical else { return Ok(None) };
        let identity = EncoderIdentity::from_canonical_json(&canonical).map_err(|err| {
            EmbeddingCacheError::Corrupted {
                path: self.path.clone(),
                detail: format!("identity {digest}: {err}"),
            }
        })?;
        if identity.digest() != *digest {
            return Err(EmbeddingCacheError::Corrupted {
                path: self.path.clone(),
                detail: format!("identity stored under {digest} hashes to {}", identity.digest()),
            });
        }
        Ok(Some(identity))
    }

    fn text_digest(&self, bytes: Vec<u8>) -> Result<TextDigest, EmbeddingCacheError> {
        let bytes: [u8; 32] =
            bytes.try_into().map_err(|b: Vec<u8>| EmbeddingCacheError::Corrupted {
                path: self.path.clone(),
                detail: format!("text digest of {} bytes", b.len()),
            })?;
        Ok(TextDigest::from_bytes(bytes))
    }

    /// Stores the embeddings of `texts` (text digest, embedding) under `identity` in one
    /// transaction.
    pub(crate) fn put(
        &self,
        identity: &EncoderIdentity,
        texts: &[(TextDigest, &TextEmbedding)],
    ) -> Result<u64, EmbeddingCacheError> {
        let digest = self.register_identity(identity)?;
        let mut conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => {
                return self.store_in(db, identity, texts, &[], &mut in_database::keep_all);
            }
        };
        let sql = sql_err(&self.path);
        let tx = conn.transaction().map_err(&sql)?;
        let mut written = 0;
        {
            let mut stmt = tx
                .prepare_cached(
                    "INSERT OR REPLACE INTO vectors
                     (identity, text_digest, window_index, token_count, token_start, token_end, vector)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                )
                .map_err(&sql)?;
            for row in self.cached_windows(identity, texts)? {
                stmt.execute(params![
                    digest.as_bytes(),
                    row.text_digest.as_bytes(),
                    row.window_index,
                    row.token_count,
                    row.token_start,
                    row.token_end,
                    row.vector
                ])
                .map_err(&sql)?;
                written += 1;
            }
        }
        tx.commit().map_err(&sql)?;
        if !texts.is_empty() {
            self.writes.record(texts.iter().map(|(text, _)| *text).collect());
        }
        Ok(written)
    }

    /// Stores vectors (`texts`) and overlength refusals (`refused`) under `identity`, leaving
    /// out every text `keep` (called just before the write, in the database's case inside the
    /// transaction that holds the cache's lock) rejects: the one way catch-up writes, so that a
    /// text an erasure orphaned meanwhile never gets a vector. Returns the vectors written.
    pub(crate) fn store(
        &self,
        identity: &EncoderIdentity,
        texts: &[(TextDigest, &TextEmbedding)],
        refused: &[(TextDigest, usize)],
        keep: &mut dyn FnMut() -> Result<Keep, ReadError>,
    ) -> Result<u64, EmbeddingCacheError> {
        if let Backend::Postgres(db) = self.backend() {
            self.register_identity(identity)?;
            return self.store_in(db, identity, texts, refused, keep);
        }
        let keep = keep()?;
        let texts: Vec<(TextDigest, &TextEmbedding)> =
            texts.iter().filter(|(t, _)| keep(t)).copied().collect();
        let refused: Vec<(TextDigest, usize)> =
            refused.iter().filter(|(t, _)| keep(t)).copied().collect();
        let written = self.put(identity, &texts)?;
        self.put_refused(&identity.digest(), &refused)?;
        Ok(written)
    }

    /// How many writes of vectors have committed: unchanged since a lookup means the lookup
    /// would find nothing new. A file's counts the writes through this handle (vectors only
    /// enter through it); a database's, every process's.
    pub(crate) fn write_generation(&self) -> Result<u64, EmbeddingCacheError> {
        match self.backend() {
            Backend::Sqlite(_) => Ok(self.writes.generation()),
            Backend::Postgres(db) => Ok(db.embedding_generation()?),
        }
    }

    /// The texts that got vectors or refusals after generation `since` (`None`: too many, or
    /// the log no longer reaches back that far; look everything up).
    pub(crate) fn written_since(
        &self,
        since: u64,
    ) -> Result<Option<HashSet<TextDigest>>, EmbeddingCacheError> {
        match self.backend() {
            Backend::Sqlite(_) => Ok(self.writes.written_since(since)),
            Backend::Postgres(db) => {
                Ok(db.embeddings_written_since(since, crate::write_log::RETAINED_TEXTS)?)
            }
        }
    }

    /// Records that the texts `refused` (text digest, encoder tokens) are longer than the
    /// encoder's maximum under `identity`'s `refuse` policy, so catch-up does not measure them
    /// again and compile can tell them from texts not embedded yet.
    pub(crate) fn put_refused(
        &self,
        identity: &EncoderIdentityDigest,
        refused: &[(TextDigest, usize)],
    ) -> Result<(), EmbeddingCacheError> {
        let mut conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => {
                self.pg_refusals(db, identity, refused)?;
                return Ok(());
            }
        };
        let sql = sql_err(&self.path);
        let tx = conn.transaction().map_err(&sql)?;
        {
            let mut stmt = tx
                .prepare_cached("INSERT OR REPLACE INTO refused (identity, text_digest, token_count) VALUES (?1, ?2, ?3)")
                .map_err(&sql)?;
            for (text, tokens) in refused {
                stmt.execute(params![identity.as_bytes(), text.as_bytes(), *tokens as i64])
                    .map_err(&sql)?;
            }
        }
        tx.commit().map_err(&sql)?;
        if !refused.is_empty() {
            self.writes.record(refused.iter().map(|(text, _)| *text).collect());
        }
        Ok(())
    }

    /// Removes every vector and refusal of the given texts, under every identity.
    pub(crate) fn purge_texts(&self, texts: &[TextDigest]) -> Result<u64, EmbeddingCacheError> {
        let mut conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => return Ok(db.purge_embeddings(texts)?),
        };
        let sql = sql_err(&self.path);
        let tx = conn.transaction().map_err(&sql)?;
        let mut removed = 0;
        {
            let mut vectors =
                tx.prepare_cached("DELETE FROM vectors WHERE text_digest = ?1").map_err(&sql)?;
            let mut refused =
                tx.prepare_cached("DELETE FROM refused WHERE text_digest = ?1").map_err(&sql)?;
            for text in texts {
                removed += vectors.execute([text.as_bytes()]).map_err(&sql)? as u64;
                refused.execute([text.as_bytes()]).map_err(&sql)?;
            }
        }
        tx.commit().map_err(&sql)?;
        // secure_delete zeroes the freed pages; checkpointing moves them out of the WAL, which
        // a reader's snapshot prevents: the vectors would then stay in the WAL unsaid.
        let busy: i64 =
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| r.get(0)).map_err(&sql)?;
        if busy != 0 {
            return Err(EmbeddingCacheError::ScrubIncomplete { path: self.path.clone() });
        }
        Ok(removed)
    }

    /// Removes vectors and refusals of every text not in `live`.
    fn retain_texts(
        &self,
        conn: std::sync::MutexGuard<'_, Connection>,
        live: &HashSet<TextDigest>,
    ) -> Result<u64, EmbeddingCacheError> {
        let mut stale = HashSet::new();
        {
            for sql in [
                "SELECT DISTINCT text_digest FROM vectors",
                "SELECT DISTINCT text_digest FROM refused",
            ] {
                let mut stmt = conn.prepare(sql).map_err(sql_err(&self.path))?;
                let rows =
                    stmt.query_map([], |r| r.get::<_, Vec<u8>>(0)).map_err(sql_err(&self.path))?;
                for row in rows {
                    let text = self.text_digest(row.map_err(sql_err(&self.path))?)?;
                    if !live.contains(&text) {
                        stale.insert(text);
                    }
                }
            }
        }
        drop(conn);
        let stale: Vec<TextDigest> = stale.into_iter().collect();
        self.purge_texts(&stale)
    }

    #[cfg(test)]
    /// Number of stored vectors under `identity`.
    pub(crate) fn count(
        &self,
        identity: &EncoderIdentityDigest,
    ) -> Result<u64, EmbeddingCacheError> {
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => return Ok(db.embedding_count(identity.as_bytes())?),
        };
        let n: i64 = conn
            .query_row(
                "SELECT COUNT(*) FROM vectors WHERE identity = ?1",
                [identity.as_bytes()],
                |r| r.get(0),
            )
            .map_err(sql_err(&self.path))?;
        Ok(n as u64)
    }
}

impl DerivedStore for EmbeddingCache {
    fn name(&self) -> &'static str {
        CACHE_NAME
    }

    fn purge(&self, receipt: &EraseReceipt) -> Result<(), DerivedStoreError> {
        self.purge_texts(&receipt.erased_texts)
            .map_err(|e| DerivedStoreError::new(CACHE_NAME, e.class(), e))?;
        Ok(())
    }
}

fn digest_from_hex(hex: &str) -> Option<EncoderIdentityDigest> {
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(EncoderIdentityDigest::from_bytes(bytes))
}

fn decode_vector(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
}

fn sql_err(path: &Path) -> impl Fn(rusqlite::Error) -> EmbeddingCacheError + '_ {
    move |source| EmbeddingCacheError::Sqlite { path: path.to_owned(), source }
}
