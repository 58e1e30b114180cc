//! The machine's f32 matrix-product rate through the same kernels the encoder uses (candle's
//! matrix product), so that the benchmark can say what fraction of it the encoder reaches.

use std::time::Instant;

use candle_core::{Device, Tensor};

/// Rows of the timed products: a large batch of tokens.
const ROWS: usize = 4096;
/// Timed repetitions per shape; the best counts (a peak, not a typical rate).
const REPETITIONS: usize = 8;

/// Best measured GFLOP/s of f32 matrix products on the shapes of an encoder's linear layers
/// (`hidden` wide, `intermediate` in the feed-forward layer), over all cores.
pub fn measure_sgemm_gflops(hidden: usize, intermediate: usize) -> anyhow::Result<f64> {
    let shapes =
        [(ROWS, hidden, 3 * hidden), (ROWS, hidden, intermediate), (ROWS, intermediate, hidden)];
    let err = |source: candle_core::Error| anyhow::anyhow!("matrix-product peak: {source}");
    let mut best = 0f64;
    for (m, k, n) in shapes {
        let a = Tensor::from_vec(filled(m * k, 0.37), (m, k), &Device::Cpu).map_err(err)?;
        let b = Tensor::from_vec(filled(k * n, 0.11), (k, n), &Device::Cpu).map_err(err)?;
        a.matmul(&b).map_err(err)?;
        for _ in 0..REPETITIONS {
            let start = Instant::now();
            let c = a.matmul(&b).map_err(err)?;
            let seconds = start.elapsed().as_secs_f64();
            drop(c);
            best = best.max(2.0 * (m * k * n) as f64 / seconds / 1e9);
        }
    }
    Ok(best)
}

fn filled(len: usize, step: f32) -> Vec<f32> {
    (0..len).map(|i| ((i % 97) as f32 * step).sin()).collect()
}
