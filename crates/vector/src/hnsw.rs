//! The approximate index: a hierarchical navigable small-world graph (HNSW, Malkov and Yashunin)
//! over the vectors of an [`ExactIndex`], searched with the admission filter inside the
//! traversal.
//!
//! The graph is built by this crate (see `hnsw/build.rs`): deterministically, so that the same
//! vectors in the same order always give the same graph and a loaded index answers exactly as the
//! one that was saved. A search walks the graph comparing the query with each row's `i8` copy
//! (a quarter of the bytes of the `f32` row, and the walk's time is mostly fetching rows from
//! memory); the rows it finds are then rescored in `f32`, so the scores returned are the exact
//! cosines of the rows found (the same function as [`ExactIndex`], bit for bit); what is
//! approximate is which rows are found.
//!
//! Filters: `admit` is asked during the layer-0 traversal about every row that could enter the
//! result, and refused rows are traversed but never returned, so the search widens past them
//! instead of returning fewer rows. A filter admitting a share `f` of the rows makes the traversal
//! score about `1/f` times as many rows, while the exact scan costs the same whatever the filter:
//! the graph pays only while the admitted rows are many, a count independent of the index's size
//! (the crossover measured by `evicortex-bench ann run`). So a search whose filter is estimated,
//! from an evenly spaced sample of the rows, to admit fewer than [`HnswIndex::min_admitted`]
//! rows is an exact scan from the start ([`SearchTrace::exact_by_estimate`]); and a traversal
//! that scores more than an eighth of the index before `ef` admitted rows are found finishes as
//! an exact scan ([`SearchTrace::exact_fallback`]), which is cheaper at that point and exact.

mod build;
mod file;
mod graph;
mod search;

use std::{
    collections::HashMap,
    sync::{Mutex, PoisonError},
};

use evicortex_core::TurnId;

pub use self::file::{
    ChecksumReader, INDEX_FILE_MAGIC, INDEX_FILE_VERSION, IndexFileError, IndexFileHeader,
    IndexFileMeta, IndexFileState, index_file_name, index_file_prefix, index_file_state,
    read_index_header, remove_abandoned_temporaries, remove_index_file, write_index_file,
};
use self::{
    graph::Graph,
    search::{BeamEnd, Visited, filtered_beam, greedy},
};
use crate::{
    ExactIndex, IndexKey, IndexKind, VectorError, VectorHit, VectorIndex, VectorIndexRead,
    VectorRow,
    distance::{dot, dot_i8, quantize},
    exact::{OrderedScore, top_n},
};

/// The graph's parameters. Every one changes results, so each is recorded in index files and in
/// compiled contexts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct HnswParams {
    /// Links chosen per row on each layer; rows hold up to `m` links on the upper layers and
    /// `2m` on layer 0. 2..=127.
    pub m: usize,
    /// Width of the beam that finds a new row's neighbours.
    pub ef_construction: usize,
    /// Width of the beam that answers a search (at least the `n` asked for).
    pub ef_search: usize,
    /// Seed of the level each row gets.
    pub seed: u64,
}

impl Default for HnswParams {
    /// The parameters chosen by `evicortex-bench ann` on real LongMemEval embeddings (see
    /// `docs/vector-index.md`): with `ef_search` 128 recall@50 fell under the 0.99 gate at 10k
    /// and 80k vectors; 256 passed at 10k, 20k and 100k.
    fn default() -> HnswParams {
        HnswParams { m: 16, ef_construction: 200, ef_search: 256, seed: 0x5EED_A11C }
    }
}

/// What one search did.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchTrace {
    /// Rows whose similarity was computed during the graph traversal.
    pub scored: usize,
    /// Whether the search finished as an exact scan (filter too selective for the graph).
    pub exact_fallback: bool,
    /// Whether the exact scan was chosen before the traversal, because the filter was
    /// estimated to admit fewer than [`HnswIndex::min_admitted`] rows (`scored` is then 0).
    pub exact_by_estimate: bool,
}

/// Rows whose admission is asked before the traversal, to estimate how many rows a filter
/// admits (a standard error of at most 3% of the index's rows).
const SELECTIVITY_SAMPLE: usize = 256;

/// A search gives up on the graph once it has scored more than this fraction of the rows
/// (1 / `FALLBACK_DIVISOR`) without finding `ef` admitted ones.
const FALLBACK_DIVISOR: usize = 8;

/// An HNSW graph over the unit vectors of an [`ExactIndex`] (which it owns: the exact scan over
/// the same rows is the fallback, the audit's reference and the source of every score).
#[derive(Debug)]
pub struct HnswIndex<K = TurnId> {
    exact: ExactIndex<K>,
    params: HnswParams,
    graph: Graph,
    visited: Mutex<Vec<Visited>>,
    /// Admitted rows a search needs for the graph to serve it (not persisted: a search setting
    /// that changes which path answers, not the graph).
    min_admitted: usize,
}

impl<K: IndexKey> HnswIndex<K> {
    /// An empty index of `dim`-dimensional vectors.
    pub fn new(dim: usize, params: HnswParams) -> Result<HnswIndex<K>, VectorError> {
        HnswIndex::build(ExactIndex::new(dim), params, &mut |_, _| {})
    }

    /// Builds the graph over every row of `exact`, in parallel on the rayon pool;
    /// `progress(linked, total)` after each batch of rows.
    pub fn build(
        exact: ExactIndex<K>,
        params: HnswParams,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<HnswIndex<K>, VectorError> {
        check_params(&params)?;
        let mut index = HnswIndex {
            exact,
            params,
            graph: Graph::new(params.m),
            visited: Mutex::new(Vec::new()),
            min_admitted: 0,
        };
        index.link_pending(progress);
        Ok(index)
    }

    pub(crate) fn from_parts(
        exact: ExactIndex<K>,
        params: HnswParams,
        graph: Graph,
    ) -> HnswIndex<K> {
        HnswIndex { exact, params, graph, visited: Mutex::new(Vec::new()), min_admitted: 0 }
    }

    pub(crate) fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The parameters.
    pub fn params(&self) -> HnswParams {
        self.params
    }

    /// Admitted rows a search needs for the graph to serve it: with fewer (estimated from a
    /// sample of the rows when the index holds at least this many), the exact scan answers.
    /// 0, the default, leaves every search to the graph.
    pub fn min_admitted(&self) -> usize {
        self.min_admitted
    }

    /// Sets [`HnswIndex::min_admitted`].
    pub fn set_min_admitted(&mut self, rows: usize) {
        self.min_admitted = rows;
    }

    /// The exact index over the same rows (scores from either are identical bit for bit).
    pub fn exact(&self) -> &ExactIndex<K> {
        &self.exact
    }

    /// Bytes held by the vectors, their quantised copy and the graph.
    pub fn heap_bytes(&self) -> usize {
        self.exact.heap_bytes() + self.graph.heap_bytes()
    }

    /// Adds many vectors at once: the new rows are linked in parallel batches.
    pub fn extend<'a>(
        &mut self,
        rows: impl IntoIterator<Item = (K, &'a [f32])>,
    ) -> Result<(), VectorError> {
        let mut result = Ok(());
        for (key, vector) in rows {
            if let Err(err) = self.exact.insert(key, vector) {
                result = Err(err);
                break;
            }
        }
        // Rows stored before a refusal are linked all the same: the graph never lags the rows.
        self.link_pending(&mut |_, _| {});
        result
    }

    /// [`VectorIndexRead::search`] with what the search did.
    pub fn search_traced(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<(Vec<VectorHit<K>>, SearchTrace), VectorError> {
        let query = self.exact.check_query(query)?;
        let mut trace = SearchTrace::default();
        let Some(entry) = self.graph.entry() else { return Ok((Vec::new(), trace)) };
        if n == 0 {
            return Ok((Vec::new(), trace));
        }
        let rows = self.graph.rows();
        let ef = self.params.ef_search.max(n);
        let budget = (rows / FALLBACK_DIVISOR).max(4 * ef);
        let keys = self.exact.row_map().keys();
        // Too few admitted rows for the graph to pay: scan at once. The traversal reuses the
        // sample's answers; the scan asks again (as the fallback after a traversal does), rather
        // than look every key up in the sample.
        let mut sampled: HashMap<u32, bool> = HashMap::new();
        let too_few = if self.min_admitted == 0 {
            false
        } else if rows < self.min_admitted {
            true
        } else {
            let sample = SELECTIVITY_SAMPLE.min(rows);
            for i in 0..sample {
                let row = ((2 * i + 1) * rows / (2 * sample)) as u32;
                sampled.insert(row, admit(keys[row as usize]));
            }
            let admitted = sampled.values().filter(|&&a| a).count();
            admitted * rows < self.min_admitted * sampled.len()
        };
        if too_few {
            trace.exact_fallback = true;
            trace.exact_by_estimate = true;
            return Ok((self.exact.search(&query, n, admit)?, trace));
        }
        let mut admit_row = |key: K, row: u32| match sampled.get(&row) {
            Some(&answer) => answer,
            None => admit(key),
        };
        let vectors = self.exact.unit_vectors();
        let dim = self.exact.dim();
        let mut visited = self.take_visited(1).pop().expect("one visited set");
        let graph = &self.graph;
        let (quantized, scales) = self.exact.quantized_rows();
        let mut query_q = Vec::with_capacity(dim);
        let query_quant = quantize(&query, &mut query_q);
        let (found, end) = pulp::Arch::new().dispatch(|| {
            // The walk's comparisons: the quantised cosine (see the module's comment).
            let mut score = |row: u32| {
                let start = row as usize * dim;
                query_quant.scale
                    * scales[row as usize]
                    * dot_i8(&query_q, &quantized[start..start + dim]) as f32
            };
            let mut best = (OrderedScore(score(entry)), entry);
            for layer in (1..=graph.level(entry)).rev() {
                best = greedy(graph, layer, best, &mut score);
            }
            visited.reset(rows);
            filtered_beam(graph, best, ef, budget, &mut visited, &mut score, &mut |row| {
                admit_row(keys[row as usize], row)
            })
        });
        trace.scored = visited.count();
        self.return_visited(vec![visited]);
        if end == BeamEnd::OverBudget || (found.len() < n && trace.scored < rows) {
            trace.exact_fallback = true;
            return Ok((self.exact.search(&query, n, admit)?, trace));
        }
        let mut hits: Vec<VectorHit<K>> = found
            .into_iter()
            .map(|(_, row)| {
                let start = row as usize * dim;
                VectorHit {
                    key: keys[row as usize],
                    score: dot(&query, &vectors[start..start + dim]),
                }
            })
            .collect();
        top_n(&mut hits, n);
        Ok((hits, trace))
    }

    fn link_pending(&mut self, progress: &mut dyn FnMut(usize, usize)) {
        if self.graph.rows() == self.exact.len() {
            return;
        }
        let mut visited = self.take_visited(rayon::current_num_threads().max(1));
        build::link_new_rows(
            &mut self.graph,
            self.exact.unit_vectors(),
            self.exact.dim(),
            &self.params,
            &mut visited,
            progress,
        );
        self.return_visited(visited);
    }

    fn take_visited(&self, count: usize) -> Vec<Visited> {
        let mut pool = self.visited.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<Visited> = Vec::with_capacity(count);
        while out.len() < count {
            out.push(pool.pop().unwrap_or_else(|| Visited::new(self.exact.len())));
        }
        out
    }

    fn return_visited(&self, visited: Vec<Visited>) {
        self.visited.lock().unwrap_or_else(PoisonError::into_inner).extend(visited);
    }
}

/// The widest beam (`ef_construction`, `ef_search`) accepted.
const MAX_EF: usize = 1 << 16;

fn check_params(params: &HnswParams) -> Result<(), VectorError> {
    let bad = |field: &'static str, reason: &str| {
        Err(VectorError::InvalidParameter { field, reason: reason.to_owned() })
    };
    if !(2..=127).contains(&params.m) {
        return bad("m", "must be in 2..=127");
    }
    // The beams are allocated at their width: a width read from a damaged file (up to 2^32)
    // must not ask for gigabytes.
    if !(params.m..=MAX_EF).contains(&params.ef_construction) {
        return bad("ef_construction", "must be in m..=65536");
    }
    if !(1..=MAX_EF).contains(&params.ef_search) {
        return bad("ef_search", "must be in 1..=65536");
    }
    Ok(())
}

impl<K: IndexKey> VectorIndexRead<K> for HnswIndex<K> {
    fn stored_vector(&self, key: K) -> Option<Vec<f32>> {
        self.exact.stored_vector(key)
    }

    fn dim(&self) -> usize {
        self.exact.dim()
    }

    fn len(&self) -> usize {
        self.exact.len()
    }

    fn covers(&self) -> Option<TurnId> {
        self.exact.covers()
    }

    fn kind(&self) -> IndexKind {
        IndexKind::Hnsw(self.params)
    }

    fn search(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<Vec<VectorHit<K>>, VectorError> {
        self.search_traced(query, n, admit).map(|(hits, _)| hits)
    }

    fn search_served(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<(Vec<VectorHit<K>>, IndexKind), VectorError> {
        let (hits, trace) = self.search_traced(query, n, admit)?;
        let kind = if trace.exact_fallback { IndexKind::Exact } else { self.kind() };
        Ok((hits, kind))
    }
}

impl<K: IndexKey> VectorIndex<K> for HnswIndex<K> {
    fn insert(&mut self, key: K, vector: &[f32]) -> Result<VectorRow, VectorError> {
        let row = self.exact.insert(key, vector)?;
        self.link_pending(&mut |_, _| {});
        Ok(row)
    }

    fn mark_covered(&mut self, position: TurnId) -> Result<(), VectorError> {
        self.exact.mark_covered(position)
    }
}

#[cfg(test)]
mod tests;
