//! HNSW tests against the exact index on clustered vectors (sentence embeddings cluster; uniform
//! random vectors would flatter nothing and exercise no near-ties).

use std::collections::HashSet;

use rand::{Rng, SeedableRng, rngs::StdRng};

use super::*;
use crate::{normalize, test_vectors::clustered_around};

fn clustered(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    clustered_around(n, dim, 32, 0.5, seed)
}

fn exact_of(vectors: &[Vec<f32>]) -> ExactIndex<u32> {
    let mut exact = ExactIndex::new(vectors[0].len());
    for (i, v) in vectors.iter().enumerate() {
        exact.insert(i as u32, v).unwrap();
    }
    exact
}

fn params() -> HnswParams {
    HnswParams { m: 8, ef_construction: 64, ef_search: 64, seed: 3 }
}

fn recall(found: &[VectorHit<u32>], truth: &[VectorHit<u32>]) -> f64 {
    let truth: HashSet<u32> = truth.iter().map(|h| h.key).collect();
    found.iter().filter(|h| truth.contains(&h.key)).count() as f64 / truth.len().max(1) as f64
}

#[test]
fn finds_nearly_all_of_the_exact_top_with_exact_scores() {
    let vectors = clustered(4000, 32, 1);
    let index = HnswIndex::build(exact_of(&vectors), params(), &mut |_, _| {}).unwrap();
    let queries = clustered(50, 32, 2);
    let mut total = 0.0;
    for q in &queries {
        let (found, trace) = index.search_traced(q, 10, &mut |_| true).unwrap();
        let truth = index.exact().search(q, 10, &mut |_| true).unwrap();
        assert!(!trace.exact_fallback);
        assert!(trace.scored < 4000 / 2, "scored {} of 4000 rows", trace.scored);
        for hit in &found {
            let exact_score = dot(&normalize(q).unwrap(), index.exact().get(hit.key).unwrap());
            assert_eq!(hit.score, exact_score, "scores are the exact cosines");
        }
        assert!(found.windows(2).all(|w| w[0].score >= w[1].score));
        total += recall(&found, &truth);
    }
    let mean = total / queries.len() as f64;
    assert!(mean >= 0.95, "recall@10 {mean}");
}

#[test]
fn the_filter_is_applied_inside_the_search_and_widens_it() {
    let vectors = clustered(4000, 32, 5);
    let index = HnswIndex::build(exact_of(&vectors), params(), &mut |_, _| {}).unwrap();
    let mut total = 0.0;
    let queries = clustered(30, 32, 6);
    for q in &queries {
        let mut asked = HashSet::new();
        let (found, trace) = index
            .search_traced(q, 10, &mut |k| {
                assert!(asked.insert(k), "asked twice about {k}");
                k % 5 == 0
            })
            .unwrap();
        assert!(!trace.exact_fallback, "20% of 4000 rows is within the graph's budget");
        assert!(!trace.exact_by_estimate);
        assert_eq!(found.len(), 10, "a filter never leaves the result short");
        assert!(found.iter().all(|h| h.key % 5 == 0));
        assert!(asked.len() < 4000, "admit was asked only about rows the search reached");
        let truth = index.exact().search(q, 10, &mut |k| k % 5 == 0).unwrap();
        total += recall(&found, &truth);
    }
    let mean = total / queries.len() as f64;
    assert!(mean >= 0.95, "filtered recall@10 {mean}");
}

#[test]
fn a_very_selective_filter_falls_back_to_the_exact_answer() {
    let vectors = clustered(3000, 16, 7);
    let index = HnswIndex::build(exact_of(&vectors), params(), &mut |_, _| {}).unwrap();
    let q = &clustered(1, 16, 8)[0];
    let admit = |k: u32| k % 500 == 7;
    // No estimate asked for (`min_admitted` 0): the traversal gives up over its budget.
    let (found, trace) = index.search_traced(q, 10, &mut |k| admit(k)).unwrap();
    assert!(trace.exact_fallback && !trace.exact_by_estimate && trace.scored > 0, "{trace:?}");
    assert_eq!(found, index.exact().search(q, 10, &mut |k| admit(k)).unwrap());
    assert_eq!(found.len(), 6);
    let (_, served) = index.search_served(q, 10, &mut |k| admit(k)).unwrap();
    assert_eq!(served, IndexKind::Exact, "the exact scan answered, and says so");
}

#[test]
fn a_filter_admitting_fewer_than_min_admitted_rows_goes_straight_to_the_exact_scan() {
    let vectors = clustered(4000, 16, 11);
    let mut index = HnswIndex::build(exact_of(&vectors), params(), &mut |_, _| {}).unwrap();
    index.set_min_admitted(1000);
    let q = &clustered(1, 16, 12)[0];
    // 400 rows (an as-of time admitting the oldest tenth, as in the bench): scanned at once.
    let (found, trace) = index.search_traced(q, 10, &mut |k| k < 400).unwrap();
    assert!(trace.exact_by_estimate && trace.scored == 0, "{trace:?}");
    assert_eq!(found, index.exact().search(q, 10, &mut |k| k < 400).unwrap());
    // The same count scattered over the rows.
    let (_, trace) = index.search_traced(q, 10, &mut |k| k % 10 == 3).unwrap();
    assert!(trace.exact_by_estimate, "{trace:?}");
    // 2000 rows: the graph, which names itself.
    let (found, trace) = index.search_traced(q, 10, &mut |k| k < 2000).unwrap();
    assert!(!trace.exact_by_estimate && trace.scored > 0, "{trace:?}");
    assert!(found.iter().all(|h| h.key < 2000) && found.len() == 10);
    let (_, served) = index.search_served(q, 10, &mut |k| k < 2000).unwrap();
    assert_eq!(served, IndexKind::Hnsw(params()));
    // An index holding fewer rows than `min_admitted` is scanned without a sample.
    index.set_min_admitted(5000);
    let mut asked = 0;
    let (found, trace) = index
        .search_traced(q, 10, &mut |_| {
            asked += 1;
            true
        })
        .unwrap();
    assert!(trace.exact_by_estimate && trace.scored == 0, "{trace:?}");
    let mut asked_by_scan = 0;
    let scanned = index
        .exact()
        .search(q, 10, &mut |_| {
            asked_by_scan += 1;
            true
        })
        .unwrap();
    assert_eq!(asked, asked_by_scan, "admit was asked by the scan only");
    assert_eq!(found, scanned);
}

#[test]
fn the_graph_does_not_depend_on_threads_or_on_how_rows_arrive() {
    let vectors = clustered(1500, 16, 9);
    let build = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| HnswIndex::build(exact_of(&vectors), params(), &mut |_, _| {}).unwrap())
    };
    let one = build(1);
    let three = build(3);
    assert_eq!(one.graph(), three.graph());

    // Rows added later are linked the same way whichever call adds them.
    let mut grown = HnswIndex::build(exact_of(&vectors[..1000]), params(), &mut |_, _| {}).unwrap();
    let rest: Vec<(u32, &[f32])> =
        vectors[1000..].iter().enumerate().map(|(i, v)| (1000 + i as u32, v.as_slice())).collect();
    grown.extend(rest.iter().copied()).unwrap();
    let mut one_by_one =
        HnswIndex::build(exact_of(&vectors[..1000]), params(), &mut |_, _| {}).unwrap();
    for (key, v) in &rest {
        one_by_one.insert(*key, v).unwrap();
    }
    let q = &clustered(1, 16, 10)[0];
    for index in [&grown, &one_by_one] {
        let (found, _) = index.search_traced(q, 10, &mut |_| true).unwrap();
        let truth = index.exact().search(q, 10, &mut |_| true).unwrap();
        assert!(recall(&found, &truth) >= 0.9);
        assert_eq!(index.len(), 1500);
    }
}

#[test]
fn every_row_is_reachable_even_among_near_duplicates() {
    // Groups of near-identical vectors inserted together: the heuristic must not leave any of
    // them without a path from the entry point.
    let mut rng = StdRng::seed_from_u64(11);
    let mut vectors = Vec::new();
    for _ in 0..60 {
        let base: Vec<f32> = (0..16).map(|_| rng.random_range(-1.0..1.0)).collect();
        for _ in 0..40 {
            vectors.push(base.iter().map(|x| x + rng.random_range(-0.001..0.001)).collect());
        }
    }
    let index = HnswIndex::build(exact_of(&vectors), params(), &mut |_, _| {}).unwrap();
    let graph = index.graph();
    let mut seen = vec![false; graph.rows()];
    let mut stack = vec![graph.entry().unwrap()];
    while let Some(row) = stack.pop() {
        if std::mem::replace(&mut seen[row as usize], true) {
            continue;
        }
        stack.extend(graph.neighbors(row, 0).iter().copied());
    }
    let unreachable = seen.iter().filter(|s| !**s).count();
    assert_eq!(unreachable, 0, "{unreachable} rows cannot be reached on layer 0");
}

#[test]
fn refuses_bad_parameters_and_answers_empty_and_small_indexes() {
    let bad = HnswParams { m: 1, ..params() };
    assert!(matches!(
        HnswIndex::<u32>::new(4, bad),
        Err(VectorError::InvalidParameter { field: "m", .. })
    ));
    let mut index = HnswIndex::<u32>::new(2, params()).unwrap();
    assert_eq!(index.search(&[1.0, 0.0], 3, &mut |_| true).unwrap(), vec![]);
    index.insert(1, &[1.0, 0.0]).unwrap();
    index.insert(2, &[0.6, 0.8]).unwrap();
    assert!(matches!(index.insert(2, &[0.0, 1.0]), Err(VectorError::DuplicateKey { .. })));
    assert_eq!(index.len(), 2);
    let hits = index.search(&[0.0, 1.0], 5, &mut |_| true).unwrap();
    assert_eq!(hits.iter().map(|h| h.key).collect::<Vec<_>>(), vec![2, 1]);
    assert_eq!(index.search(&[0.0, 1.0], 0, &mut |_| true).unwrap(), vec![]);
    assert!(matches!(
        index.search(&[0.0, 0.0], 1, &mut |_| true),
        Err(VectorError::InvalidVector { .. })
    ));
    assert_eq!(index.kind(), IndexKind::Hnsw(params()));
}

fn meta(namespace: &str) -> IndexFileMeta {
    IndexFileMeta {
        namespace: evicortex_core::Namespace::new(namespace).unwrap(),
        encoder: [7; 32],
    }
}

fn saved_index(dir: &std::path::Path) -> (HnswIndex<u32>, std::path::PathBuf) {
    let vectors = clustered(800, 16, 12);
    let mut index = HnswIndex::build(exact_of(&vectors), params(), &mut |_, _| {}).unwrap();
    index.mark_covered(TurnId::from_raw(900)).unwrap();
    let path = dir.join(index_file_name(&meta("alice").namespace, &[7; 32]));
    let bytes = index.save(&path, &meta("alice")).unwrap();
    assert_eq!(bytes, fs_err::metadata(&path).unwrap().len());
    (index, path)
}

#[test]
fn a_saved_index_loads_as_the_same_graph_and_answers_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (index, path) = saved_index(dir.path());
    let leftovers: Vec<_> = fs_err::read_dir(dir.path()).unwrap().collect();
    assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    let (header, loaded) = HnswIndex::<u32>::load(&path).unwrap();
    assert_eq!(header.meta, meta("alice"));
    assert_eq!((header.rows, header.dim, header.params), (800, 16, params()));
    assert_eq!(header.covers, Some(TurnId::from_raw(900)));
    assert_eq!(loaded.graph(), index.graph());
    assert_eq!(loaded.covers(), index.covers());
    for q in clustered(20, 16, 13) {
        assert_eq!(
            loaded.search(&q, 10, &mut |k| k % 2 == 0).unwrap(),
            index.search(&q, 10, &mut |k| k % 2 == 0).unwrap()
        );
    }
    assert!(matches!(
        HnswIndex::<TurnId>::load(&path),
        Err(IndexFileError::Corrupted { detail, .. }) if detail.contains("keys of type")
    ));
}

#[test]
fn a_damaged_or_truncated_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = saved_index(dir.path());
    let good = fs_err::read(&path).unwrap();
    for (what, bytes) in [
        ("flipped vector bit", {
            let mut b = good.clone();
            b[200] ^= 1;
            b
        }),
        ("flipped link byte", {
            let mut b = good.clone();
            let at = b.len() - 40;
            b[at] ^= 0x10;
            b
        }),
        ("truncated", good[..good.len() - 1].to_vec()),
        ("extra byte", [good.as_slice(), &[0]].concat()),
    ] {
        fs_err::write(&path, &bytes).unwrap();
        let err = HnswIndex::<u32>::load(&path).unwrap_err();
        assert!(matches!(err, IndexFileError::Corrupted { .. }), "{what}: {err}");
    }
}

#[test]
fn the_file_state_says_when_to_rebuild() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = saved_index(dir.path());
    let state = |expected: &IndexFileMeta, p: &HnswParams, erased: Option<u64>| {
        index_file_state(&path, expected, p, erased.map(TurnId::from_raw)).unwrap()
    };
    assert!(matches!(state(&meta("alice"), &params(), None), IndexFileState::Current { .. }));
    assert!(matches!(state(&meta("alice"), &params(), Some(900)), IndexFileState::Current { .. }));
    for (expected, p, erased) in [
        (meta("bob"), params(), None),
        (IndexFileMeta { encoder: [8; 32], ..meta("alice") }, params(), None),
        (meta("alice"), HnswParams { ef_search: 65, ..params() }, None),
        (meta("alice"), params(), Some(901)),
    ] {
        assert!(
            matches!(state(&expected, &p, erased), IndexFileState::Stale { .. }),
            "{expected:?} {p:?} {erased:?}"
        );
    }
    fs_err::write(&path, b"not an index").unwrap();
    assert!(matches!(state(&meta("alice"), &params(), None), IndexFileState::Stale { .. }));
    assert!(remove_index_file(&path).unwrap());
    assert!(!remove_index_file(&path).unwrap());
    assert_eq!(state(&meta("alice"), &params(), None), IndexFileState::Missing);
}
