//! `LocalGgufReader`: a pinned GGUF chat model run in-process on the CPU with candle (Qwen2
//! dequantized to f32, see `dense_qwen2`; Llama quantized), greedy decoding, the model's own
//! tokenizer and chat template.

use std::{io::Cursor, sync::Arc, sync::Mutex, time::Instant};

use candle_core::{Device, Tensor, quantized::gguf_file};
use candle_transformers::models::{quantized_llama, qwen2};
use evicortex_embed::{ModelCache, Sha256Digest};

use crate::{
    chat::ChatMessage,
    chat_template::ChatTemplate,
    decoding::{DecodingSettings, DecodingStrategy},
    error::{ReadError, ReaderModelError},
    gguf_fetch::read_verified,
    gguf_manifest::GgufManifest,
    gguf_tokenizer::GgufTokenizer,
    identity::{LOCAL_READER_IMPLEMENTATION, ReaderIdentity},
    reader::{FinishReason, ReadTiming, Reader, ReaderOutput},
};

/// The largest window this reader offers, whatever the model was trained for: candle's attention
/// materialises the full score matrix of the prompt (heads x tokens x tokens, f32), about 3.8 GB
/// at 8192 tokens for the 0.5B Qwen model, and a CPU needs minutes for such a prompt anyway.
pub const LOCAL_CONTEXT_WINDOW_CAP: u32 = 8192;

/// candle's quantized Llama precomputes rotary tables for this many positions only.
const CANDLE_LLAMA_MAX_POSITIONS: u32 = 4096;

/// A GGUF chat model on the CPU.
pub struct LocalGgufReader {
    identity: ReaderIdentity,
    tokenizer: Arc<GgufTokenizer>,
    template: ChatTemplate,
    context_window: u32,
    stop_tokens: Vec<u32>,
    prefill_step: usize,
    model: Mutex<LoadedModel>,
}

enum LoadedModel {
    Qwen2(Box<qwen2::ModelForCausalLM>),
    Llama(Box<quantized_llama::ModelWeights>),
}

/// Prompt tokens the dense model reads per step. Whole 2,000-token prompts allocated attention
/// and activation buffers of hundreds of MB per layer, which the allocator mapped and unmapped
/// each time: a third of the read went to page faults. Steps of 256 keep every buffer under
/// 32 MB, where the allocator reuses memory: a 2,100-token prompt took 23 s instead of 34.
const DENSE_PREFILL_STEP: usize = 256;

impl LoadedModel {
    /// The logits (a flat vector) of the token after `prompt`, read from the start, `step`
    /// tokens at a time where the model allows.
    fn prefill(&mut self, prompt: &[u32], step: usize) -> candle_core::Result<Tensor> {
        match self {
            LoadedModel::Qwen2(model) => {
                // The dense model appends to its cache whatever the position says.
                model.clear_kv_cache();
                let mut logits = None;
                for (index, ids) in prompt.chunks(step).enumerate() {
                    let input = Tensor::new(ids, &Device::Cpu)?.unsqueeze(0)?;
                    logits = Some(model.forward(&input, index * step)?);
                }
                logits.ok_or_else(|| candle_core::Error::Msg("empty prompt".into()))?.flatten_all()
            }
            // The quantized model restarts its cache at position 0 by itself.
            LoadedModel::Llama(model) => {
                let input = Tensor::new(prompt, &Device::Cpu)?.unsqueeze(0)?;
                model.forward(&input, 0)?.flatten_all()
            }
        }
    }

    /// The logits (a flat vector) after one more token at `position`.
    fn step(&mut self, token: u32, position: usize) -> candle_core::Result<Tensor> {
        let input = Tensor::new(&[token], &Device::Cpu)?.unsqueeze(0)?;
        match self {
            LoadedModel::Qwen2(model) => model.forward(&input, position)?.flatten_all(),
            LoadedModel::Llama(model) => model.forward(&input, position)?.flatten_all(),
        }
    }
}

impl LocalGgufReader {
    /// Loads the committed model `name` from the model cache the environment names.
    pub fn load_pinned(name: &str) -> Result<LocalGgufReader, ReaderModelError> {
        let manifest = GgufManifest::named(name)?;
        let cache = ModelCache::from_env().map_err(|e| ReaderModelError::InvalidManifest {
            manifest: name.to_owned(),
            field: "model cache".to_owned(),
            reason: e.to_string(),
        })?;
        LocalGgufReader::load(&cache, &manifest)
    }

    /// Reads the installed GGUF, checks its digest and metadata against `manifest`, builds the
    /// tokenizer and chat template from it and loads the weights.
    pub fn load(
        cache: &ModelCache,
        manifest: &GgufManifest,
    ) -> Result<LocalGgufReader, ReaderModelError> {
        let _span = tracing::info_span!("load_reader", model = %manifest.name).entered();
        let (path, bytes) = read_verified(cache, manifest)?;
        let mut cursor = Cursor::new(bytes);
        let content = gguf_file::Content::read(&mut cursor)
            .map_err(|e| ReaderModelError::BadGguf { path: path.clone(), reason: e.to_string() })?;
        let metadata = crate::gguf_metadata::check(&path, &content, &manifest.expect)?;

        let identity_seed = format!(
            "{}:{}:{}",
            manifest.gguf.sha256, manifest.expect.tokenizer_pre, manifest.expect.vocab_size
        );
        let tokenizer_digest = blake3::hash(identity_seed.as_bytes()).to_hex().to_string();
        let tokenizer = GgufTokenizer::from_gguf(&content, &tokenizer_digest)
            .map_err(|reason| ReaderModelError::Tokenizer { path: path.clone(), reason })?;
        let token_text = |id: Option<u32>| -> String {
            id.and_then(|id| tokenizer.token_text(id)).unwrap_or_default()
        };
        let template = ChatTemplate::compile(
            &metadata.chat_template,
            token_text(metadata.bos_token_id),
            token_text(Some(tokenizer.eos_token_id())),
        )
        .map_err(|reason| ReaderModelError::ChatTemplate { path: path.clone(), reason })?;

        let architecture = manifest.expect.architecture.as_str();
        let mut context_window = manifest.expect.context_length.min(LOCAL_CONTEXT_WINDOW_CAP);
        let device = Device::Cpu;
        let weights = |source| ReaderModelError::Weights { path: path.clone(), source };
        let model = match architecture {
            "qwen2" => LoadedModel::Qwen2(Box::new(
                crate::dense_qwen2::load(&content, &mut cursor, context_window).map_err(weights)?,
            )),
            "llama" => {
                context_window = context_window.min(CANDLE_LLAMA_MAX_POSITIONS);
                LoadedModel::Llama(Box::new(
                    quantized_llama::ModelWeights::from_gguf(content, &mut cursor, &device)
                        .map_err(weights)?,
                ))
            }
            other => {
                return Err(ReaderModelError::Unsupported {
                    path,
                    what: format!("architecture {other:?}"),
                });
            }
        };
        // The model's turn ends at its end-of-sequence token or any other control token.
        let mut stop_tokens: Vec<u32> =
            tokenizer.added_tokens().iter().filter(|t| t.control).map(|t| t.id).collect();
        stop_tokens.push(tokenizer.eos_token_id());
        stop_tokens.sort_unstable();
        stop_tokens.dedup();

        let identity = ReaderIdentity::LocalGguf {
            name: manifest.name.clone(),
            model: manifest.model.clone(),
            gguf_sha256: manifest.gguf.sha256.to_hex(),
            architecture: architecture.to_owned(),
            gguf_name: manifest.expect.general_name.clone(),
            file_type: manifest.expect.file_type,
            tokenizer: evicortex_compiler::ReaderTokenizer::name(&tokenizer).to_owned(),
            chat_template_sha256: Sha256Digest::of(metadata.chat_template.as_bytes()).to_hex(),
            context_window,
            implementation: LOCAL_READER_IMPLEMENTATION,
        };
        Ok(LocalGgufReader {
            identity,
            tokenizer: Arc::new(tokenizer),
            template,
            context_window,
            stop_tokens,
            prefill_step: DENSE_PREFILL_STEP,
            model: Mutex::new(model),
        })
    }

    /// Reads prompts `tokens` at a time (at least 1; the default is 256). Larger steps use more
    /// memory per step; the answer does not depend on the step beyond float rounding.
    pub fn with_prefill_step(mut self, tokens: usize) -> LocalGgufReader {
        self.prefill_step = tokens.max(1);
        self
    }

    /// The model's tokenizer, which also counts compiled contexts for the budget.
    pub fn tokenizer(&self) -> Arc<GgufTokenizer> {
        Arc::clone(&self.tokenizer)
    }

    /// The prompt text the model reads for `messages`: the chat template applied, the
    /// assistant's turn opened.
    pub fn render_prompt(&self, messages: &[ChatMessage]) -> Result<String, ReadError> {
        if messages.is_empty() {
            return Err(ReadError::InvalidMessages { reason: "no message".to_owned() });
        }
        for (message_index, message) in messages.iter().enumerate() {
            let added = self.tokenizer.added_tokens().iter();
            if let Some(token) = added.clone().find(|t| message.content.contains(&t.text)) {
                return Err(ReadError::ControlTokenInContent {
                    message_index,
                    token: token.text.clone(),
                });
            }
        }
        self.template.render(messages).map_err(|reason| ReadError::Template { reason })
    }

    /// The prompt's token ids.
    pub fn prompt_ids(&self, messages: &[ChatMessage]) -> Result<Vec<u32>, ReadError> {
        let prompt = self.render_prompt(messages)?;
        self.tokenizer.encode(&prompt).map_err(|reason| ReadError::Tokenizer { reason })
    }

    /// Greedy continuation of `prompt_ids`: the generated ids (the stop token included) and
    /// why generation ended.
    fn generate(
        &self,
        prompt_ids: &[u32],
        max_new_tokens: u32,
    ) -> Result<(Vec<u32>, FinishReason, ReadTiming), ReadError> {
        let model_error = |stage| move |source| ReadError::Model { stage, source };
        let mut model = self.model.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let started = Instant::now();
        let logits = model.prefill(prompt_ids, self.prefill_step).map_err(model_error("prompt"))?;
        let mut next = greedy_token(&logits)?;
        let prompt_seconds = started.elapsed().as_secs_f64();
        let generation_started = Instant::now();
        let mut generated = Vec::new();
        let finish = loop {
            generated.push(next);
            if self.stop_tokens.binary_search(&next).is_ok() {
                break FinishReason::Stop;
            }
            if generated.len() >= max_new_tokens as usize {
                break FinishReason::Length;
            }
            let position = prompt_ids.len() + generated.len() - 1;
            let logits = model.step(next, position).map_err(model_error("generation"))?;
            next = greedy_token(&logits)?;
        };
        let timing = ReadTiming {
            prompt_seconds,
            generation_seconds: generation_started.elapsed().as_secs_f64(),
        };
        Ok((generated, finish, timing))
    }
}

/// The index of the largest logit; the lowest index wins a tie. A non-finite logit is an error.
fn greedy_token(logits: &Tensor) -> Result<u32, ReadError> {
    let values: Vec<f32> = logits
        .to_dtype(candle_core::DType::F32)
        .and_then(|t| t.to_vec1())
        .map_err(|source| ReadError::Model { stage: "logits", source })?;
    let mut best = 0usize;
    for (i, &value) in values.iter().enumerate() {
        if !value.is_finite() {
            return Err(ReadError::Model {
                stage: "logits",
                source: candle_core::Error::Msg(format!("logit {i} is {value}")),
            });
        }
        if value > values[best] {
            best = i;
        }
    }
    u32::try_from(best).map_err(|_| ReadError::Tokenizer { reason: "token id overflow".into() })
}

impl std::fmt::Debug for LocalGgufReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalGgufReader").field("identity", &self.identity).finish()
    }
}

impl Reader for LocalGgufReader {
    fn identity(&self) -> &ReaderIdentity {
        &self.identity
    }

    fn tokenizer(&self) -> Option<Arc<dyn evicortex_compiler::ReaderTokenizer>> {
        Some(self.tokenizer.clone())
    }

    fn context_window(&self) -> Option<u32> {
        Some(self.context_window)
    }

    fn count_prompt(&self, messages: &[ChatMessage]) -> Result<Option<u32>, ReadError> {
        Ok(Some(self.prompt_ids(messages)?.len() as u32))
    }

    fn read(
        &self,
        messages: &[ChatMessage],
        decoding: &DecodingSettings,
    ) -> Result<ReaderOutput, ReadError> {
        let _span = tracing::info_span!("local_read", model = %self.identity.label()).entered();
        let DecodingStrategy::Greedy = decoding.strategy;
        if decoding.max_new_tokens == 0 {
            return Err(ReadError::InvalidDecoding {
                field: "max_new_tokens",
                reason: "must be at least 1".to_owned(),
            });
        }
        let started = Instant::now();
        let prompt_ids = self.prompt_ids(messages)?;
        let prompt_tokens = prompt_ids.len() as u32;
        if u64::from(prompt_tokens) + u64::from(decoding.max_new_tokens)
            > u64::from(self.context_window)
        {
            return Err(ReadError::PromptTooLong {
                prompt_tokens,
                max_new_tokens: decoding.max_new_tokens,
                context_window: self.context_window,
            });
        }
        let (generated, finish, mut timing) =
            self.generate(&prompt_ids, decoding.max_new_tokens)?;
        let text_ids: &[u32] = match finish {
            FinishReason::Stop => &generated[..generated.len() - 1],
            FinishReason::Length => &generated,
        };
        let text =
            self.tokenizer.decode(text_ids).map_err(|reason| ReadError::Tokenizer { reason })?;
        // Tokenising the prompt is part of reading it.
        timing.prompt_seconds = started.elapsed().as_secs_f64() - timing.generation_seconds;
        Ok(ReaderOutput {
            text,
            prompt_tokens,
            generated_tokens: generated.len() as u32,
            finish,
            seconds: started.elapsed().as_secs_f64(),
            timing: Some(timing),
        })
    }
}
