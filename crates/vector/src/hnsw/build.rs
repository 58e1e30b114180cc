//! Linking new rows into the graph, in parallel and deterministically.
//!
//! Rows are linked in batches. For every row of a batch, in parallel, the graph as it stood
//! before the batch is searched (as in sequential HNSW construction, `ef_construction` wide on
//! each layer) and the batch's other rows are added to the candidates, so rows inserted together
//! still link to each other (sentences of one turn arrive together and are each other's nearest
//! neighbours); the row's links are chosen from these by the HNSW heuristic. Then every row that
//! gains reverse links is updated, in parallel, each by one task from its sorted additions, and
//! pruned by the same heuristic when over capacity. Nothing depends on thread timing: the graph
//! is a function of the vectors, their order and the parameters.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::{
    HnswParams,
    graph::{Graph, level_of},
    search::{Scored, Visited, beam, greedy},
};
use crate::{distance::dot, exact::OrderedScore};

/// Rows linked together at most; small next to the graph so that batching costs no quality.
const MAX_BATCH: usize = 256;

/// Links rows `graph.rows()..vectors.len() / dim` of `vectors` (unit rows, row-major) into
/// `graph`; `progress(linked, total)` after each batch.
pub(crate) fn link_new_rows(
    graph: &mut Graph,
    vectors: &[f32],
    dim: usize,
    params: &HnswParams,
    visited: &mut [Visited],
    progress: &mut dyn FnMut(usize, usize),
) {
    let total = vectors.len() / dim;
    let first = graph.rows();
    for row in first..total {
        graph.push_row(level_of(row as u32, params.seed, graph.m()));
    }
    let mut next = first;
    while next < total {
        let size = (next / 4).clamp(1, MAX_BATCH).min(total - next);
        let batch = next as u32..(next + size) as u32;
        link_batch(graph, vectors, dim, params.ef_construction, batch, visited);
        next += size;
        progress(next - first, total - first);
    }
}

fn link_batch(
    graph: &mut Graph,
    vectors: &[f32],
    dim: usize,
    ef_construction: usize,
    batch: std::ops::Range<u32>,
    visited: &mut [Visited],
) {
    let rows: Vec<u32> = batch.clone().collect();
    let per_task = rows.len().div_ceil(visited.len());
    let frozen: &Graph = graph;
    let plans: Vec<Vec<Vec<u32>>> = rows
        .par_chunks(per_task)
        .zip(visited.par_iter_mut())
        .flat_map_iter(|(chunk, visited)| {
            pulp::Arch::new().dispatch(|| {
                chunk
                    .iter()
                    .map(|&row| {
                        plan_links(frozen, vectors, dim, ef_construction, row, &batch, visited)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();

    // Forward links, then the reverse links they imply, grouped by the row that receives them.
    let mut incoming: BTreeMap<(u32, u8), Vec<u32>> = BTreeMap::new();
    for (&row, links) in rows.iter().zip(&plans) {
        for (layer, targets) in links.iter().enumerate() {
            graph.set_neighbors(row, layer as u8, targets);
            for &target in targets {
                incoming.entry((target, layer as u8)).or_default().push(row);
            }
        }
    }
    let frozen: &Graph = graph;
    let updates: Vec<(NodeLayer, Option<Vec<u32>>)> = incoming
        .into_par_iter()
        .map(|((target, layer), added)| {
            let merged = pulp::Arch::new()
                .dispatch(|| add_reverse_links(frozen, vectors, dim, target, layer, &added));
            ((target, layer), merged)
        })
        .collect();
    for ((target, layer), links) in updates {
        if let Some(links) = links {
            graph.set_neighbors(target, layer, &links);
        }
    }

    for row in batch {
        let top = graph.entry().map(|e| graph.level(e));
        if top.is_none_or(|top| graph.level(row) > top) {
            graph.set_entry(row);
        }
    }
}

/// The links of `row` on each of its layers, chosen among the graph's rows found by search and
/// the batch's other rows on that layer.
#[inline(always)]
fn plan_links(
    graph: &Graph,
    vectors: &[f32],
    dim: usize,
    ef_construction: usize,
    row: u32,
    batch: &std::ops::Range<u32>,
    visited: &mut Visited,
) -> Vec<Vec<u32>> {
    let vector = unit(vectors, dim, row);
    let mut score = |other: u32| dot(vector, unit(vectors, dim, other));
    let level = graph.level(row);
    let mut from_graph: Vec<Vec<Scored>> = vec![Vec::new(); level as usize + 1];
    if let Some(entry) = graph.entry() {
        let top = graph.level(entry);
        let mut best = (OrderedScore(score(entry)), entry);
        for layer in (level.saturating_add(1)..=top).rev() {
            best = greedy(graph, layer, best, &mut score);
        }
        let mut entries = vec![best];
        for layer in (0..=level.min(top)).rev() {
            visited.reset(graph.rows());
            let found = beam(graph, layer, &entries, ef_construction, visited, &mut score);
            entries.clone_from(&found);
            from_graph[layer as usize] = found;
        }
    }
    let mut links = Vec::with_capacity(level as usize + 1);
    for (layer, found) in from_graph.into_iter().enumerate() {
        let mut candidates = found;
        for other in batch.clone() {
            if other != row && graph.level(other) >= layer as u8 {
                candidates.push((OrderedScore(score(other)), other));
            }
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        links.push(select_neighbors(vectors, dim, &candidates, graph.m()));
    }
    links
}

/// `target`'s links on `layer` with `added` appended, pruned by the heuristic when over capacity;
/// `None` when nothing changes.
#[inline(always)]
fn add_reverse_links(
    graph: &Graph,
    vectors: &[f32],
    dim: usize,
    target: u32,
    layer: u8,
    added: &[u32],
) -> Option<Vec<u32>> {
    let current = graph.neighbors(target, layer);
    let mut merged = current.to_vec();
    for &row in added {
        if !merged.contains(&row) {
            merged.push(row);
        }
    }
    if merged.len() == current.len() {
        return None;
    }
    let capacity = graph.capacity(layer);
    if merged.len() <= capacity {
        return Some(merged);
    }
    let vector = unit(vectors, dim, target);
    let mut candidates: Vec<Scored> = merged
        .iter()
        .map(|&row| (OrderedScore(dot(vector, unit(vectors, dim, row))), row))
        .collect();
    candidates.sort_unstable_by(|a, b| b.cmp(a));
    Some(select_neighbors(vectors, dim, &candidates, capacity))
}

/// The HNSW neighbour heuristic: walking the candidates from the most similar, keeps one unless
/// it is more similar to a kept neighbour than to the base row (that neighbour already leads
/// towards it), up to `m`. Keeps every candidate when there are at most `m`.
#[inline(always)]
fn select_neighbors(vectors: &[f32], dim: usize, candidates: &[Scored], m: usize) -> Vec<u32> {
    if candidates.len() <= m {
        return candidates.iter().map(|c| c.1).collect();
    }
    let mut kept: Vec<u32> = Vec::with_capacity(m);
    for &(OrderedScore(similarity), row) in candidates {
        if kept.len() == m {
            break;
        }
        let vector = unit(vectors, dim, row);
        if kept.iter().all(|&k| dot(vector, unit(vectors, dim, k)) <= similarity) {
            kept.push(row);
        }
    }
    kept
}

#[inline(always)]
fn unit(vectors: &[f32], dim: usize, row: u32) -> &[f32] {
    let start = row as usize * dim;
    &vectors[start..start + dim]
}

/// A node and one of its layers.
type NodeLayer = (u32, u8);
