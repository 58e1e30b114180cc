//! Turns embedded as one or more windows, searched as turns: a turn scores as its best window.

use std::{collections::HashSet, path::Path};

use evicortex_core::TurnId;

use crate::{
    ExactIndex, HnswIndex, HnswParams, IndexFileError, IndexFileHeader, IndexFileMeta, IndexKind,
    SketchParams, VectorError, VectorHit, VectorIndex, VectorIndexRead, VectorRow,
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

    /// The window search under both indexes: the exact one answers for a turn exactly as the
    /// graph would if it found every row.
    fn search_windows(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(WindowKey) -> bool,
    ) -> Result<(Vec<VectorHit<WindowKey>>, IndexKind), VectorError> {
        match (&self.index, self.sketch) {
            (Rows::Exact(index), Some(params)) => index
                .search_sketched(query, n, params.candidates, admit)
                .map(|hits| (hits, IndexKind::Sketch(params))),
            (Rows::Exact(index), None) => index.search_served(query, n, admit),
            (Rows::Hnsw(index), _) => index.search_served(query, n, admit),
        }
    }

    /// Sets the graph's [`HnswIndex::min_admitted`] (no effect on an exact index).
    pub fn set_min_admitted(&mut self, rows: usize) {
        if let Rows::Hnsw(index) = &mut self.index {
            index.set_min_admitted(rows);
        }
    }
}

impl VectorIndexRead for WindowedIndex {
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

    fn search_served(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<(Vec<VectorHit<TurnId>>, IndexKind), VectorError> {
        // Ask for more windows until n distinct turns are found or the index is exhausted, rather
        // than scoring and sorting every window of the namespace for each query. The hits are
        // the last search's, and so is the path named. The first search asks for 2n windows: a
        // query's best windows are often several of one long turn, and asking for n alone made
        // most searches on a namespace of long turns run twice (the 100k audit set).
        let mut want = 2 * n;
        loop {
            let (windows, kind) = self.search_windows(query, want, &mut |(turn, _)| admit(turn))?;
            let mut hits: Vec<VectorHit<TurnId>> = Vec::with_capacity(n);
            let mut seen: HashSet<TurnId> = HashSet::with_capacity(windows.len());
            for w in &windows {
                if seen.insert(w.key.0) {
                    hits.push(VectorHit { key: w.key.0, score: w.score });
                }
            }
            if hits.len() >= n || windows.len() < want {
                hits.truncate(n);
                return Ok((hits, kind));
            }
            want *= 2;
        }
    }
}
