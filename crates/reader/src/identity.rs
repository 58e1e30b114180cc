//! `ReaderIdentity`: which model, weights, tokenizer, template and code produced an answer.
//! Recorded in every answer and part of every answer-cache key.

use serde::{Deserialize, Serialize};

/// Bumped whenever this crate's local decoding changes what a given GGUF model answers.
/// 1: candle's quantized kernels; 2: Qwen2 weights dequantized to f32 (activations are no
/// longer rounded to 8 bits, so logits, and rarely a greedy answer, differ from 1); 3:
/// llama.cpp over the quantized weights (its kernels round differently from both).
pub const LOCAL_READER_IMPLEMENTATION: u32 = 3;

/// The identity of a reader.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "backend", rename_all = "snake_case", deny_unknown_fields)]
pub enum ReaderIdentity {
    /// A pinned GGUF model run in-process on the CPU by llama.cpp.
    LocalGguf {
        /// The manifest's short name.
        name: String,
        /// The model the weights are of.
        model: String,
        /// SHA-256 of the GGUF file.
        gguf_sha256: String,
        /// `general.architecture`.
        architecture: String,
        /// `general.name`.
        gguf_name: String,
        /// `general.file_type`.
        file_type: u32,
        /// The tokenizer's name (pre-tokenizer and a digest of its definition).
        tokenizer: String,
        /// SHA-256 of the chat template.
        chat_template_sha256: String,
        /// Prompt plus generated tokens the reader accepts.
        context_window: u32,
        /// [`LOCAL_READER_IMPLEMENTATION`].
        implementation: u32,
    },
    /// A model behind an OpenAI-compatible chat-completions endpoint.
    ChatCompletions {
        /// The API's base URL (`https://host/v1`).
        base_url: String,
        /// The model asked for.
        model: String,
    },
}

impl ReaderIdentity {
    /// BLAKE3 (hex) of the identity's JSON.
    pub fn digest(&self) -> String {
        let json = serde_json::to_vec(self).expect("identity serialises");
        blake3::hash(&json).to_hex().to_string()
    }

    /// A short label for reports: the manifest name, or `model@base_url`.
    pub fn label(&self) -> String {
        match self {
            ReaderIdentity::LocalGguf { name, .. } => name.clone(),
            ReaderIdentity::ChatCompletions { base_url, model } => format!("{model}@{base_url}"),
        }
    }
}
