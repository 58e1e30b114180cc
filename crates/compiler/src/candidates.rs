//! Candidate lists: what each retriever proposes, ranked, with the filters applied inside.

use evicortex_core::TurnId;
use evicortex_lexical::{Bm25Index, analyze};
use evicortex_vector::VectorIndexRead;
use serde::{Deserialize, Serialize};

use crate::{Admission, CompileError};

/// A source of ranks that enters fusion.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retriever {
    /// BM25 over the analyzed texts.
    Lexical,
    /// Cosine similarity under the namespace's encoder.
    Dense,
    /// The reranker over the best fused candidates.
    Rerank,
}

/// A key with the raw score its retriever gave it.
#[derive(Copy, Clone, Debug, PartialEq)]
pub struct ScoredKey<K = TurnId> {
    /// The record (or chunk) proposed.
    pub key: K,
    /// The retriever's raw score (BM25, cosine, reranker score); never added across retrievers.
    pub score: f32,
}

/// One retriever's candidates, best first: rank r (from 1) is `hits[r - 1]`.
#[derive(Clone, Debug, PartialEq)]
pub struct RankedList<K = TurnId> {
    /// Who ranked them.
    pub retriever: Retriever,
    /// The candidates in rank order, each key at most once.
    pub hits: Vec<ScoredKey<K>>,
}

/// BM25's top `top_n` admitted turns for `question`.
pub fn lexical_candidates(
    index: &Bm25Index,
    question: &str,
    top_n: usize,
    admission: &Admission<'_>,
) -> RankedList {
    let _span = tracing::debug_span!("lexical_candidates", top_n).entered();
    let hits = index
        .search(&analyze(question), top_n, |id| admission.admits(id))
        .into_iter()
        .map(|h| ScoredKey { key: h.key, score: h.score })
        .collect();
    RankedList { retriever: Retriever::Lexical, hits }
}

/// The vector index's top `top_n` admitted turns for the query vector.
pub fn dense_candidates(
    index: &dyn VectorIndexRead,
    query_vector: &[f32],
    top_n: usize,
    admission: &Admission<'_>,
) -> Result<RankedList, CompileError> {
    let _span = tracing::debug_span!("dense_candidates", top_n).entered();
    let hits = index
        .search(query_vector, top_n, &mut |id| admission.admits(id))?
        .into_iter()
        .map(|h| ScoredKey { key: h.key, score: h.score })
        .collect();
    Ok(RankedList { retriever: Retriever::Dense, hits })
}
