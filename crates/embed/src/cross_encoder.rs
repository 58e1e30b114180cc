//! `CrossEncoder`: a BERT sequence classifier in the MS MARCO cross-encoder format, scoring
//! (query, passage) pairs: both in one sequence (`[CLS] query [SEP] passage [SEP]`, token types 0
//! then 1), the pooler (`tanh` of a dense layer over `[CLS]`), then a classifier with one output:
//! the raw logit is the score.
//!
//! Loaded from verified artifacts only, like the encoders: a pinned manifest, or a user's
//! directory with its recorded digest ([`crate::VerifiedArtifacts::open_local`]). The encoder runs
//! on the packed backend with per-token types. A pair longer than the maximum is refused unless
//! the policy truncates the passage (never the query), as the reference's `only_second` does.

use std::fmt;

use serde::Deserialize;
use tokenizers::{Tokenizer, TruncationDirection, TruncationParams, TruncationStrategy};

use crate::{
    artifact::VerifiedArtifacts,
    bert::BertConfig,
    error::{ArtifactError, EmbedError},
    identity::IMPLEMENTATION_VERSION,
    model_config::ModelConfig,
    packed_model::PackedModel,
    packed_weights::WeightReader,
};

/// What happens to a pair longer than the maximum.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum PairOverlength {
    /// Refuse it with its token count.
    Refuse,
    /// Keep the query whole and cut the passage's tail to fit (the reference's `only_second`).
    TruncatePassage,
}

impl fmt::Display for PairOverlength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PairOverlength::Refuse => "refuse",
            PairOverlength::TruncatePassage => "truncate-passage",
        })
    }
}

/// Settings of a cross-encoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CrossEncoderConfig {
    /// Longest pair in tokens, special tokens included (at most the model's positions).
    pub max_tokens: usize,
    /// Policy for longer pairs.
    pub overlength: PairOverlength,
}

/// A BERT cross-encoder with one output.
#[derive(Debug)]
pub struct CrossEncoder {
    model: PackedModel,
    tokenizer: Tokenizer,
    truncating: Tokenizer,
    pooler_weight: Vec<f32>,
    pooler_bias: Vec<f32>,
    classifier_weight: Vec<f32>,
    classifier_bias: f32,
    config: CrossEncoderConfig,
    name: String,
}

/// The classifier fields of `config.json` beyond BERT's.
#[derive(Deserialize)]
struct ClassifierConfig {
    #[serde(default)]
    architectures: Vec<String>,
    #[serde(default)]
    id2label: Option<serde_json::Map<String, serde_json::Value>>,
}

impl CrossEncoder {
    /// Builds the cross-encoder from verified artifacts (`config.json`, `tokenizer.json`,
    /// `model.safetensors`).
    pub fn load(
        artifacts: VerifiedArtifacts,
        config: CrossEncoderConfig,
    ) -> Result<CrossEncoder, EmbedError> {
        let _span =
            tracing::info_span!("load_cross_encoder", model = artifacts.model_name()).entered();
        let invalid = |field: &str, reason: String| {
            EmbedError::Artifact(ArtifactError::InvalidConfig {
                file: "config.json".to_owned(),
                field: field.to_owned(),
                reason,
            })
        };
        let config_bytes = artifacts.bytes("config.json")?;
        let model_config = ModelConfig::parse(config_bytes)?;
        let ModelConfig::Bert(bert) = &model_config else {
            return Err(invalid("model_type", "a cross-encoder must be \"bert\"".to_owned()));
        };
        let classifier: ClassifierConfig =
            serde_json::from_slice(config_bytes).map_err(|err| invalid("json", err.to_string()))?;
        if !classifier.architectures.iter().any(|a| a == "BertForSequenceClassification") {
            return Err(invalid(
                "architectures",
                format!(
                    "{:?} does not name BertForSequenceClassification",
                    classifier.architectures
                ),
            ));
        }
        let labels = classifier.id2label.map_or(2, |labels| labels.len());
        if labels != 1 {
            return Err(invalid(
                "id2label",
                format!("has {labels} labels; a cross-encoder scores with exactly one"),
            ));
        }
        if config.max_tokens < 4 || config.max_tokens > bert.max_position_embeddings {
            return Err(EmbedError::InvalidConfig {
                field: "max_tokens",
                reason: format!(
                    "{} is outside 4..={} (the model's positions)",
                    config.max_tokens, bert.max_position_embeddings
                ),
            });
        }
        let (tokenizer, truncating) = pair_tokenizers(artifacts.bytes("tokenizer.json")?, &config)?;
        let weights = artifacts.bytes("model.safetensors")?;
        let model = crate::packed_weights::load(&model_config, weights)?;
        let (pooler_weight, pooler_bias, classifier_weight, classifier_bias) =
            classifier_head(weights, bert)?;
        let name = format!(
            "cross-encoder:{}@{}:max{}:{}:{IMPLEMENTATION_VERSION}+packed",
            artifacts.model_name(),
            &artifacts.directory_sha256().to_hex()[..16],
            config.max_tokens,
            config.overlength,
        );
        Ok(CrossEncoder {
            model,
            tokenizer,
            truncating,
            pooler_weight,
            pooler_bias,
            classifier_weight,
            classifier_bias,
            config,
            name,
        })
    }

    /// A stable name: the model, its artifacts' digest, the settings and the implementation.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The settings.
    pub fn config(&self) -> &CrossEncoderConfig {
        &self.config
    }

    /// Length in tokens of the pair `(query, passage)`, special tokens included, untruncated.
    pub fn count_pair_tokens(&self, query: &str, passage: &str) -> Result<usize, EmbedError> {
        Ok(self.encode(&self.tokenizer, 0, query, passage)?.0.len())
    }

    /// The raw logit of each `(query, passage)` pair, in passage order. Every pair is measured
    /// before the model runs; under [`PairOverlength::Refuse`] one overlength pair fails the call.
    pub fn score(&self, query: &str, passages: &[&str]) -> Result<Vec<f32>, EmbedError> {
        let _span = tracing::debug_span!("cross_encoder_score", n = passages.len()).entered();
        let mut ids = Vec::with_capacity(passages.len());
        let mut types = Vec::with_capacity(passages.len());
        for (index, passage) in passages.iter().enumerate() {
            let (mut pair_ids, mut pair_types) =
                self.encode(&self.tokenizer, index, query, passage)?;
            if pair_ids.len() > self.config.max_tokens {
                match self.config.overlength {
                    PairOverlength::Refuse => {
                        return Err(EmbedError::Overlength {
                            text_index: index,
                            tokens: pair_ids.len(),
                            max_tokens: self.config.max_tokens,
                        });
                    }
                    PairOverlength::TruncatePassage => {
                        (pair_ids, pair_types) =
                            self.encode(&self.truncating, index, query, passage)?;
                        if pair_ids.len() > self.config.max_tokens {
                            // Only the query is left to cut, which this policy never does.
                            return Err(EmbedError::Overlength {
                                text_index: index,
                                tokens: pair_ids.len(),
                                max_tokens: self.config.max_tokens,
                            });
                        }
                    }
                }
            }
            ids.push(pair_ids);
            types.push(pair_types);
        }
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let sequences: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
        let type_slices: Vec<&[u32]> = types.iter().map(Vec::as_slice).collect();
        let hidden = self.model.forward_typed(&sequences, Some(&type_slices))?;
        let h = self.model.hidden_size();
        let scores: Vec<f32> = hidden.offsets[..ids.len()]
            .iter()
            .map(|&row| self.head(&hidden.states[row * h..(row + 1) * h]))
            .collect();
        if let Some(index) = scores.iter().position(|s| !s.is_finite()) {
            return Err(EmbedError::NonFinite { text_index: index });
        }
        Ok(scores)
    }

    /// Pooler and classifier on the `[CLS]` state.
    fn head(&self, cls: &[f32]) -> f32 {
        let h = cls.len();
        let mut logit = self.classifier_bias;
        for (o, row) in self.pooler_weight.chunks_exact(h).enumerate() {
            let dense =
                row.iter().zip(cls).fold(self.pooler_bias[o], |acc, (&w, &x)| w.mul_add(x, acc));
            logit = self.classifier_weight[o].mul_add(dense.tanh(), logit);
        }
        logit
    }

    fn encode(
        &self,
        tokenizer: &Tokenizer,
        index: usize,
        query: &str,
        passage: &str,
    ) -> Result<(Vec<u32>, Vec<u32>), EmbedError> {
        let encoding = tokenizer
            .encode((query, passage), true)
            .map_err(|err| EmbedError::Tokenizer { text_index: index, reason: err.to_string() })?;
        Ok((encoding.get_ids().to_vec(), encoding.get_type_ids().to_vec()))
    }
}

/// The tokenizer without truncation or padding (to measure), and one that cuts only the
/// passage at `max_tokens`.
fn pair_tokenizers(
    bytes: &[u8],
    config: &CrossEncoderConfig,
) -> Result<(Tokenizer, Tokenizer), EmbedError> {
    let invalid = |field: &str, reason: String| ArtifactError::InvalidConfig {
        file: "tokenizer.json".to_owned(),
        field: field.to_owned(),
        reason,
    };
    let mut tokenizer =
        Tokenizer::from_bytes(bytes).map_err(|err| invalid("json", err.to_string()))?;
    tokenizer.with_padding(None);
    tokenizer.with_truncation(None).map_err(|err| invalid("truncation", err.to_string()))?;
    let probe = tokenizer
        .encode(("a", "b"), true)
        .map_err(|err| invalid("post_processor", err.to_string()))?;
    let types = probe.get_type_ids();
    if types.first() != Some(&0) || types.last() != Some(&1) {
        return Err(invalid(
            "post_processor",
            format!("a pair should be typed 0 then 1, got types {types:?}"),
        )
        .into());
    }
    let mut truncating = tokenizer.clone();
    truncating
        .with_truncation(Some(TruncationParams {
            max_length: config.max_tokens,
            strategy: TruncationStrategy::OnlySecond,
            stride: 0,
            direction: TruncationDirection::Right,
        }))
        .map_err(|err| invalid("truncation", err.to_string()))?;
    Ok((tokenizer, truncating))
}

/// Pooler weight `[h, h]`, pooler bias `[h]`, classifier weight `[h]` and its bias.
type ClassifierHead = (Vec<f32>, Vec<f32>, Vec<f32>, f32);

/// Pooler `[h, h]` and bias, classifier `[h]` and bias, checked for one output.
fn classifier_head(weights: &[u8], bert: &BertConfig) -> Result<ClassifierHead, EmbedError> {
    let h = bert.hidden_size;
    let reader = WeightReader::new(weights, "bert.")?;
    Ok((
        reader.read("pooler.dense.weight", &[h, h])?,
        reader.read("pooler.dense.bias", &[h])?,
        reader.read_exact("classifier.weight", &[1, h])?,
        reader.read_exact("classifier.bias", &[1])?[0],
    ))
}
