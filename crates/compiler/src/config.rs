//! The compile configuration. Every field changes results, so none has a default: callers state
//! each one, and the whole struct is recorded in the output.

use evicortex_lexical::Analyzer;
use serde::{Deserialize, Serialize};

/// Candidates per retriever list in the default configuration. Deep enough that the fused pool
/// outlasts a 4,096-token budget of short turns (about a hundred at 40 tokens): at 50 the gold
/// turns a 4,096-token pack missed on LoCoMo dev were nearly all outside the pool.
pub const DEFAULT_TOP_N: usize = 75;

/// How a question is compiled. Serialised verbatim into every [`crate::CompiledContext`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CompileConfig {
    /// Lexical (BM25) candidates.
    pub lexical: LexicalConfig,
    /// Dense (cosine) candidates.
    pub dense: DenseConfig,
    /// Turns ranked in their context: two more candidate lists over each turn's session
    /// neighbours (the cited and packed unit stays the turn).
    pub context: ContextConfig,
    /// Speakers the question names: each turn list again, filtered to their turns.
    pub names: NamesConfig,
    /// Time expressions of the question: the candidates said in the window they resolve to.
    pub time: TimeConfig,
    /// Sessions scored from their turns: the candidates of the best sessions as one more list.
    pub session: SessionConfig,
    /// Pseudo-relevance feedback from the best fused turns: up to two more lists.
    pub feedback: FeedbackConfig,
    /// Turns sharing a rare name with the best fused turns: one more list.
    pub links: LinksConfig,
    /// The `k` of reciprocal-rank fusion: a candidate at rank r (from 1) of a list adds
    /// `1 / (k + r)`. Must be positive.
    pub rrf_k: f32,
    /// Whether and how deep a reranker runs over the fused candidates.
    pub rerank: RerankConfig,
    /// Which candidates count as duplicates.
    pub dedup: DedupPolicy,
    /// The order candidates are offered to the budget in.
    pub long_turns: LongTurns,
    /// Whether turns too long for their share of the budget are offered as excerpts.
    pub excerpts: ExcerptConfig,
    /// Whether that order is spread over sessions before the budget is filled.
    pub spread: SessionSpread,
    /// Whether that order then favours candidates covering what those ahead do not.
    pub coverage: CoverageConfig,
    /// Whether neighbouring turns of selected ones are added when they fit.
    pub expansion: Expansion,
    /// The support score and the threshold below which the compiler abstains.
    pub abstention: AbstentionConfig,
    /// How the selected turns are laid out for the reader.
    pub layout: Layout,
    /// Whether `excluded` also lists the turns the filters removed from the unfiltered top-N
    /// (costs one unfiltered search per retriever).
    pub report_filtered: bool,
}

/// BM25 candidate generation.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LexicalConfig {
    /// Candidates taken from BM25 (0 turns lexical retrieval off).
    pub top_n: usize,
    /// BM25 `k1`; must equal the index's.
    pub k1: f32,
    /// BM25 `b`; must equal the index's.
    pub b: f32,
    /// The analyzer of documents and questions (both lexical lists).
    pub analyzer: Analyzer,
}

/// The context lists. A turn's window is its own document and those of the turns of its session
/// at most `radius` positions before or after it. A context list only ranks turns whose whole
/// window passes the filters (as-of, erasure), so no turn is ranked by words said after the
/// as-of time; such a turn is still ranked by the turn lists.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextConfig {
    /// BM25 over window documents (the documents of the window joined by newlines), top-N as the
    /// lexical list; 0 turns this list off.
    pub lexical_radius: u32,
    /// Cosine with each turn's context vector: the L2-normalised sum of the stored vectors of
    /// the turns in its window (no extra embedding), top-N as the dense list; 0 turns this list
    /// off. Needs dense retrieval.
    pub dense_radius: u32,
}

impl ContextConfig {
    /// No context lists.
    pub const OFF: ContextConfig = ContextConfig { lexical_radius: 0, dense_radius: 0 };
}

/// Named speakers.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum NamesConfig {
    /// Names in the question change nothing beyond their words.
    Off,
    /// When the question names some (not all) of the namespace's speakers, each turn list
    /// (lexical, dense, and the context lists) is fused a second time, filtered to those
    /// speakers' turns, with weight 1. A speaker is named by any word of their name (whole word,
    /// any case, possessive `'s` allowed) or by a short form: a capitalised word of 3 or more
    /// letters, not the question's first, that begins exactly one speaker's name ("Mel" for
    /// Melanie). Nicknames that are not prefixes ("Bob" for Robert) are not recognised.
    SpeakerLists,
    /// As `speaker_lists`, but each named list is a search of its own with the named speakers'
    /// filter inside (the best top-N of their turns, not the top-N of all turns filtered), so a
    /// question about one speaker of a two-person conversation sees twice as deep into what that
    /// speaker said. Costs one more search per turn list when a question names someone.
    SpeakerSearch,
}

/// Time in the question.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum TimeConfig {
    /// Time expressions change nothing beyond their words.
    Off,
    /// A relative or absolute time expression ("last Saturday", "two months ago", "in March",
    /// "last year") is resolved against the question's date (the as-of time when given, else the
    /// latest turn's time: never the clock, so compiles stay reproducible) into an event window;
    /// the fused candidates said from the window's start up to the end of the question's day, in
    /// fused order, are fused once more as one list (weight 1): what is said about an event
    /// comes after it. The resolution is recorded in the compiled context.
    WindowList,
}

/// Session-level evidence.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum SessionConfig {
    /// Sessions count only through their turns.
    Off,
    /// After fusion (and the time window's list), each session is scored by the sum of the fused
    /// scores of its best `turns` candidates, so a session where several turns support the
    /// question rises and a long session is not diluted; the candidates of the best `sessions`
    /// sessions, in order of their session's score and then their own fused order, are fused once
    /// more as one list (weight 1).
    ScoreList {
        /// Candidates per session whose fused scores are summed; at least 1.
        turns: u32,
        /// Sessions whose candidates are listed; at least 1.
        sessions: u32,
    },
}

/// Pseudo-relevance feedback without an LLM.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum FeedbackConfig {
    /// No feedback lists.
    Off,
    /// After the first fusion (names and time window included), the best `docs` admitted fused
    /// turns are read as feedback. With `terms` above 0, the question's terms plus the `terms`
    /// terms that best tell the feedback turns apart from the namespace (each term's frequency in
    /// a feedback turn, weighted by the turn's fused score and the term's idf, RM3-style; terms
    /// of the question and terms of a single turn left out) search BM25 for one more list
    /// (`lexical_feedback`, top-N as the lexical list). With `rocchio` above 0, the query vector
    /// plus `rocchio` times the mean of the feedback turns' stored vectors, scaled to unit
    /// length, searches the dense index for another (`dense_feedback`, Rocchio). Both are fused
    /// with weight 1 and recorded (`feedback` in the compiled context).
    Turns {
        /// Feedback turns; at least 1.
        docs: u32,
        /// Expansion terms; 0 for no lexical feedback list.
        terms: u32,
        /// Weight of the feedback turns' mean vector; 0 for no dense feedback list.
        rocchio: f32,
    },
}

/// Links between turns across sessions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum LinksConfig {
    /// No link list.
    Off,
    /// Each capitalised word of the best `from` admitted fused turns that does not open a
    /// sentence (a name, a place, a title; months, weekdays, speakers' names and the question's
    /// words left out) and is in 2 to `max_turns` turns of the namespace links the feedback turn
    /// to that name's best `per_name` turns by BM25; the linked turns are one more list
    /// (`linked`, fused with weight 1: most names first, then the linking turn's rank), each
    /// with the names and records that linked it.
    RareNames {
        /// Best fused turns whose names are followed; at least 1.
        from: u32,
        /// A name in more turns than this is not rare; at least 2.
        max_turns: u32,
        /// Turns taken per name; at least 1.
        per_name: u32,
    },
}

/// The order in which candidates are offered to the budget.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum LongTurns {
    /// Fused order.
    FusedOrder,
    /// Fused score divided by `max(1, tokens / unit_tokens)`, with `tokens` the reader tokens of
    /// the turn's rendered line: a turn over `unit_tokens` must be proportionally more relevant
    /// to displace shorter ones, so one long turn does not crowd out the rest. Turns up to
    /// `unit_tokens` keep their fused score.
    ScaledByLength {
        /// Reader tokens a turn may have before its score is divided; at least 1.
        unit_tokens: u32,
    },
}

/// Long turns as verbatim excerpts.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ExcerptConfig {
    /// Turns are packed whole or not at all.
    Off,
    /// A candidate whose text has more than `budget_share` of the budget in reader tokens is
    /// offered (to the long-turn rule and the budget) as its best-matching run of consecutive
    /// sentences of at most that many tokens: the run whose distinct question terms weigh most
    /// by idf (ties: the longer, then the earlier; without any question term, the opening run).
    /// A turn that fits its share is packed whole, so the larger the budget the fewer turns are
    /// cut. The line cites the record with the run's character range (`[#12 chars 140-410]`)
    /// and shows the run verbatim, an ellipsis marking each cut end; the compiled context's item
    /// carries the range and the run's text.
    Matched {
        /// The share of the budget a turn may take whole, and an excerpt at most; in (0, 1].
        budget_share: f32,
    },
}

/// Dense candidate generation.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum DenseConfig {
    /// No dense retrieval; no encoder or query vector is needed.
    Off,
    /// Cosine top-`top_n` under the namespace's encoder; needs the query vector.
    On {
        /// Candidates taken from the vector index.
        top_n: usize,
    },
}

/// The reranker seam.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum RerankConfig {
    /// No reranking.
    Off,
    /// Rerank the best `depth` fused candidates (at most [`crate::MAX_RERANK_DEPTH`]); their raw
    /// scores are recorded and their ordinal ranks add a further `weight / (rrf_k + rank)` term.
    On {
        /// Candidates reranked, 1 to 16.
        depth: usize,
        /// Weight of the reranker's RRF term (1.0 weighs it like one retriever).
        weight: f32,
    },
}

/// Spreading the packed turns over sessions, for questions whose evidence is scattered.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum SessionSpread {
    /// Candidates are offered to the budget in the long-turn rule's order.
    Off,
    /// In that order, a candidate whose session already has `turns` candidates ahead of it is
    /// deferred behind every candidate that is not (deferred ones keep their order), so that one
    /// session's many matching turns do not fill the budget before other sessions are reached.
    PerSession {
        /// Candidates of one session offered before the others' are reached; at least 1.
        turns: u32,
        /// Which questions it applies to.
        questions: SpreadQuestions,
    },
}

/// Selection for coverage.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum CoverageConfig {
    /// Candidates are offered in the long-turn rule's (and spread's) order.
    Off,
    /// That order is rebuilt greedily: each next candidate is the one with the highest
    /// `(k + 1) / (k + r) + weight * gain`, `r` its place in that order (from 1), `k` the RRF
    /// constant, and `gain` the share of the question's facets it covers that no candidate
    /// already placed covers (each question term in its document, weighted by idf; its session,
    /// weighted as the mean question term). Near-copies of what is placed fall back; a turn
    /// with a new term or from a new session comes forward.
    NewFacets {
        /// How much a full facet gain weighs against the rank score (at most 1); positive.
        weight: f32,
        /// Which questions it applies to.
        questions: SpreadQuestions,
    },
}

/// Which questions [`SessionSpread::PerSession`] and [`CoverageConfig::NewFacets`] apply to.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpreadQuestions {
    /// Every question.
    All,
    /// Questions that ask to count, total or list ("how many", "in total", "all the", "list",
    /// "how often", ...: `crate::spread::is_aggregating`).
    Aggregating,
}

/// Which candidates are folded together.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DedupPolicy {
    /// No dedup.
    Off,
    /// Documents (speaker and text, `turn_document`) equal after trimming and collapsing runs of
    /// whitespace: the earliest admitted turn (by event time, then ledger record) is kept and
    /// every copy is cited with it. The same words said by two speakers are two pieces of
    /// evidence.
    IdenticalText,
}

/// Adding neighbours of selected turns.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Expansion {
    /// Only retrieved candidates are packed.
    None,
    /// Right after each selected candidate, turns of its session within `radius` turn indexes
    /// are added (nearest first) when they pass the filters and fit; a neighbour that is itself a
    /// lower-ranked candidate is selected then, as a candidate.
    AdjacentTurns {
        /// How many turns on each side, 1 or more.
        radius: u32,
        /// Only neighbours whose text has at most this many reader tokens (none: any length).
        /// Short turns lean on their neighbours for context; long ones would eat the budget.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_tokens: Option<u32>,
    },
}

/// The support score and abstention threshold.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbstentionConfig {
    /// How support is measured.
    pub signal: SupportSignal,
    /// Abstain when support is strictly below this; `None` never abstains on support (the score is
    /// still reported, which is how a threshold is calibrated).
    pub threshold: Option<f32>,
}

/// What the support score measures. Both are in 0..=1 for normalised inputs.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SupportSignal {
    /// The highest cosine of any admitted dense candidate (needs dense retrieval).
    MaxDenseCosine,
    /// The largest idf-weighted share of the question's distinct terms that one lexical candidate
    /// contains.
    LexicalCoverage,
}

/// Reader-facing layout.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// Sessions in order of their first selected turn, each under a `Session <id> (<date>):`
    /// line, turns in time order inside, each line `[#<record>] <time> <role>[ (<speaker>)]: <text>`.
    ChronologicalBySession,
    /// The same order and grouping with fewer tokens a line: each session under
    /// `Session <date> <time>:` (its first selected turn's; the session's id is in the
    /// manifest), each line
    /// `[#<record>] [<time> ]<label>: <text>`, the time only where it differs from the header's
    /// (with the date where that differs too), the label the speaker's name for a named user,
    /// `<name> (<role>)` for a named speaker of another role, the role where no name is given.
    Compact,
}

impl Layout {
    /// Every layout, in the order count caches hold them.
    pub(crate) const ALL: [Layout; 2] = [Layout::ChronologicalBySession, Layout::Compact];

    /// This layout's place in [`Layout::ALL`].
    pub(crate) fn index(self) -> usize {
        match self {
            Layout::ChronologicalBySession => 0,
            Layout::Compact => 1,
        }
    }
}

impl CompileConfig {
    /// A reasonable starting configuration for `top_n` candidates per retriever, stated in full so
    /// callers see every choice: BM25 k1 1.2 / b 0.75, RRF k 10, no reranker, identical-text
    /// dedup, no expansion, no abstention threshold, support by lexical coverage (or dense cosine
    /// when dense is on). RRF k 10 rather than the customary 60 was chosen on the dev data: a turn
    /// one retriever ranks first keeps its place when the other retriever misses it.
    /// No context, names or time lists, plain analyzer, fused order: the baseline every
    /// mechanism of [`CompileConfig::default_for`] is measured against.
    pub fn hybrid(top_n: usize, dense: DenseConfig) -> CompileConfig {
        let signal = match dense {
            DenseConfig::Off => SupportSignal::LexicalCoverage,
            DenseConfig::On { .. } => SupportSignal::MaxDenseCosine,
        };
        CompileConfig {
            lexical: LexicalConfig { top_n, k1: 1.2, b: 0.75, analyzer: Analyzer::Plain },
            dense,
            context: ContextConfig::OFF,
            names: NamesConfig::Off,
            time: TimeConfig::Off,
            session: SessionConfig::Off,
            feedback: FeedbackConfig::Off,
            links: LinksConfig::Off,
            rrf_k: 10.0,
            rerank: RerankConfig::Off,
            dedup: DedupPolicy::IdenticalText,
            long_turns: LongTurns::FusedOrder,
            excerpts: ExcerptConfig::Off,
            spread: SessionSpread::Off,
            coverage: CoverageConfig::Off,
            expansion: Expansion::None,
            abstention: AbstentionConfig { signal, threshold: None },
            layout: Layout::ChronologicalBySession,
            report_filtered: false,
        }
    }

    /// The committed default: what `evicortex compile`, the HTTP and MCP servers and the
    /// evaluation's `evicortex` system run, with [`DEFAULT_TOP_N`] candidates per list (dense
    /// retrieval when `dense`). Chosen on the dev data (`eval/configs/default-frozen.json` says
    /// why); every choice is stated here.
    pub fn default_for(dense: bool) -> CompileConfig {
        CompileConfig::default_with(
            DEFAULT_TOP_N,
            if dense { DenseConfig::On { top_n: DEFAULT_TOP_N } } else { DenseConfig::Off },
        )
    }

    /// [`CompileConfig::default_for`] with `top_n` lexical candidates per list and `dense`.
    pub fn default_with(top_n: usize, dense: DenseConfig) -> CompileConfig {
        let mut config = CompileConfig::hybrid(top_n, dense);
        config.lexical.analyzer = Analyzer::EnglishSnowball;
        config.context = ContextConfig {
            lexical_radius: 1,
            dense_radius: if dense == DenseConfig::Off { 0 } else { 2 },
        };
        config.names = NamesConfig::SpeakerSearch;
        config.links = LinksConfig::RareNames { from: 3, max_turns: 10, per_name: 3 };
        config.time = TimeConfig::WindowList;
        config.long_turns = LongTurns::ScaledByLength { unit_tokens: 100 };
        config.layout = Layout::Compact;
        config
    }

    /// Checks ranges and combinations; the error names the field.
    pub fn validate(&self) -> Result<(), crate::CompileError> {
        let bad = |field: &'static str, reason: String| {
            Err(crate::CompileError::InvalidConfig { field, reason })
        };
        if !(self.rrf_k.is_finite() && self.rrf_k > 0.0) {
            return bad("rrf_k", format!("must be positive and finite, got {}", self.rrf_k));
        }
        if !(0.0..=evicortex_lexical::MAX_K1).contains(&self.lexical.k1) {
            let max = evicortex_lexical::MAX_K1;
            return bad("lexical.k1", format!("must be in 0..={max}, got {}", self.lexical.k1));
        }
        if !(0.0..=1.0).contains(&self.lexical.b) {
            return bad("lexical.b", format!("must be in 0..=1, got {}", self.lexical.b));
        }
        if let DenseConfig::On { top_n: 0 } = self.dense {
            return bad(
                "dense.top_n",
                "must be at least 1 when dense is on (use dense: off)".to_owned(),
            );
        }
        if self.lexical.top_n == 0 && self.dense == DenseConfig::Off {
            return bad(
                "lexical.top_n",
                "is 0 and dense is off: no retriever would run".to_owned(),
            );
        }
        if let RerankConfig::On { depth, weight } = self.rerank {
            if !(1..=crate::MAX_RERANK_DEPTH).contains(&depth) {
                return bad(
                    "rerank.depth",
                    format!("must be 1 to {}, got {depth}", crate::MAX_RERANK_DEPTH),
                );
            }
            if !(weight.is_finite() && weight > 0.0) {
                return bad("rerank.weight", format!("must be positive and finite, got {weight}"));
            }
        }
        if self.context.dense_radius > 0 && self.dense == DenseConfig::Off {
            return bad(
                "context.dense_radius",
                "a dense context list needs dense retrieval on (use 0)".to_owned(),
            );
        }
        if self.context.lexical_radius > 0 && self.lexical.top_n == 0 {
            return bad(
                "context.lexical_radius",
                "a lexical context list needs lexical.top_n > 0 (use 0)".to_owned(),
            );
        }
        if let SessionConfig::ScoreList { turns, sessions } = self.session {
            if turns == 0 {
                return bad("session.turns", "must be at least 1 (or session: off)".to_owned());
            }
            if sessions == 0 {
                return bad("session.sessions", "must be at least 1 (or session: off)".to_owned());
            }
        }
        if let FeedbackConfig::Turns { docs, terms, rocchio } = self.feedback {
            if docs == 0 {
                return bad("feedback.docs", "must be at least 1 (or feedback: off)".to_owned());
            }
            if !(rocchio.is_finite() && rocchio >= 0.0) {
                return bad("feedback.rocchio", format!("must be 0 or positive, got {rocchio}"));
            }
            if terms == 0 && rocchio == 0.0 {
                return bad(
                    "feedback.terms",
                    "and feedback.rocchio are both 0: no feedback list (use feedback: off)"
                        .to_owned(),
                );
            }
            if terms > 0 && self.lexical.top_n == 0 {
                return bad("feedback.terms", "needs lexical.top_n > 0 (use 0)".to_owned());
            }
            if rocchio > 0.0 && self.dense == DenseConfig::Off {
                return bad("feedback.rocchio", "needs dense retrieval on (use 0)".to_owned());
            }
        }
        if let LinksConfig::RareNames { from, max_turns, per_name } = self.links {
            if from == 0 {
                return bad("links.from", "must be at least 1 (or links: off)".to_owned());
            }
            if max_turns < 2 {
                return bad("links.max_turns", format!("must be at least 2, got {max_turns}"));
            }
            if per_name == 0 {
                return bad("links.per_name", "must be at least 1".to_owned());
            }
        }
        if let ExcerptConfig::Matched { budget_share } = self.excerpts
            && !(budget_share > 0.0 && budget_share <= 1.0)
        {
            return bad("excerpts.budget_share", format!("must be in (0, 1], got {budget_share}"));
        }
        if let LongTurns::ScaledByLength { unit_tokens: 0 } = self.long_turns {
            return bad("long_turns.unit_tokens", "must be at least 1".to_owned());
        }
        if let CoverageConfig::NewFacets { weight, .. } = self.coverage
            && !(weight.is_finite() && weight > 0.0)
        {
            return bad("coverage.weight", format!("must be positive and finite, got {weight}"));
        }
        if let SessionSpread::PerSession { turns: 0, .. } = self.spread {
            return bad("spread.turns", "must be at least 1 (or spread: off)".to_owned());
        }
        if let Expansion::AdjacentTurns { radius: 0, .. } = self.expansion {
            return bad("expansion.radius", "must be at least 1 (use expansion: none)".to_owned());
        }
        if let Expansion::AdjacentTurns { max_tokens: Some(0), .. } = self.expansion {
            return bad("expansion.max_tokens", "must be at least 1 (or absent)".to_owned());
        }
        if let Some(t) = self.abstention.threshold
            && !t.is_finite()
        {
            return bad("abstention.threshold", format!("must be finite, got {t}"));
        }
        if self.abstention.signal == SupportSignal::MaxDenseCosine && self.dense == DenseConfig::Off
        {
            return bad(
                "abstention.signal",
                "max_dense_cosine needs dense retrieval on".to_owned(),
            );
        }
        if self.abstention.signal == SupportSignal::LexicalCoverage && self.lexical.top_n == 0 {
            return bad("abstention.signal", "lexical_coverage needs lexical.top_n > 0".to_owned());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_names_the_field() {
        let mut config = CompileConfig::hybrid(10, DenseConfig::Off);
        config.validate().unwrap();
        config.rerank = RerankConfig::On { depth: 17, weight: 1.0 };
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("rerank.depth"), "{err}");
        let mut config = CompileConfig::hybrid(10, DenseConfig::Off);
        config.abstention.signal = SupportSignal::MaxDenseCosine;
        assert!(config.validate().unwrap_err().to_string().contains("abstention.signal"));
        let mut config = CompileConfig::hybrid(10, DenseConfig::Off);
        config.rrf_k = 0.0;
        assert!(config.validate().unwrap_err().to_string().contains("rrf_k"));
    }
}
