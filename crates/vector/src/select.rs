//! Choosing a sketched search's candidates: the `keep` admitted rows with the best sketch scores
//! (ties by row), asking the filter about as few rows as it can.
//!
//! Where a sample of the rows says the filter admits most of them, the scores are weighed block
//! by block as the scan makes them, against a cut placed from a sample of the blocks and raised
//! as better rows are seen ([`BestRows`]); no score is stored (at a million rows, writing the
//! scores and reading them back was a tenth of the scan's time). Otherwise (a narrow filter) the
//! scores are kept, a cut is placed from a sample of them and lowered by the share admitted above
//! it ([`best_above_sampled_cut`]), and a heap answers when the cut cannot ([`best_by_heap`]).
//! All three give the heap's answer.

use std::{
    cmp::{Ordering, Reverse},
    collections::BinaryHeap,
};

use crate::exact::OrderedScore;

/// Rows of the sample taken to place the cut of [`best_above_sampled_cut`]: one in this many.
const SAMPLE_STEP: usize = 16;

/// Blocks scored first to place the first cut of a [`BestRows`]: one in this many.
const SAMPLE_BLOCK_STEP: usize = 16;

/// Scores compared with a cut at once, before any is looked at alone.
const CUT_CHUNK: usize = 32;

/// Rows asked about to learn the share a filter admits, spread evenly over the rows.
const SHARE_SAMPLE: usize = 64;

/// Scores of consecutive rows, a block at a time.
pub(crate) trait BlockScores {
    /// How many blocks there are.
    fn blocks(&self) -> usize;

    /// `block`'s first row and the scores of its rows.
    fn block(&mut self, block: usize) -> (usize, &[f32]);
}

/// Best score first, ties by row.
fn by_score(a: &(f32, u32), b: &(f32, u32)) -> Ordering {
    b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
}

/// The `keep` admitted rows of `rows` with the best scores (ties by row), in no order. Every block
/// of `scan` is scored once, or twice when a filter admits far fewer rows than its sample said.
pub(crate) fn best_candidates(
    rows: usize,
    keep: usize,
    scan: &mut dyn BlockScores,
    admit: &mut dyn FnMut(usize) -> bool,
) -> Vec<u32> {
    if let Some(wanted) = wanted_by_sampled_share(rows, keep, admit) {
        let best = BestRows::from_scan(rows, wanted, scan);
        if let Some(found) = best.admitted(keep, admit) {
            return found;
        }
    }
    let mut scores = Vec::with_capacity(rows);
    (0..scan.blocks()).for_each(|block| scores.extend_from_slice(scan.block(block).1));
    best_above_sampled_cut(&scores, keep, admit)
        .unwrap_or_else(|| best_by_heap(&scores, keep, admit))
}

/// How many of the best rows by score a [`BestRows`] should hold so that `keep` of them are
/// admitted, judged from [`SHARE_SAMPLE`] rows spread over all of them: a quarter more than
/// `keep` divided by a low estimate of the share (two standard deviations under the sample's).
/// `None` when the rows are few enough for any way to be cheap, or the sample says the filter
/// refuses half the rows or more (the cut of [`best_above_sampled_cut`] learns the share better
/// from the rows near the top).
fn wanted_by_sampled_share(
    rows: usize,
    keep: usize,
    admit: &mut dyn FnMut(usize) -> bool,
) -> Option<usize> {
    if rows <= 2 * keep.max(SHARE_SAMPLE) {
        return None;
    }
    let admitted = (0..SHARE_SAMPLE).filter(|i| admit(i * rows / SHARE_SAMPLE)).count() as f64;
    if admitted < SHARE_SAMPLE as f64 / 2.0 {
        return None;
    }
    let n = SHARE_SAMPLE as f64;
    let low = admitted - 2.0 * (admitted * (n - admitted) / n).sqrt();
    Some(((keep + keep / 4) as f64 * n / low).ceil() as usize)
}

/// Rows by score, holding every row that ranks above its cut (score, then row: a row ranks above
/// the cut when its score is better, or equal with an earlier row) and none below: whenever it
/// holds twice `wanted`, it keeps the best `wanted` and raises the cut to the worst of them.
struct BestRows {
    wanted: usize,
    cut: Option<(f32, u32)>,
    rows: Vec<(f32, u32)>,
}

impl BestRows {
    /// The rows of `scan` above a cut placed from every [`SAMPLE_BLOCK_STEP`]th block so that
    /// about twice `wanted` rows of all `rows` pass it, the cut raised as it fills.
    fn from_scan(rows: usize, wanted: usize, scan: &mut dyn BlockScores) -> BestRows {
        let mut best = BestRows {
            wanted: wanted.max(1),
            cut: None,
            rows: Vec::with_capacity(2 * wanted + CUT_CHUNK),
        };
        let sampled = |block: usize| block % SAMPLE_BLOCK_STEP == SAMPLE_BLOCK_STEP / 2;
        let (mut sample, mut starts) = (Vec::new(), Vec::new());
        for block in (0..scan.blocks()).filter(|b| sampled(*b)) {
            let (start, scores) = scan.block(block);
            starts.push((start, sample.len()));
            sample.extend_from_slice(scores);
        }
        let rank = (2 * best.wanted * sample.len()).div_ceil(rows.max(1));
        if rank < sample.len() {
            let mut order = sample.clone();
            let (_, cut, _) = order.select_nth_unstable_by(rank, |a, b| b.total_cmp(a));
            best.cut = Some((*cut, u32::MAX));
        }
        let ends = starts.iter().skip(1).map(|(_, at)| *at).chain([sample.len()]);
        for (&(start, from), to) in starts.iter().zip(ends) {
            best.offer(start, &sample[from..to]);
        }
        for block in (0..scan.blocks()).filter(|b| !sampled(*b)) {
            let (start, scores) = scan.block(block);
            best.offer(start, scores);
        }
        best
    }

    /// Weighs the rows from `start` on, whose scores are `scores`.
    fn offer(&mut self, start: usize, scores: &[f32]) {
        let Some(mut cut) = self.cut else {
            self.rows.extend(scores.iter().zip(start..).map(|(s, r)| (*s, r as u32)));
            if self.rows.len() >= 2 * self.wanted {
                self.keep_best();
            }
            return;
        };
        for (chunk, scores) in scores.chunks(CUT_CHUNK).enumerate() {
            let mask = at_or_above(scores, cut.0);
            if mask == 0 {
                continue;
            }
            for i in set_bits(mask) {
                let entry = (scores[i], (start + chunk * CUT_CHUNK + i) as u32);
                if by_score(&entry, &cut) == Ordering::Less {
                    self.rows.push(entry);
                }
            }
            if self.rows.len() >= 2 * self.wanted {
                cut = self.keep_best();
            }
        }
    }

    /// Keeps the best `wanted` rows, raising the cut to the worst of them.
    fn keep_best(&mut self) -> (f32, u32) {
        self.rows.select_nth_unstable_by(self.wanted - 1, by_score);
        self.rows.truncate(self.wanted);
        let cut = self.rows[self.wanted - 1];
        self.cut = Some(cut);
        cut
    }

    /// The `keep` admitted rows with the best scores among all the rows offered, `admit` asked
    /// about the held rows best first (the best `keep` at once); `None` when fewer than `keep`
    /// held rows are admitted and some rows were below the cut.
    fn admitted(self, keep: usize, admit: &mut dyn FnMut(usize) -> bool) -> Option<Vec<u32>> {
        let complete = self.cut.is_none();
        let mut rows = self.rows;
        // The best `keep` first, all asked about: with a filter admitting nearly every row, the
        // answer is there and nothing needs sorting.
        let first = keep.min(rows.len());
        if first < rows.len() {
            rows.select_nth_unstable_by(first, by_score);
        }
        let (head, rest) = rows.split_at_mut(first);
        let mut found: Vec<(f32, u32)> =
            head.iter().copied().filter(|(_, row)| admit(*row as usize)).collect();
        if found.len() < keep {
            rest.sort_unstable_by(by_score);
            for &(score, row) in rest.iter() {
                if admit(row as usize) {
                    found.push((score, row));
                    if found.len() == keep {
                        break;
                    }
                }
            }
        }
        (found.len() == keep || complete).then(|| found.into_iter().map(|(_, row)| row).collect())
    }
}

/// Bit `i` set where `scores[i]` (one of at most 32) might rank at or above a cut of score `cut`:
/// `s >= cut` or NaN holds for every score `total_cmp` places there (one compare for the whole
/// chunk, which vectorises, and then only the rows it marks looked at).
#[inline(always)]
fn at_or_above(scores: &[f32], cut: f32) -> u32 {
    scores
        .iter()
        .enumerate()
        .fold(0, |mask, (i, s)| mask | ((((*s >= cut) | s.is_nan()) as u32) << i))
}

/// The indices of `mask`'s set bits, lowest first.
fn set_bits(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let bit = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            bit
        })
    })
}

/// The `keep` admitted rows with the best scores (ties by row), found by a cut placed from a
/// sample of the scores so that about a quarter more admitted rows than `keep` pass it (the
/// share a filter admits is learnt from the rows above a first cut, and the cut lowered once):
/// `admit` is asked only about rows above a cut. `None` when the scores are too few to sample or
/// fewer than `keep` admitted rows pass the lowered cut; the heap then answers. When at least
/// `keep` admitted rows pass a cut, the best `keep` admitted rows are all among them, so the
/// answer is the heap's.
fn best_above_sampled_cut(
    scores: &[f32],
    keep: usize,
    admit: &mut dyn FnMut(usize) -> bool,
) -> Option<Vec<u32>> {
    let mut sample: Vec<f32> = scores.iter().step_by(SAMPLE_STEP).copied().collect();
    let mut wanted = keep + keep / 4;
    for _ in 0..2 {
        let rank = wanted.div_ceil(SAMPLE_STEP);
        if rank >= sample.len() {
            return None;
        }
        let (_, cut, _) = sample.select_nth_unstable_by(rank, |a, b| b.total_cmp(a));
        let cut = *cut;
        let (mut above, mut passed) = (0usize, Vec::with_capacity(keep + keep / 2));
        // Few rows pass a cut: a chunk is looked at row by row only when one of its scores might.
        for (chunk, scores) in scores.chunks(CUT_CHUNK).enumerate() {
            for i in set_bits(at_or_above(scores, cut)) {
                let score = &scores[i];
                if score.total_cmp(&cut) != Ordering::Less {
                    above += 1;
                    let row = chunk * CUT_CHUNK + i;
                    if admit(row) {
                        passed.push((*score, row as u32));
                    }
                }
            }
        }
        if passed.len() >= keep {
            if passed.len() > keep {
                passed.select_nth_unstable_by(keep - 1, by_score);
                passed.truncate(keep);
            }
            return Some(passed.into_iter().map(|(_, row)| row).collect());
        }
        // The share admitted above the cut, at least one in 64 (a narrower filter is left to
        // the heap: the lowered cut would reach most rows anyway).
        let share = (passed.len().max(1) as f64 / above.max(1) as f64).max(1.0 / 64.0);
        wanted = ((keep + keep / 4) as f64 / share).ceil() as usize;
    }
    None
}

/// The `keep` admitted rows with the best scores (ties by row), through a heap of the best so
/// far: `admit` is asked only about rows that would enter it.
fn best_by_heap(scores: &[f32], keep: usize, admit: &mut dyn FnMut(usize) -> bool) -> Vec<u32> {
    let mut head: BinaryHeap<Reverse<(OrderedScore, Reverse<u32>)>> =
        BinaryHeap::with_capacity(keep + 1);
    for (row, score) in scores.iter().enumerate() {
        let entry = Reverse((OrderedScore(*score), Reverse(row as u32)));
        let full = head.len() == keep;
        if full && head.peek().is_some_and(|worst| entry >= *worst) {
            continue;
        }
        if !admit(row) {
            continue;
        }
        if full {
            head.pop();
        }
        head.push(entry);
    }
    head.into_iter().map(|Reverse((_, Reverse(row)))| row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Few distinct values: ties at every cut are the rule, not the exception; -0.0 beside 0.0,
    /// which `total_cmp` orders and `<` does not.
    fn tied(scores: &[i32]) -> Vec<f32> {
        scores.iter().map(|&s| if s == -40 { -0.0 } else { s as f32 * 0.5 }).collect()
    }

    /// Scores cut in blocks of `block` rows, counting the blocks scored.
    struct Blocks<'a> {
        scores: &'a [f32],
        block: usize,
        scored: usize,
    }

    impl BlockScores for Blocks<'_> {
        fn blocks(&self) -> usize {
            self.scores.len().div_ceil(self.block)
        }

        fn block(&mut self, block: usize) -> (usize, &[f32]) {
            self.scored += 1;
            let start = block * self.block;
            (start, &self.scores[start..self.scores.len().min(start + self.block)])
        }
    }

    proptest! {
        #[test]
        fn the_sampled_cut_keeps_what_the_heap_keeps(
            scores in proptest::collection::vec(-40i32..40, 0..3000),
            keep in 1usize..400,
            modulus in 1usize..6,
        ) {
            let scores = tied(&scores);
            let mut heap = best_by_heap(&scores, keep, &mut |row| row % modulus == 0);
            heap.sort_unstable();
            if let Some(mut cut) =
                best_above_sampled_cut(&scores, keep, &mut |row| row % modulus == 0)
            {
                cut.sort_unstable();
                prop_assert_eq!(cut, heap);
            }
        }

        #[test]
        fn the_candidates_are_the_heaps_however_the_scan_is_cut_and_whatever_is_admitted(
            scores in proptest::collection::vec(-40i32..40, 0..4000),
            keep in 1usize..300,
            block in 1usize..700,
            refused in 0usize..4,
            runs in 1usize..200,
        ) {
            let scores = tied(&scores);
            // Refuses one row in `refused + 1` of every other run of `runs` rows: from nothing
            // to a filter whose share its sample misjudges.
            let admits = |row: usize| refused == 0 || (row / runs).is_multiple_of(2) || !row.is_multiple_of(refused + 1);
            let mut heap = best_by_heap(&scores, keep, &mut |row| admits(row));
            heap.sort_unstable();
            let mut scan = Blocks { scores: &scores, block, scored: 0 };
            let mut asked = 0;
            let mut found = best_candidates(scores.len(), keep, &mut scan, &mut |row| {
                asked += 1;
                admits(row)
            });
            found.sort_unstable();
            prop_assert_eq!(found, heap);
            prop_assert!(scan.scored <= 2 * scan.blocks(), "{} of {}", scan.scored, scan.blocks());
            if refused == 0 && scores.len() > 2 * keep.max(SHARE_SAMPLE) {
                // Every row admitted: the sample, then only the answer's rows are asked about.
                prop_assert_eq!(asked, SHARE_SAMPLE + keep);
            }
        }

        #[test]
        fn best_rows_hold_the_best_rows_whatever_the_blocks(
            scores in proptest::collection::vec(-40i32..40, 1..3000),
            wanted in 1usize..200,
            block in 1usize..500,
        ) {
            let scores = tied(&scores);
            let best = BestRows::from_scan(
                scores.len(),
                wanted,
                &mut Blocks { scores: &scores, block, scored: 0 },
            );
            let mut all: Vec<(f32, u32)> =
                scores.iter().enumerate().map(|(r, s)| (*s, r as u32)).collect();
            all.sort_unstable_by(by_score);
            let mut held = best.rows.clone();
            held.sort_unstable_by(by_score);
            // The rows held are the best of all, however many: every row below the cut is
            // below every row held.
            prop_assert_eq!(&held[..], &all[..held.len()]);
            prop_assert!(held.len() <= 2 * wanted.max(1) + CUT_CHUNK);
            if best.cut.is_none() {
                prop_assert_eq!(held.len(), all.len());
            }
        }
    }
}
