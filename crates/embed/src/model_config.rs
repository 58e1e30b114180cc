//! The architectures this crate computes, and their `config.json`.
//!
//! `model_type` picks the architecture; anything else is refused rather than run with the wrong
//! positions (a RoBERTa read as BERT would load and produce wrong vectors).

use serde::{Deserialize, Serialize};

use crate::{bert::BertConfig, error::ArtifactError};

/// A transformer architecture the packed backend computes.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Architecture {
    /// BERT: absolute learned positions, token-type embeddings (all-MiniLM-L6-v2, the MS MARCO
    /// cross-encoders).
    Bert,
    /// MPNet: learned positions offset past the padding id, and a relative position bias shared
    /// by every layer, bucketed by distance (all-mpnet-base-v2).
    Mpnet,
}

impl Architecture {
    /// The `model_type` of its `config.json`.
    pub fn model_type(self) -> &'static str {
        match self {
            Architecture::Bert => "bert",
            Architecture::Mpnet => "mpnet",
        }
    }
}

/// The fields of an MPNet `config.json` this implementation reads.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct MpnetConfig {
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
    /// Number of learned positions (the first `pad_token_id + 1` are never used by real tokens).
    pub max_position_embeddings: usize,
    /// Layer-norm epsilon.
    pub layer_norm_eps: f64,
    /// The padding id, from which positions are counted.
    pub pad_token_id: u32,
    /// Buckets of the relative position bias.
    pub relative_attention_num_buckets: usize,
}

/// A parsed `config.json` of a supported architecture.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelConfig {
    /// A BERT model.
    Bert(BertConfig),
    /// An MPNet model.
    Mpnet(MpnetConfig),
}

/// The dimensions every supported architecture shares.
#[derive(Copy, Clone, Debug, PartialEq)]
pub(crate) struct Dimensions {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    /// The longest sequence, special tokens included, that has a learned position.
    pub max_tokens: usize,
    pub layer_norm_eps: f64,
}

impl Dimensions {
    pub(crate) fn head_dim(&self) -> usize {
        self.hidden_size / self.num_attention_heads
    }
}

fn invalid(field: &str, reason: String) -> ArtifactError {
    ArtifactError::InvalidConfig { file: "config.json".to_owned(), field: field.to_owned(), reason }
}

impl ModelConfig {
    /// Parses `config.json`, choosing the architecture by its `model_type`.
    pub fn parse(bytes: &[u8]) -> Result<ModelConfig, ArtifactError> {
        #[derive(Deserialize)]
        struct Kind {
            model_type: Option<String>,
        }
        let kind: Kind =
            serde_json::from_slice(bytes).map_err(|err| invalid("json", err.to_string()))?;
        match kind.model_type.as_deref() {
            Some("bert") => Ok(ModelConfig::Bert(BertConfig::parse(bytes)?)),
            Some("mpnet") => Ok(ModelConfig::Mpnet(MpnetConfig::parse(bytes)?)),
            Some(other) => Err(invalid(
                "model_type",
                format!("{other:?} is not supported (only \"bert\" and \"mpnet\")"),
            )),
            None => Err(invalid("model_type", "is missing (\"bert\" or \"mpnet\")".to_owned())),
        }
    }

    /// The architecture.
    pub fn architecture(&self) -> Architecture {
        match self {
            ModelConfig::Bert(_) => Architecture::Bert,
            ModelConfig::Mpnet(_) => Architecture::Mpnet,
        }
    }

    /// Width of the hidden states (the vector dimension of a sentence encoder).
    pub fn hidden_size(&self) -> usize {
        self.dimensions().hidden_size
    }

    /// Width of the feed-forward layer.
    pub fn intermediate_size(&self) -> usize {
        self.dimensions().intermediate_size
    }

    pub(crate) fn dimensions(&self) -> Dimensions {
        match self {
            ModelConfig::Bert(c) => Dimensions {
                vocab_size: c.vocab_size,
                hidden_size: c.hidden_size,
                num_hidden_layers: c.num_hidden_layers,
                num_attention_heads: c.num_attention_heads,
                intermediate_size: c.intermediate_size,
                max_tokens: c.max_position_embeddings,
                layer_norm_eps: c.layer_norm_eps,
            },
            ModelConfig::Mpnet(c) => Dimensions {
                vocab_size: c.vocab_size,
                hidden_size: c.hidden_size,
                num_hidden_layers: c.num_hidden_layers,
                num_attention_heads: c.num_attention_heads,
                intermediate_size: c.intermediate_size,
                max_tokens: c.max_tokens(),
                layer_norm_eps: c.layer_norm_eps,
            },
        }
    }
}

impl MpnetConfig {
    /// Parses and checks an MPNet `config.json`.
    pub fn parse(bytes: &[u8]) -> Result<MpnetConfig, ArtifactError> {
        let config: MpnetConfig =
            serde_json::from_slice(bytes).map_err(|err| invalid("json", err.to_string()))?;
        if config.hidden_act != "gelu" {
            return Err(invalid(
                "hidden_act",
                format!("{:?} is not supported (only \"gelu\")", config.hidden_act),
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
        // The reference buckets with 32 and counts positions from 1 whatever the file says;
        // another value would be read differently here and there, so it is refused.
        if config.relative_attention_num_buckets != 32 {
            return Err(invalid(
                "relative_attention_num_buckets",
                format!(
                    "{} is not supported (the reference always uses 32)",
                    config.relative_attention_num_buckets
                ),
            ));
        }
        if config.pad_token_id != 1 {
            return Err(invalid(
                "pad_token_id",
                format!(
                    "{} is not supported (the reference counts positions from 1)",
                    config.pad_token_id
                ),
            ));
        }
        if (config.pad_token_id as usize) + 4 > config.max_position_embeddings {
            return Err(invalid(
                "max_position_embeddings",
                format!(
                    "{} leaves no positions past the padding id {}",
                    config.max_position_embeddings, config.pad_token_id
                ),
            ));
        }
        Ok(config)
    }

    /// The longest sequence with a learned position: positions start after the padding id.
    pub fn max_tokens(&self) -> usize {
        self.max_position_embeddings - self.pad_token_id as usize - 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MPNET: &str = r#"{"model_type": "mpnet", "vocab_size": 30527, "hidden_size": 768,
        "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
        "hidden_act": "gelu", "max_position_embeddings": 514, "layer_norm_eps": 1e-05,
        "pad_token_id": 1, "relative_attention_num_buckets": 32}"#;

    #[test]
    fn model_type_chooses_the_architecture_and_unknown_types_are_refused() {
        let config = ModelConfig::parse(MPNET.as_bytes()).unwrap();
        assert_eq!(config.architecture(), Architecture::Mpnet);
        assert_eq!(config.dimensions().max_tokens, 512);

        let roberta = MPNET.replace("\"mpnet\"", "\"roberta\"");
        let err = ModelConfig::parse(roberta.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("\"roberta\" is not supported"), "{err}");

        let untyped = MPNET.replace("\"model_type\": \"mpnet\",", "");
        let err = ModelConfig::parse(untyped.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("model_type is missing"), "{err}");
    }

    #[test]
    fn an_approximate_activation_is_refused() {
        let tanh = MPNET.replace("\"gelu\"", "\"gelu_new\"");
        let err = ModelConfig::parse(tanh.as_bytes()).unwrap_err();
        assert!(err.to_string().contains("hidden_act"), "{err}");
    }
}
