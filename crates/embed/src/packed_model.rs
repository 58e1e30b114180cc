//! `PackedModel`: the BERT and MPNet computations on a packed token matrix.
//!
//! All sequences of a batch are stacked into one `[tokens, hidden]` matrix with no padding, so the
//! linear layers (95% of the work) multiply only real tokens; attention runs per sequence and
//! head. The matrix products go to candle's multi-threaded gemm; bias, GELU, residual, layer norm
//! and softmax are fused row kernels (`block_kernels.rs`) spread over threads with rayon. The two
//! architectures differ only in their embeddings (MPNet counts positions past its padding id and
//! has no token types) and in MPNet's relative position bias, added to every attention score.
//! Parity with the reference is checked by golden vectors from PyTorch.

use candle_core::{DType, Device, Storage, Tensor};
use rayon::prelude::*;

use crate::{block_kernels, error::EmbedError, model_config::Dimensions};

/// Rows handed to one rayon task by the row kernels.
const ROWS_PER_TASK: usize = 16;

/// A layer norm's scale and shift.
#[derive(Debug)]
pub(crate) struct Norm {
    pub gamma: Vec<f32>,
    pub beta: Vec<f32>,
}

/// One transformer layer laid out for the packed forward pass.
#[derive(Debug)]
pub(crate) struct PackedLayer {
    /// `[hidden, 3 * hidden]`: query, key and value weights side by side, transposed.
    pub qkv_weight: Tensor,
    pub qkv_bias: Vec<f32>,
    /// `[hidden, hidden]`, transposed.
    pub attention_output_weight: Tensor,
    pub attention_output_bias: Vec<f32>,
    pub attention_norm: Norm,
    /// `[hidden, intermediate]`, transposed.
    pub intermediate_weight: Tensor,
    pub intermediate_bias: Vec<f32>,
    /// `[intermediate, hidden]`, transposed.
    pub output_weight: Tensor,
    pub output_bias: Vec<f32>,
    pub output_norm: Norm,
}

/// How a token's learned position is found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Positions {
    /// Its index in the sequence (BERT).
    Absolute,
    /// The padding id plus the number of non-padding tokens up to and including it; padding
    /// tokens get the padding id (MPNet and RoBERTa count positions this way).
    AfterPadding {
        /// The padding token id.
        pad_id: u32,
    },
}

/// Weights laid out for the packed forward pass.
#[derive(Debug)]
pub(crate) struct PackedModel {
    pub(crate) dims: Dimensions,
    pub(crate) word_embeddings: Vec<f32>,
    pub(crate) position_embeddings: Vec<f32>,
    /// `[types, hidden]`; one zero row for an architecture without token types.
    pub(crate) token_type_embeddings: Vec<f32>,
    pub(crate) positions: Positions,
    pub(crate) embeddings_norm: Norm,
    pub(crate) layers: Vec<PackedLayer>,
    /// MPNet's attention bias by head and offset: `[heads, 2 * max_tokens - 1]`, the bias of key
    /// `j` for query `i` at `(j - i) + max_tokens - 1`.
    pub(crate) relative_bias: Option<Vec<f32>>,
}

/// Hidden states of a packed batch: row `offsets[i] + j` is token `j` of sequence `i`.
#[derive(Debug)]
pub(crate) struct PackedHidden {
    /// `[tokens, hidden]`, row-major.
    pub states: Vec<f32>,
    /// Start row of each sequence, plus the total at the end.
    pub offsets: Vec<usize>,
}

impl PackedModel {
    /// Width of the hidden states.
    pub(crate) fn hidden_size(&self) -> usize {
        self.dims.hidden_size
    }

    /// Hidden states of `sequences` (token ids with special tokens, each at most
    /// `dims.max_tokens` long), every token of token type 0.
    pub(crate) fn forward(&self, sequences: &[&[u32]]) -> Result<PackedHidden, EmbedError> {
        self.forward_typed(sequences, None)
    }

    /// [`PackedModel::forward`] with a token type per token (`types[i]` as long as
    /// `sequences[i]`), as a sentence-pair classifier needs.
    pub(crate) fn forward_typed(
        &self,
        sequences: &[&[u32]],
        types: Option<&[&[u32]]>,
    ) -> Result<PackedHidden, EmbedError> {
        let _span = tracing::trace_span!("packed_forward", n_sequences = sequences.len()).entered();
        let h = self.dims.hidden_size;
        let n_types = self.token_type_embeddings.len() / h;
        let mut offsets = Vec::with_capacity(sequences.len() + 1);
        let mut tokens: Vec<block_kernels::EmbeddedToken> = Vec::new();
        offsets.push(0);
        for (s, seq) in sequences.iter().enumerate() {
            if seq.len() > self.dims.max_tokens {
                return Err(EmbedError::InvalidConfig {
                    field: "sequence length",
                    reason: format!(
                        "{} exceeds the model's {} positions",
                        seq.len(),
                        self.dims.max_tokens
                    ),
                });
            }
            let seq_types = types.map(|types| types[s]);
            if seq_types.is_some_and(|t| t.len() != seq.len()) {
                return Err(EmbedError::InvalidConfig {
                    field: "token types",
                    reason: format!("sequence {s} has a token type count unlike its length"),
                });
            }
            let mut counted = 0usize;
            for (index, &id) in seq.iter().enumerate() {
                if id as usize >= self.dims.vocab_size {
                    return Err(EmbedError::InvalidConfig {
                        field: "token id",
                        reason: format!(
                            "{id} is outside the vocabulary of {}",
                            self.dims.vocab_size
                        ),
                    });
                }
                let position = match self.positions {
                    Positions::Absolute => index,
                    Positions::AfterPadding { pad_id } if id == pad_id => pad_id as usize,
                    Positions::AfterPadding { pad_id } => {
                        counted += 1;
                        pad_id as usize + counted
                    }
                };
                let token_type = seq_types.map_or(0, |t| t[index] as usize);
                if token_type >= n_types {
                    return Err(EmbedError::InvalidConfig {
                        field: "token type",
                        reason: format!("{token_type} is outside the model's {n_types} types"),
                    });
                }
                tokens.push(block_kernels::EmbeddedToken { id, position, token_type });
            }
            offsets.push(tokens.len());
        }
        let eps = self.dims.layer_norm_eps as f32;
        let mut states = vec![0f32; tokens.len() * h];
        states.par_chunks_mut(h * ROWS_PER_TASK).zip(tokens.par_chunks(ROWS_PER_TASK)).for_each(
            |(rows, tokens)| {
                block_kernels::embed_rows(
                    rows,
                    tokens,
                    &self.word_embeddings,
                    &self.position_embeddings,
                    &self.token_type_embeddings,
                    &self.embeddings_norm.gamma,
                    &self.embeddings_norm.beta,
                    eps,
                )
            },
        );
        for layer in &self.layers {
            states = self.layer_forward(layer, states, &offsets)?;
        }
        Ok(PackedHidden { states, offsets })
    }

    fn layer_forward(
        &self,
        layer: &PackedLayer,
        states: Vec<f32>,
        offsets: &[usize],
    ) -> Result<Vec<f32>, EmbedError> {
        let h = self.dims.hidden_size;
        let inter = self.dims.intermediate_size;
        let n_tokens = states.len() / h;
        let x =
            Tensor::from_vec(states, (n_tokens, h), &Device::Cpu).map_err(model_err("input"))?;

        let qkv = x.matmul(&layer.qkv_weight).map_err(model_err("qkv projection"))?;
        let context = with_cpu_slice(&qkv, |qkv| self.attention(qkv, &layer.qkv_bias, offsets))?;

        let context = Tensor::from_vec(context, (n_tokens, h), &Device::Cpu)
            .map_err(model_err("attention"))?;
        let projected = context
            .matmul(&layer.attention_output_weight)
            .map_err(model_err("attention output"))?;
        let attended =
            self.add_and_norm(&projected, &layer.attention_output_bias, &x, &layer.attention_norm)?;
        drop(x);

        let attended = Tensor::from_vec(attended, (n_tokens, h), &Device::Cpu)
            .map_err(model_err("attention norm"))?;
        let intermediate =
            attended.matmul(&layer.intermediate_weight).map_err(model_err("intermediate"))?;
        let activated = with_cpu_slice(&intermediate, |intermediate| {
            let mut out = vec![0f32; n_tokens * inter];
            out.par_chunks_mut(inter * ROWS_PER_TASK)
                .zip(intermediate.par_chunks(inter * ROWS_PER_TASK))
                .for_each(|(out, intermediate)| {
                    block_kernels::bias_gelu_rows(intermediate, &layer.intermediate_bias, out)
                });
            Ok(out)
        })?;
        drop(intermediate);

        let activated = Tensor::from_vec(activated, (n_tokens, inter), &Device::Cpu)
            .map_err(model_err("gelu"))?;
        let output = activated.matmul(&layer.output_weight).map_err(model_err("output"))?;
        self.add_and_norm(&output, &layer.output_bias, &attended, &layer.output_norm)
    }

    /// `LayerNorm(x + bias + residual)` over every row, `x` and `residual` `[tokens, hidden]`.
    fn add_and_norm(
        &self,
        x: &Tensor,
        bias: &[f32],
        residual: &Tensor,
        norm: &Norm,
    ) -> Result<Vec<f32>, EmbedError> {
        let h = self.dims.hidden_size;
        let eps = self.dims.layer_norm_eps as f32;
        with_cpu_slice(x, |x| {
            with_cpu_slice(residual, |residual| {
                let mut out = vec![0f32; x.len()];
                out.par_chunks_mut(h * ROWS_PER_TASK)
                    .zip(x.par_chunks(h * ROWS_PER_TASK))
                    .zip(residual.par_chunks(h * ROWS_PER_TASK))
                    .for_each(|((out, x), residual)| {
                        block_kernels::bias_residual_layer_norm_rows(
                            x,
                            bias,
                            residual,
                            &norm.gamma,
                            &norm.beta,
                            eps,
                            out,
                        )
                    });
                Ok(out)
            })
        })
    }

    /// Scaled dot-product attention of every sequence and head; `qkv` is `[tokens, 3 * hidden]`
    /// without its bias. Returns the context `[tokens, hidden]`.
    fn attention(
        &self,
        qkv: &[f32],
        qkv_bias: &[f32],
        offsets: &[usize],
    ) -> Result<Vec<f32>, EmbedError> {
        let h = self.dims.hidden_size;
        let heads = self.dims.num_attention_heads;
        let d = self.dims.head_dim();
        let n_tokens = qkv.len() / (3 * h);
        let tasks: Vec<(usize, usize)> =
            (0..offsets.len() - 1).flat_map(|s| (0..heads).map(move |head| (s, head))).collect();
        let results: Vec<Vec<f32>> = tasks
            .par_iter()
            .map(|&(s, head)| {
                let rows = &qkv[offsets[s] * 3 * h..offsets[s + 1] * 3 * h];
                let relative_bias = self.relative_bias.as_ref().map(|bias| {
                    let width = 2 * self.dims.max_tokens - 1;
                    &bias[head * width..(head + 1) * width]
                });
                block_kernels::attention_head(rows, qkv_bias, head, d, relative_bias)
            })
            .collect();
        let mut context = vec![0f32; n_tokens * h];
        for (&(s, head), part) in tasks.iter().zip(results) {
            for (t, row) in part.chunks_exact(d).enumerate() {
                let at = (offsets[s] + t) * h + head * d;
                context[at..at + d].copy_from_slice(row);
            }
        }
        Ok(context)
    }
}

/// Runs `f` on the f32 data of a contiguous CPU tensor without copying it.
fn with_cpu_slice<T>(
    tensor: &Tensor,
    f: impl FnOnce(&[f32]) -> Result<T, EmbedError>,
) -> Result<T, EmbedError> {
    if tensor.dtype() != DType::F32 {
        return Err(EmbedError::InvalidConfig {
            field: "dtype",
            reason: format!("{:?} is not f32", tensor.dtype()),
        });
    }
    let (storage, layout) = tensor.storage_and_layout();
    let Some((start, end)) = layout.contiguous_offsets() else {
        return Err(EmbedError::InvalidConfig {
            field: "layout",
            reason: "tensor is not contiguous".to_owned(),
        });
    };
    match &*storage {
        Storage::Cpu(candle_core::CpuStorage::F32(data)) => f(&data[start..end]),
        _ => Err(EmbedError::InvalidConfig {
            field: "device",
            reason: "tensor is not f32 on the CPU".to_owned(),
        }),
    }
}

pub(crate) fn model_err(stage: &'static str) -> impl Fn(candle_core::Error) -> EmbedError {
    move |source| EmbedError::Model { stage, source }
}
