//! The second-stage scorer: a stronger sentence encoder scores the fused candidates by cosine
//! with the question, embedding only those candidates, each once.

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicUsize, Ordering},
    },
};

use evicortex_compiler::{RerankError, Reranker};
use evicortex_core::TextDigest;
use evicortex_embed::{EmbeddingRole, Encoder, EncoderIdentityDigest, cosine};

use crate::{check_depth, check_finite};

/// Where candidate vectors are kept between questions, by encoder identity and text digest. A
/// text's entry holds one vector per window (one when the text fits the encoder).
pub trait CandidateVectors: Send + Sync + std::fmt::Debug {
    /// The vectors stored for `text` under `identity`, if any.
    fn get(&self, identity: &EncoderIdentityDigest, text: &TextDigest) -> Option<Arc<[Vec<f32>]>>;
    /// Stores the vectors of `text` under `identity`.
    fn put(&self, identity: &EncoderIdentityDigest, text: &TextDigest, vectors: Arc<[Vec<f32>]>);
}

type Key = (EncoderIdentityDigest, TextDigest);

/// The vectors by key, and the keys in the order they were stored.
type Entries = (HashMap<Key, Arc<[Vec<f32>]>>, VecDeque<Key>);

/// [`CandidateVectors`] in memory, holding at most `capacity` texts (the oldest stored is
/// dropped first).
#[derive(Debug)]
pub struct InMemoryVectors {
    capacity: usize,
    entries: Mutex<Entries>,
}

impl InMemoryVectors {
    /// An empty store for at most `capacity` texts (at least one).
    pub fn new(capacity: usize) -> InMemoryVectors {
        InMemoryVectors {
            capacity: capacity.max(1),
            entries: Mutex::new((HashMap::new(), VecDeque::new())),
        }
    }

    /// Texts held now.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).0.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops the vectors of `texts` under every identity (an erasure orphaned them).
    pub fn remove_texts(&self, texts: &[TextDigest]) {
        if texts.is_empty() {
            return;
        }
        let gone: std::collections::HashSet<&TextDigest> = texts.iter().collect();
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (map, order) = &mut *entries;
        map.retain(|(_, text), _| !gone.contains(text));
        order.retain(|(_, text)| !gone.contains(text));
    }
}

impl CandidateVectors for InMemoryVectors {
    fn get(&self, identity: &EncoderIdentityDigest, text: &TextDigest) -> Option<Arc<[Vec<f32>]>> {
        let entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        entries.0.get(&(*identity, *text)).cloned()
    }

    fn put(&self, identity: &EncoderIdentityDigest, text: &TextDigest, vectors: Arc<[Vec<f32>]>) {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        let (map, order) = &mut *entries;
        let key = (*identity, *text);
        if map.insert(key, vectors).is_none() {
            order.push_back(key);
        }
        while map.len() > self.capacity {
            let Some(oldest) = order.pop_front() else { break };
            map.remove(&oldest);
        }
    }
}

/// Scores candidates by the cosine between the question's vector (query role) and each
/// candidate's (document role; the best window when the encoder windows long texts).
#[derive(Debug)]
pub struct CosineReranker {
    encoder: Arc<dyn Encoder>,
    vectors: Arc<dyn CandidateVectors>,
    name: String,
    embedded_texts: AtomicUsize,
    /// The last question and its vector: a question is compiled at several budgets in a row.
    last_query: Mutex<Option<(String, Vec<f32>)>>,
}

impl CosineReranker {
    /// Scores with `encoder`, keeping candidate vectors in `vectors`.
    pub fn new(encoder: Arc<dyn Encoder>, vectors: Arc<dyn CandidateVectors>) -> CosineReranker {
        let name = format!(
            "encoder-cosine:{}@{}",
            encoder.identity().model,
            &encoder.identity_digest().to_hex()[..16]
        );
        CosineReranker {
            encoder,
            vectors,
            name,
            embedded_texts: AtomicUsize::new(0),
            last_query: Mutex::new(None),
        }
    }

    /// The encoder.
    pub fn encoder(&self) -> &Arc<dyn Encoder> {
        &self.encoder
    }

    /// Candidate texts this reranker has embedded so far (cache misses).
    pub fn embedded_texts(&self) -> usize {
        self.embedded_texts.load(Ordering::Relaxed)
    }

    /// The question's vector (query role), reused while the same question is scored again.
    fn query_vector(&self, question: &str) -> Result<Vec<f32>, String> {
        let mut last = self.last_query.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((q, v)) = last.as_ref().filter(|(q, _)| q == question) {
            debug_assert_eq!(q, question);
            return Ok(v.clone());
        }
        let embedded = self
            .encoder
            .embed(EmbeddingRole::Query, &[question])
            .map_err(|err| format!("embedding the question: {err}"))?;
        let Some(vector) = embedded.first().and_then(|q| q.single()) else {
            return Err("the question does not fit in one vector".to_owned());
        };
        *last = Some((question.to_owned(), vector.to_vec()));
        Ok(vector.to_vec())
    }

    /// The vectors of every passage, from the store or embedded now (misses in one call).
    fn passage_vectors(&self, passages: &[&str]) -> Result<Vec<Arc<[Vec<f32>]>>, RerankError> {
        let identity = self.encoder.identity_digest();
        let digests: Vec<TextDigest> = passages.iter().map(|p| TextDigest::of(p)).collect();
        let mut found: Vec<Option<Arc<[Vec<f32>]>>> =
            digests.iter().map(|d| self.vectors.get(&identity, d)).collect();
        // Distinct missing texts, each embedded once even when it appears twice.
        let mut missing: Vec<usize> = Vec::new();
        for (i, slot) in found.iter().enumerate() {
            if slot.is_none() && !missing.iter().any(|&m| digests[m] == digests[i]) {
                missing.push(i);
            }
        }
        if !missing.is_empty() {
            let texts: Vec<&str> = missing.iter().map(|&i| passages[i]).collect();
            let embedded = self.encoder.embed(EmbeddingRole::Document, &texts).map_err(|err| {
                RerankError { reason: format!("{}: embedding candidates: {err}", self.name) }
            })?;
            self.embedded_texts.fetch_add(texts.len(), Ordering::Relaxed);
            for (&i, embedding) in missing.iter().zip(embedded) {
                let windows: Arc<[Vec<f32>]> =
                    embedding.windows.into_iter().map(|w| w.vector).collect();
                self.vectors.put(&identity, &digests[i], Arc::clone(&windows));
                for (slot, digest) in found.iter_mut().zip(&digests) {
                    if slot.is_none() && *digest == digests[i] {
                        *slot = Some(Arc::clone(&windows));
                    }
                }
            }
        }
        Ok(found.into_iter().map(|v| v.expect("every passage is found or embedded")).collect())
    }
}

impl Reranker for CosineReranker {
    fn name(&self) -> &str {
        &self.name
    }

    fn score(&self, question: &str, passages: &[&str]) -> Result<Vec<f32>, RerankError> {
        check_depth(passages)?;
        let _span = tracing::debug_span!("cosine_rerank", n = passages.len()).entered();
        let fail = |err: String| RerankError { reason: format!("{}: {err}", self.name) };
        let query = self.query_vector(question).map_err(fail)?;
        let query = query.as_slice();
        let scores = self
            .passage_vectors(passages)?
            .iter()
            .map(|windows| {
                windows.iter().map(|w| cosine(query, w)).fold(f32::NEG_INFINITY, f32::max)
            })
            .collect();
        check_finite(scores)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_in_memory_store_drops_the_oldest_beyond_its_capacity() {
        let store = InMemoryVectors::new(2);
        let id = EncoderIdentityDigest::from_bytes([7; 32]);
        let vectors = |x: f32| -> Arc<[Vec<f32>]> { Arc::from(vec![vec![x]]) };
        store.put(&id, &TextDigest::of("a"), vectors(1.0));
        store.put(&id, &TextDigest::of("b"), vectors(2.0));
        store.put(&id, &TextDigest::of("a"), vectors(1.0));
        assert_eq!(store.len(), 2);
        store.put(&id, &TextDigest::of("c"), vectors(3.0));
        assert_eq!(store.len(), 2);
        assert!(store.get(&id, &TextDigest::of("a")).is_none());
        assert_eq!(store.get(&id, &TextDigest::of("c")).unwrap()[0], vec![3.0]);
        let other = EncoderIdentityDigest::from_bytes([8; 32]);
        assert!(store.get(&other, &TextDigest::of("c")).is_none(), "identities never mix");
    }
}
