//! The exact cosine index: every admitted row is scored, through an int8 pass with a proven error
//! bound, so the answer equals a full `f32` scan.

use std::{
    cmp::{Ordering, Reverse},
    collections::BinaryHeap,
    fmt::Debug,
    hash::Hash,
};

use evicortex_core::TurnId;

use crate::{
    IndexKind, RowMap, VectorError, VectorHit, VectorIndex, VectorIndexRead, VectorRow,
    distance::{dot, dot_i8, dot_i8_rows, normalize, quantize},
    prefetch::prefetched,
    select::best_candidates,
    sketch::SignSketch,
};

/// Exact cosine search over unit vectors stored contiguously (`f32`, row-major), with an `i8`
/// copy for the first pass.
///
/// Search: every row gets an approximate score `a` from the `i8` copy and a bound `e` on
/// `|cosine − a|` (from the recorded quantisation errors of the row and of the query); the best
/// `2n` admitted rows by `a` are rescored in `f32`, giving a threshold `τ` (the `n`-th best exact
/// score), and every other admitted row with `a + e ≥ τ` is rescored too. `admit` is asked only
/// about rows that would enter the best `2n` or pass `a + e ≥ τ`. A row never rescored has cosine below `τ`, so
/// the top `n` is the exact one. The result therefore does not depend on the `i8` pass.
#[derive(Debug, Clone)]
pub struct ExactIndex<K = TurnId> {
    dim: usize,
    rows: RowMap<K>,
    vectors: Vec<f32>,
    quantized: Vec<i8>,
    /// Per row: quantisation scale, error norm and norm of the dequantised vector.
    scales: Vec<f32>,
    errors: Vec<f32>,
    norms: Vec<f32>,
    /// The rows' sign bits, for approximate searches ([`ExactIndex::search_sketched`]).
    sketch: SignSketch,
    covers: Option<TurnId>,
}

/// Rows ahead of the one being scored in `i8` whose cache lines are prefetched (see `rescore`).
const LOOKAHEAD: usize = 6;

/// Rows ahead of the one being scored in `f32` (four times as many lines a row) prefetched.
const LOOKAHEAD_F32: usize = 2;

/// A row's `i8` score, that score plus its error bound, and the row.
type Approx = (f32, f32, u32);

/// Best `i8` score first, ties by row.
fn by_i8_score(a: &Approx, b: &Approx) -> Ordering {
    b.0.total_cmp(&a.0).then(a.2.cmp(&b.2))
}

/// Slack added to the int8 error bound to absorb `f32` rounding in the scores themselves.
const BOUND_SLACK: f32 = 1e-4;

impl<K: Copy + Eq + Hash + Ord + Debug> ExactIndex<K> {
    /// An empty index of `dim`-dimensional vectors.
    pub fn new(dim: usize) -> ExactIndex<K> {
        ExactIndex {
            dim,
            rows: RowMap::new(),
            vectors: Vec::new(),
            quantized: Vec::new(),
            scales: Vec::new(),
            errors: Vec::new(),
            norms: Vec::new(),
            sketch: SignSketch::new(dim),
            covers: None,
        }
    }

    /// The unit vector stored for `key`.
    pub fn get(&self, key: K) -> Option<&[f32]> {
        let row = self.rows.row(key)?.index();
        Some(&self.vectors[row * self.dim..(row + 1) * self.dim])
    }

    /// The row map (keys by row).
    pub fn row_map(&self) -> &RowMap<K> {
        &self.rows
    }

    /// Bytes held by the vectors, their quantised copy and their sketch (not counting the row
    /// map).
    pub fn heap_bytes(&self) -> usize {
        self.vectors.len() * 4
            + self.quantized.len()
            + self.scales.len() * 12
            + self.sketch.heap_bytes()
    }

    /// Full `f32` scan without the int8 pass: the reference the oracle tests and benchmark compare
    /// with.
    pub fn search_f32_scan(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<Vec<VectorHit<K>>, VectorError> {
        let query = self.check_query(query)?;
        let mut hits: Vec<VectorHit<K>> = Vec::new();
        pulp::Arch::new().dispatch(|| {
            for (key, vector) in self.rows.keys().iter().zip(self.vectors.chunks_exact(self.dim)) {
                if admit(*key) {
                    hits.push(VectorHit { key: *key, score: dot(&query, vector) });
                }
            }
        });
        top_n(&mut hits, n);
        Ok(hits)
    }

    /// The `n` best admitted rows among `keys` (keys without a row are skipped, a repeated key
    /// counts once), scored in `f32` as [`ExactIndex::search_f32_scan`] scores them: the exact
    /// answer over a candidate set, for a caller that knows where the best rows must lie. Each
    /// key is asked about once; the `i8` pass and its bound choose which rows are read in `f32`.
    pub fn search_among(
        &self,
        query: &[f32],
        n: usize,
        keys: impl IntoIterator<Item = K>,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<Vec<VectorHit<K>>, VectorError> {
        let query = self.check_query(query)?;
        let mut rows: Vec<(K, u32)> = keys
            .into_iter()
            .filter_map(|key| Some((key, self.rows.row(key)?.index() as u32)))
            .collect();
        rows.sort_unstable_by_key(|&(_, row)| row);
        rows.dedup_by_key(|&mut (_, row)| row);
        let admitted: Vec<u32> =
            rows.into_iter().filter(|&(key, _)| admit(key)).map(|(_, row)| row).collect();
        if n == 0 {
            return Ok(Vec::new());
        }
        Ok(self.rescore(&query, n, admitted))
    }

    /// An approximate search: the `n` best of the `candidates` admitted rows with the best sign
    /// sketch scores (at least `n` of them), each scored exactly as
    /// [`ExactIndex::search_f32_scan`] scores it. What may differ from the exact answer is which
    /// rows are found, never their scores; `admit` is asked only about rows whose sketch score
    /// could place them among the candidates. A filter admitting no more than `candidates` rows
    /// gets the exact answer.
    pub fn search_sketched(
        &self,
        query: &[f32],
        n: usize,
        candidates: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<Vec<VectorHit<K>>, VectorError> {
        self.search_sketched_pooled(query, n, 0, candidates, admit).map(|(hits, _)| hits)
    }

    /// [`ExactIndex::search_sketched`], with the keys of up to `pool` of the admitted candidates
    /// besides: the top `n` found, in their order, then the other candidates by their `i8`
    /// score (ties by row). For seeding a further search, which needs to know which rows lie
    /// near the top but not their exact order: only the top `n` are read in `f32`. The
    /// candidates are the best `candidates.max(n).max(pool)` by sketch.
    pub fn search_sketched_pooled(
        &self,
        query: &[f32],
        n: usize,
        pool: usize,
        candidates: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<(Vec<VectorHit<K>>, Vec<K>), VectorError> {
        self.search_sketched_pooled_first(query, n, pool, candidates, self.len(), admit)
    }

    /// [`ExactIndex::search_sketched_pooled`] among the first `rows` rows only: for a filter that
    /// admits none after them ([`RowMap::rows_up_to`] finds how many rows an as-of time's last
    /// admitted key bounds), the same answer for less of a scan.
    pub fn search_sketched_pooled_first(
        &self,
        query: &[f32],
        n: usize,
        pool: usize,
        candidates: usize,
        rows: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<(Vec<VectorHit<K>>, Vec<K>), VectorError> {
        let query = self.check_query(query)?;
        if n == 0 && pool == 0 {
            return Ok((Vec::new(), Vec::new()));
        }
        let keep = candidates.max(n).max(pool);
        let keys = self.rows.keys();
        let rows = rows.min(keys.len());
        let rows = best_candidates(rows, keep, &mut self.sketch.scan(&query, rows), &mut |row| {
            admit(keys[row])
        });
        let mut approx = self.approximate(&query, rows);
        let hits = self.exact_top(&query, n, &mut approx);
        let mut pooled: Vec<K> = hits.iter().take(pool).map(|h| h.key).collect();
        if pool > pooled.len() {
            let found: rustc_hash::FxHashSet<K> = pooled.iter().copied().collect();
            let mut rest: Vec<&Approx> =
                approx.iter().filter(|a| !found.contains(&keys[a.2 as usize])).collect();
            let more = (pool - pooled.len()).min(rest.len());
            if more < rest.len() {
                rest.select_nth_unstable_by(more, |a, b| by_i8_score(a, b));
                rest.truncate(more);
            }
            rest.sort_unstable_by(|a, b| by_i8_score(a, b));
            pooled.extend(rest.into_iter().map(|a| keys[a.2 as usize]));
        }
        Ok((hits, pooled))
    }

    /// The exact top `n` of `rows` (admitted rows, each once), scored in `f32` only where the
    /// `i8` pass and its error bound leave a row a chance: the best `n` by `i8` score, then every
    /// row whose bound reaches the `n`-th exact score among them (the argument of
    /// [`ExactIndex`]'s search; `n` rather than its `2n`: the rows here are few and read at
    /// random, so each `f32` row spared is a cache miss spared).
    fn rescore(&self, query: &[f32], n: usize, rows: Vec<u32>) -> Vec<VectorHit<K>> {
        let mut approx = self.approximate(query, rows);
        self.exact_top(query, n, &mut approx)
    }

    /// Each of `rows`' `i8` score and that score plus its error bound, with the row.
    fn approximate(&self, query: &[f32], mut rows: Vec<u32>) -> Vec<Approx> {
        let dim = self.dim;
        let mut query_q = Vec::with_capacity(dim);
        let query_quant = quantize(query, &mut query_q);
        // Row order: the rows' copies are read front to back.
        rows.sort_unstable();
        let mut approx: Vec<Approx> = Vec::with_capacity(rows.len());
        let quantized = |row: u32| &self.quantized[row as usize * dim..(row as usize + 1) * dim];
        pulp::Arch::new().dispatch(|| {
            for row in prefetched(&rows, LOOKAHEAD, quantized) {
                let at = row as usize;
                let dot = dot_i8(&query_q, quantized(row));
                let score = query_quant.scale * self.scales[at] * dot as f32;
                let bound = self.errors[at] + query_quant.error * self.norms[at] + BOUND_SLACK;
                approx.push((score, score + bound, row));
            }
        });
        approx
    }

    /// The exact top `n` of the rows `approx` scored (see `rescore`); reorders `approx`.
    fn exact_top(&self, query: &[f32], n: usize, approx: &mut [Approx]) -> Vec<VectorHit<K>> {
        if n == 0 {
            return Vec::new();
        }
        let keys = self.rows.keys();
        let first = n.min(approx.len());
        if first < approx.len() {
            approx.select_nth_unstable_by(first, by_i8_score);
        }
        let mut hits: Vec<VectorHit<K>> = Vec::with_capacity(first);
        let exact = |row: u32| VectorHit {
            key: keys[row as usize],
            score: dot(query, self.vector(row as usize)),
        };
        let rows: Vec<u32> = approx[..first].iter().map(|a| a.2).collect();
        pulp::Arch::new().dispatch(|| hits.extend(self.prefetched_f32(&rows).map(exact)));
        top_n(&mut hits, n);
        if hits.len() == n {
            let threshold = hits[n - 1].score;
            let before = hits.len();
            let rows: Vec<u32> =
                approx[first..].iter().filter(|a| a.1 >= threshold).map(|a| a.2).collect();
            pulp::Arch::new().dispatch(|| hits.extend(self.prefetched_f32(&rows).map(exact)));
            if hits.len() > before {
                top_n(&mut hits, n);
            }
        }
        hits
    }

    /// `rows` in turn, each `f32` row prefetched a few rows before it is given.
    fn prefetched_f32<'a>(&'a self, rows: &'a [u32]) -> impl Iterator<Item = u32> + 'a {
        prefetched(rows, LOOKAHEAD_F32, |row| self.vector(row as usize))
    }

    fn vector(&self, row: usize) -> &[f32] {
        &self.vectors[row * self.dim..(row + 1) * self.dim]
    }

    /// Every stored unit vector, row-major.
    pub(crate) fn unit_vectors(&self) -> &[f32] {
        &self.vectors
    }

    /// The `i8` copy of every row, row-major, and each row's quantisation scale.
    pub(crate) fn quantized_rows(&self) -> (&[i8], &[f32]) {
        (&self.quantized, &self.scales)
    }

    /// Stores a vector that is already unit length as it is (an index file's rows: normalising
    /// again could move the last bit and change scores).
    pub(crate) fn insert_unit(&mut self, key: K, unit: &[f32]) -> Result<VectorRow, VectorError> {
        debug_assert_eq!(unit.len(), self.dim);
        let row = self.rows.push(key).ok_or_else(|| match self.rows.row(key) {
            Some(_) => VectorError::DuplicateKey { key: format!("{key:?}") },
            None => VectorError::Full { rows: self.rows.len() },
        })?;
        let quant = quantize(unit, &mut self.quantized);
        self.vectors.extend_from_slice(unit);
        self.sketch.push(unit);
        self.scales.push(quant.scale);
        self.errors.push(quant.error);
        self.norms.push(quant.norm);
        Ok(row)
    }

    /// Stores `vector` (scaled to unit length) for `key`, in place of the key's vector when it has
    /// one: an index whose rows change, like the compiler's context vectors.
    pub fn upsert(&mut self, key: K, vector: &[f32]) -> Result<VectorRow, VectorError> {
        let unit = self.unit_of(key, vector)?;
        let Some(row) = self.rows.row(key) else {
            return self.insert_unit(key, &unit);
        };
        let (at, dim) = (row.index(), self.dim);
        let mut quantized = Vec::with_capacity(dim);
        let quant = quantize(&unit, &mut quantized);
        self.vectors[at * dim..(at + 1) * dim].copy_from_slice(&unit);
        self.quantized[at * dim..(at + 1) * dim].copy_from_slice(&quantized);
        self.sketch.set(at, &unit);
        self.scales[at] = quant.scale;
        self.errors[at] = quant.error;
        self.norms[at] = quant.norm;
        Ok(row)
    }

    /// Removes `key`'s vector, the last row taking its place; false when the key has none.
    pub fn remove(&mut self, key: K) -> bool {
        let Some(row) = self.rows.swap_remove(key) else {
            return false;
        };
        let (at, dim) = (row.index(), self.dim);
        let last = self.scales.len() - 1;
        if at != last {
            self.vectors.copy_within(last * dim..(last + 1) * dim, at * dim);
            self.quantized.copy_within(last * dim..(last + 1) * dim, at * dim);
        }
        self.vectors.truncate(last * dim);
        self.quantized.truncate(last * dim);
        self.sketch.swap_remove(at);
        self.scales.swap_remove(at);
        self.errors.swap_remove(at);
        self.norms.swap_remove(at);
        true
    }

    /// Removes the vectors of the keys `erased` accepts, the others keeping their order (so
    /// rows still follow keys where they did, which [`ExactIndex::remove`] does not keep).
    /// Returns how many were removed.
    pub fn remove_where(&mut self, mut erased: impl FnMut(K) -> bool) -> usize {
        let doomed: Vec<bool> = self.rows.keys().iter().map(|&k| erased(k)).collect();
        let removed = doomed.iter().filter(|&&d| d).count();
        if removed == 0 {
            return 0;
        }
        let dim = self.dim;
        let mut kept = ExactIndex::new(dim);
        kept.covers = self.covers;
        // Copied row by row, not quantised and sketched again: that cost seconds at 100k rows.
        for (row, &key) in self.rows.keys().iter().enumerate().filter(|&(row, _)| !doomed[row]) {
            kept.rows.push(key).expect("the keys of an index are distinct");
            kept.vectors.extend_from_slice(&self.vectors[row * dim..(row + 1) * dim]);
            kept.quantized.extend_from_slice(&self.quantized[row * dim..(row + 1) * dim]);
            kept.sketch.push_words(&self.sketch.row_words(row));
            kept.scales.push(self.scales[row]);
            kept.errors.push(self.errors[row]);
            kept.norms.push(self.norms[row]);
        }
        *self = kept;
        removed
    }

    /// `vector` scaled to unit length, or why `key` cannot be stored with it.
    fn unit_of(&self, key: K, vector: &[f32]) -> Result<Vec<f32>, VectorError> {
        if vector.len() != self.dim {
            return Err(VectorError::DimensionMismatch {
                what: format!("{key:?}"),
                got: vector.len(),
                expected: self.dim,
            });
        }
        normalize(vector)
            .map_err(|reason| VectorError::InvalidVector { what: format!("{key:?}"), reason })
    }

    /// The query scaled to unit length, or why it cannot be searched for.
    pub(crate) fn check_query(&self, query: &[f32]) -> Result<Vec<f32>, VectorError> {
        if query.len() != self.dim {
            return Err(VectorError::DimensionMismatch {
                what: "query".to_owned(),
                got: query.len(),
                expected: self.dim,
            });
        }
        normalize(query)
            .map_err(|reason| VectorError::InvalidVector { what: "query".to_owned(), reason })
    }
}

impl<K: Copy + Eq + Hash + Ord + Debug> VectorIndexRead<K> for ExactIndex<K> {
    fn stored_vector(&self, key: K) -> Option<Vec<f32>> {
        self.get(key).map(<[f32]>::to_vec)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn len(&self) -> usize {
        self.rows.len()
    }

    fn covers(&self) -> Option<TurnId> {
        self.covers
    }

    fn kind(&self) -> IndexKind {
        IndexKind::Exact
    }

    fn search(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<Vec<VectorHit<K>>, VectorError> {
        self.search_first(query, n, self.len(), admit)
    }
}

impl<K: Copy + Eq + Hash + Ord + Debug> ExactIndex<K> {
    /// [`VectorIndexRead::search`] among the first `rows` rows only: for a filter that admits
    /// none after them ([`RowMap::rows_up_to`]), the same answer for less of a scan.
    pub fn search_first(
        &self,
        query: &[f32],
        n: usize,
        rows: usize,
        admit: &mut dyn FnMut(K) -> bool,
    ) -> Result<Vec<VectorHit<K>>, VectorError> {
        let query = self.check_query(query)?;
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut query_q = Vec::with_capacity(self.dim);
        let query_quant = quantize(&query, &mut query_q);
        let keys = &self.rows.keys()[..rows.min(self.len())];
        let mut dots = Vec::with_capacity(keys.len());
        dot_i8_rows(&query_q, &self.quantized[..keys.len() * self.dim], &mut dots);
        // First pass: every row's upper bound, and the best `2n` admitted rows by approximate
        // score, kept in a small heap. `admit` is asked only about rows that would enter the
        // heap (few, once it is full); the answer is remembered for the second pass.
        let first = 2 * n;
        let mut uppers = Vec::with_capacity(keys.len());
        let mut admitted = vec![false; keys.len()];
        let mut head: BinaryHeap<Reverse<(OrderedScore, Reverse<u32>)>> =
            BinaryHeap::with_capacity(first + 1);
        for (row, dot) in dots.iter().enumerate() {
            let score = query_quant.scale * self.scales[row] * *dot as f32;
            let bound = self.errors[row] + query_quant.error * self.norms[row] + BOUND_SLACK;
            uppers.push(score + bound);
            let entry = Reverse((OrderedScore(score), Reverse(row as u32)));
            let full = head.len() == first;
            if full && head.peek().is_some_and(|worst| entry >= *worst) {
                continue;
            }
            if !admit(keys[row]) {
                uppers[row] = f32::NEG_INFINITY;
                continue;
            }
            admitted[row] = true;
            if full {
                head.pop();
            }
            head.push(entry);
        }
        let mut hits: Vec<VectorHit<K>> = Vec::with_capacity(first);
        for Reverse((_, Reverse(row))) in head {
            let row = row as usize;
            hits.push(VectorHit { key: keys[row], score: dot(&query, self.vector(row)) });
            uppers[row] = f32::NEG_INFINITY;
        }
        top_n(&mut hits, n);
        // Second pass: every other row that could reach the n-th exact score is rescored.
        if hits.len() == n {
            let threshold = hits[n - 1].score;
            let before = hits.len();
            for (row, upper) in uppers.iter().enumerate() {
                if *upper >= threshold && (admitted[row] || admit(keys[row])) {
                    hits.push(VectorHit { key: keys[row], score: dot(&query, self.vector(row)) });
                }
            }
            if hits.len() > before {
                top_n(&mut hits, n);
            }
        }
        Ok(hits)
    }
}

impl<K: Copy + Eq + Hash + Ord + Debug> VectorIndex<K> for ExactIndex<K> {
    fn insert(&mut self, key: K, vector: &[f32]) -> Result<VectorRow, VectorError> {
        let unit = self.unit_of(key, vector)?;
        self.insert_unit(key, &unit)
    }

    fn mark_covered(&mut self, position: TurnId) -> Result<(), VectorError> {
        match self.covers {
            Some(covered) if covered > position => {
                Err(VectorError::CoverageBackwards { covered, requested: position })
            }
            _ => {
                self.covers = Some(position);
                Ok(())
            }
        }
    }
}

/// An `f32` ordered by `total_cmp`, for the first pass's heap.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct OrderedScore(pub(crate) f32);

impl Eq for OrderedScore {}

impl PartialOrd for OrderedScore {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedScore {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Keeps the best `n` hits, sorted by descending score, ties by ascending key.
pub(crate) fn top_n<K: Ord>(hits: &mut Vec<VectorHit<K>>, n: usize) {
    let order =
        |a: &VectorHit<K>, b: &VectorHit<K>| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key));
    if hits.len() > n {
        hits.select_nth_unstable_by(n - 1, order);
        hits.truncate(n);
    }
    hits.sort_unstable_by(order);
}

#[cfg(test)]
mod tests;
