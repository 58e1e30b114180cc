//! Reading BERT and MPNet weights from safetensors into the packed model's layout: every tensor
//! checked for name, dtype and shape, the linear layers transposed once at load time, query, key
//! and value side by side, and MPNet's relative position bias expanded to a table by offset.

use candle_core::{Device, Tensor};
use safetensors::SafeTensors;

use crate::{
    error::{ArtifactError, EmbedError},
    model_config::{Dimensions, ModelConfig, MpnetConfig},
    packed_model::{Norm, PackedLayer, PackedModel, Positions, model_err},
};

/// Tensor names of one layer, relative to `encoder.layer.{i}.`.
struct LayerNames {
    query: &'static str,
    key: &'static str,
    value: &'static str,
    attention_output: &'static str,
    attention_norm: &'static str,
}

const BERT_LAYER: LayerNames = LayerNames {
    query: "attention.self.query",
    key: "attention.self.key",
    value: "attention.self.value",
    attention_output: "attention.output.dense",
    attention_norm: "attention.output.LayerNorm",
};

const MPNET_LAYER: LayerNames = LayerNames {
    query: "attention.attn.q",
    key: "attention.attn.k",
    value: "attention.attn.v",
    attention_output: "attention.attn.o",
    attention_norm: "attention.LayerNorm",
};

/// Reads checked f32 tensors from one safetensors file. Names are looked up bare, as a
/// sentence-transformers save writes them, or under the architecture's prefix (`bert.`,
/// `mpnet.`), as a task model (a sequence classifier) writes them.
pub(crate) struct WeightReader<'a> {
    tensors: SafeTensors<'a>,
    prefix: String,
}

impl<'a> WeightReader<'a> {
    /// Opens `safetensors`, finding whether names carry `prefix`.
    pub(crate) fn new(safetensors: &'a [u8], prefix: &str) -> Result<WeightReader<'a>, EmbedError> {
        let tensors = SafeTensors::deserialize(safetensors)
            .map_err(|err| invalid_weights("model.safetensors", err.to_string()))?;
        let probe = "embeddings.word_embeddings.weight";
        let prefix = if tensors.tensor(probe).is_ok() {
            String::new()
        } else if tensors.tensor(&format!("{prefix}{probe}")).is_ok() {
            prefix.to_owned()
        } else {
            return Err(invalid_weights(
                probe,
                format!("is missing (looked for it bare and under {prefix:?})"),
            ));
        };
        Ok(WeightReader { tensors, prefix })
    }

    /// The f32 values of the encoder tensor `name` (under the found prefix), which must have
    /// `shape`.
    pub(crate) fn read(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        self.read_exact(&format!("{}{name}", self.prefix), shape)
    }

    /// The f32 values of `name` taken as written (a task head outside the encoder).
    pub(crate) fn read_exact(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, EmbedError> {
        let view =
            self.tensors.tensor(name).map_err(|err| invalid_weights(name, err.to_string()))?;
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
    }

    fn norm(&self, prefix: &str, h: usize) -> Result<Norm, EmbedError> {
        Ok(Norm {
            gamma: self.read(&format!("{prefix}.weight"), &[h])?,
            beta: self.read(&format!("{prefix}.bias"), &[h])?,
        })
    }

    fn layer(
        &self,
        i: usize,
        names: &LayerNames,
        dims: &Dimensions,
    ) -> Result<PackedLayer, EmbedError> {
        let (h, inter) = (dims.hidden_size, dims.intermediate_size);
        let p = format!("encoder.layer.{i}");
        let weight = |part: &str, rows: usize, cols: usize| {
            self.read(&format!("{p}.{part}.weight"), &[rows, cols])
        };
        let bias = |part: &str, len: usize| self.read(&format!("{p}.{part}.bias"), &[len]);
        let mut qkv_rows = weight(names.query, h, h)?;
        qkv_rows.extend(weight(names.key, h, h)?);
        qkv_rows.extend(weight(names.value, h, h)?);
        let mut qkv_bias = bias(names.query, h)?;
        qkv_bias.extend(bias(names.key, h)?);
        qkv_bias.extend(bias(names.value, h)?);
        Ok(PackedLayer {
            qkv_weight: transposed(qkv_rows, 3 * h, h)?,
            qkv_bias,
            attention_output_weight: transposed(weight(names.attention_output, h, h)?, h, h)?,
            attention_output_bias: bias(names.attention_output, h)?,
            attention_norm: self.norm(&format!("{p}.{}", names.attention_norm), h)?,
            intermediate_weight: transposed(weight("intermediate.dense", inter, h)?, inter, h)?,
            intermediate_bias: bias("intermediate.dense", inter)?,
            output_weight: transposed(weight("output.dense", h, inter)?, h, inter)?,
            output_bias: bias("output.dense", h)?,
            output_norm: self.norm(&format!("{p}.output.LayerNorm"), h)?,
        })
    }
}

/// Loads `config`'s architecture from safetensors bytes.
pub(crate) fn load(config: &ModelConfig, safetensors: &[u8]) -> Result<PackedModel, EmbedError> {
    let dims = config.dimensions();
    let h = dims.hidden_size;
    let reader =
        WeightReader::new(safetensors, &format!("{}.", config.architecture().model_type()))?;
    let (names, positions, position_rows, token_type_embeddings, relative_bias) = match config {
        ModelConfig::Bert(c) => (
            &BERT_LAYER,
            Positions::Absolute,
            c.max_position_embeddings,
            reader.read("embeddings.token_type_embeddings.weight", &[c.type_vocab_size, h])?,
            None,
        ),
        ModelConfig::Mpnet(c) => (
            &MPNET_LAYER,
            Positions::AfterPadding { pad_id: c.pad_token_id },
            c.max_position_embeddings,
            vec![0f32; h],
            Some(relative_bias_table(
                c,
                &reader.read(
                    "encoder.relative_attention_bias.weight",
                    &[c.relative_attention_num_buckets, c.num_attention_heads],
                )?,
            )),
        ),
    };
    let layers = (0..dims.num_hidden_layers)
        .map(|i| reader.layer(i, names, &dims))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(PackedModel {
        dims,
        word_embeddings: reader.read("embeddings.word_embeddings.weight", &[dims.vocab_size, h])?,
        position_embeddings: reader
            .read("embeddings.position_embeddings.weight", &[position_rows, h])?,
        token_type_embeddings,
        positions,
        embeddings_norm: reader.norm("embeddings.LayerNorm", h)?,
        layers,
        relative_bias,
    })
}

/// Largest distance MPNet's buckets tell apart (beyond it every distance shares a bucket).
const MPNET_MAX_DISTANCE: usize = 128;

/// MPNet's bucket of a key `relative` positions after the query (negative: before), computed
/// as the reference does in f32, so that the distances on a bucket boundary fall on the same
/// side: half the buckets per direction, exact below a quarter of them, logarithmic up to
/// [`MPNET_MAX_DISTANCE`].
pub(crate) fn relative_position_bucket(relative: i64, num_buckets: usize) -> usize {
    let half = num_buckets / 2;
    let n = -relative;
    let mut bucket = if n < 0 { half } else { 0 };
    let n = n.unsigned_abs() as usize;
    let max_exact = half / 2;
    if n < max_exact {
        return bucket + n;
    }
    let log_ratio = (n as f32 / max_exact as f32).ln();
    let log_range = (MPNET_MAX_DISTANCE as f64 / max_exact as f64).ln() as f32;
    let large = max_exact + (log_ratio / log_range * (half - max_exact) as f32) as usize;
    bucket += large.min(half - 1);
    bucket
}

/// MPNet's buckets of `count` consecutive offsets (key position minus query position) from
/// `first`, with `num_buckets` buckets: what the relative position bias looks up.
pub fn mpnet_relative_buckets(first: i64, count: usize, num_buckets: usize) -> Vec<usize> {
    (0..count as i64).map(|i| relative_position_bucket(first + i, num_buckets)).collect()
}

/// `[heads, 2 * max_tokens - 1]`: each head's bias for every offset a sequence can have.
fn relative_bias_table(config: &MpnetConfig, weights: &[f32]) -> Vec<f32> {
    let heads = config.num_attention_heads;
    let max = config.max_tokens() as i64;
    let width = (2 * max - 1) as usize;
    let mut table = vec![0f32; heads * width];
    for offset in -(max - 1)..max {
        let bucket = relative_position_bucket(offset, config.relative_attention_num_buckets);
        for head in 0..heads {
            table[head * width + (offset + max - 1) as usize] = weights[bucket * heads + head];
        }
    }
    table
}

/// `rows x cols` row-major weights as a contiguous `[cols, rows]` tensor (their transpose).
pub(crate) fn transposed(
    weights: Vec<f32>,
    rows: usize,
    cols: usize,
) -> Result<Tensor, EmbedError> {
    Tensor::from_vec(weights, (rows, cols), &Device::Cpu)
        .and_then(|t| t.t()?.contiguous())
        .map_err(model_err("load weights"))
}

pub(crate) fn invalid_weights(name: &str, reason: String) -> EmbedError {
    EmbedError::Artifact(ArtifactError::InvalidConfig {
        file: "model.safetensors".to_owned(),
        field: name.to_owned(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_exact_near_and_logarithmic_far_in_both_directions() {
        let b = |r| relative_position_bucket(r, 32);
        assert_eq!((0..8).map(b).collect::<Vec<_>>(), vec![0, 17, 18, 19, 20, 21, 22, 23]);
        assert_eq!((0..8).map(|r| b(-r)).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
        assert_eq!(b(-1000), 15);
        assert_eq!(b(1000), 31);
        for r in 1..600i64 {
            assert!(b(-r - 1) >= b(-r), "monotone at {r}");
        }
    }
}
