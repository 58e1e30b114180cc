//! The BERT encoder on candle: a pure function of token ids and attention mask to hidden states.
//!
//! The configuration mirrors the upstream `config.json` as a serde struct; anything this
//! implementation does not compute exactly (another activation, relative positions) is refused
//! rather than approximated. Pooling, normalisation and overlength handling live around it.

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

use crate::error::{ArtifactError, EmbedError};

/// The fields of a BERT `config.json` this implementation reads.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct BertConfig {
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Width of the hidden states.
    pub hidden_size: usize,
    /// Number of transformer layers.
    pub num_hidden_layers: usize,
    /// Number of attention heads.
    pub num_attention_heads: usize,
    /// Width of the feed-forward layer.
    pub intermediate_size: usize,
    /// Feed-forward activation; only exact (erf) `gelu` is supported.
    pub hidden_act: String,
    /// Number of learned positions.
    pub max_position_embeddings: usize,
    /// Number of token types.
    pub type_vocab_size: usize,
    /// Layer-norm epsilon.
    pub layer_norm_eps: f64,
    /// Position embedding kind; only `absolute` is supported.
    #[serde(default = "absolute")]
    pub position_embedding_type: String,
}

fn absolute() -> String {
    "absolute".to_owned()
}

impl BertConfig {
    /// Parses and checks `config.json`.
    pub fn parse(bytes: &[u8]) -> Result<BertConfig, ArtifactError> {
        let invalid = |field: &str, reason: String| ArtifactError::InvalidConfig {
            file: "config.json".to_owned(),
            field: field.to_owned(),
            reason,
        };
        let config: BertConfig =
            serde_json::from_slice(bytes).map_err(|err| invalid("json", err.to_string()))?;
        if config.hidden_act != "gelu" {
            return Err(invalid(
                "hidden_act",
                format!("{:?} is not supported (only \"gelu\")", config.hidden_act),
            ));
        }
        if config.position_embedding_type != "absolute" {
            return Err(invalid(
                "position_embedding_type",
                format!(
                    "{:?} is not supported (only \"absolute\")",
                    config.position_embedding_type
                ),
            ));
        }
        if config.num_attention_heads == 0
            || !config.hidden_size.is_multiple_of(config.num_attention_heads)
        {
            return Err(invalid(
                "num_attention_heads",
                format!(
                    "{} does not divide hidden_size {}",
                    config.num_attention_heads, config.hidden_size
                ),
            ));
        }
        Ok(config)
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

/// BERT weights loaded into candle tensors.
#[derive(Debug)]
pub struct BertModel {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    token_type_embeddings: Embedding,
    embeddings_norm: LayerNorm,
    layers: Vec<BertLayer>,
    config: BertConfig,
    device: Device,
}

#[derive(Debug)]
struct BertLayer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_output: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    output: Linear,
    output_norm: LayerNorm,
}

impl BertModel {
    /// Loads the weights from verified safetensors bytes.
    pub fn load(config: BertConfig, safetensors: Vec<u8>) -> Result<BertModel, EmbedError> {
        let device = Device::Cpu;
        let model_err = |source| EmbedError::Model { stage: "load weights", source };
        let vb = VarBuilder::from_buffered_safetensors(safetensors, DType::F32, &device)
            .map_err(model_err)?;
        let h = config.hidden_size;
        let eps = config.layer_norm_eps;
        let norm = |vb: VarBuilder| candle_nn::layer_norm(h, eps, vb);
        let emb = vb.pp("embeddings");
        let word_embeddings = candle_nn::embedding(config.vocab_size, h, emb.pp("word_embeddings"))
            .map_err(model_err)?;
        let position_embeddings =
            candle_nn::embedding(config.max_position_embeddings, h, emb.pp("position_embeddings"))
                .map_err(model_err)?;
        let token_type_embeddings =
            candle_nn::embedding(config.type_vocab_size, h, emb.pp("token_type_embeddings"))
                .map_err(model_err)?;
        let embeddings_norm = norm(emb.pp("LayerNorm")).map_err(model_err)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for i in 0..config.num_hidden_layers {
            let vb = vb.pp(format!("encoder.layer.{i}"));
            let att = vb.pp("attention");
            let layer = BertLayer {
                query: candle_nn::linear(h, h, att.pp("self.query")).map_err(model_err)?,
                key: candle_nn::linear(h, h, att.pp("self.key")).map_err(model_err)?,
                value: candle_nn::linear(h, h, att.pp("self.value")).map_err(model_err)?,
                attention_output: candle_nn::linear(h, h, att.pp("output.dense"))
                    .map_err(model_err)?,
                attention_norm: norm(att.pp("output.LayerNorm")).map_err(model_err)?,
                intermediate: candle_nn::linear(
                    h,
                    config.intermediate_size,
                    vb.pp("intermediate.dense"),
                )
                .map_err(model_err)?,
                output: candle_nn::linear(config.intermediate_size, h, vb.pp("output.dense"))
                    .map_err(model_err)?,
                output_norm: norm(vb.pp("output.LayerNorm")).map_err(model_err)?,
            };
            layers.push(layer);
        }
        Ok(BertModel {
            word_embeddings,
            position_embeddings,
            token_type_embeddings,
            embeddings_norm,
            layers,
            config,
            device,
        })
    }

    /// Hidden states `[batch, seq, hidden]` for right-padded `token_ids` `[batch, seq]` (u32) and
    /// `attention_mask` `[batch, seq]` (f32, 1 for real tokens, 0 for padding).
    pub fn forward(
        &self,
        token_ids: &Tensor,
        attention_mask: &Tensor,
    ) -> candle_core::Result<Tensor> {
        let _span = tracing::trace_span!("bert_forward").entered();
        let (batch, seq) = token_ids.dims2()?;
        let positions = Tensor::arange(0u32, seq as u32, &self.device)?;
        let token_types = Tensor::zeros((batch, seq), DType::U32, &self.device)?;
        let embedded = self
            .word_embeddings
            .forward(token_ids)?
            .broadcast_add(&self.position_embeddings.forward(&positions)?)?
            .add(&self.token_type_embeddings.forward(&token_types)?)?;
        let mut hidden = self.embeddings_norm.forward(&embedded)?;
        // Additive mask as in the reference implementation: 0 for tokens, the most negative f32
        // for padding, broadcast over heads and query positions.
        let bias = ((attention_mask.ones_like()? - attention_mask)? * f64::from(f32::MIN))?
            .reshape((batch, 1, 1, seq))?;
        for layer in &self.layers {
            hidden = layer.forward(&hidden, &bias, &self.config)?;
        }
        Ok(hidden)
    }
}

impl BertLayer {
    fn forward(
        &self,
        hidden: &Tensor,
        bias: &Tensor,
        config: &BertConfig,
    ) -> candle_core::Result<Tensor> {
        let (batch, seq, width) = hidden.dims3()?;
        let heads = config.num_attention_heads;
        let head_dim = config.head_dim();
        let split =
            |t: Tensor| t.reshape((batch, seq, heads, head_dim))?.transpose(1, 2)?.contiguous();
        let q = split(self.query.forward(hidden)?)?;
        let k = split(self.key.forward(hidden)?)?;
        let v = split(self.value.forward(hidden)?)?;
        let scale = 1.0 / (head_dim as f64).sqrt();
        let scores = (q.matmul(&k.t()?.contiguous()?)? * scale)?.broadcast_add(bias)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = probs.matmul(&v)?.transpose(1, 2)?.reshape((batch, seq, width))?;
        let attended =
            self.attention_norm.forward(&(self.attention_output.forward(&context)? + hidden)?)?;
        let intermediate = self.intermediate.forward(&attended)?.gelu_erf()?;
        self.output_norm.forward(&(self.output.forward(&intermediate)? + attended)?)
    }
}
