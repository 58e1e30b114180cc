//! One query's search shared by two threads: the thread that claims it searches the rows in
//! order, and another, free before it is done, takes the upper half of the rows it has not
//! reached ([`SharedSearch::help`]). Each prunes by the higher of their n-th scores, and their
//! parts merge into what [`Bm25Index::search`] returns, scores, order and ties included.

use std::{
    fmt::Debug,
    hash::Hash,
    sync::{
        Mutex, PoisonError,
        atomic::{AtomicBool, AtomicU32, Ordering},
    },
};

use super::Bm25Index;
use crate::{
    LexicalHit,
    bm25::LengthNorm,
    max_score::{QueryTerm, Span, merge_parts, prime_floor, top_k_in},
};

/// Rows left to the first thread below which a second does not take half: the split's set-up
/// (a binary search per list, a threshold of its own to raise) would outweigh the rows.
const MIN_SPLIT_ROWS: u32 = 2_048;

/// A search of one query for its top `n` that a second thread can join ([`Bm25Index::shared_search`]).
pub struct SharedSearch<'i, K> {
    index: &'i Bm25Index<K>,
    query_terms: Vec<String>,
    terms: Vec<QueryTerm<'i>>,
    norm: LengthNorm,
    n: usize,
    /// Whether the search prunes (MaxScore), which is what can be split: short lists are
    /// scored whole by the first thread.
    prunes: bool,
    claimed: AtomicBool,
    // Each on lines of its own: the running thread stores `at` at every row, and both threads
    // read `end` and `floor` at every row; on one line, each store took the line from the
    // other thread's cache.
    end: OwnLine<AtomicU32>,
    at: OwnLine<AtomicU32>,
    floor: OwnLine<AtomicU32>,
    parts: Mutex<Vec<Vec<LexicalHit<K>>>>,
}

impl<K> Debug for SharedSearch<'_, K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedSearch")
            .field("terms", &self.terms.len())
            .field("n", &self.n)
            .field("prunes", &self.prunes)
            .field("end", &*self.end)
            .field("at", &*self.at)
            .finish_non_exhaustive()
    }
}

impl<K: Copy + Eq + Hash + Ord + Debug> Bm25Index<K> {
    /// [`Bm25Index::search`] as a [`SharedSearch`]: one thread [`SharedSearch::claim`]s and
    /// [`SharedSearch::run`]s it, another may [`SharedSearch::help`], and
    /// [`SharedSearch::into_hits`] gives what `search` would have.
    pub fn shared_search(&self, query_terms: &[String], n: usize) -> SharedSearch<'_, K> {
        let prunes = n > 0 && !self.is_empty() && self.prunes(query_terms);
        // An empty index has no average length; it is scored whole, with no norm.
        let norm =
            if self.is_empty() { LengthNorm::new(self.params, 1.0) } else { self.length_norm() };
        let (terms, query_terms) = if prunes {
            (self.query_terms(query_terms, norm), Vec::new())
        } else {
            (Vec::new(), query_terms.to_vec())
        };
        SharedSearch {
            index: self,
            query_terms,
            terms,
            norm,
            n,
            prunes,
            claimed: AtomicBool::new(false),
            end: OwnLine(AtomicU32::new(u32::try_from(self.len()).unwrap_or(u32::MAX))),
            at: OwnLine(AtomicU32::new(0)),
            floor: OwnLine(AtomicU32::new(0)),
            parts: Mutex::new(Vec::new()),
        }
    }
}

impl<K: Copy + Eq + Hash + Ord + Debug> SharedSearch<'_, K> {
    /// The search over the rows below `end` alone: the caller knows no document of a row from
    /// `end` on is admitted (see [`Bm25Index::rows_up_to`]). Lists scored whole are scored whole.
    pub fn rows_below(self, end: u32) -> Self {
        self.end.fetch_min(end, Ordering::Relaxed);
        self
    }

    /// Whether this caller is the first to claim the search, and so the one to run it.
    pub fn claim(&self) -> bool {
        !self.claimed.swap(true, Ordering::AcqRel)
    }

    /// Searches the rows from the first until the end, which a helper may lower meanwhile.
    pub fn run(&self, mut admit: impl FnMut(K) -> bool) {
        let hits = if self.prunes {
            let (doc_len, mut admit) = (&self.index.doc_len, self.admit(&mut admit));
            let end = self.end.load(Ordering::Relaxed);
            let primed = prime_floor(&self.terms, self.norm, doc_len, self.n, &mut admit, end);
            self.floor.fetch_max(primed.to_bits(), Ordering::Relaxed);
            let span = Span { start: 0, end: &self.end, at: &self.at, floor: &self.floor };
            top_k_in(&self.terms, self.norm, doc_len, self.n, admit, &span)
        } else {
            self.at.store(u32::MAX, Ordering::Relaxed);
            self.index.search_exhaustive(&self.query_terms, self.n, admit)
        };
        self.parts.lock().unwrap_or_else(PoisonError::into_inner).push(hits);
    }

    /// Takes the upper half of the rows the running search has not reached and searches them,
    /// and again while it has rows left: rows are not worth the same (a filter may admit few of
    /// some), so halves seldom take the same time. Returns whether it searched any rows; it
    /// leaves fewer than a few thousand rows to the search (and none when the search has
    /// finished or scores its lists whole).
    pub fn help(&self, mut admit: impl FnMut(K) -> bool) -> bool {
        let mut helped = false;
        while self.help_once(&mut admit) {
            helped = true;
        }
        helped
    }

    fn help_once(&self, mut admit: impl FnMut(K) -> bool) -> bool {
        let (at, end) = (self.at.load(Ordering::Relaxed), self.end.load(Ordering::Relaxed));
        if !self.prunes || at >= end || end - at < MIN_SPLIT_ROWS {
            return false;
        }
        let split = at + (end - at) / 2;
        if self.end.compare_exchange(end, split, Ordering::AcqRel, Ordering::Relaxed).is_err() {
            return false;
        }
        // The first thread may have scored a row past the split before it saw the new end: the
        // merge keeps such a document once.
        let (own_end, own_at) = (AtomicU32::new(end), AtomicU32::new(split));
        let span = Span { start: split, end: &own_end, at: &own_at, floor: &self.floor };
        let admit = self.admit(&mut admit);
        let hits = top_k_in(&self.terms, self.norm, &self.index.doc_len, self.n, admit, &span);
        self.parts.lock().unwrap_or_else(PoisonError::into_inner).push(hits);
        true
    }

    /// The best `n` documents, as [`Bm25Index::search`] gives them.
    pub fn into_hits(self) -> Vec<LexicalHit<K>> {
        merge_parts(self.parts.into_inner().unwrap_or_else(PoisonError::into_inner), self.n)
    }

    fn admit<'a>(
        &'a self,
        admit: &'a mut impl FnMut(K) -> bool,
    ) -> impl FnMut(u32) -> Option<K> + 'a {
        move |row| {
            let key = self.index.keys[row as usize];
            admit(key).then_some(key)
        }
    }
}

/// A value alone on its cache lines (two: a processor may fetch a line's neighbour with it).
#[repr(align(128))]
struct OwnLine<T>(T);

impl<T> std::ops::Deref for OwnLine<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{
        Bm25Params,
        max_score::tests::{bits, corpus, word},
    };

    /// The MaxScore tests' corpus (a skewed vocabulary: `w0` in most documents, `w15` in few),
    /// keys ascending with the rows.
    fn index_of(docs: &[Vec<u8>]) -> Bm25Index<u32> {
        let keys: Vec<u32> = (0..docs.len() as u32).map(|k| k * 7).collect();
        corpus(docs, &keys, Bm25Params { k1: 1.2, b: 0.75 })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Two spans of the rows, overlapping or not, searched one after the other with the
        /// floor they share, merge into the exhaustive top n.
        #[test]
        fn spans_of_the_rows_merge_into_the_whole(
            docs in prop::collection::vec(prop::collection::vec(any::<u8>(), 1..10), 1..150),
            query in prop::collection::vec(any::<u8>(), 1..8),
            n in 1usize..25,
            cuts in (0.0f64..=1.0, 0.0f64..=1.0),
            admit_mod in 1u32..5,
            upper_first in any::<bool>(),
        ) {
            let index = index_of(&docs);
            let query: Vec<String> = query.iter().map(|&v| word(255 - v)).collect();
            let admit = |key: u32| key % admit_mod != 1;
            let norm = index.length_norm();
            let terms = index.query_terms(&query, norm);
            let rows = index.len() as u32;
            let (a, b) = (cuts.0.min(cuts.1), cuts.0.max(cuts.1));
            // The lower span ends after the upper one starts where they overlap.
            let (upper_start, lower_end) = ((a * f64::from(rows)) as u32, (b * f64::from(rows)) as u32);
            let floor = AtomicU32::new(0);
            let search = |start: u32, end: u32| {
                let (end, at) = (AtomicU32::new(end), AtomicU32::new(start));
                let span = Span { start, end: &end, at: &at, floor: &floor };
                top_k_in(&terms, norm, &index.doc_len, n, |row| {
                    let key = index.keys[row as usize];
                    admit(key).then_some(key)
                }, &span)
            };
            let parts = if upper_first {
                let upper = search(upper_start, rows);
                vec![upper, search(0, lower_end.max(upper_start))]
            } else {
                let lower = search(0, lower_end.max(upper_start));
                vec![lower, search(upper_start, rows)]
            };
            let merged = merge_parts(parts, n);
            prop_assert_eq!(bits(&merged), bits(&index.search_exhaustive(&query, n, admit)));
        }
    }

    /// Documents each holding two of the query's common words, so that the query's lists are
    /// long enough for MaxScore and the rows many enough to split.
    fn pruned_index() -> (Bm25Index<u32>, Vec<String>) {
        let docs: Vec<Vec<u8>> = (0..40_000u32)
            .map(|i| {
                let mut state = i.wrapping_mul(2_654_435_761) | 1;
                (0..6)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 17;
                        state ^= state << 5;
                        (state % 256) as u8
                    })
                    .chain([255, 155])
                    .collect()
            })
            .collect();
        let index = index_of(&docs);
        let query = [255u8, 155, 3, 40].iter().map(|&v| word(255 - v)).collect();
        (index, query)
    }

    #[test]
    fn a_helper_takes_half_the_rows_left_and_the_merge_is_the_search() {
        let (index, query) = pruned_index();
        assert!(index.prunes(&query), "the query's lists are long enough to prune");
        let admit = |key: u32| key % 3 != 1;
        let want = bits(&index.search(&query, 50, admit));
        // A helper that comes before the first thread has started takes the upper half, then
        // half of what is left, until a few thousand rows are left.
        let shared = index.shared_search(&query, 50);
        assert!(shared.claim() && !shared.claim());
        assert!(shared.help(admit));
        let left = shared.end.load(Ordering::Relaxed);
        assert!((MIN_SPLIT_ROWS / 2..MIN_SPLIT_ROWS).contains(&left), "{left} rows left");
        assert!(!shared.help(admit));
        shared.run(admit);
        assert_eq!(bits(&shared.into_hits()), want);
        // One that comes after it is done finds nothing left.
        let shared = index.shared_search(&query, 50);
        shared.run(admit);
        assert!(!shared.help(admit));
        assert_eq!(bits(&shared.into_hits()), want);
        // Side by side, whenever the helper comes.
        for _ in 0..20 {
            let shared = index.shared_search(&query, 50);
            std::thread::scope(|scope| {
                scope.spawn(|| shared.claim().then(|| shared.run(admit)));
                scope.spawn(|| {
                    while shared.at.load(Ordering::Relaxed) == 0 {
                        std::hint::spin_loop();
                    }
                    shared.help(admit)
                });
            });
            assert_eq!(bits(&shared.into_hits()), want);
        }
    }

    #[test]
    fn a_search_bounded_to_the_rows_of_admitted_keys_finds_what_the_filter_admits() {
        let (index, query) = pruned_index();
        let last = 7 * 24_000;
        let admit = |key: u32| key <= last && key % 3 != 1;
        let want = bits(&index.search(&query, 50, admit));
        let end = index.rows_up_to(last).expect("keys were added in ascending order");
        assert_eq!(end, 24_001);
        for helped in [false, true] {
            let shared = index.shared_search(&query, 50).rows_below(end);
            assert!(shared.claim());
            if helped {
                assert!(shared.help(admit));
            }
            shared.run(admit);
            assert_eq!(bits(&shared.into_hits()), want);
        }
        let mut descending = Bm25Index::<u32>::new(Bm25Params { k1: 1.2, b: 0.75 });
        for key in [3, 2, 1] {
            descending.add(key, "w0").unwrap();
        }
        assert_eq!(descending.rows_up_to(2), None, "rows that do not follow keys bound nothing");
        assert_eq!(index_of(&[vec![1], vec![2]]).rows_up_to(0), Some(1));
    }

    #[test]
    fn short_lists_are_scored_whole_and_not_split() {
        let index = index_of(&[vec![255, 3], vec![255, 4], vec![3]]);
        let query = vec![word(0), word(252)];
        let shared = index.shared_search(&query, 2);
        assert!(!shared.help(|_| true));
        shared.run(|_| true);
        assert_eq!(bits(&shared.into_hits()), bits(&index.search(&query, 2, |_| true)));
        let empty = Bm25Index::<u32>::new(Bm25Params { k1: 1.2, b: 0.75 });
        let shared = empty.shared_search(&query, 2);
        shared.run(|_| true);
        assert!(shared.into_hits().is_empty());
    }
}
