//! The compiler's output: the prompt block and the manifest that explains it.

use evicortex_core::{
    EventTime, EvidenceDigest, Namespace, Role, SessionId, TokenBudget, TurnId, TurnIndex,
};
use serde::{Deserialize, Serialize};

use crate::{CompileConfig, FilterReason, ResolvedTime, Retriever};

/// Format tag of [`CompiledContext`]'s JSON.
pub const COMPILED_CONTEXT_FORMAT: &str = "evicortex-compiled-context-2";

/// A compiled context: the text for the reader, or an abstention, with everything needed to audit
/// it. The same corpus, indexes, query and configuration give a byte-identical value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompiledContext {
    /// [`COMPILED_CONTEXT_FORMAT`].
    pub format: String,
    /// The namespace compiled from.
    pub namespace: Namespace,
    /// The question, verbatim.
    pub question: String,
    /// Turns after this instant were not admitted.
    pub as_of: Option<EventTime>,
    /// The prompt-ready block; empty when abstaining.
    pub text: String,
    /// Exact reader tokens of `text`.
    pub tokens_used: u32,
    /// The budget it was packed into.
    pub budget: TokenBudget,
    /// The reader tokenizer's name.
    pub reader_tokenizer: String,
    /// Whether the compiler declines to answer from memory.
    pub abstain: bool,
    /// Why it abstains.
    pub abstain_reason: Option<AbstainReason>,
    /// The support score under `config.abstention.signal`; `None` without candidates.
    pub support: Option<f32>,
    /// The turns in `text`, in the order they appear.
    pub items: Vec<ContextItem>,
    /// Candidates left out, with the reason.
    pub excluded: Vec<ExcludedCandidate>,
    /// The encoder the dense candidates came from; `None` when dense retrieval is off.
    pub encoder: Option<EncoderRef>,
    /// The vector index that served the dense candidates; `None` when dense retrieval is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_index: Option<DenseIndexRef>,
    /// How the dense context list was searched; `None` without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_search: Option<ContextSearch>,
    /// The also-encoders whose dense lists were fused beside `encoder`'s, in list order
    /// (`dense_2`, `dense_3`, ...); empty with one encoder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_dense: Vec<AlsoDenseRef>,
    /// The reranker's name when reranking is on.
    pub reranker: Option<String>,
    /// The ledger positions the inputs cover.
    pub coverage: Coverage,
    /// The lexical analyzer's version.
    pub analyzer: String,
    /// The namespace's speakers the question names (with `names` on and some, not all, named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named_speakers: Vec<String>,
    /// The question's time expression and the window it resolved to (with `time` on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_window: Option<ResolvedTime>,
    /// What feedback and links read and followed, when the configuration turns them on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<crate::FeedbackReport>,
    /// How `text`'s tokens divide between preamble, session headers and evidence lines; `None`
    /// when `text` is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_parts: Option<BudgetParts>,
    /// The full configuration.
    pub config: CompileConfig,
}

/// The parts of a compiled text in reader tokens, each piece counted alone: the preamble line,
/// the session header lines, and the evidence lines (the sum of the items' `tokens`). Tokens can
/// merge across piece boundaries, so the parts add up to about `tokens_used`, not exactly: the
/// exact count of the whole text is `tokens_used`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetParts {
    /// The preamble line.
    pub preamble: u32,
    /// Every session header line, with the blank line before it.
    pub headers: u32,
    /// Every cited turn line.
    pub evidence: u32,
}

/// Why the compiler abstains.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum AbstainReason {
    /// No admitted turn matched the question.
    NoCandidates,
    /// The support score is below the configured threshold.
    BelowThreshold {
        /// The support score.
        support: f32,
        /// The threshold.
        threshold: f32,
    },
    /// Candidates exist but not one fits the budget with its header and citation.
    NothingFits,
}

/// The encoder identity behind the dense candidates, as the memory facade describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncoderRef {
    /// Model name and revision.
    pub model: String,
    /// Digest of the full encoder identity.
    pub identity_digest: String,
}

/// An also-encoder fused into a compile: who it is, which index served its list, and how far
/// its vectors cover the namespace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlsoDenseRef {
    /// The encoder.
    pub encoder: EncoderRef,
    /// The index that served its candidates.
    pub index: DenseIndexRef,
    /// The namespace record up to which every turn was offered to this encoder.
    pub covers: Option<TurnId>,
    /// Turns of the namespace without a vector under this encoder yet.
    pub pending: u64,
}

/// How the dense context list was searched.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ContextSearch {
    /// Every admitted context vector scored.
    Exact,
    /// Only the windows holding one of the dense index's best `pool` turns (its beam), scored
    /// exactly: what a graph-served namespace does, since a full scan would cost what the graph
    /// saves. Approximate: which windows are scored depends on the beam.
    Seeded {
        /// How many of the dense index's best turns seeded it.
        pool: u32,
    },
}

/// Which vector index served the dense candidates: every admitted vector scored (`exact`), or
/// an HNSW graph with the parameters that decide which vectors it finds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DenseIndexRef {
    /// Exact cosine over every admitted vector.
    Exact,
    /// An HNSW graph (approximate: the scores are exact, which vectors are found is not).
    Hnsw {
        /// Links per row on the upper layers (twice that on layer 0).
        m: u32,
        /// Beam width of construction.
        ef_construction: u32,
        /// Beam width of search.
        ef_search: u32,
        /// Seed of the row levels.
        seed: u64,
    },
    /// The exact index's rows chosen by their sign sketch (one bit a dimension against a 4-bit
    /// query), the best `candidates` then scored exactly (approximate like a graph: the scores
    /// are exact, which vectors are found is not).
    Sketch {
        /// Admitted rows rescored exactly.
        candidates: u32,
        /// Turns that seed the dense context list.
        seeds: u32,
    },
    /// pgvector's HNSW index in a PostgreSQL store.
    PgvectorHnsw {
        /// Links per element on each layer.
        m: u32,
        /// Beam width of construction.
        ef_construction: u32,
        /// `hnsw.ef_search` of the search.
        ef_search: u32,
    },
    /// pgvector's exact scan over every admitted vector in a PostgreSQL store.
    PgvectorExact,
}

impl From<evicortex_vector::IndexKind> for DenseIndexRef {
    fn from(kind: evicortex_vector::IndexKind) -> DenseIndexRef {
        match kind {
            evicortex_vector::IndexKind::Exact => DenseIndexRef::Exact,
            evicortex_vector::IndexKind::Hnsw(p) => DenseIndexRef::Hnsw {
                m: p.m as u32,
                ef_construction: p.ef_construction as u32,
                ef_search: p.ef_search as u32,
                seed: p.seed,
            },
            evicortex_vector::IndexKind::Sketch(p) => {
                DenseIndexRef::Sketch { candidates: p.candidates as u32, seeds: p.seeds as u32 }
            }
            evicortex_vector::IndexKind::Pgvector(Some(p)) => DenseIndexRef::PgvectorHnsw {
                m: p.m,
                ef_construction: p.ef_construction,
                ef_search: p.ef_search,
            },
            evicortex_vector::IndexKind::Pgvector(None) => DenseIndexRef::PgvectorExact,
        }
    }
}

impl std::fmt::Display for DenseIndexRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DenseIndexRef::Exact => f.write_str("exact"),
            DenseIndexRef::Hnsw { m, ef_construction, ef_search, seed } => write!(
                f,
                "hnsw (m {m}, ef_construction {ef_construction}, ef_search {ef_search}, seed {seed:#x})"
            ),
            DenseIndexRef::Sketch { candidates, seeds } => {
                write!(f, "sign sketch (candidates {candidates}, seeds {seeds})")
            }
            DenseIndexRef::PgvectorHnsw { m, ef_construction, ef_search } => write!(
                f,
                "pgvector hnsw (m {m}, ef_construction {ef_construction}, ef_search {ef_search})"
            ),
            DenseIndexRef::PgvectorExact => f.write_str("pgvector exact"),
        }
    }
}

/// Ledger positions covered by the corpus and indexes compiled from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Coverage {
    /// The last record in the corpus.
    pub corpus_last_record: Option<TurnId>,
    /// What the lexical index covers.
    pub lexical: Option<TurnId>,
    /// What the vector index covers; `None` when dense is off.
    pub dense: Option<TurnId>,
    /// Turns of the namespace not embedded yet, so not dense candidates (they are still lexical
    /// candidates); `None` when dense is off. Non-zero means dense coverage lags the ledger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_pending: Option<u64>,
}

/// A retriever's rank (from 1) and raw score for one candidate.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RankScore {
    /// Rank in that retriever's list, from 1.
    pub rank: u32,
    /// The retriever's raw score.
    pub score: f32,
}

/// How an item came to be selected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Selection {
    /// A retrieved, fused candidate.
    Candidate,
    /// An adjacent turn of a selected one.
    Expansion {
        /// The selected turn it neighbours.
        of: TurnId,
    },
}

/// One turn in the compiled text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ContextItem {
    /// The citation marker in `text`, e.g. `#12`.
    pub citation: String,
    /// The ledger record.
    pub record: TurnId,
    /// The record's content digest.
    pub digest: EvidenceDigest,
    /// Its session.
    pub session: SessionId,
    /// Its index in the session.
    pub turn: TurnIndex,
    /// When it was said.
    pub time: EventTime,
    /// Who said it.
    pub role: Role,
    /// The speaker's name where known.
    pub speaker: Option<String>,
    /// The verbatim text (of the excerpt, for an excerpt).
    pub text: String,
    /// Where the text lies in the turn, when a long turn was packed as an excerpt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excerpt: Option<crate::Excerpt>,
    /// Other records with the same text, cited with this one.
    pub also_cited: Vec<TurnId>,
    /// Why it is here.
    pub selected_by: Selection,
    /// BM25 rank and score.
    pub lexical: Option<RankScore>,
    /// Dense rank and cosine.
    pub dense: Option<RankScore>,
    /// Reranker rank and raw score.
    pub rerank: Option<RankScore>,
    /// Ranks in the context, names, time-window, feedback and link lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lists: Vec<ListRank>,
    /// The rare names (and the records they were read in) that linked it, when the link list
    /// ranked it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub linked_by: Vec<crate::LinkName>,
    /// Rank in the order candidates were offered to the budget (after fusion, the reranker's
    /// term, the long-turn rule and the session spread), from 1.
    pub fused_rank: Option<u32>,
    /// The fused RRF score.
    pub fused_score: Option<f64>,
    /// What the long-turn rule divided the fused score by, when more than 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_divisor: Option<f32>,
    /// Whether the session spread moved it behind other sessions' candidates.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spread_deferred: bool,
    /// Reader tokens of this item's line counted alone (lines do not add up exactly to
    /// `tokens_used`, which is the exact count of the whole text).
    pub tokens: u32,
}

/// A candidate that is not in the text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExcludedCandidate {
    /// The ledger record.
    pub record: TurnId,
    /// Why it was left out.
    pub reason: ExclusionReason,
    /// BM25 rank and score, if it was a lexical candidate.
    pub lexical: Option<RankScore>,
    /// Dense rank and cosine, if it was a dense candidate.
    pub dense: Option<RankScore>,
    /// Ranks in the context, names and time-window lists.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lists: Vec<ListRank>,
    /// Rank after fusion, if it got that far.
    pub fused_rank: Option<u32>,
    /// What the long-turn rule divided the fused score by, when more than 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length_divisor: Option<f32>,
    /// Whether the session spread moved it behind other sessions' candidates.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub spread_deferred: bool,
}

/// A candidate's rank and raw score in one of the lists beyond lexical and dense.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ListRank {
    /// The list.
    pub list: Retriever,
    /// Rank in it, from 1.
    pub rank: u32,
    /// The list's raw score (BM25, cosine; the fused score for the time-window list).
    pub score: f32,
}

/// Why a candidate was left out.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ExclusionReason {
    /// It did not fit the budget.
    Budget,
    /// Its text is identical to an earlier record that stands for it (and cites it).
    Duplicate {
        /// The record kept.
        of: TurnId,
    },
    /// A filter rejected it (listed only with `report_filtered`).
    Filtered {
        /// Which filter.
        filter: FilterReason,
    },
    /// The compiler abstained.
    Abstained,
}

impl CompiledContext {
    /// The JSON form (pretty, stable field order).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("compiled context serialises: no maps with non-string keys")
    }

    /// A human-readable account of the decisions: support, the names and time window the
    /// question resolved to, each item with its ranks and the mechanisms that contributed
    /// (context, names, time window, reranker, long-turn rule, neighbour of a selected turn),
    /// each exclusion with its reason and the same.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        let support = self.support.map_or("none".to_owned(), |s| format!("{s:.4}"));
        let mut line = |text: String| {
            out.push_str(&text);
            out.push('\n');
        };
        line(format!(
            "namespace {} | budget {} {} | used {} | support {} ({:?}) | abstain {}",
            self.namespace,
            self.budget.tokens(),
            self.reader_tokenizer,
            self.tokens_used,
            support,
            self.config.abstention.signal,
            match &self.abstain_reason {
                None => "no".to_owned(),
                Some(reason) => format!("yes: {reason}"),
            }
        ));
        if let Some(index) = &self.dense_index {
            line(format!("dense index: {index}"));
        }
        match self.context_search {
            Some(ContextSearch::Seeded { pool }) => line(format!(
                "dense context list: the windows around the dense index's best {pool} turns"
            )),
            Some(ContextSearch::Exact) => line("dense context list: every window".to_owned()),
            None => {}
        }
        for (i, also) in self.also_dense.iter().enumerate() {
            line(format!(
                "{}: {} ({} index, {} turns pending)",
                Retriever::DenseAlso(i as u8).as_str(),
                also.encoder.model,
                also.index,
                also.pending
            ));
        }
        if !self.named_speakers.is_empty() {
            line(format!("names: the question names {}", self.named_speakers.join(", ")));
        }
        if let Some(t) = &self.time_window {
            line(format!(
                "time window: \"{}\" resolved against {} to {} .. {}; candidates said from {} up to the question's day form the time_window list",
                t.expression,
                t.reference.to_rfc3339(),
                t.start.to_rfc3339(),
                t.end.to_rfc3339(),
                t.start.local_date(),
            ));
        }
        if let Some(f) = &self.feedback {
            if !f.from.is_empty() {
                let from: Vec<String> = f.from.iter().map(|id| format!("#{}", id.raw())).collect();
                line(format!("feedback: from {}", from.join(" ")));
            }
            if !f.terms.is_empty() {
                line(format!(
                    "feedback: the question with {} forms lexical_feedback",
                    f.terms.join(" ")
                ));
            }
            if f.dense {
                line(
                    "feedback: the query vector moved toward theirs forms dense_feedback"
                        .to_owned(),
                );
            }
            if !f.names.is_empty() {
                let names: Vec<String> =
                    f.names.iter().map(|n| format!("{} (#{})", n.name, n.from.raw())).collect();
                line(format!("links: rare names {} form the linked list", names.join(", ")));
            }
        }
        let rank = |r: &Option<RankScore>| {
            r.map_or("-".to_owned(), |r| format!("{}:{:.3}", r.rank, r.score))
        };
        line(format!(
            "{:<10} {:>6} {:>12} {:>12} {:>12} {:>6}  contributions",
            "record", "fused", "lexical", "dense", "rerank", "tokens"
        ));
        for item in &self.items {
            let mut parts = Vec::new();
            if let Selection::Expansion { of } = &item.selected_by {
                parts.push(format!("neighbour of {of}"));
            }
            for link in &item.linked_by {
                parts.push(format!("linked from #{} by {}", link.from.raw(), link.name));
            }
            parts.extend(contributions(
                &item.lists,
                item.rerank,
                item.length_divisor,
                item.spread_deferred,
            ));
            line(format!(
                "{:<10} {:>6} {:>12} {:>12} {:>12} {:>6}  {}",
                item.citation,
                item.fused_rank.map_or("-".to_owned(), |r| r.to_string()),
                rank(&item.lexical),
                rank(&item.dense),
                rank(&item.rerank),
                item.tokens,
                if parts.is_empty() { "retrieval only".to_owned() } else { parts.join("; ") },
            ));
        }
        for ex in &self.excluded {
            let parts = contributions(&ex.lists, None, ex.length_divisor, ex.spread_deferred);
            line(format!(
                "excluded {:<8} fused {:>4} lexical {:>12} dense {:>12}  {}{}",
                ex.record.to_string(),
                ex.fused_rank.map_or("-".to_owned(), |r| r.to_string()),
                rank(&ex.lexical),
                rank(&ex.dense),
                ex.reason,
                if parts.is_empty() { String::new() } else { format!("; {}", parts.join("; ")) },
            ));
        }
        out
    }
}

/// What each mechanism contributed to a candidate, one phrase per mechanism.
fn contributions(
    lists: &[ListRank],
    rerank: Option<RankScore>,
    divisor: Option<f32>,
    spread_deferred: bool,
) -> Vec<String> {
    let mut parts = Vec::new();
    // Retrieval lists here are the also-encoders' (the first two have their columns).
    for mechanism in ["retrieval", "context", "names", "time window", "session"] {
        let ranks: Vec<String> = lists
            .iter()
            .filter(|l| l.list.mechanism() == mechanism)
            .map(|l| format!("{} #{}", l.list.as_str(), l.rank))
            .collect();
        if !ranks.is_empty() {
            parts.push(format!("{mechanism}: {}", ranks.join(", ")));
        }
    }
    if let Some(r) = rerank {
        parts.push(format!("reranker: #{} ({:.3})", r.rank, r.score));
    }
    if let Some(d) = divisor {
        parts.push(format!("long turn: score / {d:.2}"));
    }
    if spread_deferred {
        parts.push("spread: deferred behind other sessions".to_owned());
    }
    parts
}

impl std::fmt::Display for AbstainReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AbstainReason::NoCandidates => {
                write!(f, "no candidates (nothing in the namespace matches the question)")
            }
            AbstainReason::BelowThreshold { support, threshold } => {
                write!(f, "support {support:.4} is below the threshold {threshold}")
            }
            AbstainReason::NothingFits => {
                write!(f, "nothing fits the budget with its header and citation")
            }
        }
    }
}

impl std::fmt::Display for ExclusionReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExclusionReason::Budget => write!(f, "over budget"),
            ExclusionReason::Duplicate { of } => write!(f, "duplicate of {of}"),
            ExclusionReason::Filtered { filter } => write!(f, "filtered: {filter}"),
            ExclusionReason::Abstained => write!(f, "abstained"),
        }
    }
}
