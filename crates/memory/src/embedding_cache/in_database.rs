//! The embedding cache in a PostgreSQL store's database: what differs from the file.
//!
//! Writes check liveness inside the transaction that holds the cache's lock, which an erasure's
//! purge takes after its ledger transaction committed (see `evicortex_postgres::PgShared::
//! write_embeddings`): a server embedding a text while another erases it never leaves its vector.

use evicortex_postgres::{CachedWindow, PgShared};

use super::*;

/// Which texts a write may store; built just before the write, from what the ledger says then.
pub(crate) type Keep = Box<dyn Fn(&TextDigest) -> bool>;

/// Texts a namespace's lookup asks the database for at once.
const LOOKUP_TURNS: usize = 4_096;

/// Rows a migration or an import sends in one statement.
const IMPORT_ROWS: usize = 1_024;

/// Every text may be stored (a write of texts that are no turn's, or known live).
pub(super) fn keep_all() -> Result<Keep, ReadError> {
    Ok(Box::new(|_| true))
}

/// The `store_settings` key of the cache's meta key `key`.
pub(super) fn setting_key(key: &str) -> String {
    format!("embedding_cache.{key}")
}

impl EmbeddingCache {
    /// `texts`' windows as stored rows, each vector checked against `identity`'s dimension.
    pub(super) fn cached_windows(
        &self,
        identity: &EncoderIdentity,
        texts: &[(TextDigest, &TextEmbedding)],
    ) -> Result<Vec<CachedWindow>, EmbeddingCacheError> {
        let mut rows = Vec::new();
        for (text, embedding) in texts {
            for (window_index, window) in embedding.windows.iter().enumerate() {
                if window.vector.len() != identity.dimension {
                    return Err(EmbeddingCacheError::Dimension {
                        path: self.path.clone(),
                        got: window.vector.len(),
                        expected: identity.dimension,
                    });
                }
                rows.push(CachedWindow {
                    text_digest: *text,
                    window_index: window_index as i64,
                    token_count: embedding.token_count as i64,
                    token_start: window.content_tokens.start as i64,
                    token_end: window.content_tokens.end as i64,
                    vector: window.vector.iter().flat_map(|x| x.to_le_bytes()).collect(),
                });
            }
        }
        Ok(rows)
    }

    /// [`EmbeddingCache::store`] into the database.
    pub(super) fn store_in(
        &self,
        db: &PgShared,
        identity: &EncoderIdentity,
        texts: &[(TextDigest, &TextEmbedding)],
        refused: &[(TextDigest, usize)],
        keep: &mut dyn FnMut() -> Result<Keep, ReadError>,
    ) -> Result<u64, EmbeddingCacheError> {
        if texts.is_empty() && refused.is_empty() {
            return Ok(0);
        }
        let digest = identity.digest();
        let rows = self.cached_windows(identity, texts)?;
        db.write_embeddings(|write| {
            let keep = keep()?;
            let rows: Vec<CachedWindow> =
                rows.into_iter().filter(|row| keep(&row.text_digest)).collect();
            let refused: Vec<(TextDigest, i64)> =
                refused.iter().filter(|(t, _)| keep(t)).map(|(t, n)| (*t, *n as i64)).collect();
            let written = write.vectors(digest.as_bytes(), &rows)?;
            write.refusals(digest.as_bytes(), &refused)?;
            Ok::<_, EmbeddingCacheError>(written)
        })
    }

    /// [`EmbeddingCache::put_refused`] into the database.
    pub(super) fn pg_refusals(
        &self,
        db: &PgShared,
        identity: &EncoderIdentityDigest,
        refused: &[(TextDigest, usize)],
    ) -> Result<(), EmbeddingCacheError> {
        let rows: Vec<(TextDigest, i64)> = refused.iter().map(|(t, n)| (*t, *n as i64)).collect();
        db.write_embeddings(|write| write.refusals(identity.as_bytes(), &rows))?;
        Ok(())
    }

    /// [`EmbeddingCache::namespace_vectors`] from the database: the turns are looked up a slice
    /// at a time (their texts' windows in one query), so that no more than a slice's vectors are
    /// held besides the matrix.
    pub(super) fn pg_namespace_vectors(
        &self,
        db: &PgShared,
        turns: &[(TurnId, TextDigest)],
        mut out: NamespaceVectors,
    ) -> Result<NamespaceVectors, EmbeddingCacheError> {
        let (identity, dimension) = (out.identity, out.dimension);
        for slice in turns.chunks(LOOKUP_TURNS) {
            let mut texts: Vec<TextDigest> = slice.iter().map(|(_, t)| *t).collect();
            texts.sort_unstable();
            texts.dedup();
            let mut windows: HashMap<TextDigest, Vec<Vec<f32>>> = HashMap::new();
            for row in db.embedding_windows(identity.as_bytes(), &texts)? {
                let vectors = windows.entry(row.text_digest).or_default();
                if row.window_index != vectors.len() as i64
                    || row.vector.len() != dimension * 4
                    || dimension == 0
                {
                    return Err(EmbeddingCacheError::Corrupted {
                        path: self.path.clone(),
                        detail: format!(
                            "text {}: window {} out of sequence or not of dimension {}",
                            row.text_digest,
                            row.window_index,
                            reads::stored_dimension(dimension)
                        ),
                    });
                }
                vectors.push(decode_vector(&row.vector));
            }
            texts.retain(|t| !windows.contains_key(t));
            let refused: HashSet<TextDigest> = db
                .embedding_refusals(identity.as_bytes(), Some(&texts))?
                .into_iter()
                .map(|(text, _)| text)
                .collect();
            for (turn, text) in slice {
                match windows.get(text) {
                    Some(vectors) => {
                        for vector in vectors {
                            out.turns.push(*turn);
                            out.data.extend_from_slice(vector);
                        }
                    }
                    None if refused.contains(text) => out.refused.push(*turn),
                    None => out.missing.push(*turn),
                }
            }
        }
        Ok(out)
    }

    /// Copies the rows of the cache file `file` (identities, vectors, refusals) into this
    /// database's cache, leaving out texts no live turn holds (the set `live` returns, read under
    /// the cache's lock) and keeping rows already there. Returns the vectors copied.
    pub(crate) fn import_file(
        &self,
        file: &EmbeddingCache,
        live: &mut dyn FnMut() -> Result<Keep, ReadError>,
    ) -> Result<u64, EmbeddingCacheError> {
        let Backend::Postgres(db) = self.backend() else { return Ok(0) };
        let sql = sql_err(&file.path);
        let digests: Vec<Vec<u8>> = match file.backend() {
            Backend::Sqlite(conn) => {
                let mut stmt = conn.prepare("SELECT digest FROM identities").map_err(&sql)?;
                let rows = stmt.query_map([], |r| r.get(0)).map_err(&sql)?;
                rows.collect::<Result<_, _>>().map_err(&sql)?
            }
            Backend::Postgres(_) => return Ok(0),
        };
        let mut identities = Vec::new();
        for bytes in digests {
            let digest = EncoderIdentityDigest::from_bytes(*file.text_digest(bytes)?.as_bytes());
            if let Some(identity) = file.identity(&digest)? {
                self.register_identity(&identity)?;
                identities.push(digest);
            }
        }
        let Backend::Sqlite(conn) = file.backend() else { return Ok(0) };
        db.write_embeddings(|write| {
            let keep = live()?;
            let mut copied = 0;
            for identity in &identities {
                let mut stmt = conn
                    .prepare(
                        "SELECT text_digest, window_index, token_count, token_start, token_end, \
                         vector FROM vectors WHERE identity = ?1",
                    )
                    .map_err(&sql)?;
                let mut rows = stmt.query([identity.as_bytes()]).map_err(&sql)?;
                let mut batch = Vec::with_capacity(IMPORT_ROWS);
                while let Some(row) = rows.next().map_err(&sql)? {
                    let text = file.text_digest(row.get(0).map_err(&sql)?)?;
                    if !keep(&text) {
                        continue;
                    }
                    batch.push(CachedWindow {
                        text_digest: text,
                        window_index: row.get(1).map_err(&sql)?,
                        token_count: row.get(2).map_err(&sql)?,
                        token_start: row.get(3).map_err(&sql)?,
                        token_end: row.get(4).map_err(&sql)?,
                        vector: row.get(5).map_err(&sql)?,
                    });
                    if batch.len() == IMPORT_ROWS {
                        copied += write.vectors(identity.as_bytes(), &batch)?;
                        batch.clear();
                    }
                }
                copied += write.vectors(identity.as_bytes(), &batch)?;
                let mut stmt = conn
                    .prepare("SELECT text_digest, token_count FROM refused WHERE identity = ?1")
                    .map_err(&sql)?;
                let rows = stmt
                    .query_map([identity.as_bytes()], |r| {
                        Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, i64>(1)?))
                    })
                    .map_err(&sql)?;
                let mut refused = Vec::new();
                for row in rows {
                    let (text, tokens) = row.map_err(&sql)?;
                    let text = file.text_digest(text)?;
                    if keep(&text) {
                        refused.push((text, tokens));
                    }
                }
                write.refusals(identity.as_bytes(), &refused)?;
            }
            Ok::<_, EmbeddingCacheError>(copied)
        })
    }
}

/// The cache of a PostgreSQL store in its database `db`. A cache file that an earlier version
/// kept in the derived directory `dir` is copied in once (the texts live turns hold), then
/// removed: from then on the database's is the only copy, and no server embeds again what the
/// file held.
pub(crate) fn open_in_database(
    db: PgShared,
    dir: &Path,
    ledger: &dyn EvidenceLedger,
) -> Result<EmbeddingCache, EmbeddingCacheError> {
    let cache = EmbeddingCache::in_database(db);
    let path = dir.join(EMBEDDINGS_FILE);
    if path.is_file() {
        let file = EmbeddingCache::open(dir)?;
        let copied = cache.import_file(&file, &mut || live_keep(ledger))?;
        drop(file);
        tracing::info!(vectors = copied, file = %path.display(), "cache file moved into the database");
        for suffix in ["", "-wal", "-shm"] {
            let mut name = path.clone().into_os_string();
            name.push(suffix);
            match fs_err::remove_file(&name) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(EmbeddingCacheError::Io { path: name.into(), source: e });
                }
                _ => {}
            }
        }
    }
    Ok(cache)
}

/// Keeps the documents live turns of `ledger` hold now.
pub(crate) fn live_keep(ledger: &dyn EvidenceLedger) -> Result<Keep, ReadError> {
    let live = live_documents(ledger)?;
    Ok(Box::new(move |t| live.contains(t)))
}
