//! The OpenAI chat-completions wire format, the part of it this crate speaks: plain-text
//! messages, one choice, no streaming, no tools.

use serde::{Deserialize, Serialize};

use crate::chat::ChatMessage;

/// `POST /chat/completions` request body. Fields that would change the answer and are not
/// implemented are refused by name rather than ignored (unknown fields are refused too).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatCompletionRequest {
    /// The model asked for.
    pub model: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// At most this many generated tokens (older name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// At most this many generated tokens (newer name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Sampling temperature; only 0 (greedy) is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Nucleus sampling; only 1 (off) is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
    /// Number of choices; only 1 is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n: Option<u32>,
    /// Streaming; only `false` is served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream: Option<bool>,
    /// A sampling seed; greedy decoding needs none, so any value gives the same answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// An end-user id; recorded nowhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

/// `POST /chat/completions` response body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatCompletionResponse {
    /// A response id.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: u64,
    /// The model that answered.
    pub model: String,
    /// The reply (exactly one).
    pub choices: Vec<ChatChoice>,
    /// Token counts.
    pub usage: Option<ChatUsage>,
    /// The backend's configuration digest (here: the reader identity's digest).
    #[serde(default)]
    pub system_fingerprint: Option<String>,
}

/// One choice.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatChoice {
    /// Its index.
    pub index: u32,
    /// The reply.
    pub message: ChatReplyMessage,
    /// `stop` or `length`.
    pub finish_reason: Option<String>,
}

/// The reply message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ChatReplyMessage {
    /// `assistant`.
    pub role: String,
    /// The text; `null` only for tool calls, which this crate never asks for.
    pub content: Option<String>,
}

/// Token counts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatUsage {
    /// The prompt, chat template included.
    pub prompt_tokens: u32,
    /// Generated tokens.
    pub completion_tokens: u32,
    /// Their sum.
    pub total_tokens: u32,
}

/// The error body: `{"error": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiErrorBody {
    /// The error.
    pub error: ApiError,
}

/// An API error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApiError {
    /// What went wrong.
    pub message: String,
    /// `invalid_request_error` or `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The request field concerned.
    #[serde(default)]
    pub param: Option<String>,
    /// A machine-readable code (`context_length_exceeded`, `model_not_found`).
    #[serde(default)]
    pub code: Option<String>,
}
