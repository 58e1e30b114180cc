//! Reciprocal-rank fusion: a key at rank r (from 1) of a list adds `weight / (k + r)`. Raw scores
//! of different retrievers are never added.

use std::{collections::HashMap, hash::Hash};

use crate::{RankedList, Retriever};

/// One fused candidate.
#[derive(Clone, Debug, PartialEq)]
pub struct FusedHit<K> {
    /// The record (or chunk).
    pub key: K,
    /// Σ weight / (k + rank) over the lists that ranked it.
    pub score: f64,
    /// Its rank in each list that has it, by retriever order.
    pub ranks: Vec<(Retriever, u32)>,
}

/// Fuses ranked lists with RRF constant `k`, every list weighted 1. The result is ordered by
/// descending fused score, ties by ascending key, and does not depend on the order of `lists`
/// (contributions are summed in retriever order).
pub fn rrf_fuse<K: Copy + Ord + Hash>(lists: &[RankedList<K>], k: f32) -> Vec<FusedHit<K>> {
    let mut order: Vec<&RankedList<K>> = lists.iter().collect();
    order.sort_by_key(|l| l.retriever);
    let mut fused: HashMap<K, FusedHit<K>> = HashMap::new();
    for list in order {
        for (i, hit) in list.hits.iter().enumerate() {
            let rank = i as u32 + 1;
            let entry = fused.entry(hit.key).or_insert_with(|| FusedHit {
                key: hit.key,
                score: 0.0,
                ranks: Vec::new(),
            });
            entry.score += rrf_term(k, rank, 1.0);
            entry.ranks.push((list.retriever, rank));
        }
    }
    let mut fused: Vec<FusedHit<K>> = fused.into_values().collect();
    sort_fused(&mut fused);
    fused
}

/// The contribution of rank `rank` (from 1) with constant `k` and `weight`.
pub fn rrf_term(k: f32, rank: u32, weight: f32) -> f64 {
    f64::from(weight) / (f64::from(k) + f64::from(rank))
}

/// Orders by descending score, ties by ascending key.
pub fn sort_fused<K: Ord>(fused: &mut [FusedHit<K>]) {
    fused.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ScoredKey;
    use proptest::prelude::*;

    fn list(retriever: Retriever, keys: &[u32]) -> RankedList<u32> {
        RankedList {
            retriever,
            hits: keys.iter().map(|&key| ScoredKey { key, score: 1.0 }).collect(),
        }
    }

    #[test]
    fn agreement_beats_a_single_first_place() {
        let fused = rrf_fuse(
            &[list(Retriever::Lexical, &[1, 2, 3]), list(Retriever::Dense, &[4, 2, 1])],
            60.0,
        );
        let keys: Vec<u32> = fused.iter().map(|f| f.key).collect();
        assert_eq!(keys, vec![1, 2, 4, 3]);
        assert_eq!(fused[1].ranks, vec![(Retriever::Lexical, 2), (Retriever::Dense, 2)]);
        assert!((fused[1].score - 2.0 / 62.0).abs() < 1e-12);
    }

    proptest! {
        #[test]
        fn fusion_does_not_depend_on_list_order(
            a in prop::collection::btree_set(0u32..50, 0..30),
            b in prop::collection::btree_set(0u32..50, 0..30),
            shuffle_a in any::<u64>(),
            k in 1.0f32..100.0,
        ) {
            let mut a: Vec<u32> = a.into_iter().collect();
            let b: Vec<u32> = b.into_iter().collect();
            a.sort_by_key(|x| (u64::from(*x).wrapping_mul(shuffle_a | 1)) % 97);
            let lists = [list(Retriever::Lexical, &a), list(Retriever::Dense, &b)];
            let reversed = [lists[1].clone(), lists[0].clone()];
            prop_assert_eq!(rrf_fuse(&lists, k), rrf_fuse(&reversed, k));
        }
    }
}
