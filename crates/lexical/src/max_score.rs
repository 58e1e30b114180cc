//! Exact top-k BM25 by MaxScore (Turtle and Flood, 1995), document at a time.
//!
//! Common terms (no stop words are removed) have posting lists covering most documents but small
//! idf. Once k admitted documents are held, a term whose upper bound, summed with the bounds of
//! all terms weaker than it, is below the k-th score can no longer bring a document into the top
//! k on its own: such terms become "non-essential". Only documents in the lists of essential
//! terms are visited; non-essential lists are looked up by galloping for those documents alone.
//!
//! Results equal the exhaustive scorer's bit for bit: a document that is kept is scored by
//! adding its term weights in the same order (the query's distinct terms, sorted) from 0.0, and a
//! document is skipped only when its bound, widened by a margin for rounding, is strictly below
//! the k-th score held, so it loses to it whatever the key tie-break.
//!
//! Before its walk a search takes a floor from the query's rarest lists alone ([`prime_floor`]):
//! the documents they hold score at least their weights from them, so k of those admitted put a
//! floor under the k-th score, and the walk prunes from its first rows instead of once its heap
//! has filled with whatever documents came first.
//!
//! A search may cover a span of rows only ([`Span`]), so that two threads search one query's
//! rows side by side: each prunes by the highest k-th score either holds (the floor they share:
//! k documents already score at least that), and their parts merge into the whole's top k
//! ([`merge_parts`]).

use std::{
    cmp::{Ordering, Reverse},
    collections::BinaryHeap,
    sync::atomic::{AtomicU32, Ordering as AtomicOrdering},
};

use crate::bm25::{LengthNorm, LexicalHit};

/// One posting: the document row and the term's frequency in it.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Posting {
    pub(crate) row: u32,
    pub(crate) tf: u32,
}

/// A query term present in the index.
pub(crate) struct QueryTerm<'a> {
    /// Its postings, by ascending row.
    pub(crate) postings: &'a [Posting],
    pub(crate) idf: f32,
    /// At least the largest weight the term gives any document.
    pub(crate) bound: f32,
}

/// A query term's list as a search walks it.
struct Slot<'a> {
    postings: &'a [Posting],
    idf: f32,
    /// The next posting.
    cursor: usize,
    /// The row at the cursor (u32::MAX past the end) while the term is essential.
    at: u32,
    /// The term's frequency in the document being scored, once looked up (0: absent).
    tf: u32,
}

/// The filter of a search, with how many documents it was asked about and refused.
struct Filter<F> {
    admit: F,
    asked: usize,
    refused: usize,
}

impl<F> Filter<F> {
    fn ask<K>(&mut self, row: u32) -> Option<K>
    where
        F: FnMut(u32) -> Option<K>,
    {
        self.asked += 1;
        let key = (self.admit)(row);
        self.refused += usize::from(key.is_none());
        key
    }

    /// Whether it refused most of at least 32 documents asked about.
    fn mostly_refuses(&self) -> bool {
        self.asked >= 32 && self.refused * 2 > self.asked
    }
}

/// The rows a search covers, and what it shares with searches of other rows of the same query.
pub(crate) struct Span<'s> {
    /// The first row searched.
    pub(crate) start: u32,
    /// Rows from here on are not searched; another thread may lower it while the search runs.
    pub(crate) end: &'s AtomicU32,
    /// The row the search is at, for a thread that takes the rows it has not reached.
    pub(crate) at: &'s AtomicU32,
    /// The bits of the highest k-th score any search of the same query has held (scores are
    /// never negative, so their bits order as they do; 0 is no floor).
    pub(crate) floor: &'s AtomicU32,
}

/// The best `n` documents matching at least one of `terms` (given in the exhaustive scorer's
/// summation order) among those `admit` maps to a key, by descending score then ascending key.
pub(crate) fn top_k<K: Copy + Ord>(
    terms: &[QueryTerm<'_>],
    norm: LengthNorm,
    doc_len: &[u32],
    n: usize,
    mut admit: impl FnMut(u32) -> Option<K>,
) -> Vec<LexicalHit<K>> {
    let primed = prime_floor(terms, norm, doc_len, n, &mut admit, u32::MAX);
    let (end, at) = (AtomicU32::new(u32::MAX), AtomicU32::new(0));
    let floor = AtomicU32::new(primed.to_bits());
    top_k_in(terms, norm, doc_len, n, admit, &Span { start: 0, end: &end, at: &at, floor: &floor })
}

/// A floor for a search of the rows below `end`, before it walks them, so that it prunes from
/// its first rows rather than once its heap has filled with whatever came first: the `n`-th
/// best admitted document by the weights of the query's rarest terms alone (the lists with the
/// highest bounds, while their postings number at most 4,096 or one per 128 rows of the index:
/// a small share of what a walk reads). Every such document scores at least that with all its
/// terms, so the `n`-th score of the whole search is no lower; the floor is shrunk by far more
/// than the rounding of a sum over some of the terms in another order. 0.0 (no floor) when
/// those lists hold fewer than `n` admitted documents.
pub(crate) fn prime_floor<K>(
    terms: &[QueryTerm<'_>],
    norm: LengthNorm,
    doc_len: &[u32],
    n: usize,
    admit: &mut impl FnMut(u32) -> Option<K>,
    end: u32,
) -> f32 {
    let budget = (doc_len.len() / 128).max(4_096);
    prime_floor_within(terms, norm, doc_len, n, admit, end, budget)
}

/// [`prime_floor`] reading at most `budget` postings.
fn prime_floor_within<K>(
    terms: &[QueryTerm<'_>],
    norm: LengthNorm,
    doc_len: &[u32],
    n: usize,
    admit: &mut impl FnMut(u32) -> Option<K>,
    end: u32,
    budget: usize,
) -> f32 {
    let lists = rarest_lists(terms, end, budget);
    if lists.iter().map(|(list, _)| list.len()).sum::<usize>() < n {
        return 0.0;
    }
    let mut best = BinaryHeap::from(partial_scores(&lists, norm, doc_len));
    let mut admitted = 0;
    while let Some((bits, Reverse(row))) = best.pop() {
        admitted += usize::from(admit(row).is_some());
        if admitted == n {
            let rounding = 1.0 - 64.0 * f32::EPSILON * (terms.len() as f32 + 2.0);
            return f32::from_bits(bits) * rounding;
        }
    }
    0.0
}

/// The postings below `end` and the idf of the terms with the highest bounds, taken while their
/// postings number at most `budget`.
fn rarest_lists<'a>(terms: &[QueryTerm<'a>], end: u32, budget: usize) -> Vec<(&'a [Posting], f32)> {
    let mut by_bound: Vec<&QueryTerm<'a>> = terms.iter().collect();
    by_bound.sort_by(|a, b| b.bound.total_cmp(&a.bound));
    let mut lists = Vec::new();
    let mut postings = 0;
    for term in by_bound {
        let below_end = &term.postings[..term.postings.partition_point(|p| p.row < end)];
        postings += below_end.len();
        if postings > budget {
            break;
        }
        lists.push((below_end, term.idf));
    }
    lists
}

/// Each row of `lists` (merged by row) with the bits of its weights from them summed (scores are
/// never negative, so their bits order as they do); the row reversed, so that of equal sums the
/// lowest row is the greatest.
fn partial_scores(
    lists: &[(&[Posting], f32)],
    norm: LengthNorm,
    doc_len: &[u32],
) -> Vec<(u32, Reverse<u32>)> {
    let mut partial = Vec::with_capacity(lists.iter().map(|(list, _)| list.len()).sum());
    let mut cursors = vec![0usize; lists.len()];
    loop {
        let next = lists
            .iter()
            .zip(&cursors)
            .filter_map(|((list, _), &c)| list.get(c))
            .min_by_key(|p| p.row);
        let Some(&Posting { row, .. }) = next else { return partial };
        let len = doc_len[row as usize];
        let mut score = 0.0f32;
        for ((list, idf), cursor) in lists.iter().zip(&mut cursors) {
            if let Some(p) = list.get(*cursor)
                && p.row == row
            {
                score += norm.weight(*idf, p.tf, len);
                *cursor += 1;
            }
        }
        partial.push((score.to_bits(), Reverse(row)));
    }
}

/// [`top_k`] over the rows of `span`.
pub(crate) fn top_k_in<K: Copy + Ord>(
    terms: &[QueryTerm<'_>],
    norm: LengthNorm,
    doc_len: &[u32],
    n: usize,
    admit: impl FnMut(u32) -> Option<K>,
    span: &Span<'_>,
) -> Vec<LexicalHit<K>> {
    let m = terms.len();
    // Each weight is a handful of roundings and a score sums m of them; the bound of a document
    // is widened by far more than that error before it is compared.
    let slack = 1.0 + 16.0 * f32::EPSILON * (m as f32 + 2.0);
    let mut by_bound: Vec<usize> = (0..m).collect();
    by_bound.sort_by(|&a, &b| terms[a].bound.total_cmp(&terms[b].bound).then(a.cmp(&b)));
    // From here on the terms are in `by_bound`'s order: slot i holds term by_bound[i].
    let sorted: Vec<&QueryTerm<'_>> = by_bound.iter().map(|&t| &terms[t]).collect();
    // below[i]: the bounds of slots ..i summed.
    let mut below = vec![0.0f32; m + 1];
    for (i, term) in sorted.iter().enumerate() {
        below[i + 1] = below[i] + term.bound;
    }
    let mut slots: Vec<Slot<'_>> = sorted
        .iter()
        .map(|t| {
            let cursor = t.postings.partition_point(|p| p.row < span.start);
            let at = t.postings.get(cursor).map_or(u32::MAX, |p| p.row);
            Slot { postings: t.postings, idf: t.idf, cursor, at, tf: 0 }
        })
        .collect();
    // The frequencies again in the terms' own order, for the score of a document kept.
    let mut tf_in_order = vec![0u32; m];
    let mut heap: BinaryHeap<Worst<K>> = BinaryHeap::with_capacity(n + 1);
    // Slots first_essential.. are the essential terms.
    let mut first_essential = 0;
    let mut threshold = f32::NEG_INFINITY;
    let mut filter = Filter { admit, asked: 0, refused: 0 };
    loop {
        let row = slots[first_essential..].iter().fold(u32::MAX, |min, s| min.min(s.at));
        if row == u32::MAX || row >= span.end.load(AtomicOrdering::Relaxed) {
            break;
        }
        span.at.store(row, AtomicOrdering::Relaxed);
        let floor = f32::from_bits(span.floor.load(AtomicOrdering::Relaxed));
        if floor > threshold {
            threshold = floor;
            while first_essential < m && below[first_essential + 1] * slack < threshold {
                first_essential += 1;
            }
        }
        let len = doc_len[row as usize];
        // Weights found so far plus the bounds of the terms not looked at yet; only additions,
        // so its rounding error stays relative to the sum.
        let mut found = 0.0f32;
        for slot in &mut slots[first_essential..] {
            slot.tf = 0;
            if slot.at == row {
                let p = slot.postings[slot.cursor];
                slot.tf = p.tf;
                found += norm.weight(slot.idf, p.tf, len);
                slot.cursor += 1;
                slot.at = slot.postings.get(slot.cursor).map_or(u32::MAX, |p| p.row);
            }
        }
        if (found + below[first_essential]) * slack < threshold {
            continue;
        }
        // When the filter has refused most documents it was asked about, it is asked before the
        // non-essential lists are searched for the document, not after.
        let admitted = if filter.mostly_refuses() {
            let Some(key) = filter.ask(row) else { continue };
            Some(key)
        } else {
            None
        };
        let mut pruned = false;
        for (i, slot) in slots[..first_essential].iter_mut().enumerate().rev() {
            slot.cursor = gallop_to(slot.postings, slot.cursor, row);
            slot.tf = 0;
            if let Some(p) = slot.postings.get(slot.cursor)
                && p.row == row
            {
                slot.tf = p.tf;
                found += norm.weight(slot.idf, p.tf, len);
            }
            if (found + below[i]) * slack < threshold {
                pruned = true;
                break;
            }
        }
        if pruned {
            continue;
        }
        let Some(key) = admitted.or_else(|| filter.ask(row)) else { continue };
        for (&t, slot) in by_bound.iter().zip(&slots) {
            tf_in_order[t] = slot.tf;
        }
        let mut score = 0.0f32;
        for (term, &tf) in terms.iter().zip(&tf_in_order) {
            if tf > 0 {
                score += norm.weight(term.idf, tf, len);
            }
        }
        let hit = Worst(LexicalHit { key, score });
        if heap.len() < n {
            heap.push(hit);
        } else if heap.peek().is_some_and(|worst| hit < *worst) {
            heap.pop();
            heap.push(hit);
        } else {
            continue;
        }
        if heap.len() == n {
            let kth = heap.peek().map_or(f32::NEG_INFINITY, |w| w.0.score);
            // Read first: a read-modify-write takes the line from the other thread's cache
            // even when it changes nothing.
            if kth >= 0.0 && kth.to_bits() > span.floor.load(AtomicOrdering::Relaxed) {
                span.floor.fetch_max(kth.to_bits(), AtomicOrdering::Relaxed);
            }
            threshold = threshold.max(kth);
            while first_essential < m && below[first_essential + 1] * slack < threshold {
                first_essential += 1;
            }
        }
    }
    // A thread that wants rows left finds none.
    span.at.store(u32::MAX, AtomicOrdering::Relaxed);
    let mut hits: Vec<LexicalHit<K>> = heap.into_iter().map(|w| w.0).collect();
    hits.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
    hits
}

/// The best `n` of the hits of searches of one query over spans of its rows, by descending score
/// then ascending key. Spans may overlap where a thread took rows another had reached: a
/// document found twice is scored alike both times and kept once.
pub(crate) fn merge_parts<K: Copy + Ord>(
    parts: impl IntoIterator<Item = Vec<LexicalHit<K>>>,
    n: usize,
) -> Vec<LexicalHit<K>> {
    let mut hits: Vec<LexicalHit<K>> = parts.into_iter().flatten().collect();
    hits.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(a.key.cmp(&b.key)));
    hits.dedup_by_key(|h| h.key);
    hits.truncate(n);
    hits
}

/// The first index at or after `from` whose row is at least `row`: doubling steps, then a binary
/// search, so skipping far ahead in a long list costs a logarithm, not a walk.
fn gallop_to(postings: &[Posting], from: usize, row: u32) -> usize {
    let mut step = 1;
    let mut hi = from;
    while hi < postings.len() && postings[hi].row < row {
        hi = from + step;
        step *= 2;
    }
    let lo = from + step / 4;
    let hi = hi.min(postings.len());
    let lo = lo.min(hi);
    lo + postings[lo..hi].partition_point(|p| p.row < row)
}

/// A hit ordered so that the heap's maximum is the worst one held: lowest score, then largest key.
struct Worst<K>(LexicalHit<K>);

impl<K: Ord> Ord for Worst<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        other.0.score.total_cmp(&self.0.score).then(self.0.key.cmp(&other.0.key))
    }
}

impl<K: Ord> PartialOrd for Worst<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<K: Ord> PartialEq for Worst<K> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<K: Ord> Eq for Worst<K> {}

#[cfg(test)]
pub(crate) mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{Bm25Index, Bm25Params};

    /// A skewed vocabulary: `w0` is in most documents, `w15` in few, as with common words and
    /// rare names, so that pruning has common terms to skip.
    pub(crate) fn word(v: u8) -> String {
        format!("w{}", (u32::from(v) * u32::from(v)) >> 12)
    }

    pub(crate) fn corpus(docs: &[Vec<u8>], keys: &[u32], params: Bm25Params) -> Bm25Index<u32> {
        let mut index = Bm25Index::new(params);
        for (doc, key) in docs.iter().zip(keys) {
            let text: Vec<String> = doc.iter().map(|&v| word(255 - v)).collect();
            index.add(*key, &text.join(" ")).unwrap();
        }
        index
    }

    pub(crate) fn bits(hits: &[LexicalHit<u32>]) -> Vec<(u32, u32)> {
        hits.iter().map(|h| (h.key, h.score.to_bits())).collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn pruned_search_equals_exhaustive(
            unique_docs in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..12), 1..60),
            copies in prop::collection::vec(1usize..4, 60),
            key_seed in any::<u64>(),
            query in prop::collection::vec(any::<u8>(), 1..8),
            n in 1usize..25,
            admit_mod in 1u32..5,
            k1 in prop::sample::select(vec![0.0f32, 0.5, 1.2, 2.0]),
            b in prop::sample::select(vec![0.0f32, 0.3, 0.75, 1.0]),
        ) {
            // Repeated documents tie exactly; keys shuffled against rows so ties are broken by key,
            // not by insertion order.
            let docs: Vec<Vec<u8>> = unique_docs
                .iter()
                .zip(&copies)
                .flat_map(|(d, &c)| std::iter::repeat_n(d.clone(), c))
                .collect();
            let mut keys: Vec<u32> = (0..docs.len() as u32).collect();
            let mut state = key_seed | 1;
            for i in (1..keys.len()).rev() {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                keys.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let index = corpus(&docs, &keys, Bm25Params { k1, b });
            let query: Vec<String> = query.iter().map(|&v| word(255 - v)).collect();
            // A filter refusing a few documents, and one refusing most (which the search asks
            // before the non-essential lists once it has refused most of those asked).
            let some = |key: u32| key % admit_mod != 1;
            let most = |key: u32| key.is_multiple_of(admit_mod + 3);
            for admit in [&some as &dyn Fn(u32) -> bool, &most] {
                let pruned = index.search_max_score(&query, n, admit);
                let exhaustive = index.search_exhaustive(&query, n, admit);
                prop_assert_eq!(bits(&pruned), bits(&exhaustive));
                prop_assert_eq!(bits(&index.search(&query, n, admit)), bits(&exhaustive));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// A floor read from the rarest lists, whatever their share, is no higher than the
        /// n-th admitted score, and a search starting from it finds the exhaustive top n.
        #[test]
        fn a_primed_search_equals_exhaustive(
            docs in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..12), 1..300),
            query in prop::collection::vec(any::<u8>(), 1..8),
            n in 1usize..25,
            budget in 0usize..400,
            admit_mod in 1u32..5,
        ) {
            let keys: Vec<u32> = (0..docs.len() as u32).rev().collect();
            let index = corpus(&docs, &keys, Bm25Params { k1: 1.2, b: 0.75 });
            let query: Vec<String> = query.iter().map(|&v| word(255 - v)).collect();
            let admit = |key: u32| key % admit_mod != 1;
            let exhaustive = index.search_exhaustive(&query, n, admit);
            let norm = index.length_norm();
            let (terms, doc_len) = (index.query_terms(&query, norm), &index.doc_len);
            let mut admit_row = |row: u32| Some(keys[row as usize]).filter(|&k| admit(k));
            let floor =
                prime_floor_within(&terms, norm, doc_len, n, &mut admit_row, u32::MAX, budget);
            if exhaustive.len() == n {
                prop_assert!(floor <= exhaustive[n - 1].score, "{} > {}", floor, exhaustive[n - 1].score);
            } else {
                prop_assert_eq!(floor, 0.0);
            }
            let (end, at, shared) = (AtomicU32::new(u32::MAX), AtomicU32::new(0), AtomicU32::new(floor.to_bits()));
            let span = Span { start: 0, end: &end, at: &at, floor: &shared };
            let primed = top_k_in(&terms, norm, doc_len, n, admit_row, &span);
            prop_assert_eq!(bits(&primed), bits(&exhaustive));
        }
    }

    #[test]
    fn skips_documents_that_cannot_reach_the_top() {
        // 500 documents share the common term; the first also holds the rare one, so once it is
        // held, "common" alone cannot reach it and its list is no longer walked.
        let mut index = Bm25Index::new(Bm25Params { k1: 1.2, b: 0.75 });
        for key in 0..500u32 {
            let text = if key == 0 { "common rare" } else { "common filler words here" };
            index.add(key, text).unwrap();
        }
        let query = vec!["common".to_owned(), "rare".to_owned()];
        let mut asked = 0;
        let hits = index.search_max_score(&query, 1, |_| {
            asked += 1;
            true
        });
        assert_eq!(hits, index.search_exhaustive(&query, 1, |_| true));
        assert_eq!(hits[0].key, 0);
        // Once for the floor the search starts from, once in its walk.
        assert_eq!(asked, 2, "admit asked about {asked} of 500 matching documents");
    }

    #[test]
    fn gallop_finds_the_first_row_not_below_the_target() {
        let postings: Vec<Posting> = (0..100).map(|i| Posting { row: i * 3, tf: 1 }).collect();
        for from in [0, 1, 7, 50, 99, 100] {
            for row in 0..310 {
                let want = from + postings[from..].partition_point(|p| p.row < row);
                assert_eq!(gallop_to(&postings, from, row), want, "from {from} row {row}");
            }
        }
    }
}
