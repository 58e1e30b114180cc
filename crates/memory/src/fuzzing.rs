//! What the fuzz targets in `fuzz/` drive that is not public API: the lexical index file's
//! reader on bytes, and the embedding cache's reads and writes on a cache file. Built only with
//! the `fuzzing` feature, which nothing else enables; not a stable API.

use std::{collections::HashSet, path::Path};

use evicortex_compiler::WindowIndex;
use evicortex_core::{Namespace, TextDigest, TurnId};
use evicortex_embed::{EncoderIdentity, EncoderIdentityDigest, TextEmbedding};
use evicortex_lexical::Bm25Index;
use evicortex_vector::ChecksumReader;

pub use crate::embedding_cache::{NamespaceVectors, last_overlength};
use crate::{
    EmbeddingCacheError,
    embedding_cache::EmbeddingCache,
    lexical_file::{self, Problem},
};

/// A lexical index file as the store reads it, before it is compared with the ledger.
#[derive(Debug)]
pub struct LexicalFile {
    /// The namespace it was written for.
    pub namespace: Namespace,
    /// The namespace record it covers.
    pub covers: TurnId,
    /// The turn index.
    pub lexical: Bm25Index,
    /// The context-window index, when one was saved.
    pub window: Option<WindowIndex>,
}

/// Reads a whole lexical index file (header, indexes, checksum) as a store opening it does;
/// `Err` says why the store would refuse it.
pub fn read_lexical_file(bytes: &[u8]) -> Result<LexicalFile, String> {
    let problem = |p: Problem| match p {
        Problem::Damaged(detail) => detail,
        Problem::Io(e) => e.to_string(),
    };
    let mut reader = ChecksumReader::new(bytes);
    let header = lexical_file::read_header(&mut reader).map_err(problem)?;
    let (lexical, window) = lexical_file::read_body(&mut reader).map_err(problem)?;
    reader.finish().map_err(|e| e.to_string())??;
    Ok(LexicalFile { namespace: header.namespace, covers: header.covers, lexical, window })
}

/// The embedding cache of a store directory (`DIR/embeddings.sqlite`), with the writes and
/// reads a store makes.
#[derive(Debug)]
pub struct EmbeddingCacheFile(EmbeddingCache);

impl EmbeddingCacheFile {
    /// Opens (creating if absent) the cache of `dir`.
    pub fn open(dir: &Path) -> Result<EmbeddingCacheFile, EmbeddingCacheError> {
        EmbeddingCache::open(dir).map(EmbeddingCacheFile)
    }

    /// Stores embeddings under `identity`.
    pub fn put(
        &self,
        identity: &EncoderIdentity,
        texts: &[(TextDigest, &TextEmbedding)],
    ) -> Result<u64, EmbeddingCacheError> {
        self.0.put(identity, texts)
    }

    /// Records overlength refusals.
    pub fn put_refused(
        &self,
        identity: &EncoderIdentityDigest,
        refused: &[(TextDigest, usize)],
    ) -> Result<(), EmbeddingCacheError> {
        self.0.put_refused(identity, refused)
    }

    /// Records `identity` as the last catch-up's.
    pub fn set_last_identity(
        &self,
        identity: &EncoderIdentityDigest,
    ) -> Result<(), EmbeddingCacheError> {
        self.0.set_last_identity(identity)
    }

    /// The stored identity with `digest`, checked against it.
    pub fn identity(
        &self,
        digest: &EncoderIdentityDigest,
    ) -> Result<Option<EncoderIdentity>, EmbeddingCacheError> {
        self.0.identity(digest)
    }

    /// One text's stored embedding.
    pub fn embedding(
        &self,
        identity: &EncoderIdentityDigest,
        text: &TextDigest,
    ) -> Result<Option<TextEmbedding>, EmbeddingCacheError> {
        self.0.embedding(identity, text)
    }

    /// Every text with a vector or a refusal under `identity`.
    pub fn known_texts(
        &self,
        identity: &EncoderIdentityDigest,
    ) -> Result<HashSet<TextDigest>, EmbeddingCacheError> {
        self.0.known_texts(identity)
    }

    /// Whether `text` has a vector or a refusal under `identity`.
    pub fn is_known(
        &self,
        identity: &EncoderIdentityDigest,
        text: &TextDigest,
    ) -> Result<bool, EmbeddingCacheError> {
        self.0.is_known(identity, text)
    }

    /// The vectors of a namespace's turns, as its vector index reads them.
    pub fn namespace_vectors(
        &self,
        turns: &[(TurnId, TextDigest)],
        identity: &EncoderIdentityDigest,
    ) -> Result<NamespaceVectors, EmbeddingCacheError> {
        self.0.namespace_vectors(turns, identity)
    }
}
