//! The read and write sides of a vector index, shared by the exact and approximate indexes.

use evicortex_core::TurnId;

/// One scored vector.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct VectorHit<K> {
    /// The vector's key (a [`TurnId`] for turns).
    pub key: K,
    /// Cosine similarity with the query, in -1..=1.
    pub score: f32,
}

/// Searching an index. Scores are cosine similarities; results are ordered by descending score,
/// ties by ascending key, and `admit` is applied before the top-`n` cut: a vector it refuses never
/// displaces an admitted one. An index may leave it unasked about vectors that provably cannot
/// enter the top `n`.
pub trait VectorIndexRead<K = TurnId> {
    /// The dimension every vector has.
    fn dim(&self) -> usize;
    /// Number of vectors.
    fn len(&self) -> usize;
    /// Whether the index holds no vector.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The ledger position up to which the index is complete, if recorded.
    fn covers(&self) -> Option<TurnId>;
    /// Which kind of index answers (compiled contexts record it).
    fn kind(&self) -> IndexKind;
    /// The `n` admitted vectors most similar to `query`.
    fn search(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<Vec<VectorHit<K>>, VectorError>;
    /// [`VectorIndexRead::search`], with the kind of index that answered: an index with more
    /// than one path (an HNSW graph scans exactly when its filter admits too few rows) names
    /// the one this search took, which may differ from [`VectorIndexRead::kind`].
    fn search_served(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<(Vec<VectorHit<K>>, IndexKind), VectorError> {
        Ok((self.search(query, n, admit)?, self.kind()))
    }
    /// [`VectorIndexRead::search_served`] for `n`, with the keys of the `pool` admitted vectors
    /// the index ranks best besides (fewer when it holds fewer): the `n` hits first, in their
    /// order, then the others as the index ranks them. For seeding a further search, which needs
    /// to know which vectors lie near the top rather than their exact order: an index may rank
    /// the keys past the `n`-th by an approximate score. By default the pool is the hits of a
    /// search for `pool` (so the hits are the first `n` of it).
    fn search_pooled(
        &self,
        query: &[f32],
        n: usize,
        pool: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<PooledHits<K>, VectorError>
    where
        K: Copy,
    {
        let (hits, served) = self.search_served(query, n.max(pool), admit)?;
        Ok(PooledHits::from_search(hits, n, pool, served))
    }
    /// The unit vector the index holds for `key` (of a key stored as several windows, their
    /// normalised mean), for a search that starts from stored vectors (feedback); `None` when
    /// the key has none, or when the index does not hold its vectors where they can be read.
    fn stored_vector(&self, key: K) -> Option<Vec<f32>> {
        let _ = key;
        None
    }
    /// [`VectorIndexRead::search_pooled`] for a filter that admits no key after `last` (an as-of
    /// time's last admitted record): the same answer, from an index whose rows follow their keys
    /// without reading past `last`'s. By default, the search of every row.
    fn search_pooled_up_to(
        &self,
        query: &[f32],
        n: usize,
        pool: usize,
        last: K,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<PooledHits<K>, VectorError>
    where
        K: Copy,
    {
        let _ = last;
        self.search_pooled(query, n, pool, admit)
    }
}

/// A search's hits with the keys of a wider pool ([`VectorIndexRead::search_pooled`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PooledHits<K> {
    /// The `n` best admitted vectors, scored as [`VectorIndexRead::search`] scores them.
    pub hits: Vec<VectorHit<K>>,
    /// The keys of the `pool` best, the hits' first.
    pub pool: Vec<K>,
    /// The kind of index that answered.
    pub served: IndexKind,
}

impl<K: Copy> PooledHits<K> {
    /// The pool as the first `pool` of a search's `hits`, the hits as its first `n`.
    pub fn from_search(
        mut hits: Vec<VectorHit<K>>,
        n: usize,
        pool: usize,
        served: IndexKind,
    ) -> PooledHits<K> {
        let pool = hits.iter().take(pool).map(|h| h.key).collect();
        hits.truncate(n);
        PooledHits { hits, pool, served }
    }
}

/// Which kind of index answers a search.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum IndexKind {
    /// Every admitted vector is scored ([`crate::ExactIndex`]).
    Exact,
    /// An HNSW graph with these parameters ([`crate::HnswIndex`]).
    Hnsw(crate::HnswParams),
    /// The exact index's rows chosen by their sign sketch, then scored exactly
    /// ([`crate::ExactIndex::search_sketched`]).
    Sketch(crate::SketchParams),
    /// pgvector in a PostgreSQL store: its HNSW index with these parameters, or (`None`) its
    /// exact scan over every admitted vector.
    Pgvector(Option<PgvectorHnsw>),
}

/// The parameters of a pgvector HNSW search: how the index was built, and the beam it searched
/// with.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct PgvectorHnsw {
    /// Links per element on each layer.
    pub m: u32,
    /// Beam width of construction.
    pub ef_construction: u32,
    /// `hnsw.ef_search` of the search.
    pub ef_search: u32,
}

/// Adding to an index. Removal is by rebuilding (erasure rebuilds the namespace's index).
pub trait VectorIndex<K = TurnId>: VectorIndexRead<K> {
    /// Stores `vector` (any non-zero finite vector; it is normalised) under `key`.
    fn insert(&mut self, key: K, vector: &[f32]) -> Result<crate::VectorRow, VectorError>;
    /// Records that the index holds every vector of the ledger up to `position`.
    fn mark_covered(&mut self, position: TurnId) -> Result<(), VectorError>;
}

/// Why a vector index refused an operation.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum VectorError {
    /// A vector of the wrong dimension.
    #[error("{what} has dimension {got}, the index has {expected}")]
    DimensionMismatch {
        /// `"query"` or the key of the inserted vector.
        what: String,
        /// Its dimension.
        got: usize,
        /// The index's dimension.
        expected: usize,
    },
    /// A vector that cannot be normalised: all zeros, or holding NaN or infinity.
    #[error("{what} is not a usable vector: {reason}")]
    InvalidVector {
        /// `"query"` or the key of the inserted vector.
        what: String,
        /// Zero norm or non-finite component.
        reason: &'static str,
    },
    /// The key is already in the index.
    #[error("vector {key} is already indexed")]
    DuplicateKey {
        /// The key, as debug text.
        key: String,
    },
    /// The covered ledger position would move backwards.
    #[error("index covers the ledger up to {covered}, refusing to move back to {requested}")]
    CoverageBackwards {
        /// What the index covers.
        covered: TurnId,
        /// What was asked for.
        requested: TurnId,
    },
    /// An index parameter out of range.
    #[error("index parameter {field} {reason}")]
    InvalidParameter {
        /// The parameter.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// More rows than a [`crate::VectorRow`] can address.
    #[error("vector index is full at {rows} rows")]
    Full {
        /// Rows held.
        rows: usize,
    },
}
