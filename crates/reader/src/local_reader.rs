//! `LocalGgufReader`: a pinned GGUF chat model run in-process on the CPU by llama.cpp (see
//! `llama_engine`), greedy decoding, the model's own tokenizer and chat template.

use std::{io::Cursor, sync::Arc, time::Instant};

use candle_core::quantized::gguf_file;
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
    llama_engine::{DEFAULT_PROMPT_BATCH, LlamaEngine},
    reader::{FinishReason, ReadTiming, Reader, ReaderOutput},
};

/// The largest window this reader offers, whatever the model was trained for: a read allocates
/// the key-value cache of its prompt and answer (about 235 MB at 8192 tokens for the 1.5B Qwen
/// model), and a CPU needs minutes for such a prompt anyway.
pub const LOCAL_CONTEXT_WINDOW_CAP: u32 = 8192;

/// A GGUF chat model on the CPU.
pub struct LocalGgufReader {
    identity: ReaderIdentity,
    tokenizer: Arc<GgufTokenizer>,
    template: ChatTemplate,
    context_window: u32,
    stop_tokens: Vec<u32>,
    prompt_batch: u32,
    engine: LlamaEngine,
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
        let (path, bytes, verified) = read_verified(cache, manifest)?;
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

        // The parsed copy of the file is no longer needed; llama.cpp reads the file itself.
        drop(content);
        drop(cursor);
        let architecture = manifest.expect.architecture.as_str();
        if !matches!(architecture, "qwen2" | "llama") {
            return Err(ReaderModelError::Unsupported {
                path,
                what: format!("architecture {architecture:?}"),
            });
        }
        let context_window = manifest.expect.context_length.min(LOCAL_CONTEXT_WINDOW_CAP);
        let engine =
            LlamaEngine::load(&path, &verified, manifest.expect.vocab_size, context_window)
                .map_err(|reason| ReaderModelError::Weights { path: path.clone(), reason })?;
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
            prompt_batch: DEFAULT_PROMPT_BATCH,
            engine,
        })
    }

    /// Reads prompts `tokens` at a time (at least 1; the default is 512). The answer does not
    /// depend on it beyond float rounding.
    pub fn with_prefill_step(mut self, tokens: u32) -> LocalGgufReader {
        self.prompt_batch = tokens.max(1);
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
        let stops = &self.stop_tokens;
        let continuation = self
            .engine
            .continue_greedy(prompt_ids, max_new_tokens, self.prompt_batch, |id| {
                stops.binary_search(&id).is_ok()
            })
            .map_err(|reason| ReadError::Model { reason })?;
        let finish = if continuation.stopped { FinishReason::Stop } else { FinishReason::Length };
        let timing = ReadTiming {
            prompt_seconds: continuation.prompt_seconds,
            generation_seconds: continuation.generation_seconds,
        };
        Ok((continuation.ids, finish, timing))
    }
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
