//! One abstention threshold calibrated on several runs at once (for example the LoCoMo dev
//! adversarial questions and the LongMemEval dev abstention cases), read from their
//! `questions.jsonl`: a single data set has too few abstention cases to fit a threshold on.

use std::{fmt::Write as _, io::BufRead};

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::{
    calibration_interval::{ThresholdInterval, false_abstention_threshold_interval},
    report::{
        Calibration, MAX_FALSE_ABSTENTION, calibrate, calibrate_false_abstention, calibration_at,
    },
};

/// The fields of a `questions.jsonl` line this needs.
#[derive(Deserialize)]
struct Line {
    system: String,
    budget: Option<usize>,
    excluded: Option<String>,
    support: Option<f32>,
}

/// The `(support, is_abstention)` points of one run.
#[derive(Clone, Debug, Default)]
pub struct SupportPoints {
    /// What the points came from (a file name).
    pub source: String,
    /// One per question with a support score: abstention cases `true`, answerable `false`.
    pub points: Vec<(f32, bool)>,
    /// Questions of the system and budget without a support score (not calibrated on).
    pub without_support: usize,
}

/// Reads the points of `system` at `budget` (the smallest budget in the file when `None`).
/// Questions without user evidence are neither kind and are skipped.
pub fn read_support_points(
    source: &str,
    jsonl: impl BufRead,
    system: &str,
    budget: Option<usize>,
) -> anyhow::Result<SupportPoints> {
    let mut lines = Vec::new();
    for (i, line) in jsonl.lines().enumerate() {
        let line = line.with_context(|| format!("{source}: reading line {}", i + 1))?;
        if line.trim().is_empty() {
            continue;
        }
        let l: Line =
            serde_json::from_str(&line).with_context(|| format!("{source}: line {}", i + 1))?;
        if l.system == system {
            lines.push(l);
        }
    }
    let Some(budget) = budget.or_else(|| lines.iter().filter_map(|l| l.budget).min()) else {
        bail!("{source}: no line of system {system:?}");
    };
    let mut out = SupportPoints { source: source.to_owned(), ..SupportPoints::default() };
    for l in lines.iter().filter(|l| l.budget == Some(budget)) {
        let abstention = match l.excluded.as_deref() {
            None => false,
            Some("abstention") => true,
            Some(_) => continue,
        };
        match l.support {
            Some(s) => out.points.push((s, abstention)),
            None => out.without_support += 1,
        }
    }
    if out.points.is_empty() {
        bail!("{source}: system {system:?} has no support scores at budget {budget}");
    }
    Ok(out)
}

/// The pooled calibration and, per run, what its thresholds do there.
#[derive(Clone, Debug)]
pub struct PooledCalibration {
    /// Every run's points together (source `pooled`).
    pub points: SupportPoints,
    /// Balanced-accuracy threshold over every point.
    pub balanced: Option<Calibration>,
    /// Highest threshold refusing at most 5% of the answerable questions, over every point.
    pub five_percent: Option<Calibration>,
    /// Its 95% bootstrap interval.
    pub interval: Option<ThresholdInterval>,
}

/// Calibrates over the union of `runs`.
pub fn pool(runs: &[SupportPoints]) -> PooledCalibration {
    let points = SupportPoints {
        source: "pooled".to_owned(),
        points: runs.iter().flat_map(|r| r.points.iter().copied()).collect(),
        without_support: runs.iter().map(|r| r.without_support).sum(),
    };
    PooledCalibration {
        balanced: calibrate(&points.points),
        five_percent: calibrate_false_abstention(&points.points, MAX_FALSE_ABSTENTION),
        interval: false_abstention_threshold_interval(&points.points, MAX_FALSE_ABSTENTION),
        points,
    }
}

/// The calibration as markdown: the pooled thresholds, then each run (and the pool) under them
/// and under `extra` thresholds the caller wants to see.
pub fn pooled_markdown(
    runs: &[SupportPoints],
    pooled: &PooledCalibration,
    extra: &[f32],
) -> String {
    let mut md = String::new();
    let fmt_cal = |c: &Option<Calibration>| {
        c.as_ref().map_or_else(
            || "- (needs both abstention cases and answerable questions)".to_owned(),
            |c| {
                format!(
                    "{:.6} (caught {:.1}%, refused {:.1}%, balanced accuracy {:.3})",
                    c.threshold,
                    100.0 * c.abstention_recall,
                    100.0 * c.false_abstention,
                    c.balanced_accuracy
                )
            },
        )
    };
    let _ = writeln!(md, "- balanced-accuracy threshold: {}", fmt_cal(&pooled.balanced));
    let _ = writeln!(
        md,
        "- highest threshold refusing at most {:.0}% of answerable questions: {}",
        100.0 * MAX_FALSE_ABSTENTION,
        fmt_cal(&pooled.five_percent)
    );
    if let Some(i) = pooled.interval {
        let _ = writeln!(
            md,
            "- its {:.0}% bootstrap interval ({} resamples, abstention cases and answerable \
             questions resampled apart): [{:.6}, {:.6}]",
            100.0 * i.level,
            i.resamples,
            i.low,
            i.high
        );
    }
    let mut thresholds: Vec<(String, f32)> = Vec::new();
    if let Some(c) = &pooled.five_percent {
        thresholds.push(("5% threshold".to_owned(), c.threshold));
    }
    if let Some(i) = pooled.interval {
        thresholds.push(("interval low".to_owned(), i.low));
        thresholds.push(("interval high".to_owned(), i.high));
    }
    thresholds.extend(extra.iter().map(|&t| (format!("{t}"), t)));
    let _ = writeln!(
        md,
        "\n| run | abstention cases | answerable | without support | threshold | caught | refused |"
    );
    let _ = writeln!(md, "| --- | --- | --- | --- | --- | --- | --- |");
    for run in runs.iter().chain(std::iter::once(&pooled.points)) {
        for (label, t) in &thresholds {
            let (n_abs, n_ans) = (
                run.points.iter().filter(|p| p.1).count(),
                run.points.iter().filter(|p| !p.1).count(),
            );
            let shares = calibration_at(&run.points, *t).map_or_else(
                || "- | - |".to_owned(),
                |c| {
                    format!(
                        "{:.1}% | {:.1}% |",
                        100.0 * c.abstention_recall,
                        100.0 * c.false_abstention
                    )
                },
            );
            let _ = writeln!(
                md,
                "| {} | {n_abs} | {n_ans} | {} | {label} {t:.6} | {shares}",
                run.source, run.without_support
            );
        }
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSONL: &str = r#"{"system":"evicortex","budget":512,"excluded":null,"support":0.6}
{"system":"evicortex","budget":512,"excluded":"abstention","support":0.2}
{"system":"evicortex","budget":512,"excluded":"no_user_evidence","support":0.1}
{"system":"evicortex","budget":1024,"excluded":null,"support":0.05}
{"system":"bm25","budget":512,"excluded":null,"support":0.9}
{"system":"evicortex","budget":512,"excluded":null,"support":null}
"#;

    #[test]
    fn reads_one_system_at_the_smallest_budget_and_skips_questions_without_evidence() {
        let p = read_support_points("a", JSONL.as_bytes(), "evicortex", None).unwrap();
        assert_eq!(p.points, vec![(0.6, false), (0.2, true)]);
        assert_eq!(p.without_support, 1);
        let p = read_support_points("a", JSONL.as_bytes(), "evicortex", Some(1024)).unwrap();
        assert_eq!(p.points, vec![(0.05, false)]);
        let err = read_support_points("a", JSONL.as_bytes(), "dense", None).unwrap_err();
        assert!(err.to_string().contains("no line of system \"dense\""), "{err}");
    }

    #[test]
    fn pooling_fits_one_threshold_over_both_runs() {
        let a = SupportPoints {
            source: "a".into(),
            points: vec![(0.6, false), (0.7, false), (0.2, true)],
            without_support: 0,
        };
        let b = SupportPoints {
            source: "b".into(),
            points: vec![(0.5, false), (0.3, true)],
            without_support: 0,
        };
        let pooled = pool(&[a.clone(), b.clone()]);
        let t = pooled.five_percent.as_ref().unwrap().threshold;
        // Refuses none of the answerable (lowest 0.5) and catches both cases.
        assert!(t > 0.3 && t <= 0.5, "{t}");
        let c = calibration_at(&b.points, t).unwrap();
        assert_eq!((c.abstention_recall, c.false_abstention), (1.0, 0.0));
        let md = pooled_markdown(&[a, b], &pooled, &[0.55]);
        assert!(md.contains("| pooled | 2 | 3 | 0 | 0.55 0.550000 | 100.0% | 33.3% |"), "{md}");
    }
}
