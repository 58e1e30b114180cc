//! BM25Okapi exactly as the released LongMemEval retrieval uses it (the `rank_bm25` package):
//! documents and queries split on single spaces (so empty tokens count), case-sensitive;
//! `idf = ln((N - n + 0.5) / (n + 0.5))`, and every negative idf replaced by
//! `epsilon * mean(idf)` over the vocabulary; query tokens repeat their contribution.

use std::collections::HashMap;

/// BM25Okapi parameters. The released evaluation uses [`Bm25OkapiParams::RELEASED`].
#[derive(Copy, Clone, Debug, PartialEq, serde::Serialize)]
pub struct Bm25OkapiParams {
    /// Term-frequency saturation.
    pub k1: f64,
    /// Length normalisation.
    pub b: f64,
    /// Floor for negative idfs, as a fraction of the mean idf.
    pub epsilon: f64,
}

impl Bm25OkapiParams {
    /// k1 = 1.5, b = 0.75, epsilon = 0.25 (the `rank_bm25` defaults the release uses).
    pub const RELEASED: Bm25OkapiParams = Bm25OkapiParams { k1: 1.5, b: 0.75, epsilon: 0.25 };
}

/// An in-memory BM25Okapi index over one question's documents.
#[derive(Clone, Debug)]
pub struct Bm25Okapi {
    params: Bm25OkapiParams,
    doc_freqs: Vec<HashMap<String, u32>>,
    doc_len: Vec<usize>,
    avgdl: f64,
    idf: HashMap<String, f64>,
}

/// The released tokenizer: split on single spaces.
pub fn split_on_spaces(text: &str) -> impl Iterator<Item = &str> {
    text.split(' ')
}

impl Bm25Okapi {
    /// Indexes `docs` (at least one).
    pub fn new<'a>(docs: impl IntoIterator<Item = &'a str>, params: Bm25OkapiParams) -> Bm25Okapi {
        let mut doc_freqs = Vec::new();
        let mut doc_len = Vec::new();
        // Vocabulary in first-seen order, so that the idf mean is summed in the order Python does.
        let mut df: HashMap<String, (usize, u32)> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        let mut total_len = 0usize;
        for doc in docs {
            let mut freqs: HashMap<String, u32> = HashMap::new();
            let mut seen_order: Vec<&str> = Vec::new();
            let mut len = 0;
            for token in split_on_spaces(doc) {
                len += 1;
                let slot = freqs.entry(token.to_owned()).or_insert(0);
                if *slot == 0 {
                    seen_order.push(token);
                }
                *slot += 1;
            }
            for token in seen_order {
                let entry = df.entry(token.to_owned()).or_insert_with(|| {
                    order.push(token.to_owned());
                    (order.len() - 1, 0)
                });
                entry.1 += 1;
            }
            total_len += len;
            doc_len.push(len);
            doc_freqs.push(freqs);
        }
        let n_docs = doc_freqs.len() as f64;
        let avgdl = if doc_freqs.is_empty() { 0.0 } else { total_len as f64 / n_docs };
        let mut idf = HashMap::with_capacity(order.len());
        let mut idf_sum = 0.0;
        let mut negative = Vec::new();
        for word in &order {
            let n = f64::from(df[word].1);
            let value = (n_docs - n + 0.5).ln() - (n + 0.5).ln();
            idf_sum += value;
            if value < 0.0 {
                negative.push(word);
            }
            idf.insert(word.clone(), value);
        }
        let floor = params.epsilon * idf_sum / order.len().max(1) as f64;
        for word in negative {
            idf.insert(word.clone(), floor);
        }
        Bm25Okapi { params, doc_freqs, doc_len, avgdl, idf }
    }

    /// The score of every document for `query`, in document order.
    pub fn scores(&self, query: &str) -> Vec<f64> {
        let Bm25OkapiParams { k1, b, .. } = self.params;
        let mut scores = vec![0.0; self.doc_freqs.len()];
        for token in split_on_spaces(query) {
            let idf = self.idf.get(token).copied().unwrap_or(0.0);
            for (score, (freqs, &len)) in
                scores.iter_mut().zip(self.doc_freqs.iter().zip(&self.doc_len))
            {
                let tf = f64::from(freqs.get(token).copied().unwrap_or(0));
                *score +=
                    idf * (tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * len as f64 / self.avgdl)));
            }
        }
        scores
    }

    /// Document indexes best first. Ties go to the later document, as the release's
    /// `np.argsort(scores)[::-1]` orders them for small inputs.
    pub fn ranking(&self, query: &str) -> Vec<usize> {
        let scores = self.scores(query);
        let mut order: Vec<usize> = (0..scores.len()).collect();
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(b.cmp(&a)));
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_rank_bm25_on_a_worked_example() {
        // Three documents; "the" is in all three (idf < 0, floored), "cat" in one.
        let docs = ["the cat sat", "the dog", "the  bird flew away"];
        let bm25 = Bm25Okapi::new(docs, Bm25OkapiParams::RELEASED);
        // idf(cat) = ln(2.5/1.5); idf(the) = ln(0.5/3.5) < 0 -> 0.25 * mean idf
        let n = 3.0f64;
        let idf_one = ((n - 1.0 + 0.5) / 1.5f64).ln();
        let idf_the = (0.5f64 / 3.5).ln();
        // vocabulary: the, cat, sat, dog, "", bird, flew, away -> 7 words with df 1, "the" df 3
        let mean = (7.0 * idf_one + idf_the) / 8.0;
        let avgdl = (3.0 + 2.0 + 5.0) / 3.0;
        let term =
            |idf: f64, tf: f64, len: f64| idf * tf * 2.5 / (tf + 1.5 * (0.25 + 0.75 * len / avgdl));
        let scores = bm25.scores("cat the");
        let expect0 = term(idf_one, 1.0, 3.0) + term(0.25 * mean, 1.0, 3.0);
        assert!((scores[0] - expect0).abs() < 1e-12, "{scores:?}");
        assert!((scores[1] - term(0.25 * mean, 1.0, 2.0)).abs() < 1e-12);
        assert_eq!(bm25.ranking("cat the")[0], 0);
        // case-sensitive, and unknown tokens score 0; ties go to the later document
        assert_eq!(bm25.scores("Cat"), vec![0.0; 3]);
        assert_eq!(bm25.ranking("Cat"), vec![2, 1, 0]);
    }
}
