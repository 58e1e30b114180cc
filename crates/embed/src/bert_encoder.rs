//! `BertEncoder`: verified artefacts + tokenizer + candle BERT + pooling + normalisation, behind
//! the [`Encoder`] trait.

use candle_core::{DType, Device, Tensor};

use crate::{
    artifact::VerifiedArtifacts,
    bert::{BertConfig, BertModel},
    encoder::{BatchLimits, EmbeddedWindow, EmbeddingRole, Encoder, TextEmbedding, plan_batches},
    encoder_config::EncoderConfig,
    error::EmbedError,
    identity::{EncoderIdentity, EncoderIdentityDigest},
    tokenize::{EncoderTokenizer, ModelInput},
};

/// A BERT sentence encoder (all-MiniLM-L6-v2 and its relatives) on candle, f32 on the CPU.
#[derive(Debug)]
pub struct BertEncoder {
    model: BertModel,
    tokenizer: EncoderTokenizer,
    config: EncoderConfig,
    identity: EncoderIdentity,
    identity_digest: EncoderIdentityDigest,
    limits: BatchLimits,
}

impl BertEncoder {
    /// Builds the encoder from verified artefacts. Reads `config.json`, `tokenizer.json` and
    /// `model.safetensors` from the verified bytes only.
    pub fn load(
        mut artifacts: VerifiedArtifacts,
        config: EncoderConfig,
    ) -> Result<BertEncoder, EmbedError> {
        let _span =
            tracing::info_span!("load_bert_encoder", model = artifacts.model_name()).entered();
        let bert_config = BertConfig::parse(artifacts.bytes("config.json")?)?;
        config.validate(bert_config.max_position_embeddings)?;
        let tokenizer = EncoderTokenizer::load(artifacts.bytes("tokenizer.json")?)?;
        let identity = EncoderIdentity::new(
            artifacts.model_name(),
            artifacts.revision().cloned(),
            artifacts.directory_sha256(),
            artifacts.file_digests().map(|(rel, digest)| (rel.to_owned(), digest)).collect(),
            &config,
            bert_config.hidden_size,
        );
        let weights = artifacts.take_bytes("model.safetensors")?;
        let model = BertModel::load(bert_config, weights)?;
        let identity_digest = identity.digest();
        Ok(BertEncoder {
            model,
            tokenizer,
            config,
            identity,
            identity_digest,
            limits: BatchLimits::default(),
        })
    }

    /// Changes the batch limits (speed and memory only).
    pub fn set_batch_limits(&mut self, limits: BatchLimits) -> &mut Self {
        self.limits = limits;
        self
    }

    /// The settings around the model.
    pub fn config(&self) -> &EncoderConfig {
        &self.config
    }

    fn prefixed(&self, role: EmbeddingRole, text: &str) -> String {
        let prefix = match role {
            EmbeddingRole::Query => &self.config.query_prefix,
            EmbeddingRole::Document => &self.config.document_prefix,
        };
        format!("{prefix}{text}")
    }

    /// Runs one batch of model inputs; returns one vector per input.
    fn run_batch(&self, inputs: &[&ModelInput]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let _span = tracing::debug_span!("embed_batch", n_sequences = inputs.len()).entered();
        let model_err = |stage| move |source| EmbedError::Model { stage, source };
        let seq = inputs.iter().map(|i| i.token_ids.len()).max().unwrap_or(0);
        let mut ids = vec![0u32; inputs.len() * seq];
        let mut mask = vec![0f32; inputs.len() * seq];
        for (row, input) in inputs.iter().enumerate() {
            ids[row * seq..row * seq + input.token_ids.len()].copy_from_slice(&input.token_ids);
            mask[row * seq..row * seq + input.token_ids.len()].fill(1.0);
        }
        let ids =
            Tensor::from_vec(ids, (inputs.len(), seq), &Device::Cpu).map_err(model_err("input"))?;
        let mask = Tensor::from_vec(mask, (inputs.len(), seq), &Device::Cpu)
            .map_err(model_err("input"))?;
        let hidden = self.model.forward(&ids, &mask).map_err(model_err("forward"))?;
        let pooled = self.config.pooling.pool(&hidden, &mask).map_err(model_err("pooling"))?;
        let normalized =
            self.config.normalization.apply(&pooled).map_err(model_err("normalisation"))?;
        normalized.to_dtype(DType::F32).and_then(|t| t.to_vec2()).map_err(model_err("output"))
    }
}

impl Encoder for BertEncoder {
    fn identity(&self) -> &EncoderIdentity {
        &self.identity
    }

    fn identity_digest(&self) -> EncoderIdentityDigest {
        self.identity_digest
    }

    fn dimension(&self) -> usize {
        self.model.config().hidden_size
    }

    fn count_tokens(&self, role: EmbeddingRole, text: &str) -> Result<usize, EmbedError> {
        let ids = self.tokenizer.encode_all(&[self.prefixed(role, text)])?;
        Ok(ids[0].len())
    }

    fn count_tokens_many(
        &self,
        role: EmbeddingRole,
        texts: &[&str],
    ) -> Result<Vec<usize>, EmbedError> {
        let prefixed: Vec<String> = texts.iter().map(|text| self.prefixed(role, text)).collect();
        Ok(self.tokenizer.encode_all(&prefixed)?.iter().map(Vec::len).collect())
    }

    fn embed(&self, role: EmbeddingRole, texts: &[&str]) -> Result<Vec<TextEmbedding>, EmbedError> {
        let _span = tracing::info_span!("embed", ?role, n_texts = texts.len()).entered();
        let prefixed: Vec<String> = texts.iter().map(|text| self.prefixed(role, text)).collect();
        let token_ids = self.tokenizer.encode_all(&prefixed)?;
        let token_counts: Vec<usize> = token_ids.iter().map(Vec::len).collect();
        // Measure and apply the overlength policy to every text before the model runs.
        let mut inputs = Vec::new();
        for (text_index, ids) in token_ids.into_iter().enumerate() {
            inputs.extend(self.tokenizer.model_inputs(
                text_index,
                ids,
                self.config.max_tokens,
                self.config.overlength,
            )?);
        }
        let lengths: Vec<usize> = inputs.iter().map(|i| i.token_ids.len()).collect();
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; inputs.len()];
        for batch in plan_batches(&lengths, self.limits) {
            let batch_inputs: Vec<&ModelInput> = batch.iter().map(|&i| &inputs[i]).collect();
            for (&i, vector) in batch.iter().zip(self.run_batch(&batch_inputs)?) {
                if !vector.iter().all(|x| x.is_finite()) {
                    return Err(EmbedError::NonFinite { text_index: inputs[i].text_index });
                }
                vectors[i] = Some(vector);
            }
        }
        let mut out: Vec<TextEmbedding> = token_counts
            .into_iter()
            .map(|token_count| TextEmbedding { token_count, windows: Vec::new() })
            .collect();
        for (input, vector) in inputs.into_iter().zip(vectors) {
            let vector = vector.expect("every planned input is in exactly one batch");
            out[input.text_index]
                .windows
                .push(EmbeddedWindow { content_tokens: input.content_tokens, vector });
        }
        Ok(out)
    }
}
