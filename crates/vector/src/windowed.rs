//! Turns embedded as one or more windows, searched as turns: a turn scores as its best window.

use evicortex_core::TurnId;

use crate::{
    ExactIndex, IndexKind, VectorError, VectorHit, VectorIndex, VectorIndexRead, VectorRow,
};

/// An exact index over window vectors keyed by (turn, window number), read as an index of turns.
#[derive(Debug)]
pub struct WindowedIndex {
    index: ExactIndex<(TurnId, u32)>,
}

impl WindowedIndex {
    /// Wraps an index whose keys are (turn, window number).
    pub fn new(index: ExactIndex<(TurnId, u32)>) -> WindowedIndex {
        WindowedIndex { index }
    }

    /// Adds window `key.1` of turn `key.0` (see [`VectorIndex::insert`]).
    pub fn insert_window(
        &mut self,
        key: (TurnId, u32),
        vector: &[f32],
    ) -> Result<VectorRow, VectorError> {
        self.index.insert(key, vector)
    }

    /// The stored unit vectors of `turn`'s windows, in window order (none when it has none).
    pub fn windows_of(&self, turn: TurnId) -> impl Iterator<Item = &[f32]> + '_ {
        (0u32..).map_while(move |w| self.index.get((turn, w)))
    }

    /// Records the ledger position the index covers (see [`VectorIndex::mark_covered`]).
    pub fn mark_covered(&mut self, position: TurnId) -> Result<(), VectorError> {
        self.index.mark_covered(position)
    }

    /// Heap bytes of the vectors and their tables.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes()
    }
}

impl VectorIndexRead for WindowedIndex {
    fn dim(&self) -> usize {
        self.index.dim()
    }

    fn len(&self) -> usize {
        self.index.len()
    }

    fn covers(&self) -> Option<TurnId> {
        self.index.covers()
    }

    fn kind(&self) -> IndexKind {
        self.index.kind()
    }

    fn search(
        &self,
        query: &[f32],
        n: usize,
        admit: &mut dyn FnMut(TurnId) -> bool,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorError> {
        // Ask for more windows until n distinct turns are found or the index is exhausted, rather
        // than scoring and sorting every window of the namespace for each query.
        let mut want = n;
        loop {
            let windows = self.index.search(query, want, &mut |(turn, _)| admit(turn))?;
            let mut hits: Vec<VectorHit<TurnId>> = Vec::with_capacity(n);
            for w in &windows {
                if !hits.iter().any(|h| h.key == w.key.0) {
                    hits.push(VectorHit { key: w.key.0, score: w.score });
                }
            }
            if hits.len() >= n || windows.len() < want {
                hits.truncate(n);
                return Ok(hits);
            }
            want *= 2;
        }
    }
}
