//! The packed encoder's work on blocks of rows, each compiled per instruction set
//! ([`multiversion!`]): one call per rayon task, so that dispatch costs nothing per row.

use crate::{kernels, multiversion::multiversion};

/// One token to embed: its id, its learned position and its token type.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct EmbeddedToken {
    pub id: u32,
    pub position: usize,
    pub token_type: usize,
}

multiversion! {
    /// `rows[r] = LayerNorm(word[id] + position[pos] + token_type[type])` for each token of
    /// `tokens`; `rows` holds `tokens.len()` rows of the hidden width.
    pub(crate) fn embed_rows(
        rows: &mut [f32],
        tokens: &[EmbeddedToken],
        word: &[f32],
        position: &[f32],
        token_type: &[f32],
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
    ) {
        let h = gamma.len();
        for (row, token) in rows.chunks_exact_mut(h).zip(tokens) {
            let w = &word[token.id as usize * h..][..h];
            let p = &position[token.position * h..][..h];
            let t = &token_type[token.token_type * h..][..h];
            for (((o, &w), &p), &t) in row.iter_mut().zip(w).zip(p).zip(t) {
                *o = w + p + t;
            }
            kernels::layer_norm_in_place(row, gamma, beta, eps);
        }
    }
}

multiversion! {
    /// `out = LayerNorm(x + bias + residual)` row by row.
    pub(crate) fn bias_residual_layer_norm_rows(
        x: &[f32],
        bias: &[f32],
        residual: &[f32],
        gamma: &[f32],
        beta: &[f32],
        eps: f32,
        out: &mut [f32],
    ) {
        let h = gamma.len();
        for ((o, x), r) in out.chunks_exact_mut(h).zip(x.chunks_exact(h)).zip(residual.chunks_exact(h)) {
            for (((o, &v), &b), &r) in o.iter_mut().zip(x).zip(bias).zip(r) {
                *o = v + b + r;
            }
            kernels::layer_norm_in_place(o, gamma, beta, eps);
        }
    }
}

multiversion! {
    /// `out = GELU(x + bias)` row by row.
    pub(crate) fn bias_gelu_rows(x: &[f32], bias: &[f32], out: &mut [f32]) {
        let w = bias.len();
        for (o, x) in out.chunks_exact_mut(w).zip(x.chunks_exact(w)) {
            kernels::bias_gelu(x, bias, o);
        }
    }
}

/// Rows of Q (and of the context) computed together, so that each loaded K or V vector feeds
/// several independent multiply-add chains.
const TILE_ROWS: usize = 4;
/// Columns of one tile: two 16-lane vectors; `TILE_ROWS * 2` accumulators hide the multiply-add
/// latency. K is padded to a multiple of it.
const TILE_COLS: usize = 32;

multiversion! {
    /// Scaled dot-product attention of one head over one sequence. `qkv` holds the sequence's
    /// rows `[len, 3 * hidden]` without bias; returns the head's context `[len, head_dim]`.
    /// `relative_bias`, when given, is added to the score of key `j` for query `i` from its
    /// entry `(j - i)` after the middle one (MPNet). Scores and context are computed in register
    /// tiles of rows by columns, so that the inner loops only load and multiply-add.
    pub(crate) fn attention_head(
        qkv: &[f32],
        qkv_bias: &[f32],
        head: usize,
        head_dim: usize,
        relative_bias: Option<&[f32]>,
    ) -> Vec<f32> {
        let h3 = qkv_bias.len();
        let h = h3 / 3;
        let d = head_dim;
        let len = qkv.len() / h3;
        let stride = len.div_ceil(TILE_COLS) * TILE_COLS;
        let scale = 1.0 / (d as f32).sqrt();
        // Q (pre-scaled) and V row-major [len, d]; K transposed [d, stride], zero-padded.
        let mut q = vec![0f32; len * d];
        let mut k_t = vec![0f32; d * stride];
        let mut v = vec![0f32; len * d];
        for (t, row) in qkv.chunks_exact(h3).enumerate() {
            for c in 0..d {
                let qc = head * d + c;
                q[t * d + c] = (row[qc] + qkv_bias[qc]) * scale;
                k_t[c * stride + t] = row[h + qc] + qkv_bias[h + qc];
                v[t * d + c] = row[2 * h + qc] + qkv_bias[2 * h + qc];
            }
        }
        // One tile of rows at a time: scores, softmax and context, so that the score rows stay
        // in cache between the two products.
        let mut scores = vec![0f32; TILE_ROWS * stride];
        let mut context = vec![0f32; len * d];
        let mut t = 0;
        while t < len {
            let (q, out) = (&q[t * d..], &mut context[t * d..]);
            let rows = if t + TILE_ROWS <= len {
                attend_rows::<TILE_ROWS>(q, &k_t, &v, len, stride, relative_bias, t, &mut scores, out)
            } else {
                attend_rows::<1>(q, &k_t, &v, len, stride, relative_bias, t, &mut scores, out)
            };
            t += rows;
        }
        context
    }
}

/// Attention of `R` query rows from row `first` (`q`, rows of the head width `d`): scores
/// against every key into `scores` (rows `stride` apart), plus the relative bias if any, softmax
/// over the `len` real keys, context into `out`. Returns `R`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn attend_rows<const R: usize>(
    q: &[f32],
    k_t: &[f32],
    v: &[f32],
    len: usize,
    stride: usize,
    relative_bias: Option<&[f32]>,
    first: usize,
    scores: &mut [f32],
    out: &mut [f32],
) -> usize {
    let d = k_t.len() / stride;
    for j in (0..stride).step_by(TILE_COLS) {
        score_tile::<R>(q, d, k_t, stride, j, scores);
    }
    if let Some(bias) = relative_bias {
        let middle = bias.len() / 2;
        for (r, row) in scores.chunks_exact_mut(stride).take(R).enumerate() {
            // Key j of query i takes entry middle + j - i: keys 0..len start at middle - i.
            let start = middle - (first + r);
            for (s, &b) in row[..len].iter_mut().zip(&bias[start..start + len]) {
                *s += b;
            }
        }
    }
    for row in scores.chunks_exact_mut(stride).take(R) {
        kernels::softmax_in_place(&mut row[..len]);
    }
    context_tile::<R>(scores, stride, len, v, d, out);
    R
}

/// `scores[r][j + l] = sum over c of q[r][c] * k_t[c][j + l]` for `R` rows (row width `d` in `q`,
/// `stride` in `scores`) and [`TILE_COLS`] columns.
#[inline(always)]
fn score_tile<const R: usize>(
    q: &[f32],
    d: usize,
    k_t: &[f32],
    stride: usize,
    j: usize,
    scores: &mut [f32],
) {
    let mut acc = [[0f32; TILE_COLS]; R];
    for c in 0..d {
        let k: &[f32; TILE_COLS] = k_t[c * stride + j..][..TILE_COLS].try_into().expect("tile");
        for (r, acc) in acc.iter_mut().enumerate() {
            let a = q[r * d + c];
            for (s, &k) in acc.iter_mut().zip(k) {
                *s = a.mul_add(k, *s);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        scores[r * stride + j..][..TILE_COLS].copy_from_slice(acc);
    }
}

/// `out[r] = sum over j < len of p[r][j] * v[j]` for `R` rows (`p` rows `stride` apart, `v` and
/// `out` rows `d` wide), by tiles of [`TILE_COLS`] columns.
#[inline(always)]
fn context_tile<const R: usize>(
    p: &[f32],
    stride: usize,
    len: usize,
    v: &[f32],
    d: usize,
    out: &mut [f32],
) {
    let mut c0 = 0;
    while c0 + TILE_COLS <= d {
        let mut acc = [[0f32; TILE_COLS]; R];
        for j in 0..len {
            let row: &[f32; TILE_COLS] = v[j * d + c0..][..TILE_COLS].try_into().expect("tile");
            for (r, acc) in acc.iter_mut().enumerate() {
                let w = p[r * stride + j];
                for (s, &x) in acc.iter_mut().zip(row) {
                    *s = w.mul_add(x, *s);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            out[r * d + c0..][..TILE_COLS].copy_from_slice(acc);
        }
        c0 += TILE_COLS;
    }
    // Head widths that are not a multiple of the tile finish column by column.
    for r in 0..R {
        for c in c0..d {
            out[r * d + c] = (0..len).fold(0.0, |s, j| p[r * stride + j].mul_add(v[j * d + c], s));
        }
    }
}
