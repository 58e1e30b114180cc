//! The evaluation report: `report.json` (machine-readable, full configuration and dataset digest),
//! `report.md` (tables and an SVG plot of recall against budget) and `questions.jsonl` (what each
//! system packed for each question at each budget, and its scores there).

mod budget_accumulator;
mod calibration;
mod markdown;

use std::{collections::BTreeMap, path::Path};

use serde::Serialize;

pub use self::{
    budget_accumulator::BudgetAccumulator,
    calibration::{
        Calibration, MAX_FALSE_ABSTENTION, calibrate, calibrate_false_abstention, calibration_at,
    },
    markdown::{PackedRow, packed_table_markdown},
};
use crate::{
    ArtifactIdentity, calibration_interval::ThresholdInterval, outcomes::QuestionOutcome,
    scoring::LevelScores,
};

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `longmemeval` or `locomo`.
    pub benchmark: String,
    /// The dataset file: path, sha256, official flag, name.
    pub dataset: ArtifactIdentity,
    /// What the adapter counted (repairs, repeated sessions, as-of effect).
    pub adapter: serde_json::Value,
    /// The as-of policy in words.
    pub as_of_policy: String,
    /// The full configuration of the run.
    pub config: serde_json::Value,
    /// The encoder identity, or `null` when no system in the run uses an encoder.
    pub encoder: Option<serde_json::Value>,
    /// Questions run, scored and excluded.
    pub questions: QuestionCounts,
    /// Per system.
    pub systems: BTreeMap<String, SystemReport>,
    /// Wall times in seconds: loading, and per system.
    pub wall_time_s: BTreeMap<String, f64>,
    /// Statements about how to read the numbers.
    pub notes: Vec<String>,
    /// The reader stage: reader and judge identities and speeds (`null` without `--reader`).
    pub reader: Option<serde_json::Value>,
    /// Answer accuracy per system and budget (empty without `--reader`).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub answers: BTreeMap<String, BTreeMap<String, crate::reader_stage::AnswerSummary>>,
    /// Per system, budget and question (written as `questions.jsonl`, not in `report.json`).
    #[serde(skip)]
    pub outcomes: Vec<QuestionOutcome>,
}

/// How many questions were run and why some were not scored.
#[derive(Clone, Debug, Default, Serialize)]
pub struct QuestionCounts {
    /// Questions selected by the split.
    pub selected: usize,
    /// Scored by the retrieval metrics.
    pub scored: usize,
    /// Abstention cases (reported separately).
    pub abstention: usize,
    /// Excluded for lacking (user-side) evidence.
    pub no_evidence: usize,
    /// Questions of the split file that the dataset lacks.
    pub split_questions_missing_from_dataset: Vec<String>,
}

/// One system across budgets.
#[derive(Clone, Debug, Serialize)]
pub struct SystemReport {
    /// Scored questions at the primary (first) budget.
    pub n_scored: usize,
    /// Overall scores at the primary (first) budget.
    pub overall: LevelScores,
    /// The primary budget (`null` = none).
    pub primary_budget: Option<usize>,
    /// Per budget (`"none"` or the number of tokens).
    pub budgets: BTreeMap<String, BudgetReport>,
}

/// One system at one budget.
#[derive(Clone, Debug, Serialize)]
pub struct BudgetReport {
    /// The budget (`null` = none).
    pub budget: Option<usize>,
    /// Scored questions.
    pub n_scored: usize,
    /// Mean scores.
    pub overall: LevelScores,
    /// Mean scores per question type (LongMemEval) or category (LoCoMo).
    pub by_question_type: BTreeMap<String, TypeScores>,
    /// Abstention cases, reported apart from retrieval metrics.
    pub abstention: AbstentionReport,
    /// Reader tokens of the packed context over all questions run.
    pub tokens_used: TokenStats,
    /// Latency per stage, milliseconds.
    pub latency_ms: BTreeMap<String, LatencyStats>,
}

/// Scores of one question type.
#[derive(Clone, Debug, Serialize)]
pub struct TypeScores {
    /// Scored questions of this type.
    pub n_scored: usize,
    /// Mean scores.
    #[serde(flatten)]
    pub scores: LevelScores,
}

/// Abstention cases.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AbstentionReport {
    /// Abstention questions run.
    pub n: usize,
    /// How many the system abstained on (`null` when the system never abstains).
    pub abstained: Option<usize>,
    /// How many scored (answerable) questions the system wrongly abstained on.
    pub abstained_on_answerable: Option<usize>,
    /// Mean reader tokens it still spent on abstention questions.
    pub mean_tokens_used: f64,
    /// The support threshold that best separates abstention cases from answerable questions on
    /// THIS split (balanced accuracy), for systems that report support. Calibrate on dev only;
    /// a test report shows it for information, never to choose the threshold.
    pub calibration: Option<Calibration>,
    /// The highest support threshold at which at most 5% of answerable questions would abstain
    /// (a wrong abstention scores zero), on THIS split; same caveat as `calibration`.
    pub calibration_5pct_false_abstention: Option<Calibration>,
    /// The 95% bootstrap interval of that threshold (how far another sample of questions could
    /// move it).
    pub calibration_5pct_interval: Option<ThresholdInterval>,
}

/// Token use.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TokenStats {
    /// Mean.
    pub mean: f64,
    /// Maximum.
    pub max: usize,
    /// Tokens per packed turn: all packed tokens (preamble, headers and citations included) over
    /// all packed turns (a chunk's part of a turn counts as that turn), over every question run.
    pub per_packed_turn: f64,
}

/// Latency of one stage.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyStats {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
}

/// The key of a budget in reports.
pub fn budget_key(budget: Option<usize>) -> String {
    budget.map_or_else(|| "none".to_owned(), |b| b.to_string())
}

impl Report {
    /// Writes `report.json`, `report.md` and `questions.jsonl` (the per-question outcomes) into
    /// `dir` (created if needed).
    pub fn write(&self, dir: &Path, cutoffs: &[usize]) -> std::io::Result<()> {
        fs_err::create_dir_all(dir)?;
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        fs_err::write(dir.join("report.json"), json + "\n")?;
        fs_err::write(dir.join("report.md"), self.markdown(cutoffs))?;
        crate::outcomes::write_jsonl(
            &self.outcomes,
            fs_err::File::create(dir.join("questions.jsonl"))?,
        )?;
        Ok(())
    }
}
