//! Exact index tests: the int8 pass must never change the `f32` answer.

use super::*;
use proptest::prelude::*;

// Clustered vectors, like sentence embeddings: near-ties are common, which is where a wrong
// bound would show.
use crate::test_vectors::clustered;

fn build(vectors: &[Vec<f32>]) -> ExactIndex<u32> {
    let mut index = ExactIndex::new(vectors[0].len());
    for (i, v) in vectors.iter().enumerate() {
        index.insert(i as u32, v).unwrap();
    }
    index
}

#[test]
fn equals_the_f32_scan_on_clustered_vectors() {
    let vectors = clustered(3000, 96, 7);
    let index = build(&vectors);
    let queries = clustered(20, 96, 8);
    for (qi, q) in queries.iter().enumerate() {
        for n in [1, 10, 50] {
            let fast = index.search(q, n, &mut |k| k % 3 != 0).unwrap();
            let reference = index.search_f32_scan(q, n, &mut |k| k % 3 != 0).unwrap();
            assert_eq!(fast, reference, "query {qi}, n = {n}");
            assert!(fast.iter().all(|h| h.key % 3 != 0));
        }
    }
}

#[test]
fn asks_admit_only_about_rows_that_could_enter_the_top() {
    let vectors = clustered(3000, 96, 9);
    let index = build(&vectors);
    let query = &clustered(1, 96, 10)[0];
    let mut asked = Vec::new();
    let fast = index
        .search(query, 5, &mut |k| {
            asked.push(k);
            k % 2 == 0
        })
        .unwrap();
    assert_eq!(fast, index.search_f32_scan(query, 5, &mut |k| k % 2 == 0).unwrap());
    let distinct: std::collections::HashSet<u32> = asked.iter().copied().collect();
    assert_eq!(distinct.len(), asked.len(), "a row was asked about twice");
    assert!(asked.len() < 1000, "admit asked about {} of 3000 rows", asked.len());
}

#[test]
fn search_among_is_the_scan_restricted_to_the_keys() {
    let vectors = clustered(2000, 64, 11);
    let index = build(&vectors);
    let query = &clustered(1, 64, 12)[0];
    let among: Vec<u32> = (0..2000).filter(|k| k % 5 != 1).collect();
    // Repeated keys and keys without a row change nothing.
    let keys = among.iter().copied().chain([7, 7, 4000, 4001]);
    let found = index.search_among(query, 30, keys, &mut |k| k % 2 == 0).unwrap();
    let reference = index.search_f32_scan(query, 30, &mut |k| k % 2 == 0 && k % 5 != 1).unwrap();
    assert_eq!(found, reference);
    let all = index.search_among(query, 10, 0..2000, &mut |_| true).unwrap();
    assert_eq!(all, index.search(query, 10, &mut |_| true).unwrap());
    assert_eq!(index.search_among(query, 10, [], &mut |_| true).unwrap(), vec![]);
}

#[test]
fn a_sketched_search_scores_exactly_and_finds_the_exact_top_when_candidates_cover_it() {
    let vectors = clustered(3000, 96, 13);
    let mut index = build(&vectors);
    // Edited rows keep their sketch in step with their vectors.
    index.upsert(17, &vectors[2000]).unwrap();
    assert!(index.remove(2999));
    let queries = clustered(10, 96, 14);
    for q in &queries {
        let exact = index.search(q, 20, &mut |_| true).unwrap();
        // Every row a candidate: the exact answer.
        assert_eq!(index.search_sketched(q, 20, 3000, &mut |_| true).unwrap(), exact);
        // A filter admitting fewer rows than the candidates: the exact answer too.
        let few = |k: u32| k % 200 == 3;
        assert_eq!(
            index.search_sketched(q, 5, 100, &mut |k| few(k)).unwrap(),
            index.search(q, 5, &mut |k| few(k)).unwrap()
        );
        // Fewer candidates: the scores are the rows' exact ones (how much of the exact top is
        // found depends on the embeddings: `bench ann run --sketch` audits it on real ones).
        let sketched = index.search_sketched(q, 20, 300, &mut |_| true).unwrap();
        assert_eq!(sketched.len(), 20);
        for hit in &sketched {
            let reference = index.search_among(q, 1, [hit.key], &mut |_| true).unwrap();
            assert_eq!(reference[0].score, hit.score);
        }
    }
}

#[test]
fn a_pooled_sketch_search_gives_the_same_hits_and_a_pool_led_by_them() {
    let vectors = clustered(3000, 96, 15);
    let index = build(&vectors);
    let admit = |k: u32| !k.is_multiple_of(3);
    for q in &clustered(8, 96, 16) {
        let (hits, pooled) =
            index.search_sketched_pooled(q, 20, 150, 400, &mut |k| admit(k)).unwrap();
        assert_eq!(hits, index.search_sketched(q, 20, 400, &mut |k| admit(k)).unwrap());
        assert_eq!(pooled.len(), 150);
        let keys: Vec<u32> = hits.iter().map(|h| h.key).collect();
        assert_eq!(pooled[..20], keys[..]);
        let distinct: std::collections::HashSet<u32> = pooled.iter().copied().collect();
        assert_eq!(distinct.len(), pooled.len());
        assert!(pooled.iter().all(|&k| admit(k)));
        // Every row a candidate: the pool is the exact top 150 up to the `i8` error at its
        // edge.
        let (_, all) = index.search_sketched_pooled(q, 20, 150, 3000, &mut |k| admit(k)).unwrap();
        let exact = index.search(q, 150, &mut |k| admit(k)).unwrap();
        let shared = exact.iter().filter(|h| all.contains(&h.key)).count();
        assert!(shared >= 145, "{shared} of the exact top 150 in the pool");
        // A pool smaller than the hits is their head; no hits, the pool alone.
        let (hits, head) = index.search_sketched_pooled(q, 20, 5, 400, &mut |_| true).unwrap();
        assert_eq!(head, hits[..5].iter().map(|h| h.key).collect::<Vec<_>>());
        let (none, pool) = index.search_sketched_pooled(q, 0, 30, 400, &mut |_| true).unwrap();
        assert_eq!((none.len(), pool.len()), (0, 30));
    }
}

#[test]
fn refuses_bad_vectors_and_duplicates() {
    let mut index = ExactIndex::<u32>::new(2);
    assert!(matches!(index.insert(1, &[1.0]), Err(VectorError::DimensionMismatch { .. })));
    assert!(matches!(index.insert(1, &[0.0, 0.0]), Err(VectorError::InvalidVector { .. })));
    index.insert(1, &[1.0, 0.0]).unwrap();
    assert!(matches!(index.insert(1, &[0.0, 1.0]), Err(VectorError::DuplicateKey { .. })));
    assert!(matches!(
        index.search(&[f32::NAN, 0.0], 1, &mut |_| true),
        Err(VectorError::InvalidVector { .. })
    ));
    assert_eq!(index.search(&[1.0, 1.0], 0, &mut |_| true).unwrap(), vec![]);
}

proptest! {
    #[test]
    fn replaced_and_removed_rows_search_like_a_fresh_build(
        seed in 0u64..1000,
        len in 1usize..200,
        edits in proptest::collection::vec((0u32..250, any::<bool>()), 0..120),
        n in 1usize..30,
    ) {
        let vectors = clustered(len + 250, 24, seed);
        let mut index = build(&vectors[..len]);
        let mut live: std::collections::BTreeMap<u32, usize> =
            (0..len as u32).map(|k| (k, k as usize)).collect();
        for (step, (key, remove)) in edits.into_iter().enumerate() {
            if remove {
                prop_assert_eq!(index.remove(key), live.remove(&key).is_some());
            } else {
                let source = len + step % 250;
                index.upsert(key, &vectors[source]).unwrap();
                live.insert(key, source);
            }
        }
        let mut fresh = ExactIndex::<u32>::new(24);
        for (key, source) in &live {
            fresh.insert(*key, &vectors[*source]).unwrap();
        }
        prop_assert_eq!(index.row_map().len(), live.len());
        let query = &clustered(1, 24, seed + 1)[0];
        let edited = index.search(query, n, &mut |k| k % 3 != 1).unwrap();
        prop_assert_eq!(&edited, &fresh.search(query, n, &mut |k| k % 3 != 1).unwrap());
        prop_assert_eq!(edited, index.search_f32_scan(query, n, &mut |k| k % 3 != 1).unwrap());
    }

    #[test]
    fn oracle_any_size_filter_and_n(
        seed in 0u64..1000,
        len in 1usize..300,
        n in 1usize..40,
        modulus in 1u32..5,
    ) {
        let vectors = clustered(len, 24, seed);
        let index = build(&vectors);
        let query = &clustered(1, 24, seed + 1)[0];
        let fast = index.search(query, n, &mut |k| k % modulus == 0).unwrap();
        let reference = index.search_f32_scan(query, n, &mut |k| k % modulus == 0).unwrap();
        prop_assert_eq!(fast, reference);
    }
}

#[test]
fn removing_keys_keeps_the_order_and_searches_like_building_without_them() {
    let vectors = clustered(500, 32, 21);
    let mut index = build(&vectors);
    assert_eq!(index.remove_where(|k| k % 7 == 3), 71);
    let mut kept = ExactIndex::new(32);
    for (k, v) in vectors.iter().enumerate().filter(|&(k, _)| k % 7 != 3) {
        kept.insert(k as u32, v).unwrap();
    }
    assert_eq!(index.row_map().keys(), kept.row_map().keys());
    for q in &clustered(5, 32, 22) {
        assert_eq!(
            index.search(q, 15, &mut |_| true).unwrap(),
            kept.search(q, 15, &mut |_| true).unwrap()
        );
        assert_eq!(
            index.search_sketched(q, 15, 40, &mut |_| true).unwrap(),
            kept.search_sketched(q, 15, 40, &mut |_| true).unwrap()
        );
    }
    assert_eq!(index.remove_where(|_| false), 0);
}
