//! Support thresholds for abstention, fitted on a split's `(support, is_abstention)` pairs:
//! the one that best separates abstention cases from answerable questions, and the highest one
//! that keeps wrong abstentions under a stated share.

use serde::Serialize;

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
