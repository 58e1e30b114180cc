//! The shapes of the compile and answer responses, for the OpenAPI document alone: those bodies
//! are the compiler's and the reader's own JSON (`evicortex::CompiledContext`,
//! `evicortex::AnswerReport::to_json`), not built from these types. The document names the
//! fields a client reads and allows the rest (audit detail that grows with the compiler); the
//! Python suite validates real responses against it (`python/tests/test_openapi.py`), so a
//! documented field cannot disappear or change type unnoticed, and the TypeScript client's
//! types are generated from it.
#![allow(dead_code)]

use utoipa::ToSchema;

/// A compiled context (format `evicortex-compiled-context-2`): `text` for the reader's prompt,
/// packed into `budget` reader tokens, or an abstention; every other field explains it.
#[derive(ToSchema)]
pub(crate) struct CompiledContext {
    /// `evicortex-compiled-context-2`.
    format: String,
    /// The namespace compiled from.
    namespace: String,
    /// The question, verbatim.
    question: String,
    /// Turns said after this time (RFC 3339) were not admitted.
    as_of: Option<String>,
    /// The prompt-ready block, citing each turn as `[#record]`; empty when abstaining.
    text: String,
    /// Exact reader tokens of `text`.
    tokens_used: u32,
    /// The budget it was packed into.
    budget: u32,
    /// The reader tokenizer the budget is counted in.
    reader_tokenizer: String,
    /// Whether the compiler declines to answer from memory.
    abstain: bool,
    /// Why it abstains (`kind`: `no_candidates`, `below_threshold`, `nothing_fits`).
    abstain_reason: Option<Tagged>,
    /// The support score under the configured abstention signal; null without candidates.
    support: Option<f32>,
    /// The turns in `text`, in the order they appear.
    items: Vec<ContextItem>,
    /// Candidates left out, with the reason.
    excluded: Vec<ExcludedCandidate>,
    /// The encoder the dense candidates came from; null when dense retrieval is off.
    encoder: Option<EncoderRef>,
    /// The reranker's name when reranking is on.
    reranker: Option<String>,
    /// The records the corpus and the indexes cover.
    coverage: Coverage,
    /// The lexical analyzer's version.
    analyzer: String,
    /// How `text`'s tokens divide between preamble, session headers and evidence; absent when
    /// `text` is empty.
    budget_parts: Option<BudgetParts>,
    /// The full compile configuration (every setting, defaults included).
    #[schema(value_type = Object)]
    config: serde_json::Value,
}

/// One turn in the compiled text.
#[derive(ToSchema)]
pub(crate) struct ContextItem {
    /// The citation marker in `text`, e.g. `#12`.
    citation: String,
    /// The record's number in the namespace.
    record: u64,
    /// The record's content digest (hex).
    digest: String,
    /// Its session.
    session: String,
    /// Its index in the session.
    turn: u32,
    /// When it was said (RFC 3339 with its offset).
    time: String,
    /// `user`, `assistant`, `system` or `tool`.
    role: String,
    /// The speaker's name where known.
    speaker: Option<String>,
    /// The verbatim text.
    text: String,
    /// Other records with the same text, cited with this one.
    also_cited: Vec<u64>,
    /// Why it is here (`kind`: `candidate`, or `expansion` with `of`, the turn it neighbours).
    selected_by: Tagged,
    /// BM25 rank and score.
    lexical: Option<RankScore>,
    /// Dense rank and cosine.
    dense: Option<RankScore>,
    /// Reranker rank and raw score.
    rerank: Option<RankScore>,
    /// Rank in the order candidates were offered to the budget, from 1.
    fused_rank: Option<u32>,
    /// The fused RRF score.
    fused_score: Option<f64>,
    /// Reader tokens of this item's line counted alone.
    tokens: u32,
}

/// A candidate that is not in the text.
#[derive(ToSchema)]
pub(crate) struct ExcludedCandidate {
    /// The record's number in the namespace.
    record: u64,
    /// Why it was left out (`kind`: `budget`, `duplicate` with `of`, `filtered`, `abstained`).
    reason: Tagged,
    /// BM25 rank and score, if it was a lexical candidate.
    lexical: Option<RankScore>,
    /// Dense rank and cosine, if it was a dense candidate.
    dense: Option<RankScore>,
    /// Rank after fusion, if it got that far.
    fused_rank: Option<u32>,
}

/// A tagged value: `kind` names the variant, the other fields are the variant's.
#[derive(ToSchema)]
pub(crate) struct Tagged {
    /// The variant.
    kind: String,
}

/// A retriever's rank and raw score for one candidate.
#[derive(ToSchema)]
pub(crate) struct RankScore {
    /// Rank in that retriever's list, from 1.
    rank: u32,
    /// The retriever's raw score.
    score: f32,
}

/// The encoder behind the dense candidates.
#[derive(ToSchema)]
pub(crate) struct EncoderRef {
    /// Model name and revision.
    model: String,
    /// Digest of the full encoder identity.
    identity_digest: String,
}

/// The records the inputs of a compile cover (numbers in the namespace).
#[derive(ToSchema)]
pub(crate) struct Coverage {
    /// The last record in the corpus.
    corpus_last_record: Option<u64>,
    /// What the lexical index covers.
    lexical: Option<u64>,
    /// What the vector index covers; null when dense is off.
    dense: Option<u64>,
    /// Turns not embedded yet (still lexical candidates); absent when dense is off.
    dense_pending: Option<u64>,
}

/// The parts of a compiled text in reader tokens, each counted alone.
#[derive(ToSchema)]
pub(crate) struct BudgetParts {
    /// The preamble line.
    preamble: u32,
    /// The session header lines.
    headers: u32,
    /// The cited turn lines.
    evidence: u32,
}

/// Response of `POST /v1/namespaces/{ns}/answer`: the reader's answer or the abstention, and
/// the context it read.
#[derive(ToSchema)]
pub(crate) struct AnswerResponse {
    /// Whether the compiler or the reader abstained.
    abstained: bool,
    /// Whether the compiler abstained (nothing in memory supports the question): the reader
    /// was not asked and `answer` is null.
    compiler_abstained: bool,
    /// Why the compiler abstained.
    abstain_reason: Option<String>,
    /// The reader's answer; null when the compiler abstained.
    answer: Option<ReaderAnswer>,
    /// The context the reader read.
    context: AnswerContext,
    /// Seconds the compile took.
    compile_seconds: f64,
}

/// A reader's answer.
#[derive(ToSchema)]
pub(crate) struct ReaderAnswer {
    /// The reply, verbatim.
    text: String,
    /// Records the reply cites that the context holds, in order of first citation.
    citations: Vec<u64>,
    /// Record ids the reply cites that the context does not hold.
    unknown_citations: Vec<u64>,
    /// Whether the reply is the abstention.
    abstained: bool,
    /// Who answered (`backend`: `local_gguf` with the model's digests, or `chat_completions`
    /// with `base_url` and `model`).
    #[schema(value_type = Object)]
    reader: serde_json::Value,
    /// The decoding settings (`strategy`, `max_new_tokens`).
    #[schema(value_type = Object)]
    decoding: serde_json::Value,
    /// The whole prompt in the reader's tokens.
    prompt_tokens: u32,
    /// Tokens generated.
    generated_tokens: u32,
    /// Why generation stopped: `stop` or `length`.
    finish: String,
    /// Wall-clock seconds of the read.
    seconds: f64,
}

/// The context an answer was read from.
#[derive(ToSchema)]
pub(crate) struct AnswerContext {
    /// Exact reader tokens of `text`.
    tokens_used: u32,
    /// The budget it was packed into.
    budget: u32,
    /// The reader's tokenizer.
    reader_tokenizer: String,
    /// The support score.
    support: Option<f32>,
    /// The context text.
    text: String,
}
