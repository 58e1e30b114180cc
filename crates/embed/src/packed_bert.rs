//! `PackedBert`: the same BERT computation as `bert.rs`, on a packed token matrix.
//!
//! All sequences of a batch are stacked into one `[tokens, hidden]` matrix with no padding, so the
//! linear layers (95% of the work) multiply only real tokens; attention runs per sequence and
//! head. The matrix products go to candle's multi-threaded gemm; bias, GELU, residual, layer norm
//! and softmax are fused row kernels (`block_kernels.rs`) spread over threads with rayon.
//! Parity with the reference is checked by the same golden vectors as the candle model.

use candle_core::{DType, Device, Storage, Tensor};
use rayon::prelude::*;

use crate::{bert::BertConfig, block_kernels, error::EmbedError};

/// Rows handed to one rayon task by the row kernels.
const ROWS_PER_TASK: usize = 16;

/// BERT weights laid out for the packed forward pass.
#[derive(Debug)]
pub struct PackedBert {
    config: BertConfig,
    word_embeddings: Vec<f32>,
    position_embeddings: Vec<f32>,
    token_type_embedding: Vec<f32>,
    embeddings_norm: Norm,
    layers: Vec<PackedLayer>,
}

#[derive(Debug)]
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

#[derive(Debug)]
struct PackedLayer {
    /// `[hidden, 3 * hidden]`: query, key and value weights side by side, transposed.
    qkv_weight: Tensor,
    qkv_bias: Vec<f32>,
    /// `[hidden, hidden]`, transposed.
    attention_output_weight: Tensor,
    attention_output_bias: Vec<f32>,
    attention_norm: Norm,
    /// `[hidden, intermediate]`, transposed.
    intermediate_weight: Tensor,
    intermediate_bias: Vec<f32>,
    /// `[intermediate, hidden]`, transposed.
    output_weight: Tensor,
    output_bias: Vec<f32>,
    output_norm: Norm,
}

/// Hidden states of a packed batch: row `offsets[i] + j` is token `j` of sequence `i`.
#[derive(Debug)]
pub struct PackedHidden {
    /// `[tokens, hidden]`, row-major.
    pub states: Vec<f32>,
    /// Start row of each sequence, plus the total at the end.
    pub offsets: Vec<usize>,
}

impl PackedBert {
    /// Loads the weights from verified safetensors bytes.
    pub fn load(config: BertConfig, safetensors: &[u8]) -> Result<PackedBert, EmbedError> {
        let tensors = safetensors::SafeTensors::deserialize(safetensors)
            .map_err(|err| invalid_weights("model.safetensors", err.to_string()))?;
        let h = config.hidden_size;
        let inter = config.intermediate_size;
        let read = |name: &str, shape: &[usize]| -> Result<Vec<f32>, EmbedError> {
            let view =
                tensors.tensor(name).map_err(|err| invalid_weights(name, err.to_string()))?;
            if view.dtype() != safetensors::Dtype::F32 || view.shape() != shape {
                return Err(invalid_weights(
                    name,
                    format!("is {:?} {:?}, expected F32 {shape:?}", view.dtype(), view.shape()),
                ));
            }
            Ok(view
                .data()
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect())
        };
        let norm = |prefix: &str| -> Result<Norm, EmbedError> {
            Ok(Norm {
                gamma: read(&format!("{prefix}.weight"), &[h])?,
                beta: read(&format!("{prefix}.bias"), &[h])?,
            })
        };
        let token_types =
            read("embeddings.token_type_embeddings.weight", &[config.type_vocab_size, h])?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let p = format!("encoder.layer.{i}");
            let (q, k, v) = (
                read(&format!("{p}.attention.self.query.weight"), &[h, h])?,
                read(&format!("{p}.attention.self.key.weight"), &[h, h])?,
                read(&format!("{p}.attention.self.value.weight"), &[h, h])?,
            );
            let mut qkv_rows = q;
            qkv_rows.extend(k);
            qkv_rows.extend(v);
            let mut qkv_bias = read(&format!("{p}.attention.self.query.bias"), &[h])?;
            qkv_bias.extend(read(&format!("{p}.attention.self.key.bias"), &[h])?);
            qkv_bias.extend(read(&format!("{p}.attention.self.value.bias"), &[h])?);
            layers.push(PackedLayer {
                qkv_weight: transposed(qkv_rows, 3 * h, h)?,
                qkv_bias,
                attention_output_weight: transposed(
                    read(&format!("{p}.attention.output.dense.weight"), &[h, h])?,
                    h,
                    h,
                )?,
                attention_output_bias: read(&format!("{p}.attention.output.dense.bias"), &[h])?,
                attention_norm: norm(&format!("{p}.attention.output.LayerNorm"))?,
                intermediate_weight: transposed(
                    read(&format!("{p}.intermediate.dense.weight"), &[inter, h])?,
                    inter,
                    h,
                )?,
                intermediate_bias: read(&format!("{p}.intermediate.dense.bias"), &[inter])?,
                output_weight: transposed(
                    read(&format!("{p}.output.dense.weight"), &[h, inter])?,
                    h,
                    inter,
                )?,
                output_bias: read(&format!("{p}.output.dense.bias"), &[h])?,
                output_norm: norm(&format!("{p}.output.LayerNorm"))?,
            });
        }
        Ok(PackedBert {
            word_embeddings: read("embeddings.word_embeddings.weight", &[config.vocab_size, h])?,
            position_embeddings: read(
                "embeddings.position_embeddings.weight",
                &[config.max_position_embeddings, h],
            )?,
            token_type_embedding: token_types[..h].to_vec(),
            embeddings_norm: norm("embeddings.LayerNorm")?,
            layers,
            config,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &BertConfig {
        &self.config
    }

    /// Hidden states of `sequences` (token ids with special tokens, each at most the model's
    /// positions long).
    pub fn forward(&self, sequences: &[&[u32]]) -> Result<PackedHidden, EmbedError> {
        let _span =
            tracing::trace_span!("packed_bert_forward", n_sequences = sequences.len()).entered();
        let h = self.config.hidden_size;
        let mut offsets = Vec::with_capacity(sequences.len() + 1);
        let mut tokens: Vec<(u32, usize)> = Vec::new();
        offsets.push(0);
        for seq in sequences {
            if seq.len() > self.config.max_position_embeddings {
                return Err(EmbedError::InvalidConfig {
                    field: "sequence length",
                    reason: format!(
                        "{} exceeds the model's {} positions",
                        seq.len(),
                        self.config.max_position_embeddings
                    ),
                });
            }
            for (position, &id) in seq.iter().enumerate() {
                if id as usize >= self.config.vocab_size {
                    return Err(EmbedError::InvalidConfig {
                        field: "token id",
                        reason: format!(
                            "{id} is outside the vocabulary of {}",
                            self.config.vocab_size
                        ),
                    });
                }
                tokens.push((id, position));
            }
            offsets.push(tokens.len());
        }
        let eps = self.config.layer_norm_eps as f32;
        let mut states = vec![0f32; tokens.len() * h];
        states.par_chunks_mut(h * ROWS_PER_TASK).zip(tokens.par_chunks(ROWS_PER_TASK)).for_each(
            |(rows, tokens)| {
                block_kernels::embed_rows(
                    rows,
                    tokens,
                    &self.word_embeddings,
                    &self.position_embeddings,
                    &self.token_type_embedding,
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
        let h = self.config.hidden_size;
        let inter = self.config.intermediate_size;
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
        let h = self.config.hidden_size;
        let eps = self.config.layer_norm_eps as f32;
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
        let h = self.config.hidden_size;
        let heads = self.config.num_attention_heads;
        let d = self.config.head_dim();
        let n_tokens = qkv.len() / (3 * h);
        let tasks: Vec<(usize, usize)> =
            (0..offsets.len() - 1).flat_map(|s| (0..heads).map(move |head| (s, head))).collect();
        let results: Vec<Vec<f32>> = tasks
            .par_iter()
            .map(|&(s, head)| {
                let rows = &qkv[offsets[s] * 3 * h..offsets[s + 1] * 3 * h];
                block_kernels::attention_head(rows, qkv_bias, head, d)
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

/// `rows x cols` row-major weights as a contiguous `[cols, rows]` tensor (their transpose).
fn transposed(weights: Vec<f32>, rows: usize, cols: usize) -> Result<Tensor, EmbedError> {
    Tensor::from_vec(weights, (rows, cols), &Device::Cpu)
        .and_then(|t| t.t()?.contiguous())
        .map_err(model_err("load weights"))
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

fn model_err(stage: &'static str) -> impl Fn(candle_core::Error) -> EmbedError {
    move |source| EmbedError::Model { stage, source }
}

fn invalid_weights(name: &str, reason: String) -> EmbedError {
    EmbedError::Artifact(crate::error::ArtifactError::InvalidConfig {
        file: "model.safetensors".to_owned(),
        field: name.to_owned(),
        reason,
    })
}
