//! Reading the embedding cache: whether texts are known, one text's embedding, and the vectors
//! of a namespace's turns for its index.

use evicortex_postgres::CachedWindow;

use super::*;

impl EmbeddingCache {
    /// Whether `text` has vectors, or a recorded refusal, under `identity`.
    pub(crate) fn is_known(
        &self,
        identity: &EncoderIdentityDigest,
        text: &TextDigest,
    ) -> Result<bool, EmbeddingCacheError> {
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => return Ok(db.embedding_known(identity.as_bytes(), text)?),
        };
        let sql = sql_err(&self.path);
        for query in [
            "SELECT 1 FROM vectors WHERE identity = ?1 AND text_digest = ?2 AND window_index = 0",
            "SELECT 1 FROM refused WHERE identity = ?1 AND text_digest = ?2",
        ] {
            let mut stmt = conn.prepare_cached(query).map_err(&sql)?;
            if stmt.exists(params![identity.as_bytes(), text.as_bytes()]).map_err(&sql)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Every text with a vector or a refusal under `identity`: what [`EmbeddingCache::is_known`]
    /// answers, for all texts at once. One scan of the covering `vectors_by_text` index (whose
    /// entries carry the primary key), rather than a walk down the vector rows per text: on a
    /// store of 70k texts a catch-up with nothing to embed took 7.7 s of point lookups.
    pub(crate) fn known_texts(
        &self,
        identity: &EncoderIdentityDigest,
    ) -> Result<HashSet<TextDigest>, EmbeddingCacheError> {
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => return Ok(db.known_embeddings(identity.as_bytes())?),
        };
        let sql = sql_err(&self.path);
        let mut known = HashSet::new();
        for query in [
            "SELECT text_digest FROM vectors INDEXED BY vectors_by_text \
             WHERE identity = ?1 AND window_index = 0",
            "SELECT text_digest FROM refused WHERE identity = ?1",
        ] {
            let mut stmt = conn.prepare(query).map_err(&sql)?;
            let rows =
                stmt.query_map([identity.as_bytes()], |r| r.get::<_, Vec<u8>>(0)).map_err(&sql)?;
            for row in rows {
                known.insert(self.text_digest(row.map_err(&sql)?)?);
            }
        }
        Ok(known)
    }

    /// The stored embedding of `text` under `identity` (every window, with its token range),
    /// checked: windows in sequence, each vector of the stored identity's dimension (the identity
    /// checked against its digest), each range inside the text's tokens.
    pub(crate) fn embedding(
        &self,
        identity: &EncoderIdentityDigest,
        text: &TextDigest,
    ) -> Result<Option<TextEmbedding>, EmbeddingCacheError> {
        let dimension = self.identity(identity)?.map(|stored| stored.dimension);
        let windows = match self.backend() {
            Backend::Postgres(db) => db.embedding_windows(identity.as_bytes(), &[*text])?,
            Backend::Sqlite(conn) => {
                let sql = sql_err(&self.path);
                let mut stmt = conn
                    .prepare_cached(
                        "SELECT window_index, token_count, token_start, token_end, vector
                         FROM vectors WHERE identity = ?1 AND text_digest = ?2
                         ORDER BY window_index",
                    )
                    .map_err(&sql)?;
                let rows = stmt
                    .query_map(params![identity.as_bytes(), text.as_bytes()], |r| {
                        Ok(CachedWindow {
                            text_digest: *text,
                            window_index: r.get(0)?,
                            token_count: r.get(1)?,
                            token_start: r.get(2)?,
                            token_end: r.get(3)?,
                            vector: r.get(4)?,
                        })
                    })
                    .map_err(&sql)?;
                rows.collect::<Result<Vec<_>, _>>().map_err(&sql)?
            }
        };
        self.checked_embedding(text, dimension, windows)
    }

    /// The embedding of `text` made of its stored `windows` (in window order), checked.
    fn checked_embedding(
        &self,
        text: &TextDigest,
        dimension: Option<usize>,
        windows: Vec<CachedWindow>,
    ) -> Result<Option<TextEmbedding>, EmbeddingCacheError> {
        let mut out: Option<TextEmbedding> = None;
        for window in windows {
            let CachedWindow {
                window_index, token_count, token_start: start, token_end: end, ..
            } = window;
            let blob = window.vector;
            let corrupted = |what: String| EmbeddingCacheError::Corrupted {
                path: self.path.clone(),
                detail: format!("text {text}: window {window_index} {what}"),
            };
            let count = usize::try_from(token_count)
                .map_err(|_| corrupted(format!("has a token count of {token_count}")))?;
            let embedding =
                out.get_or_insert(TextEmbedding { token_count: count, windows: Vec::new() });
            if window_index != embedding.windows.len() as i64 || !blob.len().is_multiple_of(4) {
                return Err(corrupted("malformed or out of sequence".to_owned()));
            }
            if token_count != embedding.token_count as i64 {
                return Err(corrupted(format!(
                    "has a token count of {token_count}, not {}",
                    embedding.token_count
                )));
            }
            if !(0 <= start && start <= end && end <= token_count) {
                return Err(corrupted(format!("covers tokens {start}..{end} of {token_count}")));
            }
            if dimension != Some(blob.len() / 4) {
                return Err(corrupted(format!(
                    "has a vector of dimension {} under an identity of {}",
                    blob.len() / 4,
                    dimension.map_or("(none stored)".to_owned(), |d| d.to_string())
                )));
            }
            embedding.windows.push(EmbeddedWindow {
                content_tokens: start as usize..end as usize,
                vector: decode_vector(&blob),
            });
        }
        Ok(out)
    }

    #[cfg(test)]
    /// The vectors of `text` under `identity`, one per window, in window order.
    pub(crate) fn get(
        &self,
        identity: &EncoderIdentityDigest,
        text: &TextDigest,
    ) -> Result<Vec<Vec<f32>>, EmbeddingCacheError> {
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => {
                let windows = db.embedding_windows(identity.as_bytes(), &[*text])?;
                return Ok(windows.iter().map(|w| decode_vector(&w.vector)).collect());
            }
        };
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
            if window_index != out.len() as i64 || !blob.len().is_multiple_of(4) {
                return Err(EmbeddingCacheError::Corrupted {
                    path: self.path.clone(),
                    detail: format!(
                        "text {text}: window {window_index} malformed or out of sequence"
                    ),
                });
            }
            out.push(decode_vector(&blob));
        }
        Ok(out)
    }

    /// The vectors of `evidence` (live turns of one namespace, in ledger order) under
    /// `identity`. Vectors of any other identity are never returned; turns without a vector are
    /// listed as missing or refused.
    pub(crate) fn namespace_vectors(
        &self,
        turns: &[(TurnId, TextDigest)],
        identity: &EncoderIdentityDigest,
    ) -> Result<NamespaceVectors, EmbeddingCacheError> {
        let _span = tracing::debug_span!("namespace_vectors", n_turns = turns.len()).entered();
        // The stored identity, checked against its digest, gives the dimension: a dimension
        // column edited out of range must not size the matrix. None stored: 0, of which no
        // vector can be.
        let dimension = self.identity(identity)?.map_or(0, |stored| stored.dimension);
        let mut out = NamespaceVectors {
            identity: *identity,
            dimension,
            turns: Vec::new(),
            data: Vec::new(),
            missing: Vec::new(),
            refused: Vec::new(),
        };
        let conn = match self.backend() {
            Backend::Sqlite(conn) => conn,
            Backend::Postgres(db) => return self.pg_namespace_vectors(db, turns, out),
        };
        // One snapshot for both passes: a purge between them cannot leave a counted row unread.
        let snapshot = conn.unchecked_transaction().map_err(sql_err(&self.path))?;
        // Texts are read in key order, the table's (identity, text digest): consecutive lookups
        // touch neighbouring pages, so a large namespace reads the file about once. In turn
        // order they land at random, which for a million turns in a file larger than the page
        // cache is minutes of reads at every open. The rows still come out in turn order.
        let mut order: Vec<usize> = (0..turns.len()).collect();
        order.sort_unstable_by(|&a, &b| turns[a].1.as_bytes().cmp(turns[b].1.as_bytes()));
        let runs: Vec<&[usize]> = order.chunk_by(|&a, &b| turns[a].1 == turns[b].1).collect();
        // First the windows of each text, from the small index on text digests alone.
        let mut windows = vec![0usize; turns.len()];
        {
            let mut count = snapshot
                .prepare_cached(
                    "SELECT count(*) FROM vectors INDEXED BY vectors_by_text \
                     WHERE text_digest = ?1 AND identity = ?2",
                )
                .map_err(sql_err(&self.path))?;
            for run in &runs {
                let text = turns[run[0]].1;
                let n: i64 = count
                    .query_row(params![text.as_bytes(), identity.as_bytes()], |r| r.get(0))
                    .map_err(sql_err(&self.path))?;
                for &i in *run {
                    windows[i] = n as usize;
                }
            }
        }
        let mut first_row = Vec::with_capacity(turns.len());
        for (&(turn, _), &n) in turns.iter().zip(&windows) {
            first_row.push(out.turns.len());
            out.turns.extend(std::iter::repeat_n(turn, n));
        }
        out.data = vec![0.0; out.turns.len() * dimension];
        let mut refused = snapshot
            .prepare_cached("SELECT 1 FROM refused WHERE identity = ?1 AND text_digest = ?2")
            .map_err(sql_err(&self.path))?;
        let (mut missing, mut refusals) = (Vec::new(), Vec::new());
        for run in &runs {
            let (first, text) = (run[0], turns[run[0]].1);
            if windows[first] == 0 {
                let is_refused = refused
                    .exists(params![identity.as_bytes(), text.as_bytes()])
                    .map_err(sql_err(&self.path))?;
                if is_refused { &mut refusals } else { &mut missing }.extend(run.iter().copied());
                continue;
            }
            let vectors = self.vectors_of(&snapshot, identity, &text)?;
            if vectors.len() != windows[first] {
                return Err(EmbeddingCacheError::Corrupted {
                    path: self.path.clone(),
                    detail: format!(
                        "text {text}: {} windows indexed, {} stored",
                        windows[first],
                        vectors.len()
                    ),
                });
            }
            for (window, vector) in vectors.iter().enumerate() {
                if vector.len() != dimension || dimension == 0 {
                    return Err(EmbeddingCacheError::Corrupted {
                        path: self.path.clone(),
                        detail: format!(
                            "turn {:?}: vector of dimension {} under an identity of {}",
                            turns[first].0,
                            vector.len(),
                            stored_dimension(dimension)
                        ),
                    });
                }
                for &i in *run {
                    let row = first_row[i] + window;
                    out.data[row * dimension..(row + 1) * dimension].copy_from_slice(vector);
                }
            }
        }
        // Ledger order, as the turns were given.
        missing.sort_unstable();
        refusals.sort_unstable();
        out.missing = missing.into_iter().map(|i| turns[i].0).collect();
        out.refused = refusals.into_iter().map(|i| turns[i].0).collect();
        Ok(out)
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
    /// Turns with no vector under this identity yet (not embedded so far), in ledger order.
    pub missing: Vec<TurnId>,
    /// Turns that will have no vector under this identity: their text is longer than the
    /// encoder's maximum and its overlength policy is `refuse`.
    pub refused: Vec<TurnId>,
}

impl NamespaceVectors {
    /// The vector of row `row`.
    pub fn row(&self, row: usize) -> &[f32] {
        &self.data[row * self.dimension..(row + 1) * self.dimension]
    }

    #[cfg(test)]
    /// Number of rows.
    pub fn len(&self) -> usize {
        self.turns.len()
    }

    #[cfg(test)]
    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }
}

impl EmbeddingCache {
    /// The refusals under `identity`, by the first live turn holding each refused text.
    pub(crate) fn refused_turns(
        &self,
        identity: &EncoderIdentityDigest,
        first_turn: &HashMap<TextDigest, FirstTurn>,
    ) -> Result<Vec<RefusedTurn>, EmbeddingCacheError> {
        let stored: Vec<(TextDigest, i64)> = match self.backend() {
            Backend::Postgres(db) => db.embedding_refusals(identity.as_bytes(), None)?,
            Backend::Sqlite(conn) => {
                let mut stmt = conn
                    .prepare("SELECT text_digest, token_count FROM refused WHERE identity = ?1")
                    .map_err(sql_err(&self.path))?;
                let rows = stmt
                    .query_map([identity.as_bytes()], |r| {
                        Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
                    })
                    .map_err(sql_err(&self.path))?;
                let mut stored = Vec::new();
                for row in rows {
                    let (text, tokens) = row.map_err(sql_err(&self.path))?;
                    stored.push((self.text_digest(text)?, tokens));
                }
                stored
            }
        };
        let mut out = Vec::new();
        for (text, tokens) in stored {
            if let Some(first) = first_turn.get(&text) {
                let refused = RefusedTurn {
                    namespace: first.namespace.clone(),
                    turn: first.id,
                    tokens: tokens as usize,
                };
                out.push((first.position, refused));
            }
        }
        out.sort_by_key(|(position, _)| *position);
        Ok(out.into_iter().map(|(_, refused)| refused).collect())
    }
}

/// The overlength policy of the encoder the store's turns were last caught up with
/// ([`crate::Memory::catch_up`]), if the store has an embedding cache and it was ever caught up:
/// front ends default to it, so that a store embedded with windows is compiled with windows.
/// `store` is a store directory or a PostgreSQL URL, whose cache is in its derived directory.
pub fn last_overlength(store: &Path) -> Result<Option<Overlength>, EmbeddingCacheError> {
    // A PostgreSQL store's policy is the database's, whichever server embedded last.
    let recorded = crate::shared_data::recorded_overlength(store).map_err(|detail| {
        EmbeddingCacheError::Io { path: store.to_owned(), source: std::io::Error::other(detail) }
    })?;
    if recorded.is_some() {
        return Ok(recorded);
    }
    let location = crate::StoreLocation::parse(store).map_err(|e| EmbeddingCacheError::Io {
        path: store.to_owned(),
        source: std::io::Error::other(e.to_string()),
    })?;
    let dir = location.derived_dir();
    if !dir.join(EMBEDDINGS_FILE).is_file() {
        return Ok(None);
    }
    let cache = EmbeddingCache::open(dir)?;
    let Some(hex) = cache.meta(LAST_IDENTITY)? else { return Ok(None) };
    let digest = digest_from_hex(&hex).ok_or_else(|| EmbeddingCacheError::Corrupted {
        path: cache.path.clone(),
        detail: format!("meta {LAST_IDENTITY} is not a 32-byte hex digest: {hex:?}"),
    })?;
    Ok(cache.identity(&digest)?.map(|identity| identity.overlength))
}

/// The digests of every live turn's document ([`turn_document`], what the cache is keyed by).
pub(crate) fn live_documents(
    ledger: &dyn EvidenceLedger,
) -> Result<HashSet<TextDigest>, ReadError> {
    let mut live = HashSet::new();
    ledger.for_each_evidence_since(None, None, |_, e| {
        live.insert(TextDigest::of(&turn_document(&e.turn)));
        Ok::<(), ReadError>(())
    })?;
    Ok(live)
}

/// A namespace matrix's dimension as an error names it (0: no identity stored).
pub(super) fn stored_dimension(dimension: usize) -> String {
    if dimension == 0 { "(none stored)".to_owned() } else { dimension.to_string() }
}
