//! The reranker seam: a scorer over at most [`MAX_RERANK_DEPTH`] fused candidates. Its raw scores
//! are recorded; only its ordinal ranks enter fusion, as one more RRF term.

use std::collections::HashSet;

use evicortex_lexical::analyze;

/// The most candidates a reranker ever sees.
pub const MAX_RERANK_DEPTH: usize = 16;

/// Scores passages against a question; higher is better. Scores need not be comparable across
/// questions or rerankers, only within one call.
pub trait Reranker: Send + Sync + std::fmt::Debug {
    /// A stable name, recorded in the output (include a version or weights digest).
    fn name(&self) -> &str;
    /// One finite score per passage, in passage order.
    fn score(&self, question: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError>;
}

/// A reranker failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct RerankError {
    /// What went wrong.
    pub reason: String,
}

/// A deterministic lexical reranker: the share of the question's distinct analyzed terms that a
/// passage contains. No model; it exists to exercise the seam, and as a cheap baseline.
#[derive(Copy, Clone, Debug)]
pub struct TermOverlapReranker;

impl Reranker for TermOverlapReranker {
    fn name(&self) -> &str {
        "term-overlap-v1"
    }

    fn score(&self, question: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError> {
        let question: HashSet<String> = analyze(question).into_iter().collect();
        Ok(passages
            .iter()
            .map(|p| {
                if question.is_empty() {
                    return 0.0;
                }
                let terms: HashSet<String> = analyze(p).into_iter().collect();
                question.iter().filter(|t| terms.contains(*t)).count() as f32
                    / question.len() as f32
            })
            .collect())
    }
}

/// Ordinal ranks (from 1) of `scores`, by descending score, ties by position.
pub(crate) fn ranks_of(scores: &[f32]) -> Vec<u32> {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
    let mut ranks = vec![0; scores.len()];
    for (rank, idx) in order.into_iter().enumerate() {
        ranks[idx] = rank as u32 + 1;
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_term_share_and_ranks_ties_by_position() {
        let scores = TermOverlapReranker
            .score("where is Lisbon", &["Lisbon is nice", "where is it", "no"])
            .unwrap();
        assert_eq!(scores, vec![2.0 / 3.0, 2.0 / 3.0, 0.0]);
        assert_eq!(ranks_of(&scores), vec![1, 2, 3]);
        assert_eq!(ranks_of(&[0.1, 0.9, 0.5]), vec![3, 1, 2]);
    }
}
