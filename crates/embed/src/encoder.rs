//! The `Encoder` trait: role-aware text embedding under a fixed [`EncoderIdentity`].

use std::ops::Range;

use crate::{
    error::EmbedError,
    identity::{EncoderIdentity, EncoderIdentityDigest},
};

/// Whether a text is a query or a stored document; models may prefix or encode them differently.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum EmbeddingRole {
    /// A question asked of the memory.
    Query,
    /// Stored evidence.
    Document,
}

/// One vector of a text: the whole text, or one window of it.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddedWindow {
    /// The text's content tokens (special tokens excluded) this vector covers.
    pub content_tokens: Range<usize>,
    /// The vector.
    pub vector: Vec<f32>,
}

/// The embedding of one text.
#[derive(Clone, Debug, PartialEq)]
pub struct TextEmbedding {
    /// Length of the text in encoder tokens, special tokens included, before any truncation.
    pub token_count: usize,
    /// One vector, or several when the overlength policy is `window` and the text is long.
    pub windows: Vec<EmbeddedWindow>,
}

impl TextEmbedding {
    /// The vector of a text that produced exactly one.
    pub fn single(&self) -> Option<&[f32]> {
        match self.windows.as_slice() {
            [one] => Some(&one.vector),
            _ => None,
        }
    }
}

/// A text encoder with a fixed identity.
pub trait Encoder: Send + Sync + std::fmt::Debug {
    /// The identity stored with every vector this encoder produces.
    fn identity(&self) -> &EncoderIdentity;

    /// Digest of [`Encoder::identity`].
    fn identity_digest(&self) -> EncoderIdentityDigest;

    /// Vector dimension.
    fn dimension(&self) -> usize;

    /// Length of `text` in encoder tokens for `role`, prefix and special tokens included, without
    /// truncation.
    fn count_tokens(&self, role: EmbeddingRole, text: &str) -> Result<usize, EmbedError>;

    /// [`Encoder::count_tokens`] of each text.
    fn count_tokens_many(
        &self,
        role: EmbeddingRole,
        texts: &[&str],
    ) -> Result<Vec<usize>, EmbedError> {
        texts.iter().map(|text| self.count_tokens(role, text)).collect()
    }

    /// Embeds `texts` in the given role. Every text is measured before the model runs; under the
    /// `refuse` policy one overlength text fails the whole call and nothing is embedded.
    fn embed(&self, role: EmbeddingRole, texts: &[&str]) -> Result<Vec<TextEmbedding>, EmbedError>;

    /// Embeds stored evidence.
    fn embed_documents(&self, texts: &[&str]) -> Result<Vec<TextEmbedding>, EmbedError> {
        self.embed(EmbeddingRole::Document, texts)
    }

    /// Embeds a query.
    fn embed_query(&self, text: &str) -> Result<TextEmbedding, EmbedError> {
        let mut out = self.embed(EmbeddingRole::Query, &[text])?;
        Ok(out.remove(0))
    }

    /// Lowers the priority of the threads this encoder runs batches of several texts on (see
    /// [`crate::thread_priority`]), for an encoder that embeds in the background of a process
    /// answering requests. Queries (one text) run on the caller's thread and keep its priority.
    /// Permanent for this encoder. The default has no worker threads and does nothing.
    fn lower_worker_priority(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Limits on one forward pass. They change speed and memory, not results.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct BatchLimits {
    /// Most sequences in one batch.
    pub max_sequences: usize,
    /// Most tokens in one batch counting padding (sequences x longest sequence).
    pub max_padded_tokens: usize,
    /// Whether sequences are sorted by length before batching (so that batches hold similar
    /// lengths); `false` batches them in the order given, as a benchmark of unsorted input needs.
    pub sort_by_length: bool,
}

impl Default for BatchLimits {
    fn default() -> BatchLimits {
        BatchLimits { max_sequences: 64, max_padded_tokens: 8192, sort_by_length: true }
    }
}

/// Groups sequence lengths into batches: sorted by length (unless `limits` says otherwise),
/// each batch capped by `limits`. Returns batches of indices into `lengths`.
pub fn plan_batches(lengths: &[usize], limits: BatchLimits) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..lengths.len()).collect();
    if limits.sort_by_length {
        order.sort_by_key(|&i| (lengths[i], i));
    }
    let mut batches = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut longest = 0;
    for i in order {
        let padded = (current.len() + 1) * longest.max(lengths[i]);
        if !current.is_empty()
            && (current.len() == limits.max_sequences || padded > limits.max_padded_tokens)
        {
            batches.push(std::mem::take(&mut current));
            longest = 0;
        }
        longest = longest.max(lengths[i]);
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_sorted_and_capped_by_padded_tokens() {
        let lengths = [10, 3, 7, 3, 9, 2];
        let batches = plan_batches(
            &lengths,
            BatchLimits { max_sequences: 3, max_padded_tokens: 20, sort_by_length: true },
        );
        assert_eq!(batches, vec![vec![5, 1, 3], vec![2, 4], vec![0]]);
        for batch in &batches {
            let longest = batch.iter().map(|&i| lengths[i]).max().unwrap();
            assert!(batch.len() * longest <= 20 || batch.len() == 1);
        }
        let mut all: Vec<usize> = batches.concat();
        all.sort();
        assert_eq!(all, (0..lengths.len()).collect::<Vec<_>>());
    }

    #[test]
    fn unsorted_batches_keep_the_given_order_and_the_same_caps() {
        let lengths = [10, 3, 7, 3, 9, 2];
        let limits = BatchLimits { max_sequences: 3, max_padded_tokens: 20, sort_by_length: false };
        let batches = plan_batches(&lengths, limits);
        assert_eq!(batches, vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
        assert_eq!(batches.concat(), (0..lengths.len()).collect::<Vec<_>>());
        for batch in &batches {
            let longest = batch.iter().map(|&i| lengths[i]).max().unwrap();
            assert!(batch.len() * longest <= 20 || batch.len() == 1);
        }
    }
}
