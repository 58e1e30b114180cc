//! The sign sketch: one bit per dimension of every stored unit vector (its sign), scanned against
//! a 4-bit copy of the query to choose the candidates an approximate search rescores exactly.
//!
//! A row's sketch score is `Σ q̃ᵢ·sign(xᵢ)` with `q̃` the query quantised to 16 levels: an
//! asymmetric estimate (the query keeps 4 bits, the row 1), far closer to the cosine order than
//! the Hamming distance between two sign vectors. With `q̃ᵢ = lo + Δ·uᵢ` the order is that of
//! `Σₚ 2ᵖ·popcount(bits ∧ planeₚ) + (lo/Δ)·popcount(bits)`, an integer per plane: four ANDs and
//! popcounts per 64 dimensions, 48 bytes per row of 384 dimensions against the 384 of the `i8`
//! copy the exact scan reads (its time is memory traffic). The scores are exact integers on every
//! path (AVX-512 `VPOPCNTQ` where the processor has it, `count_ones` elsewhere), so the
//! candidates never depend on the machine.

/// Bits of the query's quantised copy (its bit planes).
const QUERY_BITS: usize = 4;

/// How an approximate search by sketch runs; recorded in compiled contexts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SketchParams {
    /// Admitted rows chosen by sketch score and then rescored exactly: the search's top `n` is the
    /// exact top `n` of these (at least `n` are chosen, whatever this says).
    pub candidates: usize,
    /// Turns a compile takes from the turn search to seed its context list (as a graph's beam
    /// does): only the windows holding one of them are scored.
    pub seeds: usize,
}

impl Default for SketchParams {
    /// Chosen by `evicortex bench ann run --sketch` on real LongMemEval embeddings (see
    /// `docs/vector-index.md`).
    fn default() -> SketchParams {
        SketchParams { candidates: 1000, seeds: 256 }
    }
}

/// The sign bits of every row, column-major (word `w` of every row, then word `w + 1`: the scan
/// goes down a column with the query's four words for it held, which vectorises), and each row's
/// count of set bits.
#[derive(Debug, Clone)]
pub(crate) struct SignSketch {
    columns: Vec<Vec<u64>>,
    ones: Vec<u16>,
}

pulp::simd_type! {
    /// AVX-512 with the vector popcount (`VPOPCNTQ`), which the column loop compiles to.
    struct Popcnt512 {
        pub avx512f: "avx512f",
        pub avx512bw: "avx512bw",
        pub avx512vpopcntdq: "avx512vpopcntdq",
    }
}

impl SignSketch {
    pub(crate) fn new(dim: usize) -> SignSketch {
        SignSketch { columns: vec![Vec::new(); dim.div_ceil(64)], ones: Vec::new() }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.columns.iter().map(|c| c.len() * 8).sum::<usize>() + self.ones.len() * 2
    }

    fn encode(unit: &[f32], words: usize) -> Vec<u64> {
        let mut out = vec![0u64; words];
        for (i, x) in unit.iter().enumerate() {
            if x.is_sign_positive() {
                out[i / 64] |= 1 << (i % 64);
            }
        }
        out
    }

    fn ones_of(words: &[u64]) -> u16 {
        words.iter().map(|w| w.count_ones()).sum::<u32>() as u16
    }

    pub(crate) fn push(&mut self, unit: &[f32]) {
        let words = Self::encode(unit, self.columns.len());
        self.ones.push(Self::ones_of(&words));
        self.columns.iter_mut().zip(words).for_each(|(column, word)| column.push(word));
    }

    pub(crate) fn set(&mut self, row: usize, unit: &[f32]) {
        let words = Self::encode(unit, self.columns.len());
        self.ones[row] = Self::ones_of(&words);
        self.columns.iter_mut().zip(words).for_each(|(column, word)| column[row] = word);
    }

    /// Removes `row`, the last row taking its place (as the exact index's rows do).
    pub(crate) fn swap_remove(&mut self, row: usize) {
        self.ones.swap_remove(row);
        self.columns.iter_mut().for_each(|column| {
            column.swap_remove(row);
        });
    }

    /// Every row's sketch score for `query` (a unit vector of the sketch's dimension), appended to
    /// `out` in row order. Only the order of the scores means anything.
    pub(crate) fn scores(&self, query: &[f32], out: &mut Vec<f32>) {
        let planes = QueryPlanes::new(query, self.columns.len());
        out.reserve(self.ones.len());
        let simd = Popcnt512::try_new();
        // A block of rows at a time, its sums held in the first-level cache while every column
        // adds to them (a namespace's sums outgrow the second-level cache from a few hundred
        // thousand rows).
        let mut sums = [0u32; BLOCK_ROWS];
        for start in (0..self.ones.len()).step_by(BLOCK_ROWS) {
            let ones = &self.ones[start..self.ones.len().min(start + BLOCK_ROWS)];
            let sums = &mut sums[..ones.len()];
            sums.fill(0);
            // Dispatched per block: the target-feature function must inline the column loop.
            match simd {
                Some(simd) => simd.vectorize(|| planes_dots(&planes, &self.columns, start, sums)),
                None => {
                    pulp::Arch::new().dispatch(|| planes_dots(&planes, &self.columns, start, sums))
                }
            }
            out.extend(
                sums.iter()
                    .zip(ones)
                    .map(|(sum, ones)| *sum as f32 + planes.offset * f32::from(*ones)),
            );
        }
    }
}

/// Rows whose sums one pass down the columns adds up.
const BLOCK_ROWS: usize = 1024;

/// The query's 4-bit copy as bit planes: plane `p` holds bit `p` of every dimension's level.
struct QueryPlanes {
    /// Per word of a row, that word of each of the `QUERY_BITS` planes.
    words: Vec<[u64; QUERY_BITS]>,
    /// `lo / Δ`: the weight of a row's set bits beside the planes' weighted popcounts.
    offset: f32,
}

impl QueryPlanes {
    fn new(query: &[f32], words: usize) -> QueryPlanes {
        let lo = query.iter().copied().fold(f32::INFINITY, f32::min);
        let hi = query.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let levels = ((1 << QUERY_BITS) - 1) as f32;
        let step = if hi > lo { (hi - lo) / levels } else { 1.0 };
        let mut planes = vec![[0u64; QUERY_BITS]; words];
        for (i, x) in query.iter().enumerate() {
            let level = ((x - lo) / step).round().clamp(0.0, levels) as u32;
            for (p, plane) in planes[i / 64].iter_mut().enumerate() {
                if level >> p & 1 == 1 {
                    *plane |= 1 << (i % 64);
                }
            }
        }
        QueryPlanes { words: planes, offset: lo / step }
    }
}

/// Adds `Σₚ 2ᵖ·popcount(row ∧ planeₚ)` of the rows from `start` on to `sums`, one per row (an
/// integer below 2²⁴ for any dimension under a million, so exact as an `f32`).
#[inline(always)]
fn planes_dots(planes: &QueryPlanes, columns: &[Vec<u64>], start: usize, sums: &mut [u32]) {
    for (column, [q0, q1, q2, q3]) in columns.iter().zip(&planes.words) {
        for (sum, word) in sums.iter_mut().zip(&column[start..]) {
            let ones = (word & q0).count_ones()
                + ((word & q1).count_ones() << 1)
                + ((word & q2).count_ones() << 2)
                + ((word & q3).count_ones() << 3);
            *sum += ones;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dim: usize) -> Vec<f32> {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let v: Vec<f32> = (0..dim)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 40) as f32 / (1u64 << 24) as f32 - 0.5
            })
            .collect();
        let norm = v.iter().map(|a| a * a).sum::<f32>().sqrt();
        v.iter().map(|a| a / norm).collect()
    }

    /// The score the planes stand for, from the definition: the query's level of every dimension
    /// where the row is positive, plus the offset per positive dimension.
    fn naive(query: &[f32], row: &[f32]) -> f32 {
        let planes = QueryPlanes::new(query, query.len().div_ceil(64));
        let mut sum = 0u32;
        let mut ones = 0u32;
        for (i, x) in row.iter().enumerate() {
            if x.is_sign_positive() {
                let word = planes.words[i / 64];
                sum += (0..QUERY_BITS)
                    .map(|p| ((word[p] >> (i % 64)) & 1) as u32 * (1 << p))
                    .sum::<u32>();
                ones += 1;
            }
        }
        sum as f32 + planes.offset * ones as f32
    }

    #[test]
    fn every_kernel_scores_each_row_by_its_definition() {
        for dim in [1, 63, 64, 100, 384, 512, 1024] {
            let rows: Vec<Vec<f32>> = (0..37).map(|s| unit(s + 1, dim)).collect();
            let query = unit(999, dim);
            let mut sketch = SignSketch::new(dim);
            rows.iter().for_each(|r| sketch.push(r));
            let mut scores = Vec::new();
            sketch.scores(&query, &mut scores);
            let planes = QueryPlanes::new(&query, sketch.columns.len());
            let mut portable = vec![0u32; rows.len()];
            planes_dots(&planes, &sketch.columns, 0, &mut portable);
            for (i, row) in rows.iter().enumerate() {
                let expected = portable[i] as f32 + planes.offset * f32::from(sketch.ones[i]);
                assert_eq!(scores[i], expected, "dim {dim}, row {i}");
                assert!((scores[i] - naive(&query, row)).abs() < 1e-2, "dim {dim}, row {i}");
            }
        }
    }

    #[test]
    fn replaced_and_removed_rows_score_like_a_fresh_sketch() {
        let dim = 130;
        let mut sketch = SignSketch::new(dim);
        let mut rows: Vec<Vec<f32>> = (0..10).map(|s| unit(s + 1, dim)).collect();
        rows.iter().for_each(|r| sketch.push(r));
        rows[3] = unit(50, dim);
        sketch.set(3, &rows[3]);
        rows.swap_remove(5);
        sketch.swap_remove(5);
        rows.swap_remove(8);
        sketch.swap_remove(8);
        let mut fresh = SignSketch::new(dim);
        rows.iter().for_each(|r| fresh.push(r));
        let query = unit(77, dim);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        sketch.scores(&query, &mut a);
        fresh.scores(&query, &mut b);
        assert_eq!(a, b);
        assert_eq!(sketch.columns, fresh.columns);
    }

    #[test]
    fn a_row_near_the_query_outscores_one_far_from_it() {
        let dim = 384;
        let query = unit(5, dim);
        let far = unit(6, dim);
        let near: Vec<f32> = query.iter().zip(&far).map(|(q, f)| 0.8 * q + 0.2 * f).collect();
        let mut sketch = SignSketch::new(dim);
        sketch.push(&far);
        sketch.push(&near);
        let mut scores = Vec::new();
        sketch.scores(&query, &mut scores);
        assert!(scores[1] > scores[0], "{scores:?}");
    }
}
