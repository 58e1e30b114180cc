//! `BertEncoder`: verified artifacts + tokenizer + a BERT-family model (BERT or MPNet) + pooling +
//! normalisation, behind the [`Encoder`] trait.

use std::sync::{
    Mutex, PoisonError,
    atomic::{AtomicUsize, Ordering},
};

use candle_core::{DType, Device, Tensor};

use crate::{
    artifact::VerifiedArtifacts,
    bert::BertModel,
    encoder::{BatchLimits, EmbeddedWindow, EmbeddingRole, Encoder, TextEmbedding, plan_batches},
    encoder_config::EncoderConfig,
    error::EmbedError,
    identity::{EncoderIdentity, EncoderIdentityDigest},
    model_config::{Architecture, ModelConfig},
    packed_model::PackedModel,
    tokenize::{EncoderTokenizer, ModelInput},
};

/// A sentence encoder of the BERT family, f32 on the CPU: BERT (all-MiniLM-L6-v2 and its
/// relatives) or MPNet (all-mpnet-base-v2), chosen by the artifact's `config.json`.
#[derive(Debug)]
pub struct BertEncoder {
    model: Model,
    tokenizer: EncoderTokenizer,
    config: EncoderConfig,
    identity: EncoderIdentity,
    identity_digest: EncoderIdentityDigest,
    limits: BatchLimits,
    model_config: ModelConfig,
    /// One single-threaded pool per core, for running packed batches side by side.
    workers: Vec<rayon::ThreadPool>,
}

/// Which implementation of the BERT computation runs the model. Both pass the same parity test;
/// the backend is part of the [`EncoderIdentity`]'s implementation field.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum ModelBackend {
    /// Padded batches through candle tensors (`bert.rs`), mirroring the reference layer by layer
    /// (BERT only).
    Candle,
    /// Sequences packed into one token matrix, no padding, fused multi-threaded kernels
    /// (`packed_model.rs`). The default: several times faster.
    Packed,
}

impl ModelBackend {
    /// Name used in the identity and in benchmark tables.
    pub fn name(self) -> &'static str {
        match self {
            ModelBackend::Candle => "candle-padded",
            ModelBackend::Packed => "packed",
        }
    }
}

/// The vectors of one batch, one per sequence.
type BatchVectors = Result<Vec<Vec<f32>>, EmbedError>;

#[derive(Debug)]
enum Model {
    Candle(BertModel),
    Packed(PackedModel),
}

impl BertEncoder {
    /// Builds the encoder from verified artifacts with the default ([`ModelBackend::Packed`])
    /// backend. Reads `config.json`, `tokenizer.json` and `model.safetensors` from the verified
    /// bytes only.
    pub fn load(
        artifacts: VerifiedArtifacts,
        config: EncoderConfig,
    ) -> Result<BertEncoder, EmbedError> {
        BertEncoder::load_with_backend(artifacts, config, ModelBackend::Packed)
    }

    /// [`BertEncoder::load`] with a chosen backend.
    pub fn load_with_backend(
        mut artifacts: VerifiedArtifacts,
        config: EncoderConfig,
        backend: ModelBackend,
    ) -> Result<BertEncoder, EmbedError> {
        let _span =
            tracing::info_span!("load_bert_encoder", model = artifacts.model_name()).entered();
        let model_config = ModelConfig::parse(artifacts.bytes("config.json")?)?;
        config.validate(model_config.dimensions().max_tokens)?;
        let tokenizer = EncoderTokenizer::load(artifacts.bytes("tokenizer.json")?)?;
        let identity = EncoderIdentity::new(
            artifacts.model_name(),
            artifacts.revision().cloned(),
            artifacts.directory_sha256(),
            artifacts.file_digests().map(|(rel, digest)| (rel.to_owned(), digest)).collect(),
            &config,
            model_config.hidden_size(),
            backend.name(),
        );
        let weights = artifacts.take_bytes("model.safetensors")?;
        let model = match (backend, &model_config) {
            (ModelBackend::Candle, ModelConfig::Bert(bert)) => {
                Model::Candle(BertModel::load(bert.clone(), weights)?)
            }
            (ModelBackend::Candle, ModelConfig::Mpnet(_)) => {
                return Err(EmbedError::InvalidConfig {
                    field: "backend",
                    reason: "candle-padded computes BERT only; MPNet runs on the packed backend"
                        .to_owned(),
                });
            }
            (ModelBackend::Packed, _) => {
                Model::Packed(crate::packed_weights::load(&model_config, &weights)?)
            }
        };
        let identity_digest = identity.digest();
        Ok(BertEncoder {
            model,
            tokenizer,
            config,
            identity,
            identity_digest,
            limits: BatchLimits::default(),
            model_config,
            workers: worker_pools()?,
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

    /// The model's `config.json`.
    pub fn model_config(&self) -> &ModelConfig {
        &self.model_config
    }

    /// The model's architecture, from its `config.json`.
    pub fn architecture(&self) -> Architecture {
        self.model_config.architecture()
    }

    /// Floating-point operations of one forward pass over a sequence of `length` tokens: the
    /// linear layers and the two attention products (a benchmark compares the rate of these with
    /// the machine's matrix-product peak; embeddings, norms and softmax are not counted).
    pub fn forward_flops(&self, length: usize) -> f64 {
        let c = self.model_config.dimensions();
        let (l, h, inter) = (length as f64, c.hidden_size as f64, c.intermediate_size as f64);
        let linear = 2.0 * l * (4.0 * h * h + 2.0 * h * inter);
        let attention = 2.0 * 2.0 * l * l * h;
        c.num_hidden_layers as f64 * (linear + attention)
    }

    fn prefixed(&self, role: EmbeddingRole, text: &str) -> String {
        let prefix = match role {
            EmbeddingRole::Query => &self.config.query_prefix,
            EmbeddingRole::Document => &self.config.document_prefix,
        };
        format!("{prefix}{text}")
    }

    /// Runs `batches` (indices into `inputs`). The packed backend runs several batches at once,
    /// each on its own thread with its own single-threaded pool, so that no operation waits on
    /// another core: this keeps every core busy even when the machine is oversubscribed. A lone
    /// batch (a query) runs on one thread too, the calling thread's own single-threaded pool:
    /// split across the cores, it waited for the busiest one, which beside a server's appends
    /// and background embedding doubled a question's embedding at the median and tripled it at
    /// the 99th percentile (27 / 137 ms against 12 / 42 ms on one thread), and it gained nothing
    /// alone (a 15-token question).
    fn run_batches(&self, batches: &[Vec<usize>], inputs: &[ModelInput]) -> Vec<BatchVectors> {
        let run = |batch: &Vec<usize>| {
            let batch_inputs: Vec<&ModelInput> = batch.iter().map(|&i| &inputs[i]).collect();
            self.run_batch(&batch_inputs)
        };
        if matches!(self.model, Model::Candle(_)) || self.workers.len() < 2 {
            return batches.iter().map(run).collect();
        }
        if let [batch] = batches {
            return vec![on_one_thread(|| run(batch))];
        }
        // Longest batches first: with batches sorted by length, taking them in order left the
        // longest for last, one core finishing alone (seen as 1.6 cores busy at batch 64).
        let mut schedule: Vec<usize> = (0..batches.len()).collect();
        let cost = |b: &Vec<usize>| -> usize {
            b.iter().map(|&i| inputs[i].token_ids.len()).sum::<usize>()
        };
        schedule.sort_by_key(|&b| (std::cmp::Reverse(cost(&batches[b])), b));
        let next = AtomicUsize::new(0);
        let results: Mutex<Vec<Option<BatchVectors>>> =
            Mutex::new((0..batches.len()).map(|_| None).collect());
        std::thread::scope(|scope| {
            for pool in &self.workers {
                scope.spawn(|| {
                    pool.install(|| {
                        while let Some(&b) = schedule.get(next.fetch_add(1, Ordering::Relaxed)) {
                            let out = run(&batches[b]);
                            results.lock().unwrap_or_else(PoisonError::into_inner)[b] = Some(out);
                        }
                    })
                });
            }
        });
        results
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
            .into_iter()
            .map(|r| r.expect("every batch is taken by exactly one worker"))
            .collect()
    }

    /// The backend running the model.
    pub fn backend(&self) -> ModelBackend {
        match self.model {
            Model::Candle(_) => ModelBackend::Candle,
            Model::Packed(_) => ModelBackend::Packed,
        }
    }

    /// Runs one batch of model inputs; returns one vector per input.
    fn run_batch(&self, inputs: &[&ModelInput]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let _span = tracing::debug_span!("embed_batch", n_sequences = inputs.len()).entered();
        let model = match &self.model {
            Model::Candle(model) => model,
            Model::Packed(model) => {
                let sequences: Vec<&[u32]> =
                    inputs.iter().map(|i| i.token_ids.as_slice()).collect();
                let hidden = model.forward(&sequences)?;
                let width = model.hidden_size();
                return Ok(hidden
                    .offsets
                    .windows(2)
                    .map(|range| {
                        let rows = &hidden.states[range[0] * width..range[1] * width];
                        let mut vector = self.config.pooling.pool_rows(rows, width);
                        self.config.normalization.apply_in_place(&mut vector);
                        vector
                    })
                    .collect());
            }
        };
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
        let hidden = model.forward(&ids, &mask).map_err(model_err("forward"))?;
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
        self.identity.dimension
    }

    fn lower_worker_priority(&self) -> std::io::Result<()> {
        for pool in &self.workers {
            pool.broadcast(|_| crate::thread_priority::lower_current_thread_priority())
                .into_iter()
                .collect::<std::io::Result<()>>()?;
        }
        Ok(())
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
        let batches = plan_batches(&lengths, self.limits);
        let mut vectors: Vec<Option<Vec<f32>>> = vec![None; inputs.len()];
        for (batch, batch_vectors) in batches.iter().zip(self.run_batches(&batches, &inputs)) {
            for (&i, vector) in batch.iter().zip(batch_vectors?) {
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

thread_local! {
    /// The single-threaded pool a thread's lone batches run in (created by that thread, so it
    /// has that thread's priority: the background embedder's stays low).
    static ONE_THREAD: Option<rayon::ThreadPool> = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .thread_name(|_| "evicortex-embed-one".to_owned())
        .build()
        .ok();
}

/// Runs `job` without intra-operation parallelism: in the calling thread's single-threaded
/// pool, or (when no thread could be started for it) on the calling thread with the global
/// pool's, which changes speed only.
fn on_one_thread<T: Send>(job: impl FnOnce() -> T + Send) -> T {
    ONE_THREAD.with(|pool| match pool {
        Some(pool) => pool.install(job),
        None => job(),
    })
}

/// One single-threaded rayon pool per available core (`EVICORTEX_EMBED_THREADS` overrides the
/// count; it changes speed only).
fn worker_pools() -> Result<Vec<rayon::ThreadPool>, EmbedError> {
    let threads = match std::env::var("EVICORTEX_EMBED_THREADS") {
        Ok(value) => value.parse::<usize>().ok().filter(|&n| n > 0).ok_or_else(|| {
            EmbedError::InvalidConfig {
                field: "EVICORTEX_EMBED_THREADS",
                reason: format!("{value:?} is not a positive integer"),
            }
        })?,
        Err(_) => std::thread::available_parallelism().map_or(1, usize::from),
    };
    (0..threads)
        .map(|i| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(move |_| format!("evicortex-embed-{i}"))
                .build()
                .map_err(|err| EmbedError::InvalidConfig {
                    field: "worker threads",
                    reason: err.to_string(),
                })
        })
        .collect()
}
