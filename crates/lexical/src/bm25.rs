//! BM25 scoring: parameters and the formulas, kept apart from the index that feeds them.
//!
//! score(d, q) = Σ over distinct query terms t present in d of
//! `idf(t) · tf(t, d) · (k1 + 1) / (tf(t, d) + k1 · (1 − b + b · |d| / avgdl))`, with the
//! non-negative idf of Lucene, `ln(1 + (N − df + 0.5) / (df + 0.5))`, where N counts the index's
//! documents. A query term repeated in the query counts once.

/// BM25 parameters. No `Default`: both change results, so every caller states them.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct Bm25Params {
    /// Term-frequency saturation (commonly 0.9 to 2.0).
    pub k1: f32,
    /// Length normalisation, 0 (none) to 1 (full).
    pub b: f32,
}

/// The largest `k1` taken. Beyond a few, BM25 is already plain tf-idf; near `f32::MAX` the
/// score's `k1 + 1` factor overflows to infinity and ranks turn to NaN.
pub const MAX_K1: f32 = 1_000.0;

impl Bm25Params {
    /// Checks the parameters: `k1` in 0..=[`MAX_K1`], `b` in 0..=1.
    pub fn validate(self) -> Result<Bm25Params, crate::LexicalError> {
        if !(0.0..=MAX_K1).contains(&self.k1) {
            return Err(crate::LexicalError::InvalidParam { field: "k1", value: self.k1 });
        }
        if !(0.0..=1.0).contains(&self.b) {
            return Err(crate::LexicalError::InvalidParam { field: "b", value: self.b });
        }
        Ok(self)
    }
}

/// Lucene's non-negative BM25 idf for a term in `df` of `n_docs` documents.
pub fn bm25_idf(n_docs: usize, df: usize) -> f32 {
    let (n, df) = (n_docs as f64, df as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln() as f32
}

/// The length-normalisation constants of one query: the term weight is
/// `idf · tf · (k1 + 1) / (tf + base + per_len · |d|)`.
#[derive(Copy, Clone, Debug)]
pub(crate) struct LengthNorm {
    pub(crate) k1_plus_1: f32,
    pub(crate) base: f32,
    pub(crate) per_len: f32,
}

impl LengthNorm {
    pub(crate) fn new(params: Bm25Params, avg_len: f32) -> LengthNorm {
        let avg_len = if avg_len > 0.0 { avg_len } else { 1.0 };
        LengthNorm {
            k1_plus_1: params.k1 + 1.0,
            base: params.k1 * (1.0 - params.b),
            per_len: params.k1 * params.b / avg_len,
        }
    }

    /// The weight over the idf: `tf · (k1 + 1) / (tf + base + per_len · |d|)`.
    #[inline]
    pub(crate) fn part(self, tf: u32, doc_len: u32) -> f32 {
        let tf = tf as f32;
        tf * self.k1_plus_1 / (tf + self.base + self.per_len * doc_len as f32)
    }

    #[inline]
    pub(crate) fn weight(self, idf: f32, tf: u32, doc_len: u32) -> f32 {
        let tf = tf as f32;
        idf * tf * self.k1_plus_1 / (tf + self.base + self.per_len * doc_len as f32)
    }
}

/// One scored document.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct LexicalHit<K> {
    /// The document's key (an `evicortex_core::TurnId` for turns).
    pub key: K,
    /// The BM25 score.
    pub score: f32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idf_is_positive_and_decreasing_in_df() {
        assert!(bm25_idf(100, 100) > 0.0);
        assert!(bm25_idf(100, 1) > bm25_idf(100, 10));
        assert!((bm25_idf(1, 1) - (1.0f64 + 0.5 / 1.5).ln() as f32).abs() < 1e-6);
    }

    #[test]
    fn weight_saturates_and_normalises_length() {
        let norm = LengthNorm::new(Bm25Params { k1: 1.2, b: 0.75 }, 10.0);
        assert!(norm.weight(1.0, 2, 10) > norm.weight(1.0, 1, 10));
        assert!(norm.weight(1.0, 1, 5) > norm.weight(1.0, 1, 20));
        // b = 0: no length effect; weight tends to (k1 + 1) · idf.
        let flat = LengthNorm::new(Bm25Params { k1: 1.2, b: 0.0 }, 10.0);
        assert_eq!(flat.weight(1.0, 1, 5), flat.weight(1.0, 1, 500));
        assert!(flat.weight(1.0, 10_000, 5) < 2.2);
    }

    #[test]
    fn refuses_out_of_range_params() {
        assert!(Bm25Params { k1: -1.0, b: 0.5 }.validate().is_err());
        assert!(Bm25Params { k1: 1.0, b: 1.5 }.validate().is_err());
        assert!(Bm25Params { k1: f32::NAN, b: 0.5 }.validate().is_err());
        assert!(Bm25Params { k1: f32::MAX / 2.0, b: 0.5 }.validate().is_err());
        assert!(Bm25Params { k1: MAX_K1, b: 0.5 }.validate().is_ok());
    }
}
