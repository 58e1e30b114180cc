//! Element-wise and row-wise f32 kernels of the packed encoder: branch-free so that the compiler
//! vectorises them, always inlined so that the per-instruction-set versions of their callers
//! (`block_kernels.rs`) get them compiled for AVX-512 or AVX2, and split over rows by the caller
//! for multi-threading.
//!
//! `exp` uses the Cephes single-precision polynomial after range reduction by powers of two; `erf`
//! the rational approximation on [-4, 4] used by Eigen and XLA for f32 (beyond 4, erf is 1 to
//! f32 precision). Both are within a few ulp of the exact values, far inside the parity bound.

/// Lanes of the independent accumulators used in reductions, so they vectorise without
/// reassociating floating-point sums.
const LANES: usize = 16;

/// e^x, branch-free and free of float-to-int casts, so that it vectorises.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding 1.5 * 2^23 rounds to the nearest integer n and leaves n in the low mantissa bits.
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.0, 88.0);
    let shifted = x * LOG2E + ROUND;
    let n = shifted - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    // 2^n: the exponent field is n + 127; `shifted`'s bits are 0x4B40_0000 + n.
    let two_n = f32::from_bits(shifted.to_bits().wrapping_sub(0x4B40_0000).wrapping_add(127) << 23);
    y * two_n
}

/// erf(x), branch-free.
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = -2.726_142_3e-10_f32;
    p = p * x2 + 2.770_681_4e-8;
    p = p * x2 + -2.101_024e-6;
    p = p * x2 + -5.692_506_4e-5;
    p = p * x2 + -7.349_906_3e-4;
    p = p * x2 + -2.954_6e-3;
    p = p * x2 + -1.609_603_3e-2;
    let mut q = -1.456_607_2e-5_f32;
    q = q * x2 + -2.133_740_6e-4;
    q = q * x2 + -1.682_827e-3;
    q = q * x2 + -7.373_329_3e-3;
    q = q * x2 + -1.426_473_9e-2;
    x * p / q
}

/// Exact (erf) GELU of `x + bias`, written to `out`.
#[inline(always)]
pub(crate) fn bias_gelu(x: &[f32], bias: &[f32], out: &mut [f32]) {
    for ((o, &v), &b) in out.iter_mut().zip(x).zip(bias) {
        let v = v + b;
        *o = 0.5 * v * (1.0 + erf(v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Sum of `values` with [`LANES`] independent accumulators.
#[inline(always)]
fn sum(values: &[f32]) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = values.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, v) in acc.iter_mut().zip(chunk) {
            *a += v;
        }
    }
    let mut total: f32 = acc.iter().sum();
    total += chunks.remainder().iter().sum::<f32>();
    total
}

/// LayerNorm of one row, in place.
#[inline(always)]
pub(crate) fn layer_norm_in_place(row: &mut [f32], gamma: &[f32], beta: &[f32], eps: f32) {
    let n = row.len() as f32;
    let mean = sum(row) / n;
    let mut acc = [0f32; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, v) in acc.iter_mut().zip(chunk) {
            let d = v - mean;
            *a += d * d;
        }
    }
    let mut var: f32 = acc.iter().sum();
    var += chunks.remainder().iter().map(|v| (v - mean) * (v - mean)).sum::<f32>();
    let inv = 1.0 / (var / n + eps).sqrt();
    for ((v, &g), &b) in row.iter_mut().zip(gamma).zip(beta) {
        *v = (*v - mean) * inv * g + b;
    }
}

/// Softmax of one row, in place.
#[inline(always)]
pub(crate) fn softmax_in_place(row: &mut [f32]) {
    let mut lanes = [f32::NEG_INFINITY; LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = if v > *m { v } else { *m };
        }
    }
    let mut max = f32::NEG_INFINITY;
    for &v in lanes.iter().chain(chunks.remainder()) {
        max = if v > max { v } else { max };
    }
    for v in row.iter_mut() {
        *v = exp(*v - max);
    }
    let inv = 1.0 / sum(row);
    for v in row.iter_mut() {
        *v *= inv;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_within_a_few_ulp() {
        let mut worst = 0f64;
        for i in -8700..=8800 {
            let x = i as f32 / 100.0;
            let exact = f64::from(x).exp();
            let rel = ((f64::from(exp(x)) - exact) / exact).abs();
            worst = worst.max(rel);
        }
        assert!(worst < 5e-7, "worst relative error {worst:e}");
        assert_eq!(exp(-1000.0), exp(-87.0), "clamped below");
        assert!(exp(-1000.0) >= 0.0 && exp(1000.0).is_finite());
    }

    #[test]
    fn erf_is_within_a_few_ulp() {
        // Reference: erf through the complementary error function's continued fraction would be
        // long; f64 integration of exp(-t^2) with Simpson's rule is exact enough here.
        let erf64 = |x: f64| {
            let n = 20_000;
            let h = x / n as f64;
            let f = |t: f64| (-t * t).exp();
            let mut s = f(0.0) + f(x);
            for i in 1..n {
                s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
            }
            s * h / 3.0 * 2.0 / std::f64::consts::PI.sqrt()
        };
        let mut worst = 0f64;
        for i in -600..=600 {
            let x = i as f32 / 100.0;
            worst = worst.max((f64::from(erf(x)) - erf64(f64::from(x))).abs());
        }
        assert!(worst < 5e-7, "worst absolute error {worst:e}");
    }

    #[test]
    fn layer_norm_and_softmax_match_their_definitions() {
        let mut row: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
        let original = row.clone();
        let gamma = vec![2.0; 37];
        let beta = vec![0.5; 37];
        layer_norm_in_place(&mut row, &gamma, &beta, 1e-12);
        let mean = original.iter().map(|&v| f64::from(v)).sum::<f64>() / 37.0;
        let var = original.iter().map(|&v| (f64::from(v) - mean).powi(2)).sum::<f64>() / 37.0;
        for (got, v) in row.iter().zip(&original) {
            let want = (f64::from(*v) - mean) / var.sqrt() * 2.0 + 0.5;
            assert!((f64::from(*got) - want).abs() < 1e-5, "{got} vs {want}");
        }

        let mut scores = vec![1.0f32, 2.0, 3.0, -1e30];
        softmax_in_place(&mut scores);
        let z = 1f64.exp() + 2f64.exp() + 3f64.exp();
        for (got, want) in scores.iter().zip([1f64.exp() / z, 2f64.exp() / z, 3f64.exp() / z, 0.0])
        {
            assert!((f64::from(*got) - want).abs() < 1e-7, "{got} vs {want}");
        }
    }
}
