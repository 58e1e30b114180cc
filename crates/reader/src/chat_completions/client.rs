//! `ChatCompletionsClient`: a [`Reader`] backed by any OpenAI-compatible chat-completions
//! endpoint (hosted or self-hosted), greedy (temperature 0), token counts taken from the
//! server's `usage`.

use std::time::{Duration, Instant};

use crate::{
    chat::ChatMessage,
    chat_completions::dto::{ApiErrorBody, ChatCompletionRequest, ChatCompletionResponse},
    decoding::{DecodingSettings, DecodingStrategy},
    error::ReadError,
    identity::ReaderIdentity,
    reader::{FinishReason, Reader, ReaderOutput},
};

/// The environment variable naming the API's base URL (`https://host/v1`).
pub const BASE_URL_VAR: &str = "EVICORTEX_READER_BASE_URL";
/// The environment variable naming the model.
pub const MODEL_VAR: &str = "EVICORTEX_READER_MODEL";
/// The environment variable holding the API key (optional: self-hosted servers often need none).
pub const API_KEY_VAR: &str = "EVICORTEX_READER_API_KEY";
/// The environment variable giving the model's context window in tokens (optional).
pub const CONTEXT_WINDOW_VAR: &str = "EVICORTEX_READER_CONTEXT_WINDOW";

/// Where and what to ask.
#[derive(Clone, PartialEq, Eq)]
pub struct ChatCompletionsConfig {
    /// The API's base URL, up to and including the version (`https://host/v1`).
    pub base_url: String,
    /// The model.
    pub model: String,
    /// Sent as a bearer token when present.
    pub api_key: Option<String>,
    /// The model's window, when known; prompts are then refused before they are sent.
    pub context_window: Option<u32>,
    /// How long one request may take.
    pub timeout: Duration,
}

impl std::fmt::Debug for ChatCompletionsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChatCompletionsConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("context_window", &self.context_window)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ChatCompletionsConfig {
    /// From [`BASE_URL_VAR`], [`MODEL_VAR`], [`API_KEY_VAR`] and [`CONTEXT_WINDOW_VAR`], with a
    /// 300-second timeout.
    pub fn from_env() -> Result<ChatCompletionsConfig, ReadError> {
        let var = |name: &'static str| std::env::var(name).ok().filter(|v| !v.is_empty());
        let required = |name: &'static str| {
            var(name).ok_or(ReadError::Config { field: name, reason: "is not set".to_owned() })
        };
        let context_window = match var(CONTEXT_WINDOW_VAR) {
            Some(value) => Some(value.parse().map_err(|_| ReadError::Config {
                field: CONTEXT_WINDOW_VAR,
                reason: format!("{value:?} is not a token count"),
            })?),
            None => None,
        };
        Ok(ChatCompletionsConfig {
            base_url: required(BASE_URL_VAR)?,
            model: required(MODEL_VAR)?,
            api_key: var(API_KEY_VAR),
            context_window,
            timeout: Duration::from_secs(300),
        })
    }
}

/// A reader behind a chat-completions endpoint.
#[derive(Debug)]
pub struct ChatCompletionsClient {
    identity: ReaderIdentity,
    url: String,
    config: ChatCompletionsConfig,
    http: reqwest::blocking::Client,
}

impl ChatCompletionsClient {
    /// A client for `config`. Do not call [`Reader::read`] on it from inside an async task: it
    /// blocks (use `spawn_blocking`).
    pub fn new(config: ChatCompletionsConfig) -> Result<ChatCompletionsClient, ReadError> {
        let base = config.base_url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ReadError::Config {
                field: BASE_URL_VAR,
                reason: format!("{base:?} is not an http(s) URL"),
            });
        }
        let url = format!("{base}/chat/completions");
        let http = reqwest::blocking::Client::builder()
            .timeout(config.timeout)
            .build()
            .map_err(|e| ReadError::Http { url: url.clone(), reason: e.to_string() })?;
        let identity =
            ReaderIdentity::ChatCompletions { base_url: base, model: config.model.clone() };
        Ok(ChatCompletionsClient { identity, url, config, http })
    }

    /// A client configured by the environment ([`ChatCompletionsConfig::from_env`]).
    pub fn from_env() -> Result<ChatCompletionsClient, ReadError> {
        ChatCompletionsClient::new(ChatCompletionsConfig::from_env()?)
    }
}

impl Reader for ChatCompletionsClient {
    fn identity(&self) -> &ReaderIdentity {
        &self.identity
    }

    fn tokenizer(&self) -> Option<std::sync::Arc<dyn evicortex_compiler::ReaderTokenizer>> {
        None
    }

    fn context_window(&self) -> Option<u32> {
        self.config.context_window
    }

    fn count_prompt(&self, _messages: &[ChatMessage]) -> Result<Option<u32>, ReadError> {
        Ok(None)
    }

    fn read(
        &self,
        messages: &[ChatMessage],
        decoding: &DecodingSettings,
    ) -> Result<ReaderOutput, ReadError> {
        let _span = tracing::info_span!("chat_completions_read", url = %self.url).entered();
        let DecodingStrategy::Greedy = decoding.strategy;
        let request = ChatCompletionRequest {
            model: self.config.model.clone(),
            messages: messages.to_vec(),
            max_tokens: Some(decoding.max_new_tokens),
            max_completion_tokens: None,
            temperature: Some(0.0),
            top_p: None,
            n: Some(1),
            stream: None,
            seed: None,
            user: None,
        };
        let started = Instant::now();
        let mut builder = self.http.post(&self.url).json(&request);
        if let Some(key) = &self.config.api_key {
            builder = builder.bearer_auth(key);
        }
        let http_error =
            |e: reqwest::Error| ReadError::Http { url: self.url.clone(), reason: e.to_string() };
        let response = builder.send().map_err(http_error)?;
        let status = response.status();
        let body = response.text().map_err(http_error)?;
        if !status.is_success() {
            let message = serde_json::from_str::<ApiErrorBody>(&body)
                .map(|b| b.error.message)
                .unwrap_or_else(|_| body.chars().take(500).collect());
            return Err(ReadError::Remote {
                url: self.url.clone(),
                status: status.as_u16(),
                message,
            });
        }
        let invalid = |field: &'static str, reason: String| ReadError::InvalidResponse {
            url: self.url.clone(),
            field,
            reason,
        };
        let parsed: ChatCompletionResponse =
            serde_json::from_str(&body).map_err(|e| invalid("body", e.to_string()))?;
        let [choice] = parsed.choices.as_slice() else {
            return Err(invalid(
                "choices",
                format!("has {} entries, expected 1", parsed.choices.len()),
            ));
        };
        let text = choice
            .message
            .content
            .clone()
            .ok_or_else(|| invalid("choices[0].message.content", "is null".to_owned()))?;
        let finish = match choice.finish_reason.as_deref() {
            Some("stop") => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            other => return Err(invalid("choices[0].finish_reason", format!("is {other:?}"))),
        };
        let usage = parsed.usage.ok_or_else(|| {
            invalid("usage", "is missing: the server does not report token counts".to_owned())
        })?;
        Ok(ReaderOutput {
            text,
            prompt_tokens: usage.prompt_tokens,
            generated_tokens: usage.completion_tokens,
            finish,
            seconds: started.elapsed().as_secs_f64(),
            timing: None,
        })
    }
}
