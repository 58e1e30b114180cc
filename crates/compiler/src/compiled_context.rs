//! The compiler's output: the prompt block and the manifest that explains it.

use std::fmt::Write as _;

use evicortex_core::{
    EventTime, EvidenceDigest, Namespace, Role, SessionId, TokenBudget, TurnId, TurnIndex,
};
use serde::{Deserialize, Serialize};

use crate::{CompileConfig, FilterReason};

/// Format tag of [`CompiledContext`]'s JSON.
pub const COMPILED_CONTEXT_FORMAT: &str = "evicortex-compiled-context-1";

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
    /// The reranker's name when reranking is on.
    pub reranker: Option<String>,
    /// The ledger positions the inputs cover.
    pub coverage: Coverage,
    /// The lexical analyzer's version.
    pub analyzer: String,
    /// The full configuration.
    pub config: CompileConfig,
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
    /// The verbatim text.
    pub text: String,
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
    /// Rank after fusion (and the reranker's term), from 1.
    pub fused_rank: Option<u32>,
    /// The fused RRF score.
    pub fused_score: Option<f64>,
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
    /// Rank after fusion, if it got that far.
    pub fused_rank: Option<u32>,
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

    /// A human-readable account of the decisions: support, each item with its ranks, each
    /// exclusion with its reason.
    pub fn explain(&self) -> String {
        let mut out = String::new();
        let support = self.support.map_or("none".to_owned(), |s| format!("{s:.4}"));
        writeln!(
            out,
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
        )
        .expect("writing to a String cannot fail");
        let rank = |r: &Option<RankScore>| {
            r.map_or("-".to_owned(), |r| format!("{}:{:.3}", r.rank, r.score))
        };
        writeln!(
            out,
            "{:<10} {:>6} {:>12} {:>12} {:>12} {:>6}  selected",
            "record", "fused", "lexical", "dense", "rerank", "tokens"
        )
        .expect("writing to a String cannot fail");
        for item in &self.items {
            let selected = match &item.selected_by {
                Selection::Candidate => "retrieved".to_owned(),
                Selection::Expansion { of } => format!("neighbour of {of}"),
            };
            writeln!(
                out,
                "{:<10} {:>6} {:>12} {:>12} {:>12} {:>6}  {selected}",
                item.citation,
                item.fused_rank.map_or("-".to_owned(), |r| r.to_string()),
                rank(&item.lexical),
                rank(&item.dense),
                rank(&item.rerank),
                item.tokens,
            )
            .expect("writing to a String cannot fail");
        }
        for ex in &self.excluded {
            let reason = &ex.reason;
            writeln!(
                out,
                "excluded {:<8} fused {:>4} lexical {:>12} dense {:>12}  {reason}",
                ex.record.to_string(),
                ex.fused_rank.map_or("-".to_owned(), |r| r.to_string()),
                rank(&ex.lexical),
                rank(&ex.dense),
            )
            .expect("writing to a String cannot fail");
        }
        out
    }
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
