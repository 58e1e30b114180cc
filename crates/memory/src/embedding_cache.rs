//! `EmbeddingCache`: the content-addressed store of turn vectors in `DIR/embeddings.sqlite`,
//! keyed by (encoder identity digest, text digest), so identical text under one identity is
//! embedded once across namespaces. Derived data: rebuildable from the ledger and the encoder,
//! purged of erased texts, reconciled with the ledger on open after a crash.
//!
//! Every vector row carries its identity digest, and the identity's canonical encoding is stored
//! beside it; vectors are only ever read back under the identity asked for.

use std::{
    collections::{HashMap, HashSet},
    path::{Path, PathBuf},
    sync::Mutex,
    time::Instant,
};

use evicortex_core::{Evidence, TextDigest, TurnId};
use evicortex_embed::{
    EmbedError, Encoder, EncoderIdentity, EncoderIdentityDigest, IdentifiedVector, Overlength,
};
use rusqlite::{Connection, OptionalExtension, params};

use crate::{DerivedStore, DerivedStoreError, EraseReceipt, Memory, ReadError};

/// The embedding cache's file name inside a store directory.
pub const EMBEDDINGS_FILE: &str = "embeddings.sqlite";

/// The cache's [`DerivedStore::name`].
pub(crate) const CACHE_NAME: &str = "embedding cache";

const FORMAT_VERSION: &str = "1";

/// The embedding cache of one store directory.
#[derive(Debug)]
pub struct EmbeddingCache {
    path: PathBuf,
    conn: Mutex<Connection>,
}

/// Why an embedding-cache operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddingCacheError {
    /// SQLite failed.
    #[error("{path}: {source}")]
    Sqlite {
        /// The cache file.
        path: PathBuf,
        /// The SQLite error.
        #[source]
        source: rusqlite::Error,
    },
    /// The cache file could not be made private to its owner.
    #[error("{path}: {source}")]
    Io {
        /// The cache file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The cache holds data that fails an integrity check.
    #[error("{path}: corrupted embedding cache: {detail}")]
    Corrupted {
        /// The cache file.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// Embedding failed.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// Reading the ledger failed.
    #[error(transparent)]
    Read(#[from] ReadError),
}

impl EmbeddingCacheError {
    /// Whether the failure is about integrity (corruption, identity mismatch).
    pub fn is_integrity_failure(&self) -> bool {
        matches!(
            self,
            EmbeddingCacheError::Corrupted { .. }
                | EmbeddingCacheError::Embed(EmbedError::IdentityMismatch { .. })
        )
    }
}

/// The vectors of one namespace's evidence under one identity, in one contiguous matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct NamespaceVectors {
    /// The identity every row was produced under.
    pub identity: EncoderIdentityDigest,
    /// Vector dimension.
    pub dimension: usize,
    /// The turn of each row (several rows for a turn embedded as windows), in ledger order.
    pub turns: Vec<TurnId>,
    /// Row-major `turns.len() x dimension` vectors.
    pub data: Vec<f32>,
    /// Live turns with no vector under this identity (not embedded yet, or refused as
    /// overlength), in ledger order.
    pub missing: Vec<TurnId>,
}

impl NamespaceVectors {
    /// The vector of row `row`.
    pub fn row(&self, row: usize) -> &[f32] {
        &self.data[row * self.dimension..(row + 1) * self.dimension]
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// Fails closed unless `query` was produced under the same identity as these vectors.
    pub fn check_query(&self, query: &IdentifiedVector) -> Result<(), EmbedError> {
        self.identity.ensure_matches(&query.identity)?;
        if query.vector.len() != self.dimension {
            return Err(EmbedError::InvalidConfig {
                field: "query.vector",
                reason: format!(
                    "dimension {} differs from the stored {}",
                    query.vector.len(),
                    self.dimension
                ),
            });
        }
        Ok(())
    }
}

/// Progress of [`embed_pending`], reported after every committed chunk.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct EmbedProgress {
    /// Distinct texts embedded so far in this run.
    pub done_texts: u64,
    /// Distinct texts this run has to embed.
    pub total_texts: u64,
    /// Encoder tokens embedded so far in this run.
    pub done_tokens: u64,
    /// Encoder tokens this run has to embed.
    pub total_tokens: u64,
}

/// A turn whose text was not embedded because it is longer than the encoder's maximum and the
/// overlength policy is `refuse`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefusedTurn {
    /// The first live turn holding the text.
    pub turn: TurnId,
    /// The text's length in encoder tokens.
    pub tokens: usize,
}

/// What [`embed_pending`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbedReport {
    /// The identity the vectors were stored under.
    pub identity: EncoderIdentityDigest,
    /// Live turns in the ledger.
    pub live_turns: u64,
    /// Distinct live texts.
    pub distinct_texts: u64,
    /// Distinct texts that already had vectors (or an earlier refusal) under this identity.
    pub already_cached: u64,
    /// Distinct texts embedded by this run.
    pub embedded_texts: u64,
    /// Encoder tokens embedded by this run (special tokens included, before windowing).
    pub embedded_tokens: u64,
    /// Vectors written by this run (more than texts when windows are used).
    pub vectors_written: u64,
    /// Texts refused as overlength (this run and earlier ones), by first live turn.
    pub refused: Vec<RefusedTurn>,
    /// Seconds spent.
    pub seconds: f64,
}

/// How [`embed_pending`] groups work. Changes speed and resumability granularity, not results.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CatchUpLimits {
    /// Most texts embedded and committed together.
    pub chunk_texts: usize,
}

impl Default for CatchUpLimits {
    fn default() -> CatchUpLimits {
        CatchUpLimits { chunk_texts: 512 }
    }
}

impl EmbeddingCache {
    /// Opens (creating if absent) `DIR/embeddings.sqlite`.
    pub fn open(dir: &Path) -> Result<EmbeddingCache, EmbeddingCacheError> {
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
        let format: String = conn
            .query_row("SELECT value FROM meta WHERE key = 'format'", [], |r| r.get(0))
            .map_err(&sql)?;
        if format != FORMAT_VERSION {
            return Err(EmbeddingCacheError::Corrupted {
                path,
                detail: format!(
                    "format version {format:?} is not the supported {FORMAT_VERSION:?}"
                ),
            });
        }
        Ok(EmbeddingCache { path, conn: Mutex::new(conn) })
    }

    /// Opens the cache of `memory`'s store and drops vectors of texts no live turn holds when
    /// the ledger recorded an erasure since the last reconciliation (a crash between the ledger
    /// erasure and the purge leaves such vectors behind).
    pub fn open_reconciled(memory: &Memory) -> Result<EmbeddingCache, EmbeddingCacheError> {
        let cache = EmbeddingCache::open(memory.dir())?;
        let redactions = memory.stats()?.ledger.redactions.to_string();
        let seen = cache.meta("reconciled_redactions")?;
        if seen.as_deref() != Some(redactions.as_str()) {
            let mut live = HashSet::new();
            memory.ledger().for_each_evidence(None, None, |e| {
                live.insert(TextDigest::of(&e.turn.text));
                Ok::<(), ReadError>(())
            })?;
            cache.retain_texts(&live)?;
            cache.set_meta("reconciled_redactions", &redactions)?;
        }
        Ok(cache)
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn meta(&self, key: &str) -> Result<Option<String>, EmbeddingCacheError> {
        self.lock()
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(sql_err(&self.path))
    }

    fn set_meta(&self, key: &str, value: &str) -> Result<(), EmbeddingCacheError> {
        self.lock()
            .execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", [key, value])
            .map_err(sql_err(&self.path))?;
        Ok(())
    }

    /// Records `identity`; fails closed if its digest is already stored with another encoding.
    pub fn register_identity(
        &self,
        identity: &EncoderIdentity,
    ) -> Result<EncoderIdentityDigest, EmbeddingCacheError> {
        let digest = identity.digest();
        let canonical = identity.canonical_json();
        let conn = self.lock();
        let stored: Option<String> = conn
            .query_row(
                "SELECT canonical FROM identities WHERE digest = ?1",
                [digest.as_bytes()],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql_err(&self.path))?;
        match stored {
            Some(stored) if stored == canonical => {}
            Some(_) => {
                return Err(EmbeddingCacheError::Corrupted {
                    path: self.path.clone(),
                    detail: format!(
                        "identity {digest} is stored with a different canonical encoding"
                    ),
                });
            }
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

    /// The stored identity with `digest`, checked against its digest.
    pub fn identity(
        &self,
        digest: &EncoderIdentityDigest,
    ) -> Result<Option<EncoderIdentity>, EmbeddingCacheError> {
        let canonical: Option<String> = self
            .lock()
            .query_row(
                "SELECT canonical FROM identities WHERE digest = ?1",
                [digest.as_bytes()],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql_err(&self.path))?;
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

    /// Text digests that have vectors, or a recorded refusal, under `identity`.
    pub fn known_texts(
        &self,
        identity: &EncoderIdentityDigest,
    ) -> Result<HashSet<TextDigest>, EmbeddingCacheError> {
        let conn = self.lock();
        let mut out = HashSet::new();
        for sql in [
            "SELECT DISTINCT text_digest FROM vectors WHERE identity = ?1",
            "SELECT text_digest FROM refused WHERE identity = ?1",
        ] {
            let mut stmt = conn.prepare(sql).map_err(sql_err(&self.path))?;
            let rows = stmt
                .query_map([identity.as_bytes()], |r| r.get::<_, Vec<u8>>(0))
                .map_err(sql_err(&self.path))?;
            for row in rows {
                out.insert(self.text_digest(row.map_err(sql_err(&self.path))?)?);
            }
        }
        Ok(out)
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
    pub fn put(
        &self,
        identity: &EncoderIdentity,
        texts: &[(TextDigest, &evicortex_embed::TextEmbedding)],
    ) -> Result<u64, EmbeddingCacheError> {
        let digest = self.register_identity(identity)?;
        let mut conn = self.lock();
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
            for (text, embedding) in texts {
                for (window_index, window) in embedding.windows.iter().enumerate() {
                    if window.vector.len() != identity.dimension {
                        return Err(EmbedError::InvalidConfig {
                            field: "vector",
                            reason: format!(
                                "dimension {} differs from the identity's {}",
                                window.vector.len(),
                                identity.dimension
                            ),
                        }
                        .into());
                    }
                    let blob: Vec<u8> =
                        window.vector.iter().flat_map(|x| x.to_le_bytes()).collect();
                    stmt.execute(params![
                        digest.as_bytes(),
                        text.as_bytes(),
                        window_index as i64,
                        embedding.token_count as i64,
                        window.content_tokens.start as i64,
                        window.content_tokens.end as i64,
                        blob
                    ])
                    .map_err(&sql)?;
                    written += 1;
                }
            }
        }
        tx.commit().map_err(&sql)?;
        Ok(written)
    }

    fn put_refused(
        &self,
        identity: &EncoderIdentityDigest,
        refused: &[(TextDigest, usize)],
    ) -> Result<(), EmbeddingCacheError> {
        let mut conn = self.lock();
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
        tx.commit().map_err(&sql)
    }

    /// The vectors of `text` under `identity`, one per window, in window order.
    pub fn get(
        &self,
        identity: &EncoderIdentityDigest,
        text: &TextDigest,
    ) -> Result<Vec<Vec<f32>>, EmbeddingCacheError> {
        let conn = self.lock();
        self.vectors_of(&conn, identity, text)
    }

    fn vectors_of(
        &self,
        conn: &Connection,
        identity: &EncoderIdentityDigest,
        text: &TextDigest,
    ) -> Result<Vec<Vec<f32>>, EmbeddingCacheError> {
        let mut stmt = conn
            .prepare_cached(
                "SELECT window_index, vector FROM vectors WHERE identity = ?1 AND text_digest = ?2 ORDER BY window_index",
            )
            .map_err(sql_err(&self.path))?;
        let rows = stmt
            .query_map(params![identity.as_bytes(), text.as_bytes()], |r| {
                Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
            })
            .map_err(sql_err(&self.path))?;
        let mut out = Vec::new();
        for row in rows {
            let (window_index, blob) = row.map_err(sql_err(&self.path))?;
            if window_index != out.len() as i64 || blob.len() % 4 != 0 {
                return Err(EmbeddingCacheError::Corrupted {
                    path: self.path.clone(),
                    detail: format!(
                        "text {text}: window {window_index} malformed or out of sequence"
                    ),
                });
            }
            out.push(
                blob.chunks_exact(4)
                    .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect(),
            );
        }
        Ok(out)
    }

    /// The vectors of `evidence` (one namespace's live turns) under `identity`. Vectors of any
    /// other identity are never returned; turns without a vector are listed as missing.
    pub fn namespace_vectors(
        &self,
        evidence: &[Evidence],
        identity: &EncoderIdentityDigest,
    ) -> Result<NamespaceVectors, EmbeddingCacheError> {
        let _span = tracing::debug_span!("namespace_vectors", n_turns = evidence.len()).entered();
        let dimension: Option<i64> = self
            .lock()
            .query_row(
                "SELECT dimension FROM identities WHERE digest = ?1",
                [identity.as_bytes()],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql_err(&self.path))?;
        let dimension = dimension.unwrap_or(0) as usize;
        let mut out = NamespaceVectors {
            identity: *identity,
            dimension,
            turns: Vec::new(),
            data: Vec::new(),
            missing: Vec::new(),
        };
        let conn = self.lock();
        for e in evidence {
            let vectors = self.vectors_of(&conn, identity, &TextDigest::of(&e.turn.text))?;
            if vectors.is_empty() {
                out.missing.push(e.id);
            }
            for vector in vectors {
                if vector.len() != dimension {
                    return Err(EmbeddingCacheError::Corrupted {
                        path: self.path.clone(),
                        detail: format!(
                            "turn {:?}: vector of dimension {} under an identity of {dimension}",
                            e.id,
                            vector.len()
                        ),
                    });
                }
                out.turns.push(e.id);
                out.data.extend_from_slice(&vector);
            }
        }
        Ok(out)
    }

    /// Removes every vector and refusal of the given texts, under every identity.
    pub fn purge_texts(&self, texts: &[TextDigest]) -> Result<u64, EmbeddingCacheError> {
        let mut conn = self.lock();
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
        // secure_delete zeroes the freed pages; checkpointing moves them out of the WAL.
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())).map_err(&sql)?;
        Ok(removed)
    }

    /// Removes vectors and refusals of every text not in `live`.
    fn retain_texts(&self, live: &HashSet<TextDigest>) -> Result<u64, EmbeddingCacheError> {
        let mut stale = HashSet::new();
        {
            let conn = self.lock();
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
        let stale: Vec<TextDigest> = stale.into_iter().collect();
        self.purge_texts(&stale)
    }

    /// Number of stored vectors under `identity`.
    pub fn count(&self, identity: &EncoderIdentityDigest) -> Result<u64, EmbeddingCacheError> {
        let n: i64 = self
            .lock()
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
        self.purge_texts(&receipt.orphaned_texts).map_err(as_derived_error)?;
        Ok(())
    }
}

impl EmbeddingCache {
    /// Purges the cache file of `dir`, if there is one, for an erasure made while no cache was
    /// attached to the store (a library caller that never called [`EmbeddingCache::attach_to`]).
    pub(crate) fn purge_unattached(
        dir: &Path,
        receipt: &EraseReceipt,
    ) -> Result<(), DerivedStoreError> {
        if !dir.join(EMBEDDINGS_FILE).exists() {
            return Ok(());
        }
        EmbeddingCache::open(dir).map_err(as_derived_error)?.purge(receipt)
    }
}

fn as_derived_error(err: EmbeddingCacheError) -> DerivedStoreError {
    DerivedStoreError {
        store: CACHE_NAME,
        detail: err.to_string(),
        corrupted: err.is_integrity_failure(),
    }
}

/// Embeds every live text of the store that has no vector under `encoder`'s identity.
///
/// Texts are deduplicated by digest (identical text is embedded once across namespaces),
/// measured first, sorted by token count and embedded in chunks that are each committed in one
/// transaction, so a killed run resumes where it stopped. Under the `refuse` overlength policy,
/// longer texts are not embedded: they are recorded and reported (by first turn and token count).
pub fn embed_pending(
    memory: &Memory,
    cache: &EmbeddingCache,
    encoder: &dyn Encoder,
    limits: CatchUpLimits,
    progress: &mut dyn FnMut(&EmbedProgress),
) -> Result<EmbedReport, EmbeddingCacheError> {
    let _span = tracing::info_span!("embed_pending").entered();
    let started = Instant::now();
    let identity = encoder.identity();
    let digest = cache.register_identity(identity)?;
    let known = cache.known_texts(&digest)?;

    let mut live_turns = 0u64;
    let mut first_turn: HashMap<TextDigest, TurnId> = HashMap::new();
    let mut pending: Vec<(TextDigest, String)> = Vec::new();
    memory.ledger().for_each_evidence(None, None, |e| {
        live_turns += 1;
        let text = TextDigest::of(&e.turn.text);
        if let std::collections::hash_map::Entry::Vacant(slot) = first_turn.entry(text) {
            slot.insert(e.id);
            if !known.contains(&text) {
                pending.push((text, e.turn.text));
            }
        }
        Ok::<(), ReadError>(())
    })?;
    let distinct_texts = first_turn.len() as u64;
    let already_cached = distinct_texts - pending.len() as u64;

    let texts: Vec<&str> = pending.iter().map(|(_, t)| t.as_str()).collect();
    let counts = encoder.count_tokens_many(evicortex_embed::EmbeddingRole::Document, &texts)?;
    let mut order: Vec<usize> = (0..pending.len()).collect();
    let mut newly_refused = Vec::new();
    if identity.overlength == Overlength::Refuse {
        order.retain(|&i| {
            let fits = counts[i] <= identity.max_tokens;
            if !fits {
                newly_refused.push((pending[i].0, counts[i]));
            }
            fits
        });
    }
    cache.put_refused(&digest, &newly_refused)?;
    order.sort_by_key(|&i| (counts[i], i));

    let mut state = EmbedProgress {
        done_texts: 0,
        total_texts: order.len() as u64,
        done_tokens: 0,
        total_tokens: order.iter().map(|&i| counts[i] as u64).sum(),
    };
    progress(&state);
    let mut vectors_written = 0;
    for chunk in order.chunks(limits.chunk_texts.max(1)) {
        let chunk_texts: Vec<&str> = chunk.iter().map(|&i| pending[i].1.as_str()).collect();
        let embedded = encoder.embed_documents(&chunk_texts)?;
        let rows: Vec<(TextDigest, &evicortex_embed::TextEmbedding)> =
            chunk.iter().zip(&embedded).map(|(&i, e)| (pending[i].0, e)).collect();
        vectors_written += cache.put(identity, &rows)?;
        state.done_texts += chunk.len() as u64;
        state.done_tokens += chunk.iter().map(|&i| counts[i] as u64).sum::<u64>();
        progress(&state);
    }

    let refused = cache.refused_turns(&digest, &first_turn)?;
    Ok(EmbedReport {
        identity: digest,
        live_turns,
        distinct_texts,
        already_cached,
        embedded_texts: state.done_texts,
        embedded_tokens: state.done_tokens,
        vectors_written,
        refused,
        seconds: started.elapsed().as_secs_f64(),
    })
}

impl EmbeddingCache {
    fn refused_turns(
        &self,
        identity: &EncoderIdentityDigest,
        first_turn: &HashMap<TextDigest, TurnId>,
    ) -> Result<Vec<RefusedTurn>, EmbeddingCacheError> {
        let conn = self.lock();
        let mut stmt = conn
            .prepare("SELECT text_digest, token_count FROM refused WHERE identity = ?1")
            .map_err(sql_err(&self.path))?;
        let rows = stmt
            .query_map([identity.as_bytes()], |r| {
                Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
            })
            .map_err(sql_err(&self.path))?;
        let mut out = Vec::new();
        for row in rows {
            let (text, tokens) = row.map_err(sql_err(&self.path))?;
            if let Some(&turn) = first_turn.get(&self.text_digest(text)?) {
                out.push(RefusedTurn { turn, tokens: tokens as usize });
            }
        }
        out.sort_by_key(|r| r.turn);
        Ok(out)
    }
}

fn sql_err(path: &Path) -> impl Fn(rusqlite::Error) -> EmbeddingCacheError + '_ {
    move |source| EmbeddingCacheError::Sqlite { path: path.to_owned(), source }
}

impl EmbeddingCache {
    /// Opens `memory`'s cache reconciled with its ledger ([`EmbeddingCache::open_reconciled`]) and
    /// attaches it, so that [`Memory::erase`] purges the vectors of erased texts.
    pub fn attach_to(
        memory: &Memory,
    ) -> Result<std::sync::Arc<EmbeddingCache>, EmbeddingCacheError> {
        let cache = std::sync::Arc::new(EmbeddingCache::open_reconciled(memory)?);
        memory.attach(cache.clone());
        Ok(cache)
    }
}

#[cfg(test)]
mod tests;
