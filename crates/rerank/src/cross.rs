//! The cross-encoder behind the seam.

use evicortex_compiler::{RerankError, Reranker};
use evicortex_embed::CrossEncoder;

use crate::{check_depth, check_finite};

/// Scores each (question, passage) pair with a BERT cross-encoder; the score is its raw logit.
#[derive(Debug)]
pub struct CrossEncoderReranker {
    encoder: CrossEncoder,
}

impl CrossEncoderReranker {
    /// Wraps a loaded cross-encoder (see [`CrossEncoder::load`]).
    pub fn new(encoder: CrossEncoder) -> CrossEncoderReranker {
        CrossEncoderReranker { encoder }
    }

    /// The cross-encoder.
    pub fn encoder(&self) -> &CrossEncoder {
        &self.encoder
    }
}

impl Reranker for CrossEncoderReranker {
    fn name(&self) -> &str {
        self.encoder.name()
    }

    fn score(&self, question: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError> {
        check_depth(passages)?;
        let scores = self
            .encoder
            .score(question, passages)
            .map_err(|err| RerankError { reason: format!("{}: {err}", self.encoder.name()) })?;
        check_finite(scores)
    }
}
