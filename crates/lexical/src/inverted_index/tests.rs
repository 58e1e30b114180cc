//! Inverted index tests: BM25 scores against a direct computation, and the score bounds
//! that pruned searches rely on.

use super::*;
use crate::analyze;
use proptest::prelude::*;

fn params() -> Bm25Params {
    Bm25Params { k1: 1.2, b: 0.75 }
}

fn index(texts: &[&str]) -> Bm25Index<u32> {
    let mut index = Bm25Index::new(params());
    for (i, text) in texts.iter().enumerate() {
        index.add(i as u32, text).unwrap();
    }
    index
}

/// The formula evaluated directly, document by document.
fn naive(texts: &[&str], query: &str) -> Vec<(u32, f32)> {
    let docs: Vec<Vec<String>> = texts.iter().map(|t| analyze(t)).collect();
    let avg = docs.iter().map(Vec::len).sum::<usize>() as f32 / docs.len() as f32;
    let mut q = analyze(query);
    q.sort();
    q.dedup();
    let norm = LengthNorm::new(params(), avg);
    let mut out = Vec::new();
    for (i, doc) in docs.iter().enumerate() {
        let mut score = 0.0f32;
        let mut matched = false;
        for term in &q {
            let tf = doc.iter().filter(|t| *t == term).count() as u32;
            if tf > 0 {
                matched = true;
                let df = docs.iter().filter(|d| d.contains(term)).count();
                score += norm.weight(bm25_idf(docs.len(), df), tf, doc.len() as u32);
            }
        }
        if matched {
            out.push((i as u32, score));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

#[test]
fn ranks_rare_terms_and_applies_filter_before_cut() {
    let texts = ["lisbon trip in may", "the trip was long", "lisbon lisbon lisbon", "unrelated"];
    let idx = index(&texts);
    let hits = idx.search(&analyze("Lisbon trip"), 2, |_| true);
    assert_eq!(hits.iter().map(|h| h.key).collect::<Vec<_>>(), vec![0, 2]);
    // Filtering the two best still yields two hits: the filter runs before the cut.
    let hits = idx.search(&analyze("Lisbon trip"), 2, |k| k != 0 && k != 2);
    assert_eq!(hits.iter().map(|h| h.key).collect::<Vec<_>>(), vec![1]);
    assert!(idx.search(&analyze("nothing matches"), 5, |_| true).is_empty());
}

#[test]
fn refuses_duplicate_keys_and_backwards_coverage() {
    let mut idx = index(&["a"]);
    assert!(matches!(idx.add(0, "b"), Err(LexicalError::DuplicateKey { .. })));
    idx.mark_covered(TurnId::from_raw(5)).unwrap();
    assert!(matches!(
        idx.mark_covered(TurnId::from_raw(4)),
        Err(LexicalError::CoverageBackwards { .. })
    ));
    assert_eq!(idx.covers(), Some(TurnId::from_raw(5)));
}

#[test]
fn a_replace_checks_the_text_it_replaces() {
    let mut idx = index(&["alpha beta", "gamma"]);
    let stale = idx.replace(0, "alpha gamma", "delta");
    assert!(matches!(stale, Err(LexicalError::StaleDocument { .. })), "{stale:?}");
    assert!(matches!(idx.replace(7, "a", "b"), Err(LexicalError::UnknownKey { .. })));
    assert_eq!(idx.search(&analyze("alpha"), 5, |_| true).len(), 1, "nothing changed");
    idx.replace(0, "alpha beta", "delta delta").unwrap();
    assert!(idx.search(&analyze("alpha"), 5, |_| true).is_empty());
    assert_eq!(idx.search(&analyze("delta"), 5, |_| true)[0].key, 0);
}

/// Whether every term's bound is at least each of its postings' weights under the index's
/// norm now (within the few roundings MaxScore's margin allows for); the first term and
/// posting it fails at otherwise.
pub(crate) fn bounds_hold<K: Copy + Eq + Hash + Ord + Debug>(
    idx: &Bm25Index<K>,
) -> Result<(), String> {
    let norm = idx.length_norm();
    for term in idx.term_ids.keys() {
        let [query] = &idx.query_terms(std::slice::from_ref(term), norm)[..] else {
            return Err(format!("{term:?} has no list"));
        };
        for p in query.postings {
            let weight = norm.weight(query.idf, p.tf, idx.doc_len[p.row as usize]);
            if query.bound < weight * (1.0 - 4.0 * f32::EPSILON) {
                return Err(format!("{term:?}: bound {} under {weight} ({p:?})", query.bound));
            }
        }
    }
    Ok(())
}

#[test]
fn a_common_term_is_bounded_by_its_largest_weight_not_its_extremes() {
    // "note" is in one short document once and in a long one often: the largest frequency
    // with the shortest length bounds it far above either posting's weight.
    let idx = index(&["note", "note note note note a b c d e f g h i j k l m n o p q r s t"]);
    let norm = idx.length_norm();
    let [note] = &idx.query_terms(&["note".to_owned()], norm)[..] else { panic!() };
    let loose = norm.weight(note.idf, 4, 1);
    let largest = note
        .postings
        .iter()
        .map(|p| norm.weight(note.idf, p.tf, idx.doc_len[p.row as usize]))
        .fold(0.0, f32::max);
    assert!(note.bound < 0.9 * loose, "bound {} against {loose}", note.bound);
    assert!(note.bound >= largest, "bound {} under {largest}", note.bound);
    bounds_hold(&idx).unwrap();
}

proptest! {
    #[test]
    fn bounds_hold_as_documents_grow_and_are_replaced(
        // Lengths rise with the row, so the average passes the norm the bounds were kept
        // under again and again, by adds and by replaces.
        docs in prop::collection::vec(
            (prop::collection::vec(0u8..6, 1..4), 1usize..6), 1..60),
        replacements in prop::collection::vec((0usize..60, 1usize..40), 0..12),
    ) {
        let words = ["alpha", "beta", "gamma", "delta", "eta", "zeta"];
        let text = |picks: &[u8], repeat: usize| -> String {
            let doc: Vec<&str> = picks.iter().map(|&w| words[w as usize]).collect();
            vec![doc.join(" "); repeat].join(" ")
        };
        let mut idx = Bm25Index::new(params());
        let mut current = Vec::new();
        for (row, (picks, repeat)) in docs.iter().enumerate() {
            let doc = text(picks, repeat * (row + 1));
            idx.add(row as u32, &doc).unwrap();
            current.push(doc);
            prop_assert!(bounds_hold(&idx).is_ok(), "{:?}", bounds_hold(&idx));
        }
        for (at, repeat) in replacements {
            let at = at % current.len();
            let doc = text(&docs[(at + 1) % docs.len()].0, repeat);
            idx.replace(at as u32, &current[at], &doc).unwrap();
            current[at] = doc;
            prop_assert!(bounds_hold(&idx).is_ok(), "{:?}", bounds_hold(&idx));
        }
        for query in ["alpha", "beta gamma", "zeta delta eta", "alpha beta gamma delta"] {
            let terms = analyze(query);
            for n in [1, 3] {
                prop_assert_eq!(
                    idx.search_max_score(&terms, n, |_| true),
                    idx.search_exhaustive(&terms, n, |_| true)
                );
            }
        }
    }
}

proptest! {
    #[test]
    fn replacing_documents_scores_like_building_with_the_new_texts(
        texts in prop::collection::vec("(alpha|beta|gamma|delta|x-1|v2.0| ){1,12}", 2..30),
        replacements in prop::collection::vec(
            (0usize..30, "(alpha|beta|gamma|zeta|eta| ){0,12}"), 1..20),
        n in 1usize..12,
    ) {
        let mut current: Vec<String> = texts.clone();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut replaced = index(&refs);
        for (at, text) in replacements {
            let at = at % current.len();
            replaced.replace(at as u32, &current[at], &text).unwrap();
            current[at] = text;
        }
        let refs: Vec<&str> = current.iter().map(String::as_str).collect();
        let built = index(&refs);
        for query in ["alpha", "beta gamma", "zeta x-1", "eta alpha delta", "v2.0 beta"] {
            let terms = analyze(query);
            prop_assert_eq!(replaced.search(&terms, n, |_| true), built.search(&terms, n, |_| true));
            prop_assert_eq!(
                replaced.search_max_score(&terms, n, |_| true),
                built.search_exhaustive(&terms, n, |_| true)
            );
        }
    }

    #[test]
    fn agrees_with_the_formula(
        texts in prop::collection::vec("(alpha|beta|gamma|delta|x-1|v2.0| ){1,12}", 1..30),
        query in "(alpha|beta|gamma|zeta|x-1| ){1,6}",
        n in 1usize..10,
    ) {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let idx = index(&refs);
        let got = idx.search(&analyze(&query), n, |_| true);
        let want = naive(&refs, &query);
        prop_assert_eq!(got.len(), want.len().min(n));
        for (g, w) in got.iter().zip(&want) {
            prop_assert!((g.score - w.1).abs() <= 1e-4 * w.1.abs().max(1.0), "{:?} vs {:?}", g, w);
        }
        // The set above the cut agrees up to float ties.
        if let (Some(last), Some(next)) = (got.last(), want.get(got.len())) {
            prop_assert!(last.score >= next.1 - 1e-4);
        }
    }
}

proptest! {
    #[test]
    fn removing_documents_scores_like_building_without_them(
        texts in prop::collection::vec("(alpha|beta|gamma|delta|x-1|v2.0|only| ){1,12}", 2..40),
        replacements in prop::collection::vec(
            (0usize..40, "(alpha|beta|gamma|zeta|eta| ){0,12}"), 0..8),
        erased in prop::collection::vec(any::<bool>(), 40),
        n in 1usize..12,
    ) {
        let mut current: Vec<String> = texts.clone();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let mut removed = index(&refs);
        for (at, text) in replacements {
            let at = at % current.len();
            removed.replace(at as u32, &current[at], &text).unwrap();
            current[at] = text;
        }
        let count = removed.remove(|key| erased[key as usize]);
        let mut built = Bm25Index::new(params());
        for (key, text) in current.iter().enumerate().filter(|&(key, _)| !erased[key]) {
            built.add(key as u32, text).unwrap();
        }
        prop_assert_eq!(count, current.len() - built.len());
        prop_assert_eq!(removed.len(), built.len());
        prop_assert!(bounds_hold(&removed).is_ok(), "{:?}", bounds_hold(&removed));
        for query in ["alpha", "beta gamma", "zeta x-1", "eta alpha delta", "v2.0 beta only"] {
            let terms = analyze(query);
            prop_assert_eq!(removed.search(&terms, n, |_| true), built.search(&terms, n, |_| true));
            prop_assert_eq!(
                removed.search_max_score(&terms, n, |_| true),
                built.search_exhaustive(&terms, n, |_| true)
            );
        }
        // No term outlives the documents that held it.
        let mut held: Vec<&String> = removed.term_ids.keys().collect();
        let mut want: Vec<&String> = built.term_ids.keys().collect();
        held.sort();
        want.sort();
        prop_assert_eq!(held, want);
        let mut more = removed.clone();
        more.add(1_000, "only alpha").unwrap();
        built.add(1_000, "only alpha").unwrap();
        let terms = analyze("only alpha");
        prop_assert_eq!(more.search(&terms, n, |_| true), built.search(&terms, n, |_| true));
    }
}
