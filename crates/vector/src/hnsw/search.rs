//! Searching one layer of the graph: the beam search of construction, and the filtered beam
//! search of queries, in which the admission predicate is asked during the traversal.

use std::{cmp::Reverse, collections::BinaryHeap};

use super::graph::Graph;
use crate::exact::OrderedScore;

/// A row with its similarity to the query; ordered by similarity, then by row (so every heap
/// order, and therefore every graph built, is deterministic).
pub(crate) type Scored = (OrderedScore, u32);

/// Rows seen during one search: a mark per row, reset in O(1) by moving to the next epoch.
#[derive(Debug, Clone)]
pub(crate) struct Visited {
    marks: Vec<u32>,
    epoch: u32,
    count: usize,
}

impl Visited {
    pub(crate) fn new(rows: usize) -> Visited {
        Visited { marks: vec![0; rows], epoch: 0, count: 0 }
    }

    /// Forgets every row and makes room for `rows`.
    pub(crate) fn reset(&mut self, rows: usize) {
        if self.marks.len() < rows {
            self.marks.resize(rows, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.fill(0);
            self.epoch = 1;
        }
        self.count = 0;
    }

    /// Marks `row`; `false` if it was already marked.
    #[inline(always)]
    pub(crate) fn insert(&mut self, row: u32) -> bool {
        let mark = &mut self.marks[row as usize];
        if *mark == self.epoch {
            return false;
        }
        *mark = self.epoch;
        self.count += 1;
        true
    }

    /// Rows marked since the last reset.
    pub(crate) fn count(&self) -> usize {
        self.count
    }
}

/// Follows the best link on `layer` from `start` until no link improves the similarity.
#[inline(always)]
pub(crate) fn greedy(
    graph: &Graph,
    layer: u8,
    start: Scored,
    score: &mut impl FnMut(u32) -> f32,
) -> Scored {
    let mut best = start;
    loop {
        let mut moved = false;
        for &row in graph.neighbors(best.1, layer) {
            let candidate = (OrderedScore(score(row)), row);
            if candidate > best {
                best = candidate;
                moved = true;
            }
        }
        if !moved {
            return best;
        }
    }
}

/// The `ef` rows most similar to the query reachable on `layer` from `entries`, best first.
#[inline(always)]
pub(crate) fn beam(
    graph: &Graph,
    layer: u8,
    entries: &[Scored],
    ef: usize,
    visited: &mut Visited,
    score: &mut impl FnMut(u32) -> f32,
) -> Vec<Scored> {
    let mut candidates: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef * 4);
    let mut found: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(ef + 1);
    for &entry in entries {
        if visited.insert(entry.1) {
            candidates.push(entry);
            found.push(Reverse(entry));
            if found.len() > ef {
                found.pop();
            }
        }
    }
    while let Some(current) = candidates.pop() {
        if found.len() >= ef && found.peek().is_some_and(|Reverse(worst)| current < *worst) {
            break;
        }
        for &row in graph.neighbors(current.1, layer) {
            if !visited.insert(row) {
                continue;
            }
            let next = (OrderedScore(score(row)), row);
            if found.len() < ef || found.peek().is_some_and(|Reverse(worst)| next > *worst) {
                candidates.push(next);
                found.push(Reverse(next));
                if found.len() > ef {
                    found.pop();
                }
            }
        }
    }
    let mut out: Vec<Scored> = found.into_iter().map(|Reverse(s)| s).collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    out
}

/// How a filtered search ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum BeamEnd {
    /// The beam converged (or every reachable row was seen).
    Converged,
    /// More than `budget` rows were scored before `ef` admitted rows were found.
    OverBudget,
}

/// The filtered beam search on layer 0: every reachable row may be traversed, but only rows
/// `admit` accepts enter the result, and `admit` is asked only about rows similar enough to
/// enter it. While fewer than `ef` admitted rows are known, the beam keeps widening: a
/// selective filter makes the search look further instead of returning fewer rows. Gives up
/// once `budget` rows are scored with fewer than `ef` admitted rows found.
#[inline(always)]
pub(crate) fn filtered_beam(
    graph: &Graph,
    entry: Scored,
    ef: usize,
    budget: usize,
    visited: &mut Visited,
    score: &mut impl FnMut(u32) -> f32,
    admit: &mut dyn FnMut(u32) -> bool,
) -> (Vec<Scored>, BeamEnd) {
    let mut candidates: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef * 4);
    let mut found: BinaryHeap<Reverse<Scored>> = BinaryHeap::with_capacity(ef + 1);
    visited.insert(entry.1);
    candidates.push(entry);
    if admit(entry.1) {
        found.push(Reverse(entry));
    }
    while let Some(current) = candidates.pop() {
        if found.len() >= ef && found.peek().is_some_and(|Reverse(worst)| current < *worst) {
            break;
        }
        if found.len() < ef && visited.count() > budget {
            return (Vec::new(), BeamEnd::OverBudget);
        }
        for &row in graph.neighbors(current.1, 0) {
            if !visited.insert(row) {
                continue;
            }
            let next = (OrderedScore(score(row)), row);
            if found.len() < ef || found.peek().is_some_and(|Reverse(worst)| next > *worst) {
                candidates.push(next);
                if admit(row) {
                    found.push(Reverse(next));
                    if found.len() > ef {
                        found.pop();
                    }
                }
            }
        }
    }
    let mut out: Vec<Scored> = found.into_iter().map(|Reverse(s)| s).collect();
    out.sort_unstable_by(|a, b| b.cmp(a));
    (out, BeamEnd::Converged)
}
