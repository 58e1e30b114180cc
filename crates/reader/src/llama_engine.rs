//! The local reader's compute: llama.cpp (built from the source vendored in `llama-cpp-sys-2`)
//! running a GGUF model over token ids this crate produced, so the ids the budget counted are the
//! ids the model reads; llama.cpp's own tokenizer is never used.
//!
//! Why llama.cpp rather than candle: on this project's two-core reference machine candle read a
//! 2,100-token prompt of the 1.5B Qwen model at about 30 tokens/s (its f32 path; its quantized
//! kernels are scalar without compile-time AVX) and generated 2 tokens/s from 6 GB of f32
//! weights; llama.cpp reads the same prompt at about 75 tokens/s and generates about 25 tokens/s
//! from the 1 GB quantized file (uncontended).

use std::{num::NonZeroU32, path::Path, sync::OnceLock};

use llama_cpp_2::{
    context::params::LlamaContextParams,
    llama_backend::LlamaBackend,
    llama_batch::LlamaBatch,
    model::{LlamaModel, params::LlamaModelParams},
    token::LlamaToken,
};

/// Prompt tokens per llama.cpp micro-batch; the answer does not depend on it beyond rounding.
pub(crate) const DEFAULT_PROMPT_BATCH: u32 = 512;

/// llama.cpp's process-wide state, initialised once, its log routed to `tracing`.
fn backend() -> Result<&'static LlamaBackend, String> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default());
            LlamaBackend::init().map_err(|e| format!("initialising llama.cpp: {e}"))
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// A loaded GGUF model.
pub(crate) struct LlamaEngine {
    model: LlamaModel,
    context_window: u32,
    threads: i32,
}

/// What a greedy continuation produced.
pub(crate) struct Continuation {
    /// Generated ids, the stop token included when one ended it.
    pub ids: Vec<u32>,
    /// Whether a stop token ended it.
    pub stopped: bool,
    /// Seconds spent reading the prompt.
    pub prompt_seconds: f64,
    /// Seconds spent generating.
    pub generation_seconds: f64,
}

impl LlamaEngine {
    /// Loads the weights of `path` into memory (not mapped: a file changed later cannot change
    /// the weights in use), and refuses a file whose size or modification time changed since
    /// `verified` was taken, when its digest was checked.
    pub(crate) fn load(
        path: &Path,
        verified: &std::fs::Metadata,
        vocab_size: u32,
        context_window: u32,
    ) -> Result<LlamaEngine, String> {
        let backend = backend()?;
        let params = LlamaModelParams::default().with_use_mmap(false);
        let model = LlamaModel::load_from_file(backend, path, &params)
            .map_err(|e| format!("llama.cpp could not load the weights: {e}"))?;
        let now = fs_err::metadata(path).map_err(|e| e.to_string())?;
        if !same_file_state(verified, &now) {
            return Err("the file changed while it was loaded: load it again".to_owned());
        }
        let model_vocab = u32::try_from(model.n_vocab()).unwrap_or(0);
        if model_vocab != vocab_size {
            return Err(format!(
                "llama.cpp sees {model_vocab} tokens in the vocabulary, the tokenizer {vocab_size}"
            ));
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Ok(LlamaEngine { model, context_window, threads: i32::try_from(threads).unwrap_or(1) })
    }

    /// Greedy continuation of `prompt`, at most `max_new_tokens` ids, ending at the first id
    /// `is_stop` accepts. A fresh context per call: nothing of one read reaches the next.
    pub(crate) fn continue_greedy(
        &self,
        prompt: &[u32],
        max_new_tokens: u32,
        prompt_batch: u32,
        is_stop: impl Fn(u32) -> bool,
    ) -> Result<Continuation, String> {
        let started = std::time::Instant::now();
        // The key-value cache holds what this read needs, not the whole window: allocating and
        // clearing 8,192 positions cost a tenth of a 2,000-token read.
        let needed = prompt.len().saturating_add(max_new_tokens as usize);
        let window = u32::try_from(needed.next_multiple_of(256))
            .unwrap_or(u32::MAX)
            .min(self.context_window);
        let window = NonZeroU32::new(window).ok_or("a context window of 0")?;
        let prompt_batch = prompt_batch.clamp(1, window.get());
        let params = LlamaContextParams::default()
            .with_n_ctx(Some(window))
            .with_n_batch(window.get())
            .with_n_ubatch(prompt_batch)
            .with_n_threads(self.threads)
            .with_n_threads_batch(self.threads);
        let mut context = self
            .model
            .new_context(backend()?, params)
            .map_err(|e| format!("llama.cpp context: {e}"))?;
        let vocab = usize::try_from(self.model.n_vocab()).unwrap_or(0);
        let mut batch = LlamaBatch::new(prompt.len().max(1), 1);
        for (position, &id) in prompt.iter().enumerate() {
            let last = position + 1 == prompt.len();
            batch.add(token(id)?, position_of(position)?, &[0], last).map_err(|e| e.to_string())?;
        }
        context.decode(&mut batch).map_err(|e| format!("reading the prompt: {e}"))?;
        let mut next = greedy(context.get_logits_ith(batch.n_tokens() - 1), vocab)?;
        let prompt_seconds = started.elapsed().as_secs_f64();
        let generation_started = std::time::Instant::now();
        let mut ids = Vec::new();
        let stopped = loop {
            ids.push(next);
            if is_stop(next) {
                break true;
            }
            if ids.len() >= max_new_tokens as usize {
                break false;
            }
            batch.clear();
            let position = prompt.len() + ids.len() - 1;
            batch
                .add(token(next)?, position_of(position)?, &[0], true)
                .map_err(|e| e.to_string())?;
            context.decode(&mut batch).map_err(|e| format!("generating: {e}"))?;
            next = greedy(context.get_logits_ith(0), vocab)?;
        };
        Ok(Continuation {
            ids,
            stopped,
            prompt_seconds,
            generation_seconds: generation_started.elapsed().as_secs_f64(),
        })
    }
}

fn same_file_state(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    a.len() == b.len() && a.modified().ok() == b.modified().ok()
}

fn token(id: u32) -> Result<LlamaToken, String> {
    i32::try_from(id).map(LlamaToken::new).map_err(|_| format!("token id {id} out of range"))
}

fn position_of(position: usize) -> Result<i32, String> {
    i32::try_from(position).map_err(|_| format!("position {position} out of range"))
}

/// The index of the largest logit; the lowest index wins a tie. A non-finite logit is an error.
fn greedy(logits: &[f32], vocab: usize) -> Result<u32, String> {
    if logits.len() != vocab || vocab == 0 {
        return Err(format!("{} logits for a vocabulary of {vocab}", logits.len()));
    }
    let mut best = 0usize;
    for (i, &value) in logits.iter().enumerate() {
        if !value.is_finite() {
            return Err(format!("logit {i} is {value}"));
        }
        if value > logits[best] {
            best = i;
        }
    }
    u32::try_from(best).map_err(|_| "token id overflow".to_owned())
}
