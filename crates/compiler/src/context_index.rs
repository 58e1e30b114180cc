//! Turns indexed in their context: each turn's window (the turn and the turns of its session at
//! most `radius` positions before or after it), as a BM25 document ([`WindowIndex`]) and as a
//! context vector ([`ContextVectors`]: the normalised sum of the window's stored turn vectors, so
//! nothing is embedded again). Short conversational turns ("Which one?", "That's great!") carry
//! little alone; their neighbours say what they are about. The cited and packed unit stays the
//! turn: these indexes only rank.
//!
//! Both are built from a [`Corpus`] (its eligible records only: another namespace's or an erased
//! record is never part of a window). When records are appended or turns get vectors, only the
//! windows that changed are computed again ([`WindowIndex::extend`], [`ContextVectors::update`]):
//! rebuilding every window of a namespace after each append made the next compile take seconds
//! at ten thousand turns.

use std::{borrow::Cow, collections::HashSet};

use evicortex_core::TurnId;
use evicortex_lexical::{Analyzer, Bm25Index, Bm25Params, LexicalError, TermCounts};
use evicortex_vector::{ExactIndex, VectorError, VectorHit, VectorIndexRead};

use crate::{Admission, Corpus, turn_document};

/// The corpus positions of the window of the record at `pos`: the eligible records of its
/// session within `radius` positions of it (in the session's turn order), itself included, in
/// that order. Empty when the record is not eligible.
pub(crate) fn window_positions(corpus: &Corpus, pos: usize, radius: u32) -> Vec<usize> {
    window_positions_among(corpus, pos, radius, |_| true)
}

/// [`window_positions`] as it was when only the records at positions `present` accepts were
/// held (the window of `pos` before later records were appended).
fn window_positions_among(
    corpus: &Corpus,
    pos: usize,
    radius: u32,
    present: impl Fn(usize) -> bool,
) -> Vec<usize> {
    if corpus.eligible_time_at(pos).is_none() {
        return Vec::new();
    }
    let session = corpus.session_of(pos);
    let at = corpus.place_in_session(pos);
    let eligible =
        |p: &&u32| present(**p as usize) && corpus.eligible_time_at(**p as usize).is_some();
    let radius = radius as usize;
    let mut before: Vec<usize> =
        session[..at].iter().rev().filter(eligible).take(radius).map(|&p| p as usize).collect();
    before.reverse();
    before.push(pos);
    before.extend(session[at + 1..].iter().filter(eligible).take(radius).map(|&p| p as usize));
    before
}

/// Whether every record of the window of `pos` is admitted: only then may a context list rank
/// it (a window reaching past the as-of time would rank the turn by words said later).
pub(crate) fn window_admitted(
    corpus: &Corpus,
    pos: usize,
    radius: u32,
    admission: &Admission<'_>,
) -> bool {
    // `window_positions` walked without collecting it: a filtered context list asks this of
    // thousands of windows per compile.
    if corpus.eligible_time_at(pos).is_none() {
        return true;
    }
    let session = corpus.session_of(pos);
    let at = corpus.place_in_session(pos);
    let eligible = |p: &usize| corpus.eligible_time_at(*p).is_some();
    let radius = radius as usize;
    let before = session[..at].iter().rev().map(|&p| p as usize).filter(eligible).take(radius);
    let after = session[at + 1..].iter().map(|&p| p as usize).filter(eligible).take(radius);
    admission.admits_at(pos) && before.chain(after).all(|p| admission.admits_at(p))
}

/// The BM25 document of the window of `pos`: the window's turn documents, one per line. The
/// indexes never build it: the analyzer is additive at line breaks, so they join its turns'
/// terms instead; the tests read it to say what a window holds.
#[cfg(test)]
fn window_document(corpus: &Corpus, pos: usize, radius: u32) -> String {
    document_of(corpus, window_positions(corpus, pos, radius))
}

/// The positions of every window that holds one of the records at `positions` (windows are
/// symmetric: the record at `p` is in the window of `q` exactly when `q` is in that of `p`),
/// ascending.
fn windows_holding(
    corpus: &Corpus,
    radius: u32,
    positions: impl IntoIterator<Item = usize>,
) -> Vec<usize> {
    let mut windows: Vec<usize> =
        positions.into_iter().flat_map(|p| window_positions(corpus, p, radius)).collect();
    windows.sort_unstable();
    windows.dedup();
    windows
}

/// The records whose windows an erasure of `erased` (ids held by `before`) changes: those
/// sharing a window with an erased record and not erased themselves. Every other window keeps
/// its records, since a window takes the nearest eligible records of its session.
fn windows_changed_by(before: &Corpus, radius: u32, erased: &HashSet<TurnId>) -> Vec<TurnId> {
    let positions = erased.iter().filter_map(|&id| before.position(id));
    windows_holding(before, radius, positions)
        .into_iter()
        .map(|pos| before.at(pos).id)
        .filter(|id| !erased.contains(id))
        .collect()
}

#[cfg(test)]
fn document_of(corpus: &Corpus, positions: Vec<usize>) -> String {
    let mut out = String::new();
    for p in positions {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&turn_document(&corpus.at(p).turn));
    }
    out
}

/// Windows indexed per pass: their records' terms are held while the pass runs.
const WINDOWS_PER_PASS: usize = 1_024;

/// Indexes the window documents of `windows` (ascending positions): a window at a position below
/// `built_for` was indexed when only the first `built_for` records were held and is replaced, the
/// others are added. Each record is analysed once a pass (`analysed` gives the terms a caller
/// has already, under the index's analyzer) and counted once; a window's counts are its
/// records' joined (the analyzer is additive at the line breaks that join a window's turns).
fn index_windows<'t>(
    index: &mut Bm25Index,
    corpus: &Corpus,
    radius: u32,
    windows: &[usize],
    built_for: usize,
    analysed: &dyn Fn(usize) -> Option<&'t [String]>,
) -> Result<(), LexicalError> {
    for pass in windows.chunks(WINDOWS_PER_PASS) {
        let members: Vec<(usize, Vec<usize>, Option<Vec<usize>>)> = pass
            .iter()
            .map(|&pos| {
                let before = (pos < built_for)
                    .then(|| window_positions_among(corpus, pos, radius, |p| p < built_for));
                (pos, window_positions(corpus, pos, radius), before)
            })
            .collect();
        let mut needed: Vec<usize> = members
            .iter()
            .flat_map(|(_, now, before)| now.iter().chain(before.iter().flatten()))
            .copied()
            .collect();
        needed.sort_unstable();
        needed.dedup();
        let owned: Vec<Option<Vec<String>>> = needed
            .iter()
            .map(|&p| {
                analysed(p).is_none().then(|| index.analyze(&turn_document(&corpus.at(p).turn)))
            })
            .collect();
        let counts: Vec<TermCounts<'_>> = needed
            .iter()
            .zip(&owned)
            .map(|(&p, own)| match own {
                Some(terms) => TermCounts::of(terms),
                None => TermCounts::of(analysed(p).unwrap_or_default()),
            })
            .collect();
        let joined =
            |positions: &[usize]| {
                TermCounts::joined(positions.iter().map(|p| {
                    &counts[needed.binary_search(p).expect("every window member is counted")]
                }))
            };
        for (pos, now, before) in &members {
            let id = corpus.at(*pos).id;
            let document = joined(now);
            match before {
                Some(before) => index.replace_counts(id, &joined(before), &document)?,
                None => {
                    index.add_counts(id, &document)?;
                }
            }
        }
    }
    Ok(())
}

/// BM25 over the window documents of a corpus, one per eligible record, keyed by the record.
#[derive(Debug, Clone)]
pub struct WindowIndex {
    radius: u32,
    index: Bm25Index,
    built_for: usize,
}

impl WindowIndex {
    /// Indexes the window document of every eligible record of `corpus`.
    pub fn build(
        corpus: &Corpus,
        radius: u32,
        params: Bm25Params,
        analyzer: Analyzer,
    ) -> Result<WindowIndex, LexicalError> {
        let mut index = Bm25Index::with_analyzer(params.validate()?, analyzer);
        let windows: Vec<usize> =
            (0..corpus.len()).filter(|&pos| corpus.eligible_time_at(pos).is_some()).collect();
        index_windows(&mut index, corpus, radius, &windows, 0, &|_| None)?;
        if let Some(last) = corpus.last_record() {
            index.mark_covered(last)?;
        }
        Ok(WindowIndex { radius, index, built_for: corpus.len() })
    }

    /// Brings the index up to `corpus` after records were appended to the one it was built for
    /// (which must be a prefix of `corpus`: an erasure goes through [`WindowIndex::erase`]): the new records'
    /// windows are added and every window a new record entered is replaced, so the index
    /// searches exactly as [`WindowIndex::build`] over `corpus` would, at the cost of the
    /// windows that changed rather than all of them.
    pub fn extend(&mut self, corpus: &Corpus) -> Result<(), LexicalError> {
        self.extend_analysed(corpus, &|_| None)
    }

    /// [`WindowIndex::extend`] given the terms, under this index's analyzer, of the records a
    /// caller analysed already (`analysed` of a corpus position; `None` for the others).
    pub fn extend_analysed<'t>(
        &mut self,
        corpus: &Corpus,
        analysed: &dyn Fn(usize) -> Option<&'t [String]>,
    ) -> Result<(), LexicalError> {
        let built_for = self.built_for;
        if corpus.len() <= built_for {
            return Ok(());
        }
        let windows = windows_holding(corpus, self.radius, built_for..corpus.len());
        index_windows(&mut self.index, corpus, self.radius, &windows, built_for, analysed)?;
        if let Some(last) = corpus.last_record() {
            self.index.mark_covered(last)?;
        }
        self.built_for = corpus.len();
        Ok(())
    }

    /// Brings the index from `before`, the corpus it was built for, to `after`, the same
    /// corpus without the records `erased` ([`Corpus::without`]): their windows are removed,
    /// the windows that held them are replaced, and no term of theirs stays behind, so the index
    /// searches exactly as [`WindowIndex::build`] over `after` would. Only the records of the
    /// changed windows are analysed again. False, changing nothing, when the index was not
    /// built for all of `before` (the caller builds it again).
    pub fn erase(
        &mut self,
        before: &Corpus,
        after: &Corpus,
        erased: &HashSet<TurnId>,
    ) -> Result<bool, LexicalError> {
        if self.built_for != before.len() {
            return Ok(false);
        }
        let terms = |corpus: &Corpus, positions: Vec<usize>| -> Vec<Vec<String>> {
            let analyse = |p: usize| self.index.analyze(&turn_document(&corpus.at(p).turn));
            positions.into_iter().map(analyse).collect()
        };
        let mut replaced = Vec::new();
        for id in windows_changed_by(before, self.radius, erased) {
            let (Some(was), Some(now)) = (before.position(id), after.position(id)) else {
                continue;
            };
            let old = terms(before, window_positions(before, was, self.radius));
            let new = terms(after, window_positions(after, now, self.radius));
            replaced.push((id, old, new));
        }
        for (id, old, new) in &replaced {
            let old: Vec<TermCounts<'_>> = old.iter().map(|t| TermCounts::of(t)).collect();
            let new: Vec<TermCounts<'_>> = new.iter().map(|t| TermCounts::of(t)).collect();
            self.index.replace_counts(*id, &TermCounts::joined(&old), &TermCounts::joined(&new))?;
        }
        self.index.remove(|id| erased.contains(&id));
        self.built_for = after.len();
        Ok(true)
    }

    /// A window index read back from where [`WindowIndex::index`] was saved, for the first
    /// `built_for` records of a corpus; `None` when `index` cannot be one (more documents than
    /// records). Which windows it holds is the caller's to check against the corpus.
    pub fn from_saved(radius: u32, index: Bm25Index, built_for: usize) -> Option<WindowIndex> {
        (radius > 0 && index.len() <= built_for).then_some(WindowIndex { radius, index, built_for })
    }

    /// The window radius.
    pub fn radius(&self) -> u32 {
        self.radius
    }

    /// The BM25 index of window documents.
    pub fn index(&self) -> &Bm25Index {
        &self.index
    }

    /// How many corpus records it was built from (a larger corpus needs a rebuild).
    pub fn built_for(&self) -> usize {
        self.built_for
    }

    /// Estimated heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.index.len() * 256
    }
}

/// The context vector of every eligible record of a corpus: the L2-normalised sum of the unit
/// vectors of the turns in its window that have one. Held in an [`ExactIndex`], so a search
/// takes its int8 first pass and returns what a full `f32` scan would.
#[derive(Debug, Clone)]
pub struct ContextVectors {
    radius: u32,
    dim: usize,
    index: ExactIndex<TurnId>,
    built_for: usize,
    vectors_seen: usize,
}

impl ContextVectors {
    /// Builds the context vectors of `corpus` from `turn_vector` (a turn's unit vector, `None`
    /// when it has none yet). `vectors_seen` records how many turn vectors were available, so a
    /// caller can tell when new vectors call for a rebuild.
    pub fn build<'v>(
        corpus: &Corpus,
        radius: u32,
        dim: usize,
        vectors_seen: usize,
        turn_vector: impl Fn(TurnId) -> Option<&'v [f32]>,
    ) -> ContextVectors {
        let mut built = ContextVectors {
            radius,
            dim,
            index: ExactIndex::new(dim),
            built_for: corpus.len(),
            vectors_seen,
        };
        let mut sum = vec![0.0f32; dim];
        for pos in 0..corpus.len() {
            if built.window_vector(corpus, pos, &mut sum, |id| turn_vector(id).map(Cow::Borrowed)) {
                built.set_row(corpus.at(pos).id, &sum);
            }
        }
        built
    }

    /// Brings the vectors up to `corpus` after records were appended to the one they were built
    /// for (a prefix of `corpus`) or turns got vectors (`embedded`, the turns that have a
    /// vector now and had none at the last build or update): every window holding a new record
    /// or one of those turns is computed again, so the result searches exactly as
    /// [`ContextVectors::build`] would.
    pub fn update<'v>(
        &mut self,
        corpus: &Corpus,
        embedded: impl IntoIterator<Item = TurnId>,
        vectors_seen: usize,
        turn_vector: impl Fn(TurnId) -> Option<Cow<'v, [f32]>>,
    ) {
        let changed = (self.built_for.min(corpus.len())..corpus.len())
            .chain(embedded.into_iter().filter_map(|id| corpus.position(id)));
        self.compute_again(corpus, windows_holding(corpus, self.radius, changed), turn_vector);
        self.built_for = corpus.len();
        self.vectors_seen = vectors_seen;
    }

    /// Computes the context vectors of the records at `positions` of `corpus` again (a record
    /// whose window no longer has a vector loses its row).
    fn compute_again<'v>(
        &mut self,
        corpus: &Corpus,
        positions: impl IntoIterator<Item = usize>,
        turn_vector: impl Fn(TurnId) -> Option<Cow<'v, [f32]>>,
    ) {
        let mut sum = vec![0.0f32; self.dim];
        for pos in positions {
            let id = corpus.at(pos).id;
            if self.window_vector(corpus, pos, &mut sum, &turn_vector) {
                self.set_row(id, &sum);
            } else {
                self.index.remove(id);
            }
        }
    }

    /// [`WindowIndex::erase`] for context vectors: the vectors of `erased` are removed and
    /// those of the windows that held them computed again over `after`, so the result searches
    /// exactly as [`ContextVectors::build`] over `after` would. False, changing nothing, when
    /// they were not built for all of `before`.
    pub fn erase<'v>(
        &mut self,
        before: &Corpus,
        after: &Corpus,
        erased: &HashSet<TurnId>,
        vectors_seen: usize,
        turn_vector: impl Fn(TurnId) -> Option<Cow<'v, [f32]>>,
    ) -> bool {
        if self.built_for != before.len() {
            return false;
        }
        for &id in erased {
            self.index.remove(id);
        }
        let changed = windows_changed_by(before, self.radius, erased);
        let positions = changed.into_iter().filter_map(|id| after.position(id));
        self.compute_again(after, positions, turn_vector);
        self.built_for = after.len();
        self.vectors_seen = vectors_seen;
        true
    }

    /// Writes into `sum` the sum of the vectors of the window of the record at `pos` (the
    /// context vector before scaling); false when none of its window's turns has a vector.
    fn window_vector<'v>(
        &self,
        corpus: &Corpus,
        pos: usize,
        sum: &mut [f32],
        turn_vector: impl Fn(TurnId) -> Option<Cow<'v, [f32]>>,
    ) -> bool {
        sum.iter_mut().for_each(|x| *x = 0.0);
        let mut any = false;
        for p in window_positions(corpus, pos, self.radius) {
            if let Some(v) = turn_vector(corpus.at(p).id).filter(|v| v.len() == self.dim) {
                sum.iter_mut().zip(v.iter()).for_each(|(s, x)| *s += x);
                any = true;
            }
        }
        // The index scales the sum to unit length; a sum it could not scale is no vector.
        let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
        any && norm.is_finite() && norm > 0.0
    }

    fn set_row(&mut self, id: TurnId, vector: &[f32]) {
        // `window_vector` only reports finite, non-zero sums of the index's dimension, which
        // `upsert` never refuses.
        self.index.upsert(id, vector).expect("a unit vector of the index's dimension");
    }

    /// The window radius.
    pub fn radius(&self) -> u32 {
        self.radius
    }

    /// How many corpus records it was built from.
    pub fn built_for(&self) -> usize {
        self.built_for
    }

    /// How many turn vectors were available when it was built.
    pub fn vectors_seen(&self) -> usize {
        self.vectors_seen
    }

    /// Estimated heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.index.heap_bytes() + self.index.row_map().len() * 32
    }

    /// The `n` records whose context vectors are most similar to `query` (cosine; `query` need not
    /// be normalised) among those `admit` accepts, best first, ties by record.
    pub fn search(
        &self,
        query: &[f32],
        n: usize,
        mut admit: impl FnMut(TurnId) -> bool,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorError> {
        self.index.search(query, n, &mut admit)
    }

    /// [`ContextVectors::search`] restricted to the windows that hold one of `seeds` (records,
    /// typically the best turns by their own vectors): a context vector is the sum of its
    /// window's turn vectors, so its cosine with the query is high only where some of those turns
    /// score well, and the scores over that set are exact. An approximation of the full search
    /// whose cost follows the seeds, not the namespace; `bench ann run` audits its recall.
    pub fn search_seeded(
        &self,
        corpus: &Corpus,
        query: &[f32],
        n: usize,
        seeds: impl IntoIterator<Item = TurnId>,
        mut admit: impl FnMut(TurnId) -> bool,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorError> {
        let positions = seeds.into_iter().filter_map(|id| corpus.position(id));
        let windows = windows_holding(corpus, self.radius, positions);
        let keys = windows.into_iter().map(|pos| corpus.at(pos).id);
        self.index.search_among(query, n, keys, &mut admit)
    }

    /// The same answer as [`ContextVectors::search`] from a plain `f32` scan of every row: the
    /// anchor benchmarks measure it against.
    pub fn search_f32_scan(
        &self,
        query: &[f32],
        n: usize,
        mut admit: impl FnMut(TurnId) -> bool,
    ) -> Result<Vec<VectorHit<TurnId>>, VectorError> {
        self.index.search_f32_scan(query, n, &mut admit)
    }
}

#[cfg(test)]
mod tests;
