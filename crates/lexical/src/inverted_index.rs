//! The in-memory BM25 inverted index of one namespace.

use std::{collections::HashMap, fmt::Debug, hash::Hash};

use evicortex_core::TurnId;

use crate::{
    Analyzer, LexicalError, TermCounts,
    bm25::{Bm25Params, LengthNorm, LexicalHit, bm25_idf},
    max_score::{Posting, QueryTerm, top_k},
};

mod index_bytes;
mod shared_search;

pub use shared_search::SharedSearch;

/// Row of a document inside one [`Bm25Index`]: dense, assigned in insertion order, meaningless
/// outside that index.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DocRow(u32);

impl DocRow {
    /// The row as an array index.
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// BM25 over the documents of one namespace, keyed by `K` (turns use [`TurnId`]; a chunk index can
/// use its own key). Documents are added incrementally and removed in place
/// ([`Bm25Index::remove`]), which is how an erasure reaches this derived data.
#[derive(Debug, Clone)]
pub struct Bm25Index<K = TurnId> {
    params: Bm25Params,
    analyzer: Analyzer,
    term_ids: HashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    /// Per term: what bounds its weight in any document, for pruning.
    term_extremes: Vec<TermExtremes>,
    bound_norm: BoundNorm,
    pub(crate) doc_len: Vec<u32>,
    keys: Vec<K>,
    /// Whether every key was added above the last (rows then follow keys).
    keys_ascending: bool,
    rows: HashMap<K, DocRow>,
    total_len: u64,
    covers: Option<TurnId>,
}

/// Below this many postings in the query's lists, scoring every one (a tight loop) beats
/// MaxScore's per-document work: measured with compile_latency's questions, MaxScore took 0.05 ms
/// against 0.02 ms at 1k turns and 0.20 against 0.16 ms at 10k, and 0.80 against 1.7 ms at 100k.
const MAX_SCORE_FROM_POSTINGS: usize = 65_536;

/// What bounds a term's weight in any of its documents. The largest frequency and the shortest
/// document bound it together (the weight grows with the one and falls with the other), but
/// loosely when they come from different postings, as they do for common terms; the largest
/// weight over the idf among its postings bounds it tightly, under `bound_norm`. A search takes
/// the lower of the two.
#[derive(Copy, Clone, Debug)]
struct TermExtremes {
    max_tf: u32,
    min_len: u32,
    max_part: f32,
}

/// The length normalisation term bounds are kept under: that of an average length an eighth
/// above the index's (the weight grows with the average, so they hold until it passes that).
#[derive(Copy, Clone, Debug)]
struct BoundNorm {
    avg_len: f32,
    norm: LengthNorm,
}

impl BoundNorm {
    fn new(params: Bm25Params, avg_len: f32) -> BoundNorm {
        let avg_len = avg_len * 1.125;
        BoundNorm { avg_len, norm: LengthNorm::new(params, avg_len) }
    }
}

impl<K: Copy + Eq + Hash + Ord + Debug> Bm25Index<K> {
    /// An empty index under the [`Analyzer::Plain`] analyzer. `params` must pass
    /// [`Bm25Params::validate`].
    pub fn new(params: Bm25Params) -> Bm25Index<K> {
        Bm25Index::with_analyzer(params, Analyzer::Plain)
    }

    /// An empty index whose documents (and queries, through [`Bm25Index::analyze`]) go through
    /// `analyzer`.
    pub fn with_analyzer(params: Bm25Params, analyzer: Analyzer) -> Bm25Index<K> {
        Bm25Index {
            params,
            analyzer,
            term_ids: HashMap::new(),
            postings: Vec::new(),
            term_extremes: Vec::new(),
            bound_norm: BoundNorm::new(params, 1.0),
            doc_len: Vec::new(),
            keys: Vec::new(),
            keys_ascending: true,
            rows: HashMap::new(),
            total_len: 0,
            covers: None,
        }
    }

    /// An empty index after checking `params`.
    pub fn try_new(params: Bm25Params) -> Result<Bm25Index<K>, LexicalError> {
        Ok(Bm25Index::new(params.validate()?))
    }

    /// The BM25 parameters.
    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// The analyzer documents were indexed with.
    pub fn analyzer(&self) -> Analyzer {
        self.analyzer
    }

    /// The terms of a query `text` under this index's analyzer.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        self.analyzer.analyze(text)
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The ledger position up to which this index is complete, if any was recorded.
    pub fn covers(&self) -> Option<TurnId> {
        self.covers
    }

    /// Records that the index now holds every document of the ledger up to `position`. Coverage
    /// never moves backwards; a rebuild starts from a new index.
    pub fn mark_covered(&mut self, position: TurnId) -> Result<(), LexicalError> {
        match self.covers {
            Some(covered) if covered > position => {
                Err(LexicalError::CoverageBackwards { covered, requested: position })
            }
            _ => {
                self.covers = Some(position);
                Ok(())
            }
        }
    }

    /// Analyzes and indexes `text` under `key`.
    pub fn add(&mut self, key: K, text: &str) -> Result<DocRow, LexicalError> {
        let terms = self.analyze(text);
        self.add_terms(key, &terms)
    }

    /// Indexes under `key` a document whose terms, under this index's analyzer, are `terms`
    /// (in any order): what [`Bm25Index::add`] does after analysing, for callers that analysed
    /// the document's parts already. The analyzer is additive at line breaks (the terms of
    /// `a + "\n" + b` are those of `a` then those of `b`), so a document joined by line breaks
    /// may be given as its parts' terms.
    pub fn add_terms<S: AsRef<str>>(
        &mut self,
        key: K,
        terms: &[S],
    ) -> Result<DocRow, LexicalError> {
        self.add_counts(key, &TermCounts::of(terms))
    }

    /// [`Bm25Index::add_terms`] given the document's terms counted, for callers that build a
    /// document's counts from its parts' ([`TermCounts::joined`]).
    pub fn add_counts(&mut self, key: K, counts: &TermCounts<'_>) -> Result<DocRow, LexicalError> {
        if self.rows.contains_key(&key) {
            return Err(LexicalError::DuplicateKey { key: format!("{key:?}") });
        }
        let row = u32::try_from(self.keys.len())
            .map_err(|_| LexicalError::Full { rows: self.keys.len() })?;
        let doc_len = counts.len();
        for &(term, tf) in counts.counts() {
            let term_id = self.term_id(term, tf, doc_len);
            self.postings[term_id as usize].push(Posting { row, tf });
        }
        self.doc_len.push(doc_len);
        self.keys_ascending &= self.keys.last().is_none_or(|&last| last < key);
        self.keys.push(key);
        self.rows.insert(key, DocRow(row));
        self.total_len += u64::from(doc_len);
        self.bound_again_if_stale();
        Ok(DocRow(row))
    }

    /// Replaces the document of `key`, indexed from `old_text`, by `new_text`, keeping its row:
    /// the index then scores exactly as one built with `new_text` in its place. `old_text` must
    /// be what the row holds (every term and frequency is checked), else nothing changes and
    /// the call fails.
    pub fn replace(&mut self, key: K, old_text: &str, new_text: &str) -> Result<(), LexicalError> {
        let old_terms = self.analyze(old_text);
        let new_terms = self.analyze(new_text);
        self.replace_terms(key, &old_terms, &new_terms)
    }

    /// [`Bm25Index::replace`] given the old and new documents' terms under this index's analyzer
    /// (in any order), for callers that analysed the documents' parts already (see
    /// [`Bm25Index::add_terms`]).
    pub fn replace_terms<S: AsRef<str>, T: AsRef<str>>(
        &mut self,
        key: K,
        old_terms: &[S],
        new_terms: &[T],
    ) -> Result<(), LexicalError> {
        self.replace_counts(key, &TermCounts::of(old_terms), &TermCounts::of(new_terms))
    }

    /// [`Bm25Index::replace_terms`] given both documents' terms counted.
    pub fn replace_counts(
        &mut self,
        key: K,
        old: &TermCounts<'_>,
        new: &TermCounts<'_>,
    ) -> Result<(), LexicalError> {
        let row =
            self.row(key).ok_or_else(|| LexicalError::UnknownKey { key: format!("{key:?}") })?;
        let stale = || LexicalError::StaleDocument { key: format!("{key:?}") };
        let old_len = old.len();
        if old_len != self.doc_len[row.index()] {
            return Err(stale());
        }
        let mut found = Vec::with_capacity(old.counts().len());
        for &(term, tf) in old.counts() {
            let term_id = *self.term_ids.get(term).ok_or_else(stale)? as usize;
            let postings = &self.postings[term_id];
            match postings.binary_search_by_key(&row.0, |p| p.row) {
                Ok(at) if postings[at].tf == tf => found.push((term_id, at)),
                _ => return Err(stale()),
            }
        }
        for (term_id, at) in found {
            self.postings[term_id].remove(at);
        }
        let new_len = new.len();
        for &(term, tf) in new.counts() {
            let term_id = self.term_id(term, tf, new_len) as usize;
            let postings = &mut self.postings[term_id];
            let at = postings.partition_point(|p| p.row < row.0);
            postings.insert(at, Posting { row: row.0, tf });
        }
        self.total_len = self.total_len - u64::from(old_len) + u64::from(new_len);
        self.doc_len[row.index()] = new_len;
        self.bound_again_if_stale();
        Ok(())
    }

    /// Removes the documents whose keys `erased` accepts, and forgets every term then left in
    /// no document (a replaced document's old terms included). The others keep their order, so
    /// the index scores exactly as one built without the removed documents: the same
    /// documents, lengths and frequencies, so the same idf and average length, bit for bit.
    /// Returns how many documents were removed. How an erasure reaches the index without
    /// analysing every document again.
    pub fn remove(&mut self, mut erased: impl FnMut(K) -> bool) -> usize {
        let mut new_row: Vec<Option<u32>> = Vec::with_capacity(self.keys.len());
        let mut kept = 0u32;
        for &key in &self.keys {
            if erased(key) {
                new_row.push(None);
            } else {
                new_row.push(Some(kept));
                kept += 1;
            }
        }
        let removed = self.keys.len() - kept as usize;
        if removed > 0 {
            for postings in &mut self.postings {
                postings.retain_mut(|p| match new_row[p.row as usize] {
                    Some(row) => {
                        p.row = row;
                        true
                    }
                    None => false,
                });
            }
            let mut rows = new_row.iter();
            self.doc_len.retain(|_| rows.next().is_some_and(Option::is_some));
            let mut rows = new_row.iter();
            self.keys.retain(|_| rows.next().is_some_and(Option::is_some));
            self.rows = self.keys.iter().enumerate().map(|(r, &k)| (k, DocRow(r as u32))).collect();
            self.keys_ascending = self.keys.windows(2).all(|w| w[0] < w[1]);
            self.total_len = self.doc_len.iter().map(|&l| u64::from(l)).sum();
        }
        self.forget_unused_terms();
        if self.is_empty() {
            self.bound_norm = BoundNorm::new(self.params, 1.0);
        } else {
            // Removing short documents lengthens the average.
            self.bound_again_if_stale();
        }
        removed
    }

    /// Drops the terms no document holds, keeping the others' relative order.
    fn forget_unused_terms(&mut self) {
        if self.postings.iter().all(|p| !p.is_empty()) {
            return;
        }
        let mut new_id: Vec<Option<u32>> = Vec::with_capacity(self.postings.len());
        let mut next = 0u32;
        for postings in &self.postings {
            new_id.push((!postings.is_empty()).then(|| {
                next += 1;
                next - 1
            }));
        }
        self.term_ids.retain(|_, id| match new_id[*id as usize] {
            Some(new) => {
                *id = new;
                true
            }
            None => false,
        });
        let mut ids = new_id.iter();
        self.term_extremes.retain(|_| ids.next().is_some_and(Option::is_some));
        self.postings.retain(|p| !p.is_empty());
        self.term_ids.shrink_to_fit();
    }

    /// The id of `term`, created when new; widens the term's bounds to a posting of `tf` in a
    /// document of `doc_len` terms. Bounds never narrow (a replaced document leaves them
    /// loose), which keeps them bounds.
    fn term_id(&mut self, term: &str, tf: u32, doc_len: u32) -> u32 {
        let term_id = match self.term_ids.get(term) {
            Some(&id) => id,
            None => {
                let id = self.postings.len() as u32;
                self.term_ids.insert(term.to_owned(), id);
                self.postings.push(Vec::new());
                self.term_extremes.push(TermExtremes {
                    max_tf: tf,
                    min_len: doc_len,
                    max_part: 0.0,
                });
                id
            }
        };
        let extremes = &mut self.term_extremes[term_id as usize];
        extremes.max_tf = extremes.max_tf.max(tf);
        extremes.min_len = extremes.min_len.min(doc_len);
        extremes.max_part = extremes.max_part.max(self.bound_norm.norm.part(tf, doc_len));
        term_id
    }

    /// The key stored at `row`.
    pub fn key(&self, row: DocRow) -> Option<K> {
        self.keys.get(row.index()).copied()
    }

    /// The row of `key`.
    pub fn row(&self, key: K) -> Option<DocRow> {
        self.rows.get(&key).copied()
    }

    /// Number of documents containing `term` (an analyzed term).
    pub fn doc_freq(&self, term: &str) -> usize {
        self.term_ids.get(term).map_or(0, |&t| self.postings[t as usize].len())
    }

    /// The idf of `term` in this index (0 documents containing it still gives a finite value).
    pub fn idf(&self, term: &str) -> f32 {
        bm25_idf(self.len(), self.doc_freq(term))
    }

    /// The best `n` documents for the analyzed `query_terms` among those whose key `admit`s,
    /// by descending score, ties by ascending key. The filter applies before the cut, so a
    /// filtered document never displaces an admitted one. Documents sharing no term with the query
    /// are not returned.
    ///
    /// Exact top-n by MaxScore when the query's posting lists are long: documents that provably
    /// cannot enter the top n are skipped (and `admit` is not asked about them, unless it has
    /// refused most of the documents asked about so far: then it is asked first). Short lists are
    /// scored exhaustively, which is faster there. Either way the result equals
    /// [`Bm25Index::search_exhaustive`]'s, scores bit for bit, order and ties included.
    pub fn search(
        &self,
        query_terms: &[String],
        n: usize,
        admit: impl FnMut(K) -> bool,
    ) -> Vec<LexicalHit<K>> {
        if self.prunes(query_terms) {
            self.search_max_score(query_terms, n, admit)
        } else {
            self.search_exhaustive(query_terms, n, admit)
        }
    }

    /// [`Bm25Index::search`] by MaxScore whatever the lists' lengths.
    pub(crate) fn search_max_score(
        &self,
        query_terms: &[String],
        n: usize,
        mut admit: impl FnMut(K) -> bool,
    ) -> Vec<LexicalHit<K>> {
        if n == 0 || self.is_empty() {
            return Vec::new();
        }
        let norm = self.length_norm();
        top_k(&self.query_terms(query_terms, norm), norm, &self.doc_len, n, |row| {
            let key = self.keys[row as usize];
            admit(key).then_some(key)
        })
    }

    /// The query's distinct terms present in the index, as MaxScore takes them.
    pub(crate) fn query_terms(
        &self,
        query_terms: &[String],
        norm: LengthNorm,
    ) -> Vec<QueryTerm<'_>> {
        distinct_terms(query_terms)
            .filter_map(|term| {
                let term_id = *self.term_ids.get(term)? as usize;
                let postings = self.postings[term_id].as_slice();
                let idf = bm25_idf(self.len(), postings.len());
                let extremes = self.term_extremes[term_id];
                let bound = norm
                    .weight(idf, extremes.max_tf, extremes.min_len)
                    .min(idf * extremes.max_part);
                Some(QueryTerm { postings, idf, bound })
            })
            .collect()
    }

    /// How many rows hold keys up to `key`, when every key was added above the last (so that
    /// the documents of keys up to `key` are the rows below that number); `None` otherwise.
    pub fn rows_up_to(&self, key: K) -> Option<u32> {
        let rows = self.keys.partition_point(|&k| k <= key);
        self.keys_ascending.then(|| u32::try_from(rows).unwrap_or(u32::MAX))
    }

    /// Whether [`Bm25Index::search`] scores the lists of `query_terms` by MaxScore.
    fn prunes(&self, query_terms: &[String]) -> bool {
        let postings: usize = distinct_terms(query_terms)
            .filter_map(|term| self.term_ids.get(term))
            .map(|&t| self.postings[t as usize].len())
            .sum();
        postings >= MAX_SCORE_FROM_POSTINGS
    }

    /// [`Bm25Index::search`] by scoring every document that shares a term with the query: the
    /// reference the pruned search is checked against, and a benchmark anchor.
    pub fn search_exhaustive(
        &self,
        query_terms: &[String],
        n: usize,
        mut admit: impl FnMut(K) -> bool,
    ) -> Vec<LexicalHit<K>> {
        if n == 0 || self.is_empty() {
            return Vec::new();
        }
        let norm = self.length_norm();
        let mut scores = vec![0.0f32; self.len()];
        let mut touched: Vec<u32> = Vec::new();
        for term in distinct_terms(query_terms) {
            let Some(&term_id) = self.term_ids.get(term) else { continue };
            let postings = &self.postings[term_id as usize];
            let idf = bm25_idf(self.len(), postings.len());
            for posting in postings {
                let slot = &mut scores[posting.row as usize];
                if *slot == 0.0 {
                    touched.push(posting.row);
                }
                *slot += norm.weight(idf, posting.tf, self.doc_len[posting.row as usize]);
            }
        }
        let mut hits: Vec<LexicalHit<K>> = touched
            .into_iter()
            .filter_map(|row| {
                let key = self.keys[row as usize];
                admit(key).then(|| LexicalHit { key, score: scores[row as usize] })
            })
            .collect();
        let order = |a: &LexicalHit<K>, b: &LexicalHit<K>| {
            b.score.total_cmp(&a.score).then(a.key.cmp(&b.key))
        };
        if hits.len() > n {
            hits.select_nth_unstable_by(n - 1, order);
            hits.truncate(n);
        }
        hits.sort_unstable_by(order);
        hits
    }

    /// Works every term's largest weight out again when the average length has outgrown the
    /// norm they were worked out under.
    fn bound_again_if_stale(&mut self) {
        let avg_len = self.avg_len();
        if avg_len <= self.bound_norm.avg_len {
            return;
        }
        self.bound_norm = BoundNorm::new(self.params, avg_len);
        let norm = self.bound_norm.norm;
        for (extremes, postings) in self.term_extremes.iter_mut().zip(&self.postings) {
            extremes.max_part = postings
                .iter()
                .map(|p| norm.part(p.tf, self.doc_len[p.row as usize]))
                .fold(0.0, f32::max);
        }
    }

    pub(crate) fn length_norm(&self) -> LengthNorm {
        LengthNorm::new(self.params, self.avg_len())
    }

    /// The documents' average length in terms (not a number when there are none).
    fn avg_len(&self) -> f32 {
        self.total_len as f32 / self.doc_len.len() as f32
    }
}

/// The query's distinct terms in sorted order: the order both scorers add weights in, so their
/// sums agree bit for bit.
fn distinct_terms(query_terms: &[String]) -> impl Iterator<Item = &str> {
    let mut distinct: Vec<&str> = query_terms.iter().map(String::as_str).collect();
    distinct.sort_unstable();
    distinct.dedup();
    distinct.into_iter()
}

#[cfg(test)]
pub(crate) mod tests;
