//! Pooling token states into one vector per sequence, and L2 normalisation.

use candle_core::{D, Tensor};

use crate::encoder_config::{Normalization, Pooling};

impl Pooling {
    /// `[batch, hidden]` from `hidden` `[batch, seq, hidden]` and `mask` `[batch, seq]` (f32).
    pub(crate) fn pool(self, hidden: &Tensor, mask: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Pooling::Cls => hidden.narrow(1, 0, 1)?.squeeze(1),
            Pooling::Mean => {
                let weights = mask.unsqueeze(2)?;
                let summed = hidden.broadcast_mul(&weights)?.sum(1)?;
                // The reference clamps the token count at 1e-9; the count is at least 2 here.
                let counts = mask.sum_keepdim(1)?.clamp(1e-9, f64::INFINITY)?;
                summed.broadcast_div(&counts)
            }
        }
    }

    /// One vector from the packed rows `[len, hidden]` of one sequence.
    pub(crate) fn pool_rows(self, rows: &[f32], hidden: usize) -> Vec<f32> {
        match self {
            Pooling::Cls => rows[..hidden].to_vec(),
            Pooling::Mean => {
                let n = rows.len() / hidden;
                let mut sum = vec![0f32; hidden];
                for row in rows.chunks_exact(hidden) {
                    for (s, v) in sum.iter_mut().zip(row) {
                        *s += v;
                    }
                }
                let count = (n as f32).max(1e-9);
                sum.iter_mut().for_each(|s| *s /= count);
                sum
            }
        }
    }
}

impl Normalization {
    /// Applies the normalisation to one vector in place.
    pub(crate) fn apply_in_place(self, vector: &mut [f32]) {
        if self == Normalization::L2 {
            let norm = vector.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
            vector.iter_mut().for_each(|v| *v /= norm);
        }
    }

    /// Applies the normalisation to `[batch, hidden]` vectors.
    pub(crate) fn apply(self, pooled: &Tensor) -> candle_core::Result<Tensor> {
        match self {
            Normalization::None => Ok(pooled.clone()),
            Normalization::L2 => {
                let norms =
                    pooled.sqr()?.sum_keepdim(D::Minus1)?.sqrt()?.clamp(1e-12, f64::INFINITY)?;
                pooled.broadcast_div(&norms)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use candle_core::Device;

    use super::*;

    #[track_caller]
    fn check(pooling: Pooling, expect: &[[f32; 2]]) {
        // Two sequences of three positions; the second has one padding position whose state
        // (100, 100) must not leak into the mean.
        let hidden = Tensor::new(
            &[[[1f32, 2.], [3., 4.], [5., 6.]], [[2., 0.], [4., 2.], [100., 100.]]],
            &Device::Cpu,
        )
        .unwrap();
        let mask = Tensor::new(&[[1f32, 1., 1.], [1., 1., 0.]], &Device::Cpu).unwrap();
        let pooled: Vec<Vec<f32>> = pooling.pool(&hidden, &mask).unwrap().to_vec2().unwrap();
        let expect: Vec<Vec<f32>> = expect.iter().map(|row| row.to_vec()).collect();
        assert_eq!(pooled, expect);
    }

    #[test]
    fn mean_pooling_excludes_padding() {
        check(Pooling::Mean, &[[3., 4.], [3., 1.]]);
    }

    #[test]
    fn cls_pooling_takes_the_first_token() {
        check(Pooling::Cls, &[[1., 2.], [2., 0.]]);
    }

    #[test]
    fn l2_normalisation_gives_unit_vectors_and_keeps_zero() {
        let v = Tensor::new(&[[3f32, 4.], [0., 0.]], &Device::Cpu).unwrap();
        let n: Vec<Vec<f32>> = Normalization::L2.apply(&v).unwrap().to_vec2().unwrap();
        assert_eq!(n, vec![vec![0.6, 0.8], vec![0., 0.]]);
    }
}
