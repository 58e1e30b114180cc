//! `Memory::dense_candidates`: the dense turn list a compile would fuse, alone and whole, from
//! whichever index serves it (the exact scan, the HNSW graph, or pgvector on a PostgreSQL store).
//! Audits compare it with the exact cosine ranking (recall@N) through the path compile runs.

use evicortex_compiler::{Admission, CompileQuery, DenseIndexRef};
use evicortex_core::TurnId;
use evicortex_vector::{VectorHit, VectorIndexRead};

use crate::{
    CompileError, Memory,
    index_cache::FreshKey,
    pg_dense::{DenseQuery, PgCandidates},
};

/// A dense turn list and the index that served it.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseCandidates {
    /// The admitted turns most similar to the question, best first, with their cosine.
    pub hits: Vec<VectorHit<TurnId>>,
    /// Which index served them.
    pub index: DenseIndexRef,
}

impl Memory {
    /// The `top_n` turns of `query.namespace` admitted at `query.as_of` (erased turns never) most
    /// similar to `query_vector` under the memory's leading encoder, as compile's dense list
    /// finds them, after the namespace's indexes are brought to the ledger head.
    pub fn dense_candidates(
        &self,
        query: &CompileQuery,
        query_vector: &[f32],
        top_n: usize,
    ) -> Result<DenseCandidates, CompileError> {
        let dense = self.inner.dense.as_ref().ok_or(CompileError::DenseUnavailable)?;
        let namespace = &query.namespace;
        let slot = self.inner.indexes.slot(namespace);
        // Asks for no context indexes: its own key, never equal to a compile's.
        let key = FreshKey::now(self.view(), Some(dense), &self.inner.also_dense, String::new())?;
        let indexes = self.inner.indexes.refreshed(namespace, &slot, key, |indexes| {
            indexes.refresh(self.view(), namespace, Some(dense), &self.inner.also_dense)
        })?;
        let Some(local) = indexes.dense.as_ref() else {
            return Ok(DenseCandidates { hits: Vec::new(), index: DenseIndexRef::Exact });
        };
        let as_of = query.as_of.map(|t| t.utc_micros());
        let admission = Admission::new(&indexes.corpus, as_of);
        let vector_err = |source| CompileError::Vector { namespace: namespace.clone(), source };
        let from_pg: Option<PgCandidates> = match &self.inner.pg_dense {
            Some(pg) => {
                let asked = DenseQuery { vector: query_vector, top_n, as_of_micros: as_of };
                Some(pg.candidates(dense, namespace, &asked, &admission, &local.index)?)
            }
            None => None,
        };
        let index: &dyn VectorIndexRead = match &from_pg {
            Some(pg) => pg,
            None => &local.index,
        };
        let (hits, served) = index
            .search_served(query_vector, top_n, &mut |id| admission.admits(id))
            .map_err(vector_err)?;
        Ok(DenseCandidates { hits, index: served.into() })
    }
}
