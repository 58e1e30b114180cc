//! Model-backed rerankers behind the compiler's [`Reranker`] seam (at most
//! [`MAX_RERANK_DEPTH`] candidates; the compiler records the raw scores and fuses only their
//! ordinal ranks):
//!
//! - [`CrossEncoderReranker`]: a BERT cross-encoder (MS MARCO format) scoring each
//!   (question, passage) pair; the score is the raw logit.
//! - [`CosineReranker`]: a second stage that embeds only the fused candidates with a stronger
//!   encoder (all-mpnet-base-v2) and scores them by cosine with the question. Candidate vectors
//!   are kept by content and encoder identity ([`CandidateVectors`]), so a turn is embedded once
//!   however many questions fetch it.
//!
//! This crate sits above `compiler` and `embed` so that neither depends on the other.

mod cosine;
mod cross;

pub use crate::{
    cosine::{CandidateVectors, CosineReranker, InMemoryVectors},
    cross::CrossEncoderReranker,
};
pub use evicortex_compiler::{MAX_RERANK_DEPTH, RerankError, Reranker};

/// Refuses more passages than the seam allows.
fn check_depth(passages: &[&str]) -> Result<(), RerankError> {
    if passages.len() > MAX_RERANK_DEPTH {
        return Err(RerankError {
            reason: format!(
                "{} passages exceed the reranker's depth of {MAX_RERANK_DEPTH}",
                passages.len()
            ),
        });
    }
    Ok(())
}

/// Refuses a score that is not finite (the compiler would fuse its rank otherwise).
fn check_finite(scores: Vec<f32>) -> Result<Vec<f32>, RerankError> {
    match scores.iter().position(|s| !s.is_finite()) {
        Some(i) => Err(RerankError { reason: format!("passage {i} scored {}", scores[i]) }),
        None => Ok(scores),
    }
}
