//! A namespace's vector index under one encoder: filled from the embedding cache as turns get
//! vectors, loaded from and grown into its index file, mirrored into pgvector on a database.

use std::collections::HashSet;

use evicortex_compiler::{Corpus, turn_document};
use evicortex_core::{Evidence, Namespace, TextDigest, TurnId};
use evicortex_vector::{ExactIndex, VectorIndexRead, WindowedIndex};

use crate::{CompileError, ann, dense::Dense, derived_view::DerivedView};

/// The vector index of a namespace under the memory's encoder.
#[derive(Debug)]
pub(crate) struct DenseIndex {
    pub(crate) index: WindowedIndex,
    /// Turns in the corpus without a vector yet (catch-up has not reached them), in ledger
    /// order, with their document's digest (what the embedding cache is keyed by).
    pub(crate) missing: Vec<(TurnId, TextDigest)>,
    /// The embedding cache's write generation at the last lookup, and how many of `missing`
    /// (a prefix) that lookup covered: of that prefix, only the turns whose documents were
    /// written since are looked up again, so that a long backlog is not looked up again at
    /// every compile while the embedder works through it.
    looked_up: Option<(u64, usize)>,
    /// Rows of the graph in its index file (`None`: no file written or loaded by this process).
    pub(crate) saved_rows: Option<usize>,
    /// Whether a PostgreSQL store's pgvector tables hold every vector of this index (after
    /// that, only the vectors added are stored).
    pg_synced: bool,
}

/// Adds to the index in `slot` (built, or loaded from its file, when empty) the vectors of
/// turns that have one now under `dense`'s encoder; records the namespace's record up to which
/// every turn has been offered to the encoder. Returns the turns that got vectors.
pub(super) fn refresh_dense(
    slot: &mut Option<DenseIndex>,
    corpus: &Corpus,
    covers: Option<TurnId>,
    view: DerivedView<'_>,
    dense: &Dense,
    namespace: &Namespace,
) -> Result<Vec<TurnId>, CompileError> {
    let vector_err = |source| CompileError::Vector { namespace: namespace.clone(), source };
    if slot.is_none() {
        let loaded = ann::load(view, dense, namespace)?;
        *slot = Some(match loaded {
            Some((index, covers)) => DenseIndex {
                saved_rows: Some(index.len()),
                index,
                missing: corpus.evidence().iter().filter(|e| e.id > covers).map(pending).collect(),
                looked_up: None,
                pg_synced: false,
            },
            None => DenseIndex {
                index: WindowedIndex::new(ExactIndex::new(dense.encoder.identity().dimension)),
                missing: corpus.evidence().iter().map(pending).collect(),
                looked_up: None,
                saved_rows: None,
                pg_synced: false,
            },
        });
    }
    let index = slot.as_mut().expect("set above");
    let generation = dense.cache.write_generation()?;
    let (covered, written) = match index.looked_up {
        Some((seen, covered)) if seen == generation => (covered, Some(HashSet::new())),
        Some((seen, covered)) => (covered, dense.cache.written_since(seen)?),
        None => (0, None),
    };
    let to_look_up = to_look_up(&index.missing, covered, written.as_ref());
    let mut added = Vec::new();
    if !to_look_up.is_empty() {
        let _span =
            tracing::debug_span!("vector_index", %namespace, n_turns = to_look_up.len()).entered();
        let digest = dense.encoder.identity_digest();
        let vectors = dense.cache.namespace_vectors(&to_look_up, &digest)?;
        let mut window = 0u32;
        let mut rows = Vec::with_capacity(vectors.turns.len());
        for (row, turn) in vectors.turns.iter().enumerate() {
            window = if row > 0 && vectors.turns[row - 1] == *turn { window + 1 } else { 0 };
            rows.push(((*turn, window), vectors.row(row)));
        }
        index.index.extend_windows(rows).map_err(vector_err)?;
        added.extend(vectors.turns.iter().copied());
        added.dedup();
        let still_missing: HashSet<TurnId> = vectors.missing.iter().copied().collect();
        let found: HashSet<TurnId> = to_look_up
            .iter()
            .map(|(turn, _)| *turn)
            .filter(|turn| !still_missing.contains(turn))
            .collect();
        index.missing.retain(|(turn, _)| !found.contains(turn));
    }
    index.looked_up = Some((generation, index.missing.len()));
    if let Some(pg) = view.pg_dense {
        let turns = index.pg_synced.then_some(added.as_slice());
        pg.sync(dense, namespace, &index.index, corpus, turns)?;
        index.pg_synced = true;
    }
    index.mark_covered(covers, namespace)?;
    ann::grow(view, dense, namespace, index, covers)?;
    Ok(added)
}

impl DenseIndex {
    /// Drops the turns `erased` accepts from those waiting for a vector, keeping the count of
    /// them the last lookup covered in step.
    pub(super) fn forget_missing(&mut self, erased: impl Fn(TurnId) -> bool) {
        if let Some((generation, covered)) = self.looked_up {
            let gone = self.missing.iter().take(covered).filter(|(id, _)| erased(*id)).count();
            self.looked_up = Some((generation, covered - gone));
        }
        self.missing.retain(|(id, _)| !erased(*id));
    }

    /// Dense coverage: the namespace's last record (`covers`) when every turn has been offered
    /// to the encoder, else the record just before the first turn still waiting for its vector.
    fn mark_covered(
        &mut self,
        covers: Option<TurnId>,
        namespace: &Namespace,
    ) -> Result<(), CompileError> {
        let covered = match self.missing.first() {
            Some((first, _)) => first.raw().checked_sub(1).map(TurnId::from_raw),
            None => covers,
        };
        if let Some(covered) = covered
            && self.index.covers().is_none_or(|c| c < covered)
        {
            self.index
                .mark_covered(covered)
                .map_err(|source| CompileError::Vector { namespace: namespace.clone(), source })?;
        }
        Ok(())
    }
}

/// The turns of `missing` worth looking up: those after the first `covered` (never looked up),
/// and of the first `covered`, the ones whose documents were `written` since the lookup that
/// covered them (`None`: the log does not reach back that far, all of them).
fn to_look_up(
    missing: &[(TurnId, TextDigest)],
    covered: usize,
    written: Option<&HashSet<TextDigest>>,
) -> Vec<(TurnId, TextDigest)> {
    let covered = covered.min(missing.len());
    match written {
        // Nothing written since: the common case of a compile, without a pass over the backlog.
        Some(written) if written.is_empty() => missing[covered..].to_vec(),
        Some(written) => missing[..covered]
            .iter()
            .filter(|(_, text)| written.contains(text))
            .chain(&missing[covered..])
            .copied()
            .collect(),
        None => missing.to_vec(),
    }
}

/// A turn waiting for its vector, with the digest of the document it waits for.
pub(crate) fn pending(e: &Evidence) -> (TurnId, TextDigest) {
    (e.id, TextDigest::of(&turn_document(&e.turn)))
}

/// A turn's vector for its context windows: a turn embedded as several windows counts once, as
/// its windows' normalised sum. `None` when it has no vector yet.
pub(super) fn turn_vector(index: &WindowedIndex, id: TurnId, dim: usize) -> Option<Vec<f32>> {
    let mut sum = vec![0.0f32; dim];
    let mut any = false;
    for window in index.windows_of(id) {
        sum.iter_mut().zip(window).for_each(|(s, x)| *s += x);
        any = true;
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    (any && norm > 0.0).then(|| {
        sum.iter_mut().for_each(|x| *x /= norm);
        sum
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: u64) -> (TurnId, TextDigest) {
        (TurnId::from_raw(i), TextDigest::of(&format!("text {i}")))
    }

    #[test]
    fn only_turns_never_looked_up_or_written_since_are_looked_up_again() {
        let missing: Vec<_> = (1..=6).map(turn).collect();
        let written: HashSet<TextDigest> = [turn(2).1, turn(5).1, turn(9).1].into();
        // 1-4 were looked up before; 5 and 6 arrived since.
        let ids = |v: Vec<(TurnId, TextDigest)>| v.iter().map(|(t, _)| t.raw()).collect::<Vec<_>>();
        assert_eq!(ids(to_look_up(&missing, 4, Some(&written))), [2, 5, 6]);
        assert_eq!(ids(to_look_up(&missing, 4, Some(&HashSet::new()))), [5, 6]);
        assert_eq!(ids(to_look_up(&missing, 4, None)), [1, 2, 3, 4, 5, 6], "the log fell short");
        assert_eq!(ids(to_look_up(&missing, 9, Some(&written))), [2, 5]);
    }
}
