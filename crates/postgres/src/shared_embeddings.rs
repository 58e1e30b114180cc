//! The embedding cache of a PostgreSQL store, shared by every server of the database: a text's
//! vectors (one row per window) and overlength refusals keyed by (encoder identity digest, text
//! digest), and the identities' canonical encodings, so that what one server embedded no other
//! embeds again.
//!
//! Every write and every purge runs in a transaction holding one advisory lock
//! ([`EMBEDDING_LOCK`]), which orders them across processes:
//! - a writer checks, inside the lock, that its texts are still live (the caller's check reads
//!   the ledger), and an erasure's purge runs after its ledger transaction committed: either the
//!   purge comes second and deletes what the writer stored, or the writer comes second and its
//!   check sees the erasure. No vector of an erased text survives either order.
//! - each write takes the next value of `embedding_writes` as its generation after taking the
//!   lock and commits before releasing it, so generations become visible in order: a reader that
//!   saw generation G has seen every write up to G, and [`PgShared::embeddings_written_since`]
//!   names exactly what came later (what compile looks up again).

use std::collections::HashSet;

use evicortex_core::TextDigest;

use crate::{PgShared, SharedDataError};

/// The advisory lock ordering the cache's writes and purges ("EVEC"; transaction-scoped).
const EMBEDDING_LOCK: i64 = 0x4556_4543;

/// One window of a text's embedding, as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedWindow {
    /// The digest of the embedded text.
    pub text_digest: TextDigest,
    /// The window's number within the text (0 for a text embedded whole).
    pub window_index: i64,
    /// The text's length in encoder tokens.
    pub token_count: i64,
    /// The first of the text's tokens the window covers.
    pub token_start: i64,
    /// One past the last.
    pub token_end: i64,
    /// The vector, little-endian `f32`s.
    pub vector: Vec<u8>,
}

/// One write into the embedding cache, under its lock, committed when the closure given to
/// [`PgShared::write_embeddings`] returns `Ok`.
pub struct EmbeddingWrite<'a> {
    tx: postgres::Transaction<'a>,
    generation: i64,
    shared: &'a PgShared,
}

impl std::fmt::Debug for EmbeddingWrite<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingWrite")
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}

impl EmbeddingWrite<'_> {
    /// Stores `rows` under `identity`, keeping a row already there (another server embedded the
    /// same text at the same time); how many were new.
    pub fn vectors(
        &mut self,
        identity: &[u8; 32],
        rows: &[CachedWindow],
    ) -> Result<u64, SharedDataError> {
        if rows.is_empty() {
            return Ok(0);
        }
        let texts: Vec<&[u8]> = rows.iter().map(|r| r.text_digest.as_bytes().as_slice()).collect();
        let column = |f: fn(&CachedWindow) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
        let vectors: Vec<&[u8]> = rows.iter().map(|r| r.vector.as_slice()).collect();
        let stored = self
            .tx
            .execute(
                "INSERT INTO embedding_vectors (identity, text_digest, window_index, token_count, \
                 token_start, token_end, vector, generation) \
                 SELECT $1, t, w, c, s, e, v, $8 \
                 FROM unnest($2::bytea[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[], \
                             $7::bytea[]) AS u(t, w, c, s, e, v) \
                 ON CONFLICT DO NOTHING",
                &[
                    &identity.as_slice(),
                    &texts,
                    &column(|r| r.window_index),
                    &column(|r| r.token_count),
                    &column(|r| r.token_start),
                    &column(|r| r.token_end),
                    &vectors,
                    &self.generation,
                ],
            )
            .map_err(self.shared.fail("storing embeddings"))?;
        Ok(stored)
    }

    /// Records that the texts `refused` (digest, encoder tokens) are too long for `identity`.
    pub fn refusals(
        &mut self,
        identity: &[u8; 32],
        refused: &[(TextDigest, i64)],
    ) -> Result<(), SharedDataError> {
        if refused.is_empty() {
            return Ok(());
        }
        let texts: Vec<&[u8]> = refused.iter().map(|(t, _)| t.as_bytes().as_slice()).collect();
        let tokens: Vec<i64> = refused.iter().map(|(_, n)| *n).collect();
        self.tx
            .execute(
                "INSERT INTO embedding_refusals (identity, text_digest, token_count, generation) \
                 SELECT $1, t, n, $4 FROM unnest($2::bytea[], $3::bigint[]) AS u(t, n) \
                 ON CONFLICT DO NOTHING",
                &[&identity.as_slice(), &texts, &tokens, &self.generation],
            )
            .map_err(self.shared.fail("storing overlength refusals"))?;
        Ok(())
    }
}

impl PgShared {
    /// Runs `write` in a transaction holding the cache's lock and commits what it stored.
    pub fn write_embeddings<T, E: From<SharedDataError>>(
        &self,
        write: impl FnOnce(&mut EmbeddingWrite<'_>) -> Result<T, E>,
    ) -> Result<T, E> {
        self.check_writable("storing embeddings")?;
        let mut client = self.client();
        let fail = self.fail("writing the embedding cache");
        let mut tx = locked(&mut client).map_err(&fail)?;
        let generation: i64 =
            tx.query_one("SELECT nextval('embedding_writes')", &[]).map_err(&fail)?.get(0);
        let mut state = EmbeddingWrite { tx, generation, shared: self };
        let out = write(&mut state)?;
        state.tx.commit().map_err(&fail)?;
        Ok(out)
    }

    /// Deletes every vector and refusal of `texts`, under every identity; how many vectors.
    pub fn purge_embeddings(&self, texts: &[TextDigest]) -> Result<u64, SharedDataError> {
        self.retain_or_purge(|_| Ok::<_, SharedDataError>(texts.to_vec()))
    }

    /// Deletes every vector and refusal of a text not in the set `live` returns, which is read
    /// under the cache's lock (no write lands between the read and the delete).
    pub fn retain_embeddings<E: From<SharedDataError>>(
        &self,
        live: impl FnOnce() -> Result<HashSet<TextDigest>, E>,
    ) -> Result<u64, E> {
        self.retain_or_purge(|stored: &mut dyn FnMut() -> Result<_, SharedDataError>| {
            let live = live()?;
            let stored: HashSet<TextDigest> = stored()?;
            Ok(stored.into_iter().filter(|t| !live.contains(t)).collect())
        })
    }

    /// Deletes, under the lock, the texts `choose` names (given a reader of every stored text).
    fn retain_or_purge<E: From<SharedDataError>>(
        &self,
        choose: impl FnOnce(
            &mut dyn FnMut() -> Result<HashSet<TextDigest>, SharedDataError>,
        ) -> Result<Vec<TextDigest>, E>,
    ) -> Result<u64, E> {
        self.check_writable("purging embeddings")?;
        let mut client = self.client();
        let fail = self.fail("purging the embedding cache");
        let mut tx = locked(&mut client).map_err(&fail)?;
        let texts = {
            let mut stored = || {
                let rows = tx
                    .query(
                        "SELECT text_digest FROM embedding_vectors \
                         UNION SELECT text_digest FROM embedding_refusals",
                        &[],
                    )
                    .map_err(self.fail("listing the cached texts"))?;
                rows.iter().map(|row| self.text_digest(row.get(0))).collect()
            };
            choose(&mut stored)?
        };
        if texts.is_empty() {
            return Ok(0);
        }
        let digests: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes().as_slice()).collect();
        let removed = tx
            .execute("DELETE FROM embedding_vectors WHERE text_digest = ANY($1)", &[&digests])
            .map_err(&fail)?;
        tx.execute("DELETE FROM embedding_refusals WHERE text_digest = ANY($1)", &[&digests])
            .map_err(&fail)?;
        tx.commit().map_err(&fail)?;
        Ok(removed)
    }

    /// Stores an encoder identity's canonical encoding unless its digest is stored already;
    /// returns the one stored (the caller checks it is the same).
    pub fn register_embedding_identity(
        &self,
        digest: &[u8; 32],
        canonical: &str,
        dimension: usize,
    ) -> Result<String, SharedDataError> {
        self.check_writable("registering an encoder identity")?;
        let fail = self.fail("registering an encoder identity");
        let mut client = self.client();
        client
            .execute(
                "INSERT INTO embedding_identities (digest, canonical, dimension) \
                 VALUES ($1, $2, $3) ON CONFLICT (digest) DO NOTHING",
                &[&digest.as_slice(), &canonical, &(dimension as i64)],
            )
            .map_err(&fail)?;
        let row = client
            .query_one(
                "SELECT canonical FROM embedding_identities WHERE digest = $1",
                &[&digest.as_slice()],
            )
            .map_err(&fail)?;
        Ok(row.get(0))
    }

    /// The canonical encoding stored under an identity digest.
    pub fn embedding_identity(&self, digest: &[u8; 32]) -> Result<Option<String>, SharedDataError> {
        Ok(self
            .client()
            .query_opt(
                "SELECT canonical FROM embedding_identities WHERE digest = $1",
                &[&digest.as_slice()],
            )
            .map_err(self.fail("reading an encoder identity"))?
            .map(|row| row.get(0)))
    }

    /// The generation of the last committed write (0: none).
    pub fn embedding_generation(&self) -> Result<u64, SharedDataError> {
        let last: i64 = self
            .client()
            .query_one(
                "SELECT greatest(coalesce((SELECT max(generation) FROM embedding_vectors), 0), \
                                 coalesce((SELECT max(generation) FROM embedding_refusals), 0))",
                &[],
            )
            .map_err(self.fail("reading the embedding cache's generation"))?
            .get(0);
        Ok(last as u64)
    }

    /// The texts given vectors or refusals after generation `since`; `None` when there are more
    /// than `at_most` (the caller looks everything up instead).
    pub fn embeddings_written_since(
        &self,
        since: u64,
        at_most: usize,
    ) -> Result<Option<HashSet<TextDigest>>, SharedDataError> {
        let rows = self
            .client()
            .query(
                "(SELECT text_digest FROM embedding_vectors WHERE generation > $1) \
                 UNION (SELECT text_digest FROM embedding_refusals WHERE generation > $1) \
                 LIMIT $2",
                &[&(since as i64), &(at_most as i64 + 1)],
            )
            .map_err(self.fail("reading the embedding cache's recent writes"))?;
        if rows.len() > at_most {
            return Ok(None);
        }
        rows.iter().map(|row| self.text_digest(row.get(0))).collect::<Result<_, _>>().map(Some)
    }

    /// Every text with a vector or a refusal under `identity`.
    pub fn known_embeddings(
        &self,
        identity: &[u8; 32],
    ) -> Result<HashSet<TextDigest>, SharedDataError> {
        let rows = self
            .client()
            .query(
                "SELECT text_digest FROM embedding_vectors WHERE identity = $1 AND window_index = 0 \
                 UNION ALL SELECT text_digest FROM embedding_refusals WHERE identity = $1",
                &[&identity.as_slice()],
            )
            .map_err(self.fail("listing the embedded texts"))?;
        rows.iter().map(|row| self.text_digest(row.get(0))).collect()
    }

    /// Whether `text` has a vector or a refusal under `identity`.
    pub fn embedding_known(
        &self,
        identity: &[u8; 32],
        text: &TextDigest,
    ) -> Result<bool, SharedDataError> {
        Ok(self
            .client()
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM embedding_vectors WHERE identity = $1 \
                     AND text_digest = $2 AND window_index = 0) \
                 OR EXISTS (SELECT 1 FROM embedding_refusals WHERE identity = $1 \
                     AND text_digest = $2)",
                &[&identity.as_slice(), &text.as_bytes().as_slice()],
            )
            .map_err(self.fail("looking an embedded text up"))?
            .get(0))
    }

    /// The stored windows of `texts` under `identity`, by text digest, each text's in window
    /// order.
    pub fn embedding_windows(
        &self,
        identity: &[u8; 32],
        texts: &[TextDigest],
    ) -> Result<Vec<CachedWindow>, SharedDataError> {
        let digests: Vec<&[u8]> = texts.iter().map(|t| t.as_bytes().as_slice()).collect();
        let rows = self
            .client()
            .query(
                "SELECT text_digest, window_index, token_count, token_start, token_end, vector \
                 FROM embedding_vectors WHERE identity = $1 AND text_digest = ANY($2) \
                 ORDER BY text_digest, window_index",
                &[&identity.as_slice(), &digests],
            )
            .map_err(self.fail("reading embeddings"))?;
        rows.iter()
            .map(|row| {
                Ok(CachedWindow {
                    text_digest: self.text_digest(row.get(0))?,
                    window_index: row.get(1),
                    token_count: row.get(2),
                    token_start: row.get(3),
                    token_end: row.get(4),
                    vector: row.get(5),
                })
            })
            .collect()
    }

    /// The refusals under `identity` (of `texts` only, when given): (text, encoder tokens).
    pub fn embedding_refusals(
        &self,
        identity: &[u8; 32],
        texts: Option<&[TextDigest]>,
    ) -> Result<Vec<(TextDigest, i64)>, SharedDataError> {
        let digests: Option<Vec<&[u8]>> =
            texts.map(|texts| texts.iter().map(|t| t.as_bytes().as_slice()).collect());
        let rows = self
            .client()
            .query(
                "SELECT text_digest, token_count FROM embedding_refusals WHERE identity = $1 \
                 AND ($2::bytea[] IS NULL OR text_digest = ANY($2))",
                &[&identity.as_slice(), &digests],
            )
            .map_err(self.fail("reading overlength refusals"))?;
        rows.iter().map(|row| Ok((self.text_digest(row.get(0))?, row.get(1)))).collect()
    }

    /// How many vectors are stored under `identity`.
    pub fn embedding_count(&self, identity: &[u8; 32]) -> Result<u64, SharedDataError> {
        let n: i64 = self
            .client()
            .query_one(
                "SELECT count(*) FROM embedding_vectors WHERE identity = $1",
                &[&identity.as_slice()],
            )
            .map_err(self.fail("counting embeddings"))?
            .get(0);
        Ok(n as u64)
    }

    fn text_digest(&self, bytes: Vec<u8>) -> Result<TextDigest, SharedDataError> {
        let bytes =
            <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| SharedDataError::Corrupted {
                url: self.url.clone(),
                table: "embedding_vectors",
                detail: format!("a text digest of {} bytes", bytes.len()),
            })?;
        Ok(TextDigest::from_bytes(bytes))
    }

    fn fail(&self, op: &'static str) -> impl Fn(postgres::Error) -> SharedDataError + '_ {
        move |source| SharedDataError::from(self.db(op)(source))
    }
}

/// A transaction on `client` holding the cache's lock.
fn locked(client: &mut postgres::Client) -> Result<postgres::Transaction<'_>, postgres::Error> {
    let mut tx = client.transaction()?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&EMBEDDING_LOCK])?;
    Ok(tx)
}
