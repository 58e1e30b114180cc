//! How far a fitted abstention threshold can be trusted: a percentile bootstrap over the
//! questions it was fitted on, resampling abstention cases and answerable questions apart (so each
//! resample keeps both kinds), with a fixed seed so a report is reproducible.

use serde::Serialize;

use crate::report::calibrate_false_abstention;

/// Resamples per interval.
pub const BOOTSTRAP_RESAMPLES: usize = 1000;

/// The seed of every interval (reports must reproduce).
const SEED: u64 = 0x5EED_AB57;

/// A two-sided percentile interval of a fitted threshold.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ThresholdInterval {
    /// Lower end (the 2.5th percentile of the resampled thresholds).
    pub low: f32,
    /// Upper end (the 97.5th percentile).
    pub high: f32,
    /// Coverage of the interval (0.95).
    pub level: f64,
    /// Resamples drawn.
    pub resamples: usize,
}

/// The 95% interval of the highest threshold with at most `max_false_abstention` of answerable
/// questions below it, over `(support, is_abstention)` pairs; `None` without both kinds.
pub fn false_abstention_threshold_interval(
    points: &[(f32, bool)],
    max_false_abstention: f64,
) -> Option<ThresholdInterval> {
    let abstention: Vec<(f32, bool)> = points.iter().copied().filter(|p| p.1).collect();
    let answerable: Vec<(f32, bool)> = points.iter().copied().filter(|p| !p.1).collect();
    if abstention.is_empty() || answerable.is_empty() {
        return None;
    }
    let mut rng = SplitMix64(SEED);
    let mut fitted: Vec<f32> = Vec::with_capacity(BOOTSTRAP_RESAMPLES);
    let mut sample = Vec::with_capacity(points.len());
    for _ in 0..BOOTSTRAP_RESAMPLES {
        sample.clear();
        for group in [&abstention, &answerable] {
            sample.extend((0..group.len()).map(|_| group[rng.below(group.len())]));
        }
        if let Some(c) = calibrate_false_abstention(&sample, max_false_abstention) {
            fitted.push(c.threshold);
        }
    }
    fitted.sort_by(f32::total_cmp);
    let at = |q: f64| fitted[((fitted.len() - 1) as f64 * q).round() as usize];
    Some(ThresholdInterval {
        low: at(0.025),
        high: at(0.975),
        level: 0.95,
        resamples: BOOTSTRAP_RESAMPLES,
    })
}

/// SplitMix64: small, fast and fully determined by its seed, which is all a bootstrap needs.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0); the modulo bias is below 2^-40 for the sizes used here.
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interval_brackets_the_fitted_threshold_and_narrows_with_more_questions() {
        // Answerable supports spread over 0.30..0.80, abstention cases over 0.20..0.50.
        let points = |n: usize| -> Vec<(f32, bool)> {
            (0..n)
                .map(|i| (0.30 + 0.50 * i as f32 / n as f32, false))
                .chain((0..n / 4).map(|i| (0.20 + 0.30 * i as f32 / (n / 4) as f32, true)))
                .collect()
        };
        let small = points(40);
        let fitted = calibrate_false_abstention(&small, 0.05).unwrap().threshold;
        let ci = false_abstention_threshold_interval(&small, 0.05).unwrap();
        assert!(ci.low <= fitted && fitted <= ci.high, "{ci:?} around {fitted}");
        assert!(ci.low < ci.high, "{ci:?}");
        let large = false_abstention_threshold_interval(&points(400), 0.05).unwrap();
        assert!(large.high - large.low < ci.high - ci.low, "{large:?} vs {ci:?}");
        // Deterministic: the same points give the same interval.
        assert_eq!(false_abstention_threshold_interval(&small, 0.05), Some(ci));
    }

    #[test]
    fn no_interval_without_both_kinds() {
        assert!(false_abstention_threshold_interval(&[(0.4, false)], 0.05).is_none());
        assert!(false_abstention_threshold_interval(&[(0.4, true)], 0.05).is_none());
    }
}
