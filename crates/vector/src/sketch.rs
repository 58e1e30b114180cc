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

use crate::select::BlockScores;

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
    /// Chosen by `evicortex-bench ann run --sketch` on real LongMemEval embeddings (see
    /// `docs/vector-index.md`).
    fn default() -> SketchParams {
        SketchParams { candidates: 1000, seeds: 256 }
    }
}

/// The sign bits of every row, in blocks of `BLOCK_ROWS` rows, each block column-major (word `w`
/// of each of its rows, then word `w + 1`: the scan goes down a column with the query's four
/// words for it held, which vectorises) and the blocks one after another, so a scan reads one
/// stream front to back; and each row's count of set bits. The last block's columns are only as
/// long as it needs (doubling as it fills), so a small index holds no block's worth of padding.
#[derive(Debug, Clone)]
pub(crate) struct SignSketch {
    /// Words per row.
    width: usize,
    words: Vec<u64>,
    /// Rows a column of the last block has room for (`BLOCK_ROWS` in every other block).
    tail_stride: usize,
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

/// Rows in one block: their sums stay in the first-level cache while every column adds to them.
const BLOCK_ROWS: usize = 1024;

/// The fewest rows a last block's columns make room for.
const MIN_TAIL_STRIDE: usize = 8;

impl SignSketch {
    pub(crate) fn new(dim: usize) -> SignSketch {
        SignSketch { width: dim.div_ceil(64), words: Vec::new(), tail_stride: 0, ones: Vec::new() }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 8 + self.ones.len() * 2
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

    fn blocks(&self) -> usize {
        self.ones.len().div_ceil(BLOCK_ROWS)
    }

    /// Where `block`'s words start, and its columns' stride.
    fn block_at(&self, block: usize) -> (usize, usize) {
        let stride = if block + 1 == self.blocks() { self.tail_stride } else { BLOCK_ROWS };
        (block * BLOCK_ROWS * self.width, stride)
    }

    /// Index into `words` of word `w` of `row`.
    fn word_at(&self, row: usize, w: usize) -> usize {
        let (start, stride) = self.block_at(row / BLOCK_ROWS);
        start + w * stride + row % BLOCK_ROWS
    }

    /// `row`'s words.
    pub(crate) fn row_words(&self, row: usize) -> Vec<u64> {
        (0..self.width).map(|w| self.words[self.word_at(row, w)]).collect()
    }

    fn write_row(&mut self, row: usize, words: &[u64]) {
        for (w, word) in words.iter().enumerate() {
            let at = self.word_at(row, w);
            self.words[at] = *word;
        }
    }

    pub(crate) fn push(&mut self, unit: &[f32]) {
        self.push_words(&Self::encode(unit, self.width));
    }

    /// Appends a row given its words ([`SignSketch::row_words`] of a sketch of this width).
    pub(crate) fn push_words(&mut self, words: &[u64]) {
        let row = self.ones.len();
        let in_block = row % BLOCK_ROWS;
        if in_block == 0 {
            // A new last block: the one before it is full, its stride `BLOCK_ROWS`.
            self.tail_stride = MIN_TAIL_STRIDE;
            self.words.resize(self.words.len() + self.width * self.tail_stride, 0);
        } else if in_block == self.tail_stride {
            self.widen_tail();
        }
        self.ones.push(Self::ones_of(words));
        self.write_row(row, words);
    }

    /// Doubles the room of the last block's columns, moving each column to its new place.
    fn widen_tail(&mut self) {
        let (start, old) = self.block_at(self.blocks() - 1);
        let new = (old * 2).min(BLOCK_ROWS);
        self.words.resize(start + self.width * new, 0);
        // The last column first: every column moves towards the end, onto room already moved;
        // then the rest of its new room is cleared of what the columns after it left there.
        for w in (0..self.width).rev() {
            self.words.copy_within(start + w * old..start + (w + 1) * old, start + w * new);
            self.words[start + w * new + old..start + (w + 1) * new].fill(0);
        }
        self.tail_stride = new;
    }

    pub(crate) fn set(&mut self, row: usize, unit: &[f32]) {
        let words = Self::encode(unit, self.width);
        self.ones[row] = Self::ones_of(&words);
        self.write_row(row, &words);
    }

    /// Removes `row`, the last row taking its place (as the exact index's rows do).
    pub(crate) fn swap_remove(&mut self, row: usize) {
        let last = self.ones.len() - 1;
        self.write_row(row, &self.row_words(last));
        self.write_row(last, &vec![0; self.width]);
        self.ones.swap_remove(row);
        if last.is_multiple_of(BLOCK_ROWS) {
            // The last block is empty: drop it; the full block before it is the last now.
            self.words.truncate(last * self.width);
            self.tail_stride = BLOCK_ROWS;
        }
    }

    /// Every row's sketch score for `query` (a unit vector of the sketch's dimension), appended to
    /// `out` in row order. Only the order of the scores means anything.
    #[cfg(test)]
    pub(crate) fn scores(&self, query: &[f32], out: &mut Vec<f32>) {
        let mut scan = self.scan(query, self.ones.len());
        (0..scan.blocks()).for_each(|block| out.extend_from_slice(scan.block(block).1));
    }

    /// The scores of the first `rows` rows (all of them at most) for `query` (see
    /// [`SignSketch::scores`]), a block at a time.
    pub(crate) fn scan(&self, query: &[f32], rows: usize) -> SketchScan<'_> {
        SketchScan {
            sketch: self,
            rows: rows.min(self.ones.len()),
            planes: QueryPlanes::new(query, self.width),
            simd: Popcnt512::try_new(),
            sums: [0; BLOCK_ROWS],
            scores: [0.0; BLOCK_ROWS],
        }
    }
}

/// A sketch's scores for one query, a block of rows at a time.
pub(crate) struct SketchScan<'a> {
    sketch: &'a SignSketch,
    /// Rows scanned: the first this many.
    rows: usize,
    planes: QueryPlanes,
    simd: Option<Popcnt512>,
    sums: [u32; BLOCK_ROWS],
    scores: [f32; BLOCK_ROWS],
}

impl BlockScores for SketchScan<'_> {
    fn blocks(&self) -> usize {
        self.rows.div_ceil(BLOCK_ROWS)
    }

    fn block(&mut self, block: usize) -> (usize, &[f32]) {
        let SketchScan { sketch, rows, planes, simd, sums, scores } = self;
        let first = block * BLOCK_ROWS;
        let ones = &sketch.ones[first..(*rows).min(first + BLOCK_ROWS)];
        let (start, stride) = sketch.block_at(block);
        let words = &sketch.words[start..start + sketch.width * stride];
        let sums = &mut sums[..ones.len()];
        sums.fill(0);
        // Dispatched per block: the target-feature function must inline the column loop.
        match simd {
            Some(simd) => simd.vectorize(|| planes_dots(planes, words, stride, sums)),
            None => pulp::Arch::new().dispatch(|| planes_dots(planes, words, stride, sums)),
        }
        let scores = &mut scores[..ones.len()];
        for ((score, sum), ones) in scores.iter_mut().zip(sums.iter()).zip(ones) {
            *score = *sum as f32 + planes.offset * f32::from(*ones);
        }
        (first, scores)
    }
}

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

/// Adds `Σₚ 2ᵖ·popcount(row ∧ planeₚ)` of a block's rows to `sums`, one per row (an integer
/// below 2²⁴ for any dimension under a million, so exact as an `f32`); the block's columns are
/// `stride` words apart.
#[inline(always)]
fn planes_dots(planes: &QueryPlanes, words: &[u64], stride: usize, sums: &mut [u32]) {
    for (column, [q0, q1, q2, q3]) in words.chunks(stride).zip(&planes.words) {
        for (sum, word) in sums.iter_mut().zip(column) {
            // Summed in 64 bits and narrowed once: a narrowing per plane costs more than the
            // popcounts.
            let ones = (word & q0).count_ones() as u64
                + (((word & q1).count_ones() as u64) << 1)
                + (((word & q2).count_ones() as u64) << 2)
                + (((word & q3).count_ones() as u64) << 3);
            *sum += ones as u32;
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
            let planes = QueryPlanes::new(&query, sketch.width);
            let mut portable = vec![0u32; rows.len()];
            planes_dots(&planes, &sketch.words, sketch.tail_stride, &mut portable);
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
        for row in 0..rows.len() {
            assert_eq!(sketch.row_words(row), fresh.row_words(row), "row {row}");
        }
    }

    #[test]
    fn rows_across_blocks_score_alike_as_the_last_block_grows_and_empties() {
        let dim = 130;
        let mut sketch = SignSketch::new(dim);
        let mut rows: Vec<Vec<f32>> = Vec::new();
        let query = unit(3, dim);
        let check = |sketch: &SignSketch, rows: &[Vec<f32>]| {
            let mut fresh = SignSketch::new(dim);
            rows.iter().for_each(|r| fresh.push(r));
            let (mut a, mut b) = (Vec::new(), Vec::new());
            sketch.scores(&query, &mut a);
            fresh.scores(&query, &mut b);
            assert_eq!(a, b, "{} rows", rows.len());
            for (i, row) in rows.iter().enumerate() {
                assert!((a[i] - naive(&query, row)).abs() < 1e-2, "row {i} of {}", rows.len());
            }
            assert!(sketch.words.len() <= fresh.words.len().max(sketch.width * BLOCK_ROWS * 3));
        };
        for seed in 0..(2 * BLOCK_ROWS as u64 + 9) {
            rows.push(unit(seed + 10, dim));
            sketch.push(rows.last().unwrap());
            if [1, 8, 9, 17, 1023, 1024, 1025, 2048, 2049].contains(&rows.len()) {
                check(&sketch, &rows);
            }
        }
        // Back below two blocks, then over again, then nearly empty.
        for step in 0..20 {
            let at = (step * 97) % rows.len();
            rows.swap_remove(at);
            sketch.swap_remove(at);
        }
        check(&sketch, &rows);
        rows.push(unit(5000, dim));
        sketch.push(rows.last().unwrap());
        check(&sketch, &rows);
        while rows.len() > 3 {
            rows.swap_remove(0);
            sketch.swap_remove(0);
        }
        check(&sketch, &rows);
        assert_eq!(sketch.words.len(), sketch.width * sketch.tail_stride);
        for _ in 0..3 {
            rows.swap_remove(0);
            sketch.swap_remove(0);
        }
        assert!(sketch.words.is_empty());
        rows.push(unit(6000, dim));
        sketch.push(rows.last().unwrap());
        check(&sketch, &rows);
    }

    #[test]
    fn a_scan_of_the_first_rows_scores_them_as_the_whole_scan_does() {
        let dim = 130;
        let mut sketch = SignSketch::new(dim);
        (0..2 * BLOCK_ROWS as u64 + 300).for_each(|s| sketch.push(&unit(s + 1, dim)));
        let query = unit(7, dim);
        let mut all = Vec::new();
        sketch.scores(&query, &mut all);
        for rows in [0, 1, 31, BLOCK_ROWS, BLOCK_ROWS + 1, 2 * BLOCK_ROWS + 300, 5 * BLOCK_ROWS] {
            let mut scan = sketch.scan(&query, rows);
            let mut part = Vec::new();
            for block in 0..scan.blocks() {
                let (first, scores) = scan.block(block);
                assert_eq!(first, part.len());
                part.extend_from_slice(scores);
            }
            assert_eq!(part, all[..rows.min(all.len())], "{rows} rows");
        }
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
