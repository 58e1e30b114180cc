//! The running totals of one system at one budget while questions run, finished into its
//! [`BudgetReport`].

use std::{collections::BTreeMap, time::Duration};

use super::{
    AbstentionReport, BudgetReport, LatencyStats, MAX_FALSE_ABSTENTION, TokenStats, TypeScores,
    calibrate, calibrate_false_abstention,
};
use crate::{
    calibration_interval::false_abstention_threshold_interval,
    scoring::{LevelScores, MeanScores},
};

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
