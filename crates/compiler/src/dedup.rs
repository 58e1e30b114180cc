//! Dedup of identical evidence inside ranked lists: each key is replaced by its group's
//! representative (the earliest admitted copy), and later copies are dropped from the list.

use std::{collections::HashSet, hash::Hash};

use crate::{RankedList, ScoredKey};

/// A key dropped because its representative already holds its place.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Duplicate<K> {
    /// The dropped key.
    pub key: K,
    /// The key kept in its place.
    pub kept: K,
}

/// Replaces every key by `representative(key)` and keeps only the first (best-ranked) occurrence
/// of each representative in each list; ranks close up. Idempotent when `representative` maps a
/// representative to itself. Returns the lists and every key dropped or replaced, in list order.
pub fn dedup_ranked_lists<K: Copy + Eq + Hash>(
    lists: &[RankedList<K>],
    representative: impl Fn(K) -> K,
) -> (Vec<RankedList<K>>, Vec<Duplicate<K>>) {
    let mut duplicates = Vec::new();
    let mut seen_dup = HashSet::new();
    let deduped = lists
        .iter()
        .map(|list| {
            let mut seen = HashSet::new();
            let mut hits = Vec::with_capacity(list.hits.len());
            for hit in &list.hits {
                let kept = representative(hit.key);
                if kept != hit.key && seen_dup.insert(hit.key) {
                    duplicates.push(Duplicate { key: hit.key, kept });
                }
                if seen.insert(kept) {
                    hits.push(ScoredKey { key: kept, score: hit.score });
                }
            }
            RankedList { retriever: list.retriever, hits }
        })
        .collect();
    (deduped, duplicates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Retriever;
    use proptest::prelude::*;

    fn list(keys: &[u32]) -> RankedList<u32> {
        RankedList {
            retriever: Retriever::Lexical,
            hits: keys
                .iter()
                .enumerate()
                .map(|(i, &key)| ScoredKey { key, score: 100.0 - i as f32 })
                .collect(),
        }
    }

    #[test]
    fn keeps_the_representative_at_the_best_rank() {
        // 7 and 3 are copies of 3 (the earliest).
        let (lists, dups) =
            dedup_ranked_lists(&[list(&[5, 7, 3, 9])], |k| if k == 7 { 3 } else { k });
        assert_eq!(lists[0].hits.iter().map(|h| h.key).collect::<Vec<_>>(), vec![5, 3, 9]);
        assert_eq!(lists[0].hits[1].score, 99.0);
        assert_eq!(dups, vec![Duplicate { key: 7, kept: 3 }]);
    }

    proptest! {
        #[test]
        fn dedup_is_idempotent(keys in prop::collection::vec(0u32..40, 0..60), groups in 1u32..10) {
            let mut unique = keys.clone();
            unique.dedup();
            let mut seen = HashSet::new();
            unique.retain(|k| seen.insert(*k));
            // Group representative: smallest key with the same residue.
            let rep = |k: u32| k % groups;
            let (once, _) = dedup_ranked_lists(&[list(&unique)], rep);
            let (twice, dups) = dedup_ranked_lists(&once, rep);
            prop_assert_eq!(&once, &twice);
            prop_assert!(dups.is_empty());
            let out: Vec<u32> = once[0].hits.iter().map(|h| h.key).collect();
            let mut sorted = out.clone();
            sorted.sort();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), out.len());
        }
    }
}
