//! Dense candidates of a store on PostgreSQL: the turns' vectors are kept beside the ledger
//! in pgvector (one table per encoder, one partition per namespace, each with its HNSW index),
//! and compile takes a namespace's dense list from there, with the as-of filter applied inside
//! the search. Every process compiling from the database (and every replica) then reads one
//! index instead of building its own.
//!
//! The embedding cache (the database's on a primary, a standby's own file) is content-addressed
//! by text: a compile brings the namespace's vectors up from it as on an embedded store, and
//! stores in the pgvector tables those they lack (`sync`), skipping any a turn erased
//! meanwhile. The context vectors (the windows around a turn) are computed from the copy the
//! compile brought up. An erasure removes the erased turns' vectors
//! (`DerivedStore::purge`), and opening the store removes any an interrupted erasure left.

use std::collections::{BTreeMap, HashSet};

use evicortex_compiler::{Admission, Corpus};
use evicortex_core::{Namespace, TurnId};
use evicortex_postgres::{EncoderSpace, HnswBuild, PgVectors, ServedBy, StoredVector};
use evicortex_vector::{
    IndexKind, PgvectorHnsw, VectorError, VectorHit, VectorIndexRead, WindowedIndex,
};

use crate::{CompileError, DerivedStore, DerivedStoreError, EraseReceipt, OpenError, dense::Dense};

/// The beam of pgvector's HNSW searches (`hnsw.ef_search`, at least the list's length). With
/// 128 (the store's floor) recall@50 against the exact scan was 0.9898 on 10k real LongMemEval
/// vectors (`evicortex-bench ann run --postgres`), under the 0.99 gate; the embedded graph
/// passes it at 10k to 100k with 256.
const EF_SEARCH: u32 = 256;

/// The vector store of a PostgreSQL store's database.
#[derive(Debug)]
pub(crate) struct PgDense {
    vectors: PgVectors,
    /// Where a memory that embeds records its overlength policy (on the primary).
    overlength: Option<crate::shared_data::SharedOverlength>,
}

impl PgDense {
    /// The vector store for a memory embedding with `encoders`: connected (pgvector installed
    /// when missing and allowed), each encoder registered, and the vectors of erased turns an
    /// interrupted erasure left removed. On a read replica nothing is written: the encoders
    /// must be registered on the primary already.
    pub(crate) fn connect(url: &str, encoders: &[&Dense]) -> Result<PgDense, OpenError> {
        let vectors = PgVectors::connect_for_ledger(url)
            .and_then(|v| v.with_ef_search(EF_SEARCH))
            .map_err(OpenError::VectorStore)?;
        for dense in encoders {
            let space = EncoderSpace {
                identity: identity(dense),
                dim: dense.encoder.identity().dimension,
                hnsw: HnswBuild::default(),
            };
            vectors.register(&space).map_err(OpenError::VectorStore)?;
        }
        if !vectors.is_read_only() {
            vectors.remove_erased().map_err(OpenError::VectorStore)?;
        }
        let overlength = crate::shared_data::SharedOverlength::connect(url)?;
        Ok(PgDense { vectors, overlength })
    }

    /// Records `policy` in the database as the one the store was last embedded with.
    pub(crate) fn record_overlength(
        &self,
        policy: evicortex_embed::Overlength,
    ) -> Result<(), evicortex_postgres::SharedDataError> {
        self.overlength.as_ref().map_or(Ok(()), |shared| shared.record(policy))
    }

    /// The vector store when the database has one, for a memory without an encoder: its
    /// erasures must still remove what other processes stored.
    pub(crate) fn connect_existing(url: &str) -> Result<Option<PgDense>, OpenError> {
        let Some(vectors) = PgVectors::connect_existing(url).map_err(OpenError::VectorStore)?
        else {
            return Ok(None);
        };
        if !vectors.is_read_only() {
            vectors.remove_erased().map_err(OpenError::VectorStore)?;
        }
        Ok(Some(PgDense { vectors, overlength: None }))
    }

    /// Stores the local vectors of `turns` (every turn of `corpus` when `None`, minus those
    /// already stored) under `dense`'s encoder. On a read replica nothing is stored: its dense
    /// lists hold the vectors the primary's processes stored and the replica replayed.
    pub(crate) fn sync(
        &self,
        dense: &Dense,
        namespace: &Namespace,
        local: &WindowedIndex,
        corpus: &Corpus,
        turns: Option<&[TurnId]>,
    ) -> Result<(), CompileError> {
        if self.vectors.is_read_only() {
            return Ok(());
        }
        let identity = identity(dense);
        let store_err = |source| CompileError::VectorStore { namespace: namespace.clone(), source };
        let (stored, turns): (HashSet<(TurnId, u32)>, Vec<TurnId>) = match turns {
            Some(turns) => (HashSet::new(), turns.to_vec()),
            None => (
                self.vectors.stored_keys(&identity, namespace).map_err(store_err)?,
                corpus.evidence().iter().map(|e| e.id).collect(),
            ),
        };
        let mut rows = Vec::new();
        for turn in turns {
            let Some(evidence) = corpus.get(turn) else { continue };
            let time = evidence.turn.time.utc_micros();
            for (segment, vector) in (0u32..).zip(local.windows_of(turn)) {
                if !stored.contains(&(turn, segment)) {
                    rows.push(StoredVector {
                        record: turn,
                        segment,
                        event_utc_micros: time,
                        vector,
                    });
                }
            }
        }
        self.vectors.mirror(&identity, namespace, &rows).map_err(store_err)?;
        Ok(())
    }

    /// The namespace's `top_n` admitted turns most similar to `query` under `dense`'s encoder,
    /// as a list the compiler reads like an index. pgvector applies the as-of filter; the
    /// admission check drops what the corpus does not admit (a turn past the corpus, erased
    /// since), and more rows are asked for until `top_n` distinct turns are found or the
    /// namespace has no more.
    pub(crate) fn candidates(
        &self,
        dense: &Dense,
        namespace: &Namespace,
        query: &DenseQuery<'_>,
        admission: &Admission<'_>,
        local: &WindowedIndex,
    ) -> Result<PgCandidates, CompileError> {
        let &DenseQuery { vector: query, top_n, as_of_micros } = query;
        let identity = identity(dense);
        let store_err = |source| CompileError::VectorStore { namespace: namespace.clone(), source };
        let mut want = top_n.max(1);
        loop {
            let found = self
                .vectors
                .search(&identity, namespace, query, want, as_of_micros)
                .map_err(store_err)?;
            let rows = found.hits.len();
            let mut hits: Vec<VectorHit<TurnId>> = Vec::with_capacity(top_n);
            let mut seen = HashSet::new();
            for hit in found.hits {
                if seen.insert(hit.key) && admission.admits(hit.key) {
                    hits.push(hit);
                }
            }
            if hits.len() >= top_n || rows < want || want >= local.len().max(top_n) {
                hits.truncate(top_n);
                return Ok(PgCandidates {
                    hits,
                    kind: kind_of(found.served_by),
                    dim: local.dim(),
                    len: local.len(),
                    covers: local.covers(),
                });
            }
            want = want.saturating_mul(2);
        }
    }
}

/// What a dense list asks for.
pub(crate) struct DenseQuery<'a> {
    /// The question's vector.
    pub(crate) vector: &'a [f32],
    /// How many turns.
    pub(crate) top_n: usize,
    /// Only turns at or before this instant (UTC microseconds).
    pub(crate) as_of_micros: Option<i64>,
}

/// How the store names an encoder: its identity digest.
fn identity(dense: &Dense) -> String {
    dense.encoder.identity_digest().to_hex()
}

fn kind_of(served: ServedBy) -> IndexKind {
    match served {
        ServedBy::Hnsw { m, ef_construction, ef_search } => {
            IndexKind::Pgvector(Some(PgvectorHnsw { m, ef_construction, ef_search }))
        }
        _ => IndexKind::Pgvector(None),
    }
}

/// One compile's dense list from pgvector, read by the compiler as an index.
pub(crate) struct PgCandidates {
    hits: Vec<VectorHit<TurnId>>,
    kind: IndexKind,
    dim: usize,
    len: usize,
    covers: Option<TurnId>,
}

impl VectorIndexRead for PgCandidates {
    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.len
    }

    fn covers(&self) -> Option<TurnId> {
        self.covers
    }

    fn kind(&self) -> IndexKind {
        self.kind
    }

    fn search(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorError> {
        if query.len() != self.dim {
            return Err(VectorError::DimensionMismatch {
                what: "query".to_owned(),
                got: query.len(),
                expected: self.dim,
            });
        }
        Ok(self.hits.iter().filter(|h| admit(h.key)).take(n).copied().collect())
    }
}

impl DerivedStore for PgDense {
    fn name(&self) -> &'static str {
        "pgvector store"
    }

    fn purge(&self, receipt: &EraseReceipt) -> Result<(), DerivedStoreError> {
        let mut by_namespace: BTreeMap<&Namespace, Vec<TurnId>> = BTreeMap::new();
        for turn in &receipt.erased {
            by_namespace.entry(&turn.namespace).or_default().push(turn.id);
        }
        for (namespace, turns) in by_namespace {
            self.vectors.remove(namespace, &turns).map_err(|e| {
                DerivedStoreError::new(self.name(), crate::error::vector_store_class(&e), e)
            })?;
        }
        Ok(())
    }
}
