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
        // column edited out of range must not size the matrix.
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
                if vector.len() != dimension {
                    return Err(EmbeddingCacheError::Corrupted {
                        path: self.path.clone(),
                        detail: format!(
                            "turn {:?}: vector of dimension {} under an identity of {dimension}",
                            turns[first].0,
                            vector.len()
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
