//! Turns embedded as one or more windows, searched as turns: a turn scores as its best window.

use std::path::Path;

use evicortex_core::TurnId;
use rustc_hash::FxHashSet as HashSet;

use crate::{
    ExactIndex, HnswIndex, HnswParams, IndexFileError, IndexFileHeader, IndexFileMeta, IndexKind,
    PooledHits, SketchParams, VectorError, VectorHit, VectorIndex, VectorIndexRead, VectorRow,
};

/// A window's key: the turn and the window's number.
pub type WindowKey = (TurnId, u32);

/// An index over window vectors keyed by (turn, window number), read as an index of turns: exact
/// (every admitted window scored), the exact rows searched by their sign sketch, or an HNSW graph
/// over the same rows.
#[derive(Debug)]
pub struct WindowedIndex {
    index: Rows,
    /// Set: an exact index answers by [`ExactIndex::search_sketched`].
    sketch: Option<SketchParams>,
}

// One per namespace index: the variants' sizes differ, and boxing the graph would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
enum Rows {
    Exact(ExactIndex<WindowKey>),
    Hnsw(HnswIndex<WindowKey>),
}

impl WindowedIndex {
    /// Wraps an exact index whose keys are (turn, window number).
    pub fn new(index: ExactIndex<WindowKey>) -> WindowedIndex {
        WindowedIndex { index: Rows::Exact(index), sketch: None }
    }

    /// Wraps an HNSW index whose keys are (turn, window number).
    pub fn from_hnsw(index: HnswIndex<WindowKey>) -> WindowedIndex {
        WindowedIndex { index: Rows::Hnsw(index), sketch: None }
    }

    /// Makes an exact index answer searches by its sign sketch with `params` (`None`: by the
    /// exact scan again). A graph is searched as a graph whatever this says.
    pub fn set_sketch(&mut self, params: Option<SketchParams>) {
        self.sketch = params;
    }

    /// Reads an HNSW index file of windows ([`HnswIndex::load`]).
    pub fn load_hnsw(path: &Path) -> Result<(IndexFileHeader, WindowedIndex), IndexFileError> {
        let (header, index) = HnswIndex::load(path)?;
        Ok((header, WindowedIndex::from_hnsw(index)))
    }

    /// The HNSW graph, when this index is one.
    pub fn hnsw(&self) -> Option<&HnswIndex<WindowKey>> {
        match &self.index {
            Rows::Exact(_) => None,
            Rows::Hnsw(index) => Some(index),
        }
    }

    /// Builds an HNSW graph with `params` over the rows of an exact index (an HNSW index is
    /// left as it is).
    pub fn build_hnsw(
        &mut self,
        params: HnswParams,
        progress: &mut dyn FnMut(usize, usize),
    ) -> Result<(), VectorError> {
        let dim = self.dim();
        let index = std::mem::replace(&mut self.index, Rows::Exact(ExactIndex::new(dim)));
        self.index = match index {
            Rows::Exact(exact) => Rows::Hnsw(HnswIndex::build(exact, params, progress)?),
            hnsw => hnsw,
        };
        Ok(())
    }

    /// Writes the HNSW graph to `path` ([`HnswIndex::save`]); `Ok(None)` for an exact index,
    /// which is never persisted.
    pub fn save_hnsw(
        &self,
        path: &Path,
        meta: &IndexFileMeta,
    ) -> Result<Option<u64>, IndexFileError> {
        self.hnsw().map(|index| index.save(path, meta)).transpose()
    }

    fn exact(&self) -> &ExactIndex<WindowKey> {
        match &self.index {
            Rows::Exact(index) => index,
            Rows::Hnsw(index) => index.exact(),
        }
    }

    /// Adds window `key.1` of turn `key.0` (see [`VectorIndex::insert`]).
    pub fn insert_window(
        &mut self,
        key: WindowKey,
        vector: &[f32],
    ) -> Result<VectorRow, VectorError> {
        match &mut self.index {
            Rows::Exact(index) => index.insert(key, vector),
            Rows::Hnsw(index) => index.insert(key, vector),
        }
    }

    /// Adds many windows at once (an HNSW graph links them in parallel batches).
    pub fn extend_windows<'a>(
        &mut self,
        rows: impl IntoIterator<Item = (WindowKey, &'a [f32])>,
    ) -> Result<(), VectorError> {
        match &mut self.index {
            Rows::Exact(index) => {
                for (key, vector) in rows {
                    index.insert(key, vector)?;
                }
                Ok(())
            }
            Rows::Hnsw(index) => index.extend(rows),
        }
    }

    /// Removes every window of the turns `erased` accepts, keeping the other rows' order; false,
    /// removing nothing, from a graph (which is rebuilt without them instead).
    pub fn remove_turns(&mut self, erased: impl Fn(TurnId) -> bool) -> bool {
        match &mut self.index {
            Rows::Exact(index) => {
                index.remove_where(|(turn, _)| erased(turn));
                true
            }
            Rows::Hnsw(_) => false,
        }
    }

    /// The stored unit vectors of `turn`'s windows, in window order (none when it has none).
    pub fn windows_of(&self, turn: TurnId) -> impl Iterator<Item = &[f32]> + '_ {
        let exact = self.exact();
        (0u32..).map_while(move |w| exact.get((turn, w)))
    }

    /// Records the ledger position the index covers (see [`VectorIndex::mark_covered`]).
    pub fn mark_covered(&mut self, position: TurnId) -> Result<(), VectorError> {
        match &mut self.index {
            Rows::Exact(index) => index.mark_covered(position),
            Rows::Hnsw(index) => index.mark_covered(position),
        }
    }

    /// Heap bytes of the vectors, their tables and the graph.
    pub fn heap_bytes(&self) -> usize {
        match &self.index {
            Rows::Exact(index) => index.heap_bytes(),
            Rows::Hnsw(index) => index.heap_bytes(),
        }
    }

    /// The window search under both indexes, among the first `rows` rows of an exact one (a
    /// graph searches all of its own): the exact one answers for a turn exactly as the graph
    /// would if it found every row.
    fn search_windows(
        &self,
        query: &[f32],
        n: usize,
        rows: usize,
        admit: &mut dyn FnMut(WindowKey) -> bool,
    ) -> Result<(Vec<VectorHit<WindowKey>>, IndexKind), VectorError> {
        match (&self.index, self.sketch) {
            (Rows::Exact(index), Some(params)) => index
                .search_sketched_pooled_first(query, n, 0, params.candidates, rows, admit)
                .map(|(hits, _)| (hits, IndexKind::Sketch(params))),
            (Rows::Exact(index), None) => {
                index.search_first(query, n, rows, admit).map(|hits| (hits, IndexKind::Exact))
            }
            (Rows::Hnsw(index), _) => index.search_served(query, n, admit),
        }
    }

    /// The rows holding the windows of turns up to `last` where rows follow keys (an exact
    /// index's rows are added in ledger order unless a turn got its vector late), else all.
    fn rows_up_to(&self, last: TurnId) -> usize {
        let exact = self.exact();
        exact.row_map().rows_up_to((last, u32::MAX)).unwrap_or(exact.len())
    }

    /// Sets the graph's [`HnswIndex::min_admitted`] (no effect on an exact index).
    pub fn set_min_admitted(&mut self, rows: usize) {
        if let Rows::Hnsw(index) = &mut self.index {
            index.set_min_admitted(rows);
        }
    }
}

impl VectorIndexRead for WindowedIndex {
    /// The normalised mean of the turn's windows.
    fn stored_vector(&self, key: TurnId) -> Option<Vec<f32>> {
        let mut sum: Option<Vec<f32>> = None;
        for window in self.windows_of(key) {
            let sum = sum.get_or_insert_with(|| vec![0.0; window.len()]);
            sum.iter_mut().zip(window).for_each(|(s, x)| *s += x);
        }
        let mut sum = sum?;
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        (norm.is_finite() && norm > 0.0).then(|| {
            sum.iter_mut().for_each(|x| *x /= norm);
            sum
        })
    }

    fn dim(&self) -> usize {
        self.exact().dim()
    }

    fn len(&self) -> usize {
        self.exact().len()
    }

    fn covers(&self) -> Option<TurnId> {
        self.exact().covers()
    }

    fn kind(&self) -> IndexKind {
        match (&self.index, self.sketch) {
            (Rows::Exact(_), Some(params)) => IndexKind::Sketch(params),
            (Rows::Exact(index), None) => index.kind(),
            (Rows::Hnsw(index), _) => index.kind(),
        }
    }

    fn search(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorError> {
        self.search_served(query, n, admit).map(|(hits, _)| hits)
    }

    /// Behind a sketch, only the windows of the `n` hits are read in `f32`; the pool's other
    /// turns are ranked by their best window's `i8` score among the sketch's candidates.
    fn search_pooled(
        &self,
        query: &[f32],
        n: usize,
        pool: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<PooledHits<TurnId>, VectorError> {
        self.pooled_first(query, n, pool, self.len(), admit)
    }

    /// An exact index's rows follow their keys unless a turn got its vector late or a removal
    /// moved one: its search then stops at `last`'s windows.
    fn search_pooled_up_to(
        &self,
        query: &[f32],
        n: usize,
        pool: usize,
        last: TurnId,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<PooledHits<TurnId>, VectorError> {
        self.pooled_first(query, n, pool, self.rows_up_to(last), admit)
    }

    fn search_served(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<(Vec<VectorHit<TurnId>>, IndexKind), VectorError> {
        self.served_first(query, n, self.len(), admit)
    }
}

impl WindowedIndex {
    /// [`VectorIndexRead::search_pooled`] among the first `rows` rows of an exact index.
    fn pooled_first(
        &self,
        query: &[f32],
        n: usize,
        pool: usize,
        rows: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<PooledHits<TurnId>, VectorError> {
        let (Rows::Exact(index), Some(params)) = (&self.index, self.sketch) else {
            let (hits, served) = self.served_first(query, n.max(pool), rows, admit)?;
            return Ok(PooledHits::from_search(hits, n, pool, served));
        };
        // As in `search_served`: twice as many windows as turns, doubled while too few turns.
        let (mut want, mut want_pool) = (2 * n, 2 * pool);
        loop {
            let (windows, pooled) = index.search_sketched_pooled_first(
                query,
                want,
                want_pool,
                params.candidates,
                rows,
                &mut |(turn, _)| admit(turn),
            )?;
            let mut hits = best_window_per_turn(&windows);
            let mut seen: HashSet<TurnId> =
                HashSet::with_capacity_and_hasher(pooled.len(), Default::default());
            let mut turns: Vec<TurnId> =
                pooled.iter().map(|w| w.0).filter(|&turn| seen.insert(turn)).collect();
            let hits_short = hits.len() < n && windows.len() == want;
            let pool_short = turns.len() < pool && pooled.len() == want_pool;
            if !hits_short && !pool_short {
                hits.truncate(n);
                turns.truncate(pool);
                return Ok(PooledHits { hits, pool: turns, served: IndexKind::Sketch(params) });
            }
            if hits_short {
                want *= 2;
            }
            if pool_short {
                want_pool *= 2;
            }
        }
    }

    /// [`VectorIndexRead::search_served`] among the first `rows` rows of an exact index.
    fn served_first(
        &self,
        query: &[f32],
        n: usize,
        rows: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<(Vec<VectorHit<TurnId>>, IndexKind), VectorError> {
        // Ask for more windows until n distinct turns are found or the index is exhausted, rather
        // than scoring and sorting every window of the namespace for each query. The hits are
        // the last search's, and so is the path named. The first search asks for 2n windows: a
        // query's best windows are often several of one long turn, and asking for n alone made
        // most searches on a namespace of long turns run twice (the 100k audit set).
        let mut want = 2 * n;
        loop {
            let (windows, kind) =
                self.search_windows(query, want, rows, &mut |(turn, _)| admit(turn))?;
            let mut hits = best_window_per_turn(&windows);
            if hits.len() >= n || windows.len() < want {
                hits.truncate(n);
                return Ok((hits, kind));
            }
            want *= 2;
        }
    }
}

/// Each turn once, at its first (best) window's score, in the windows' order.
fn best_window_per_turn(windows: &[VectorHit<WindowKey>]) -> Vec<VectorHit<TurnId>> {
    let mut seen: HashSet<TurnId> =
        HashSet::with_capacity_and_hasher(windows.len(), Default::default());
    windows
        .iter()
        .filter(|w| seen.insert(w.key.0))
        .map(|w| VectorHit { key: w.key.0, score: w.score })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_vectors::clustered;

    /// 900 turns of one to three windows each, clustered.
    fn windowed(sketch: Option<SketchParams>) -> (WindowedIndex, Vec<Vec<f32>>) {
        let vectors = clustered(1806, 64, 21);
        let mut rows = vectors.iter();
        let mut index = WindowedIndex::new(ExactIndex::new(64));
        for turn in 1..=900u64 {
            for w in 0..=(turn % 3) as u32 {
                let vector = rows.next().expect("one vector per window");
                index.insert_window((TurnId::from_raw(turn), w), vector).unwrap();
            }
        }
        index.set_sketch(sketch);
        (index, rows.cloned().collect())
    }

    #[test]
    fn a_pooled_search_gives_the_searchs_hits_and_distinct_turns_led_by_them() {
        let params = SketchParams { candidates: 400, seeds: 64 };
        for sketch in [None, Some(params)] {
            let (index, queries) = windowed(sketch);
            let admit = |t: TurnId| t.raw() % 4 != 1;
            for q in &queries {
                let PooledHits { hits, pool: pooled, served: kind } =
                    index.search_pooled(q, 10, 100, &mut |t| admit(t)).unwrap();
                let (searched, served) = index.search_served(q, 10, &mut |t| admit(t)).unwrap();
                assert_eq!((&hits, kind), (&searched, served));
                assert_eq!(pooled.len(), 100);
                let keys: Vec<TurnId> = hits.iter().map(|h| h.key).collect();
                assert_eq!(pooled[..10], keys[..]);
                let distinct: HashSet<TurnId> = pooled.iter().copied().collect();
                assert_eq!(distinct.len(), 100);
                assert!(pooled.iter().all(|&t| admit(t)));
                // The pool is the top 100 turns up to the approximate order past the hits.
                let top = index.search(q, 100, &mut |t| admit(t)).unwrap();
                let shared = top.iter().filter(|h| distinct.contains(&h.key)).count();
                assert!(shared >= 90, "{shared} of the top 100 turns in the pool ({sketch:?})");
            }
        }
    }

    #[test]
    fn a_search_up_to_the_last_admitted_turn_answers_as_the_whole_search() {
        let params = SketchParams { candidates: 400, seeds: 64 };
        for sketch in [None, Some(params)] {
            let (index, queries) = windowed(sketch);
            // The same windows added with turn 10 last: its rows no longer follow its keys.
            let mut late = WindowedIndex::new(ExactIndex::new(64));
            let exact = index.exact();
            let keys = exact.row_map().keys();
            let order = keys
                .iter()
                .filter(|k| k.0.raw() != 10)
                .chain(keys.iter().filter(|k| k.0.raw() == 10));
            for key in order {
                late.insert_window(*key, exact.get(*key).unwrap()).unwrap();
            }
            late.set_sketch(sketch);
            assert_eq!(
                index.rows_up_to(TurnId::from_raw(300)),
                exact.row_map().keys().iter().filter(|k| k.0.raw() <= 300).count()
            );
            assert_eq!(late.rows_up_to(TurnId::from_raw(300)), late.len());
            for last in [1u64, 10, 299, 300, 899, 900] {
                let admit = |t: TurnId| t.raw() <= last && t.raw() % 4 != 1;
                // The last admitted turn's own windows: the best hits, which a bound one row
                // short would lose.
                let newest = (1..=last).rev().map(TurnId::from_raw).find(|&t| admit(t));
                let own = newest.into_iter().flat_map(|t| index.windows_of(t));
                for q in queries.iter().map(Vec::as_slice).take(6).chain(own) {
                    let whole = index.search_pooled(q, 10, 100, &mut |t| admit(t)).unwrap();
                    for searched in [&index, &late] {
                        let bounded = searched
                            .search_pooled_up_to(q, 10, 100, TurnId::from_raw(last), &mut |t| {
                                admit(t)
                            })
                            .unwrap();
                        assert_eq!(bounded, whole, "up to {last} ({sketch:?})");
                    }
                }
            }
        }
    }
}
