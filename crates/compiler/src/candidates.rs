//! Candidate lists: what each retriever proposes, ranked, with the filters applied inside.

use evicortex_core::TurnId;
use evicortex_lexical::LexicalHit;
use evicortex_vector::{IndexKind, VectorIndexRead};
use serde::{Deserialize, Serialize};

use crate::{Admission, CompileError, ContextVectors, Corpus};

/// How many encoders a compile fuses besides the first ([`CompileInputs::also_dense`]).
///
/// [`CompileInputs::also_dense`]: crate::CompileInputs::also_dense
pub const MAX_ALSO_ENCODERS: usize = 3;

const ALSO_NAMES: [&str; MAX_ALSO_ENCODERS] = ["dense_2", "dense_3", "dense_4"];
const ALSO_NAMED_NAMES: [&str; MAX_ALSO_ENCODERS] =
    ["dense_2_named", "dense_3_named", "dense_4_named"];

/// A source of ranks that enters fusion: a candidate list. Serialised as its name
/// ([`Retriever::as_str`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", try_from = "String")]
pub enum Retriever {
    /// BM25 over the turns' documents.
    Lexical,
    /// Cosine similarity under the namespace's encoder.
    Dense,
    /// BM25 over the turns' window documents (context).
    LexicalContext,
    /// Cosine with the turns' context vectors (context).
    DenseContext,
    /// The lexical list filtered to the named speakers' turns (names).
    LexicalNamed,
    /// The dense list filtered to the named speakers' turns (names).
    DenseNamed,
    /// The lexical context list filtered to the named speakers' turns (names).
    LexicalContextNamed,
    /// The dense context list filtered to the named speakers' turns (names).
    DenseContextNamed,
    /// The fused candidates said in the question's time window (time).
    TimeWindow,
    /// The fused candidates of the best-scored sessions (session).
    Session,
    /// The reranker over the best fused candidates.
    Rerank,
    /// BM25 for the question with the feedback turns' expansion terms (feedback).
    LexicalFeedback,
    /// Cosine with the query vector moved toward the feedback turns' vectors (feedback).
    DenseFeedback,
    /// Turns sharing a rare name with a feedback turn (links).
    Linked,
    /// Cosine similarity under an also-encoder the compile fuses: `DenseAlso(0)` is the
    /// second encoder (`dense_2`), up to [`MAX_ALSO_ENCODERS`].
    DenseAlso(u8),
    /// An also-encoder's list filtered to the named speakers' turns (names).
    DenseAlsoNamed(u8),
}

impl From<Retriever> for &'static str {
    fn from(retriever: Retriever) -> &'static str {
        retriever.as_str()
    }
}

impl TryFrom<String> for Retriever {
    type Error = String;

    fn try_from(name: String) -> Result<Retriever, String> {
        name.parse()
    }
}

impl std::str::FromStr for Retriever {
    type Err = String;

    fn from_str(name: &str) -> Result<Retriever, String> {
        let fixed = [
            Retriever::Lexical,
            Retriever::Dense,
            Retriever::LexicalContext,
            Retriever::DenseContext,
            Retriever::LexicalNamed,
            Retriever::DenseNamed,
            Retriever::LexicalContextNamed,
            Retriever::DenseContextNamed,
            Retriever::TimeWindow,
            Retriever::Session,
            Retriever::Rerank,
            Retriever::LexicalFeedback,
            Retriever::DenseFeedback,
            Retriever::Linked,
        ];
        let also = (0..MAX_ALSO_ENCODERS as u8)
            .flat_map(|i| [Retriever::DenseAlso(i), Retriever::DenseAlsoNamed(i)]);
        fixed
            .into_iter()
            .chain(also)
            .find(|r| r.as_str() == name)
            .ok_or_else(|| format!("unknown candidate list {name:?}"))
    }
}

impl Retriever {
    /// The list of the same ranking filtered to named speakers, for the four turn lists.
    pub fn named(self) -> Option<Retriever> {
        Some(match self {
            Retriever::Lexical => Retriever::LexicalNamed,
            Retriever::Dense => Retriever::DenseNamed,
            Retriever::LexicalContext => Retriever::LexicalContextNamed,
            Retriever::DenseContext => Retriever::DenseContextNamed,
            Retriever::DenseAlso(i) => Retriever::DenseAlsoNamed(i),
            _ => return None,
        })
    }

    /// Which mechanism the list belongs to, as the explanation names it.
    pub fn mechanism(self) -> &'static str {
        match self {
            Retriever::Lexical | Retriever::Dense | Retriever::DenseAlso(_) => "retrieval",
            Retriever::LexicalContext | Retriever::DenseContext => "context",
            Retriever::LexicalNamed
            | Retriever::DenseNamed
            | Retriever::LexicalContextNamed
            | Retriever::DenseContextNamed
            | Retriever::DenseAlsoNamed(_) => "names",
            Retriever::TimeWindow => "time window",
            Retriever::Session => "session",
            Retriever::Rerank => "reranker",
            Retriever::LexicalFeedback | Retriever::DenseFeedback => "feedback",
            Retriever::Linked => "links",
        }
    }

    /// The list's name in the explanation and the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Retriever::Lexical => "lexical",
            Retriever::Dense => "dense",
            Retriever::LexicalContext => "lexical_context",
            Retriever::DenseContext => "dense_context",
            Retriever::LexicalNamed => "lexical_named",
            Retriever::DenseNamed => "dense_named",
            Retriever::LexicalContextNamed => "lexical_context_named",
            Retriever::DenseContextNamed => "dense_context_named",
            Retriever::TimeWindow => "time_window",
            Retriever::Session => "session",
            Retriever::Rerank => "rerank",
            Retriever::LexicalFeedback => "lexical_feedback",
            Retriever::DenseFeedback => "dense_feedback",
            Retriever::Linked => "linked",
            // A compile refuses more than MAX_ALSO_ENCODERS also-encoders.
            Retriever::DenseAlso(i) => ALSO_NAMES.get(usize::from(i)).unwrap_or(&"dense_other"),
            Retriever::DenseAlsoNamed(i) => {
                ALSO_NAMED_NAMES.get(usize::from(i)).unwrap_or(&"dense_other_named")
            }
        }
    }
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

/// A lexical search's hits as `retriever`'s list.
pub(crate) fn lexical_list(hits: Vec<LexicalHit<TurnId>>, retriever: Retriever) -> RankedList {
    let hits = hits.into_iter().map(|h| ScoredKey { key: h.key, score: h.score }).collect();
    RankedList { retriever, hits }
}

/// The context vectors' top `top_n` turns among those `admit` accepts: over every context
/// vector, or, given `seeded` (the corpus and seed records), over the windows holding a seed.
pub fn dense_context_candidates(
    vectors: &ContextVectors,
    query_vector: &[f32],
    top_n: usize,
    seeded: Option<(&Corpus, &[TurnId])>,
    admit: impl FnMut(TurnId) -> bool,
) -> Result<RankedList, CompileError> {
    let _span = tracing::debug_span!("dense_context_candidates", top_n, seeded = seeded.is_some())
        .entered();
    let hits = match seeded {
        Some((corpus, seeds)) => {
            vectors.search_seeded(corpus, query_vector, top_n, seeds.iter().copied(), admit)?
        }
        None => vectors.search(query_vector, top_n, admit)?,
    };
    let hits = hits.into_iter().map(|h| ScoredKey { key: h.key, score: h.score }).collect();
    Ok(RankedList { retriever: Retriever::DenseContext, hits })
}

/// The vector index's top `top_n` admitted turns for the query vector, as `retriever`'s list,
/// with the `pool` admitted turns the index ranks best besides
/// ([`VectorIndexRead::search_pooled`]: seeds for a search around them) and the kind of index
/// that served them. `last_admitted`, when given, is a turn after which `admission` admits none
/// (an as-of time's last admitted record): the index need not read past it.
pub fn dense_candidates_pooled(
    index: &dyn VectorIndexRead,
    query_vector: &[f32],
    top_n: usize,
    pool: usize,
    admission: &Admission<'_>,
    last_admitted: Option<TurnId>,
    retriever: Retriever,
) -> Result<(RankedList, Vec<TurnId>, IndexKind), CompileError> {
    let _span = tracing::debug_span!("dense_candidates_pooled", top_n, pool).entered();
    let admit = &mut |id| admission.admits(id);
    let found = match last_admitted {
        Some(last) => index.search_pooled_up_to(query_vector, top_n, pool, last, admit)?,
        None => index.search_pooled(query_vector, top_n, pool, admit)?,
    };
    Ok((ranked(retriever, found.hits), found.pool, found.served))
}

fn ranked(retriever: Retriever, hits: Vec<evicortex_vector::VectorHit<TurnId>>) -> RankedList {
    let hits = hits.into_iter().map(|h| ScoredKey { key: h.key, score: h.score }).collect();
    RankedList { retriever, hits }
}
