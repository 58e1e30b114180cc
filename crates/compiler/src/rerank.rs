//! The reranker seam: a scorer over at most [`MAX_RERANK_DEPTH`] fused candidates. Its raw scores
//! are recorded; only its ordinal ranks enter fusion, as one more RRF term.

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
    fn ranks_descend_by_score_and_ties_go_by_position() {
        assert_eq!(ranks_of(&[2.0 / 3.0, 2.0 / 3.0, 0.0]), vec![1, 2, 3]);
        assert_eq!(ranks_of(&[0.1, 0.9, 0.5]), vec![3, 1, 2]);
    }
}
