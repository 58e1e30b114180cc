//! Dot products over `f32` and `i8`, and normalisation. Written so the compiler vectorises them.

/// Dot product of two equally long `f32` slices, summed in eight lanes then combined in a fixed
/// order (so results are identical across runs and instruction sets: lanes are explicit, so
/// vectorisation does not reorder the sums).
#[inline(always)]
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let mut lanes = [0.0f32; 8];
    let (a_chunks, b_chunks) = (a.chunks_exact(8), b.chunks_exact(8));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    let mut sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]))
        + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += x * y;
    }
    sum
}

/// Dot product of two equally long `i8` slices, exact in `i32` (at most 2^31 / 127^2 = 133k
/// dimensions).
#[inline(always)]
pub(crate) fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    debug_assert_eq!(a.len(), b.len());
    let mut lanes = [0i32; 16];
    let (a_chunks, b_chunks) = (a.chunks_exact(16), b.chunks_exact(16));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..16 {
            lanes[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let mut sum: i32 = lanes.iter().sum();
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += i32::from(*x) * i32::from(*y);
    }
    sum
}

/// Appends to `out` the dot product of `query` with each `query.len()`-long row of `rows`. Integer
/// sums, so the result does not depend on the path taken: with AVX-512 (BW) rows are widened to
/// `i16` and multiplied pairwise into `i32` lanes, 32 components a step, the query held in
/// registers; otherwise [`dot_i8`] per row. (Written out because the auto-vectorised loop stays
/// on SSE2 and took three times as long on a 100k-row scan.)
pub(crate) fn dot_i8_rows(query: &[i8], rows: &[i8], out: &mut Vec<i32>) {
    if query.is_empty() {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(simd) = pulp::x86::V4::try_new() {
        simd.vectorize(RowsV4 { simd, query, rows, out });
        return;
    }
    dot_i8_rows_portable(query, rows, out);
}

fn dot_i8_rows_portable(query: &[i8], rows: &[i8], out: &mut Vec<i32>) {
    pulp::Arch::new().dispatch(|| {
        out.extend(rows.chunks_exact(query.len()).map(|row| dot_i8(query, row)));
    });
}

#[cfg(target_arch = "x86_64")]
struct RowsV4<'a> {
    simd: pulp::x86::V4,
    query: &'a [i8],
    rows: &'a [i8],
    out: &'a mut Vec<i32>,
}

#[cfg(target_arch = "x86_64")]
impl pulp::NullaryFnOnce for RowsV4<'_> {
    type Output = ();

    #[inline(always)]
    fn call(self) {
        use pulp::{cast, i8x32, i16x32, i32x16};
        let RowsV4 { simd, query, rows, out } = self;
        let dim = query.len();
        let head = dim - dim % 32;
        let (query_head, query_tail) = query.split_at(head);
        let widened: Vec<i16x32> = query_head
            .chunks_exact(32)
            .map(|c| simd.convert_i8x32_to_i16x32(cast::<[i8; 32], i8x32>(array32(c))))
            .collect();
        out.reserve(rows.len() / dim);
        for row in rows.chunks_exact(dim) {
            let (row_head, row_tail) = row.split_at(head);
            let mut acc: i32x16 = simd.splat_i32x16(0);
            for (q, r) in widened.iter().zip(row_head.chunks_exact(32)) {
                let r = simd.convert_i8x32_to_i16x32(cast::<[i8; 32], i8x32>(array32(r)));
                let products = simd.multiply_wrapping_add_adjacent_i16x32(*q, r);
                acc = cast(simd.avx512f._mm512_add_epi32(cast(acc), cast(products)));
            }
            // |q · r| <= 127² per component pair, so neither the i16 products nor their pairwise
            // i32 sums can wrap.
            let sum = simd.avx512f._mm512_reduce_add_epi32(cast(acc));
            out.push(sum + dot_i8(query_tail, row_tail));
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn array32(chunk: &[i8]) -> [i8; 32] {
    chunk.try_into().expect("chunks of 32")
}

/// `v` scaled to unit length, or why it cannot be: zero norm or a non-finite component.
pub fn normalize(v: &[f32]) -> Result<Vec<f32>, &'static str> {
    if v.iter().any(|x| !x.is_finite()) {
        return Err("non-finite component");
    }
    let norm = v.iter().map(|x| f64::from(*x) * f64::from(*x)).sum::<f64>().sqrt();
    if norm == 0.0 {
        return Err("zero norm");
    }
    Ok(v.iter().map(|x| (f64::from(*x) / norm) as f32).collect())
}

/// A unit vector quantised to `i8` with one scale: `v ≈ scale · q`. Also returns the exact
/// quantisation error `‖v − scale · q‖` and `‖scale · q‖`, which bound the error of a quantised dot.
pub(crate) fn quantize(v: &[f32], out: &mut Vec<i8>) -> Quantized {
    let max_abs = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let scale = if max_abs > 0.0 { max_abs / 127.0 } else { 1.0 };
    let mut err = 0.0f64;
    let mut norm = 0.0f64;
    for &x in v {
        let q = (x / scale).round().clamp(-127.0, 127.0) as i8;
        let back = f64::from(scale) * f64::from(q);
        err += (f64::from(x) - back).powi(2);
        norm += back * back;
        out.push(q);
    }
    Quantized { scale, error: err.sqrt() as f32, norm: norm.sqrt() as f32 }
}

#[derive(Copy, Clone, Debug)]
pub(crate) struct Quantized {
    pub(crate) scale: f32,
    pub(crate) error: f32,
    pub(crate) norm: f32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dots_match_naive_sums() {
        let a: Vec<f32> = (0..37).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..37).map(|i| (i as f32 * 0.11).cos()).collect();
        let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - naive).abs() < 1e-5);
        let qa: Vec<i8> = (0..37).map(|i| (i * 7 % 255 - 127) as i8).collect();
        let qb: Vec<i8> = (0..37).map(|i| (i * 13 % 255 - 127) as i8).collect();
        let naive: i32 = qa.iter().zip(&qb).map(|(x, y)| i32::from(*x) * i32::from(*y)).sum();
        assert_eq!(dot_i8(&qa, &qb), naive);
    }

    #[test]
    fn row_dots_equal_per_row_dots_for_any_dimension() {
        for dim in [1, 7, 31, 32, 33, 64, 96, 100, 384] {
            let query: Vec<i8> = (0..dim).map(|i| ((i * 37 + dim) % 255) as u8 as i8).collect();
            let rows: Vec<i8> = (0..dim * 5).map(|i| ((i * 91 + 3) % 255) as u8 as i8).collect();
            let extreme: Vec<i8> = [vec![127; dim], vec![-127; dim]].concat();
            for rows in [&rows, &extreme] {
                let mut out = vec![42];
                dot_i8_rows(&query, rows, &mut out);
                let naive = rows.chunks_exact(dim).map(|r| {
                    r.iter().zip(&query).map(|(a, b)| i32::from(*a) * i32::from(*b)).sum::<i32>()
                });
                let expected: Vec<i32> = std::iter::once(42).chain(naive).collect();
                assert_eq!(out, expected, "dim {dim}");
                let mut portable = vec![42];
                dot_i8_rows_portable(&query, rows, &mut portable);
                assert_eq!(portable, expected, "dim {dim}");
            }
        }
        let mut none = Vec::new();
        dot_i8_rows(&[], &[], &mut none);
        assert!(none.is_empty());
    }

    #[test]
    fn quantisation_error_is_the_stated_bound() {
        let v = normalize(&[0.3, -0.2, 0.9, 0.01]).unwrap();
        let mut q = Vec::new();
        let quant = quantize(&v, &mut q);
        let back: Vec<f32> = q.iter().map(|&x| quant.scale * f32::from(x)).collect();
        let err = v.iter().zip(&back).map(|(a, b)| (a - b).powi(2)).sum::<f32>().sqrt();
        assert!((err - quant.error).abs() < 1e-6);
        assert!(normalize(&[0.0, 0.0]).is_err());
        assert!(normalize(&[f32::NAN]).is_err());
    }
}
