//! The evaluation report: `report.json` (machine-readable, full configuration and dataset digest),
//! `report.md` (tables and an SVG plot of recall against budget) and `questions.jsonl` (what each
//! system packed for each question at each budget, and its scores there).

use std::{collections::BTreeMap, fmt::Write as _, path::Path, time::Duration};

use serde::Serialize;

use crate::{
    ArtefactIdentity,
    calibration_interval::{ThresholdInterval, false_abstention_threshold_interval},
    outcomes::QuestionOutcome,
    scoring::{Level, LevelScores, MeanScores, MetricTable, PACKED},
};

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `longmemeval` or `locomo`.
    pub benchmark: String,
    /// The dataset file: path, sha256, official flag, name.
    pub dataset: ArtefactIdentity,
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

/// The largest share of answerable questions a product threshold may send to abstention.
pub const MAX_FALSE_ABSTENTION: f64 = 0.05;

/// A support threshold fitted on a split: abstain when support < threshold.
#[derive(Clone, Debug, Serialize)]
pub struct Calibration {
    /// The threshold.
    pub threshold: f32,
    /// Balanced accuracy at it: mean of (abstention cases below it, answerable questions at or
    /// above it).
    pub balanced_accuracy: f64,
    /// Share of abstention cases below it (abstained on, rightly).
    pub abstention_recall: f64,
    /// Share of answerable questions below it (abstained on, wrongly).
    pub false_abstention: f64,
    /// Abstention cases with a support score.
    pub n_abstention: usize,
    /// Answerable questions with a support score.
    pub n_answerable: usize,
}

/// Every candidate threshold over `(support, is_abstention)` pairs, ascending: the lowest score,
/// the midpoints between neighbouring scores and just above the highest.
fn thresholds(points: &[(f32, bool)]) -> Option<Vec<Calibration>> {
    let n_abs = points.iter().filter(|p| p.1).count();
    let n_ans = points.len() - n_abs;
    if n_abs == 0 || n_ans == 0 {
        return None;
    }
    let mut scores: Vec<f32> = points.iter().map(|p| p.0).collect();
    scores.sort_by(f32::total_cmp);
    scores.dedup();
    let mut candidates = vec![scores[0]];
    candidates.extend(scores.windows(2).map(|w| (w[0] + w[1]) / 2.0));
    candidates.push(scores[scores.len() - 1] + 1e-6);
    candidates.into_iter().map(|t| calibration_at(points, t)).collect()
}

/// What abstaining strictly below `t` does on `(support, is_abstention)` pairs; `None` without
/// both kinds.
pub fn calibration_at(points: &[(f32, bool)], t: f32) -> Option<Calibration> {
    let n_abs = points.iter().filter(|p| p.1).count();
    let n_ans = points.len() - n_abs;
    if n_abs == 0 || n_ans == 0 {
        return None;
    }
    let abs_ok = points.iter().filter(|p| p.1 && p.0 < t).count() as f64 / n_abs as f64;
    let ans_ok = points.iter().filter(|p| !p.1 && p.0 >= t).count() as f64 / n_ans as f64;
    Some(Calibration {
        threshold: t,
        balanced_accuracy: (abs_ok + ans_ok) / 2.0,
        abstention_recall: abs_ok,
        false_abstention: 1.0 - ans_ok,
        n_abstention: n_abs,
        n_answerable: n_ans,
    })
}

/// The threshold maximising balanced accuracy over `(support, is_abstention)` pairs (the
/// midpoint between neighbouring scores; ties keep the lowest threshold).
pub fn calibrate(points: &[(f32, bool)]) -> Option<Calibration> {
    let mut best: Option<Calibration> = None;
    for c in thresholds(points)? {
        if best.as_ref().is_none_or(|b| c.balanced_accuracy > b.balanced_accuracy) {
            best = Some(c);
        }
    }
    best
}

/// The highest threshold whose false-abstention share is at most `max_false_abstention`.
pub fn calibrate_false_abstention(
    points: &[(f32, bool)],
    max_false_abstention: f64,
) -> Option<Calibration> {
    thresholds(points)?.into_iter().rev().find(|c| c.false_abstention <= max_false_abstention)
}

/// One system's row of the packed-context table: per budget, turn all, turn any and session
/// all (`None`: not measured at that budget).
#[derive(Clone, Debug)]
pub struct PackedRow {
    /// The system.
    pub system: String,
    /// Scored questions.
    pub n: usize,
    /// Per budget, in the table's column order.
    pub cells: Vec<Option<[f64; 3]>>,
}

/// The packed-context table as markdown, budgets in columns.
pub fn packed_table_markdown(budgets: &[String], rows: &[PackedRow]) -> String {
    let mut md = "| system | n |".to_owned();
    let mut rule = "| --- | --- |".to_owned();
    for b in budgets {
        let _ = write!(md, " turn all ({b}) | turn any ({b}) | session all ({b}) |");
        rule.push_str(" --- | --- | --- |");
    }
    let _ = writeln!(md, "\n{rule}");
    for r in rows {
        let _ = write!(md, "| {} | {} |", r.system, r.n);
        for cell in &r.cells {
            match cell {
                Some([a, b, c]) => {
                    let _ = write!(md, " {a:.4} | {b:.4} | {c:.4} |");
                }
                None => md.push_str(" - | - | - |"),
            }
        }
        md.push('\n');
    }
    md
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

/// Accumulates one system at one budget while questions run.
#[derive(Debug, Default)]
pub struct BudgetAccumulator {
    overall: MeanScores,
    by_kind: BTreeMap<String, MeanScores>,
    abstention: AbstentionReport,
    abstained_any: bool,
    abstained_on_answerable: usize,
    abstention_tokens: usize,
    tokens: Vec<usize>,
    packed_turns: usize,
    stages: BTreeMap<String, Vec<Duration>>,
    support: Vec<(f32, bool)>,
}

impl BudgetAccumulator {
    /// Records a scored question.
    pub fn add_scored(&mut self, kind: &str, scores: &LevelScores, abstained: Option<bool>) {
        self.overall.add(scores);
        self.by_kind.entry(kind.to_owned()).or_default().add(scores);
        if let Some(a) = abstained {
            self.abstained_any = true;
            self.abstained_on_answerable += usize::from(a);
        }
    }
    /// Records an abstention question.
    pub fn add_abstention(&mut self, abstained: Option<bool>, tokens: usize) {
        self.abstention.n += 1;
        self.abstention_tokens += tokens;
        if let Some(a) = abstained {
            self.abstained_any = true;
            *self.abstention.abstained.get_or_insert(0) += usize::from(a);
        }
    }
    /// Records a support score (of an abstention case or of an answerable question).
    pub fn add_support(&mut self, support: f32, abstention: bool) {
        self.support.push((support, abstention));
    }
    /// Records tokens, packed turns and stage times of any question.
    pub fn add_cost(
        &mut self,
        tokens: usize,
        packed_turns: usize,
        stages: &[(&'static str, Duration)],
    ) {
        self.tokens.push(tokens);
        self.packed_turns += packed_turns;
        for (stage, d) in stages {
            self.stages.entry((*stage).to_owned()).or_default().push(*d);
        }
    }
    /// The finished report.
    pub fn finish(mut self, budget: Option<usize>) -> BudgetReport {
        if self.abstained_any {
            self.abstention.abstained.get_or_insert(0);
            self.abstention.abstained_on_answerable = Some(self.abstained_on_answerable);
        }
        self.abstention.calibration = calibrate(&self.support);
        self.abstention.calibration_5pct_false_abstention =
            calibrate_false_abstention(&self.support, MAX_FALSE_ABSTENTION);
        self.abstention.calibration_5pct_interval =
            false_abstention_threshold_interval(&self.support, MAX_FALSE_ABSTENTION);
        self.abstention.mean_tokens_used =
            self.abstention_tokens as f64 / self.abstention.n.max(1) as f64;
        let tokens_used = TokenStats {
            mean: self.tokens.iter().sum::<usize>() as f64 / self.tokens.len().max(1) as f64,
            max: self.tokens.iter().copied().max().unwrap_or(0),
            per_packed_turn: self.tokens.iter().sum::<usize>() as f64
                / self.packed_turns.max(1) as f64,
        };
        let latency_ms = self
            .stages
            .into_iter()
            .map(|(stage, mut ds)| {
                ds.sort();
                let ms = |d: Duration| d.as_secs_f64() * 1000.0;
                let pct = |p: f64| ms(ds[((ds.len() - 1) as f64 * p).round() as usize]);
                let mean = ds.iter().map(|d| ms(*d)).sum::<f64>() / ds.len() as f64;
                (stage, LatencyStats { mean, p50: pct(0.5), p95: pct(0.95) })
            })
            .collect();
        BudgetReport {
            budget,
            n_scored: self.overall.count(),
            overall: self.overall.mean(),
            by_question_type: self
                .by_kind
                .into_iter()
                .map(|(k, m)| (k, TypeScores { n_scored: m.count(), scores: m.mean() }))
                .collect(),
            abstention: self.abstention,
            tokens_used,
            latency_ms,
        }
    }
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

    /// The human-readable summary.
    pub fn markdown(&self, cutoffs: &[usize]) -> String {
        let mut md = String::new();
        let d = &self.dataset;
        let _ = writeln!(md, "# {} evaluation\n", self.benchmark);
        let _ = writeln!(
            md,
            "Dataset `{}`: {} (sha256 `{}`{}).\n",
            d.path.display(),
            d.name,
            d.sha256,
            if d.official { ", official" } else { ", NOT an official artefact" }
        );
        let q = &self.questions;
        let _ = writeln!(
            md,
            "Questions: {} selected, {} scored, {} abstention cases (reported separately), {} without evidence.\n",
            q.selected, q.scored, q.abstention, q.no_evidence
        );
        for note in &self.notes {
            let _ = writeln!(md, "- {note}");
        }
        let budgets: Vec<String> = self
            .systems
            .values()
            .next()
            .map(|s| {
                let mut b: Vec<(Option<usize>, String)> =
                    s.budgets.values().map(|r| (r.budget, budget_key(r.budget))).collect();
                b.sort_by_key(|(x, _)| x.unwrap_or(usize::MAX));
                b.into_iter().map(|(_, k)| k).collect()
            })
            .unwrap_or_default();
        for level in ["session", "turn"] {
            for budget in &budgets {
                let _ = writeln!(md, "\n## {level} level, budget {budget}\n");
                let mut header = "| system | n |".to_owned();
                let mut rule = "| --- | --- |".to_owned();
                for k in cutoffs {
                    for m in ["recall_any", "recall_all", "ndcg_any"] {
                        let _ = write!(header, " {m}@{k} |");
                        rule.push_str(" --- |");
                    }
                }
                header.push_str(" tokens mean | tokens per packed turn |");
                rule.push_str(" --- | --- |");
                let _ = writeln!(md, "{header}\n{rule}");
                for (name, sys) in &self.systems {
                    let Some(r) = sys.budgets.get(budget) else { continue };
                    let table =
                        if level == "session" { &r.overall.session } else { &r.overall.turn };
                    let mut row = format!("| {name} | {} |", r.n_scored);
                    for k in cutoffs {
                        for m in ["recall_any", "recall_all", "ndcg_any"] {
                            let v = table.get(&format!("{m}@{k}")).copied().unwrap_or(f64::NAN);
                            let _ = write!(row, " {v:.4} |");
                        }
                    }
                    let _ = write!(
                        row,
                        " {:.0} | {:.1} |",
                        r.tokens_used.mean, r.tokens_used.per_packed_turn
                    );
                    let _ = writeln!(md, "{row}");
                }
            }
        }
        self.packed_section(&mut md, &budgets);
        crate::reader_stage::answers_markdown(self, cutoffs, &mut md);
        let numeric: Vec<usize> = budgets.iter().filter_map(|b| b.parse().ok()).collect();
        if numeric.len() >= 2
            && let Some(&k) = cutoffs.iter().max()
        {
            let metric = format!("recall_all@{k}");
            let _ = writeln!(md, "\n## Session {metric} against budget\n");
            let _ = writeln!(md, "{}", self.svg_plot(&numeric, Level::Session, &metric));
            let metric = format!("recall_all@{PACKED}");
            let _ = writeln!(md, "\n## Turn {metric} against budget\n");
            let _ = writeln!(md, "{}", self.svg_plot(&numeric, Level::Turn, &metric));
        }
        self.by_type_section(&mut md, &budgets, cutoffs);
        let _ = writeln!(md, "\n## Abstention cases and latency\n");
        let _ = writeln!(
            md,
            "| system | budget | abstention n | abstained | abstained on answerable | mean tokens on abstention | threshold fitted on this split for balanced accuracy: t (acc., caught, false abst.) | highest threshold with at most 5% false abstention: t (caught) [95% bootstrap interval of t] | stages (mean ms) |"
        );
        let _ = writeln!(md, "| --- | --- | --- | --- | --- | --- | --- | --- | --- |");
        for (name, sys) in &self.systems {
            for b in &budgets {
                let Some(r) = sys.budgets.get(b) else { continue };
                let stages: Vec<String> =
                    r.latency_ms.iter().map(|(s, l)| format!("{s} {:.1}", l.mean)).collect();
                let opt = |o: Option<usize>| {
                    o.map_or_else(|| "never abstains".to_owned(), |v| v.to_string())
                };
                let _ = writeln!(
                    md,
                    "| {name} | {b} | {} | {} | {} | {:.0} | {} | {} | {} |",
                    r.abstention.n,
                    opt(r.abstention.abstained),
                    opt(r.abstention.abstained_on_answerable),
                    r.abstention.mean_tokens_used,
                    r.abstention.calibration.as_ref().map_or_else(
                        || "-".to_owned(),
                        |c| format!(
                            "{:.4} ({:.3}, {:.0}%, {:.0}%)",
                            c.threshold,
                            c.balanced_accuracy,
                            100.0 * c.abstention_recall,
                            100.0 * c.false_abstention
                        )
                    ),
                    r.abstention.calibration_5pct_false_abstention.as_ref().map_or_else(
                        || "-".to_owned(),
                        |c| format!(
                            "{:.6} ({:.0}%){}",
                            c.threshold,
                            100.0 * c.abstention_recall,
                            r.abstention.calibration_5pct_interval.map_or_else(
                                String::new,
                                |i| format!(" [{:.4}, {:.4}]", i.low, i.high)
                            )
                        )
                    ),
                    stages.join(", ")
                );
            }
        }
        let _ = writeln!(md, "\n## Wall time\n");
        for (what, s) in &self.wall_time_s {
            let _ = writeln!(md, "- {what}: {s:.1} s");
        }
        md
    }

    /// Per system, each question type's turn and session recall_all in the packed context and
    /// at the largest cutoff, budgets in columns.
    fn by_type_section(&self, md: &mut String, budgets: &[String], cutoffs: &[usize]) {
        let k = cutoffs.iter().max().copied().unwrap_or(10);
        let _ = writeln!(
            md,
            "\n## By question type\n\nEach cell: turn recall_all@packed / session \
             recall_all@packed / turn recall_all@{k} / session recall_all@{k}.\n"
        );
        for (name, sys) in &self.systems {
            let _ = writeln!(md, "\n### {name}\n");
            let mut header = "| type | n |".to_owned();
            let mut rule = "| --- | --- |".to_owned();
            for b in budgets {
                let _ = write!(header, " {b} |");
                rule.push_str(" --- |");
            }
            let _ = writeln!(md, "{header}\n{rule}");
            let kinds: std::collections::BTreeSet<&String> =
                sys.budgets.values().flat_map(|r| r.by_question_type.keys()).collect();
            for kind in kinds {
                let n = sys
                    .budgets
                    .values()
                    .find_map(|r| r.by_question_type.get(kind))
                    .map_or(0, |t| t.n_scored);
                let mut row = format!("| {kind} | {n} |");
                for b in budgets {
                    let Some(t) = sys.budgets.get(b).and_then(|r| r.by_question_type.get(kind))
                    else {
                        row.push_str(" - |");
                        continue;
                    };
                    let get = |table: &MetricTable, cut: &str| {
                        table.get(&format!("recall_all@{cut}")).copied().unwrap_or(f64::NAN)
                    };
                    let s = &t.scores;
                    let _ = write!(
                        row,
                        " {:.4} / {:.4} / {:.4} / {:.4} |",
                        get(&s.turn, PACKED),
                        get(&s.session, PACKED),
                        get(&s.turn, &k.to_string()),
                        get(&s.session, &k.to_string())
                    );
                }
                let _ = writeln!(md, "{row}");
            }
        }
    }

    /// The table of evidence anywhere in the packed context, whatever its rank.
    fn packed_section(&self, md: &mut String, budgets: &[String]) {
        let _ = writeln!(
            md,
            "\n## Evidence anywhere in the packed context\n\n\
             Every gold turn (`all`) or at least one (`any`) inside the packed context, whatever its \
             rank; `session all`: every gold session reached by a packed evidence turn. Cutoffs count \
             items, which favours systems whose items are larger (a chunk lists several turns); \
             this counts only what fits the budget.\n"
        );
        let rows: Vec<PackedRow> = self
            .systems
            .iter()
            .map(|(name, sys)| {
                let cells = budgets
                    .iter()
                    .map(|b| {
                        let o = &sys.budgets.get(b)?.overall;
                        let get =
                            |t: &MetricTable, m: &str| t.get(&format!("{m}@{PACKED}")).copied();
                        Some([
                            get(&o.turn, "recall_all")?,
                            get(&o.turn, "recall_any")?,
                            get(&o.session, "recall_all")?,
                        ])
                    })
                    .collect();
                let n = sys.budgets.values().next().map_or(0, |r| r.n_scored);
                PackedRow { system: name.clone(), n, cells }
            })
            .collect();
        md.push_str(&packed_table_markdown(budgets, &rows));
    }

    /// A small SVG line plot of `metric` at `level` against budget, one line per system.
    pub fn svg_plot(&self, budgets: &[usize], level: Level, metric: &str) -> String {
        const W: f64 = 560.0;
        const H: f64 = 320.0;
        const L: f64 = 50.0;
        const R: f64 = 150.0;
        const T: f64 = 20.0;
        const B: f64 = 40.0;
        const COLOURS: [&str; 10] = [
            "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf",
        ];
        let lx = |b: usize| {
            let (lo, hi) = ((budgets[0] as f64).log2(), (budgets[budgets.len() - 1] as f64).log2());
            L + ((b as f64).log2() - lo) / (hi - lo).max(1e-9) * (W - L - R)
        };
        let ly = |v: f64| T + (1.0 - v) * (H - T - B);
        let mut svg = format!(
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="11">"#
        );
        let _ = write!(svg, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
        for i in 0..=4 {
            let v = f64::from(i) / 4.0;
            let _ = write!(
                svg,
                r##"<line x1="{L}" x2="{}" y1="{y}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{v:.2}</text>"##,
                W - R,
                L - 4.0,
                ly(v) + 4.0,
                y = ly(v)
            );
        }
        for &b in budgets {
            let _ = write!(
                svg,
                r#"<text x="{}" y="{}" text-anchor="middle">{b}</text>"#,
                lx(b),
                H - B + 16.0
            );
        }
        let _ = write!(
            svg,
            r#"<text x="{}" y="{}" text-anchor="middle">budget (reader tokens, log scale)</text>"#,
            L + (W - L - R) / 2.0,
            H - 6.0
        );
        for (i, (name, sys)) in self.systems.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let points: Vec<(f64, f64)> = budgets
                .iter()
                .filter_map(|b| {
                    let overall = &sys.budgets.get(&b.to_string())?.overall;
                    let table = match level {
                        Level::Session => &overall.session,
                        Level::Turn => &overall.turn,
                    };
                    let v = table.get(metric)?;
                    Some((lx(*b), ly(*v)))
                })
                .collect();
            let path: Vec<String> = points.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(
                svg,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                path.join(" ")
            );
            for (x, y) in &points {
                let _ = write!(svg, r#"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"#);
            }
            let ty = T + 14.0 * i as f64 + 8.0;
            let _ = write!(
                svg,
                r#"<rect x="{}" y="{}" width="10" height="10" fill="{colour}"/><text x="{}" y="{}">{name}</text>"#,
                W - R + 10.0,
                ty - 9.0,
                W - R + 24.0,
                ty
            );
        }
        svg.push_str("</svg>");
        svg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calibration_separates_low_support_abstention_cases() {
        let points = [(0.1, true), (0.2, true), (0.5, false), (0.7, false), (0.15, false)];
        let c = calibrate(&points).unwrap();
        assert!((c.threshold - 0.35).abs() < 1e-6, "{c:?}");
        assert!((c.balanced_accuracy - (1.0 + 2.0 / 3.0) / 2.0).abs() < 1e-9);
        assert!((c.false_abstention - 1.0 / 3.0).abs() < 1e-9, "0.15 is answerable, below 0.35");
        assert_eq!(c.abstention_recall, 1.0);
        assert!(calibrate(&[(0.1, true)]).is_none(), "needs both kinds");
        // At most 5% false abstention: no answerable question may fall below, so the threshold
        // stops under the lowest answerable score (0.15), catching only the case at 0.1.
        let strict = calibrate_false_abstention(&points, 0.05).unwrap();
        assert!((strict.threshold - 0.125).abs() < 1e-6, "{strict:?}");
        assert_eq!((strict.false_abstention, strict.abstention_recall), (0.0, 0.5));
        // A third of answerable questions may abstain: the threshold rises to just below 0.5.
        let loose = calibrate_false_abstention(&points, 0.34).unwrap();
        assert!((loose.threshold - 0.35).abs() < 1e-6, "{loose:?}");
        assert_eq!(loose.abstention_recall, 1.0);
    }
}
