//! The shapes of the OpenAI-compatible chat-completions bodies, for the OpenAPI document alone:
//! the route speaks the reader crate's own wire types (`evicortex::front_end::Chat*`); these
//! name the part of OpenAI's format the server serves, so that a client generated from the
//! document knows it.
#![allow(dead_code)]

use utoipa::ToSchema;

/// A chat completion request: plain-text messages, one choice, greedy decoding, no streaming.
/// Fields that would change the answer and are not served are refused by name; unknown fields
/// are refused.
#[derive(ToSchema)]
#[schema(as = ChatCompletionRequest)]
pub(crate) struct ChatCompletionRequest {
    /// The served model's id (`GET /v1/models`).
    model: String,
    /// The conversation.
    messages: Vec<ChatMessage>,
    /// At most this many generated tokens (older name).
    max_tokens: Option<u32>,
    /// At most this many generated tokens (newer name).
    max_completion_tokens: Option<u32>,
    /// Only 0 (greedy) is served.
    temperature: Option<f64>,
    /// Only 1 (off) is served.
    top_p: Option<f64>,
    /// Only 1 is served.
    n: Option<u32>,
    /// Only `false` is served.
    stream: Option<bool>,
    /// Accepted; greedy decoding gives the same answer for any value.
    seed: Option<i64>,
    /// An end-user id; recorded nowhere.
    user: Option<String>,
}

/// Who speaks a message.
#[derive(ToSchema)]
#[schema(as = ChatRole, rename_all = "lowercase")]
pub(crate) enum ChatRole {
    System,
    User,
    Assistant,
}

/// One message of the conversation.
#[derive(ToSchema)]
#[schema(as = ChatMessage)]
pub(crate) struct ChatMessage {
    role: ChatRole,
    /// The text, verbatim.
    content: String,
}

/// A chat completion: exactly one choice.
#[derive(ToSchema)]
#[schema(as = ChatCompletionResponse)]
pub(crate) struct ChatCompletionResponse {
    id: String,
    /// `chat.completion`.
    object: String,
    /// Unix seconds.
    created: u64,
    /// The model that answered.
    model: String,
    choices: Vec<ChatChoice>,
    usage: Option<ChatUsage>,
    /// The reader identity's digest.
    system_fingerprint: Option<String>,
}

/// The one choice.
#[derive(ToSchema)]
#[schema(as = ChatChoice)]
pub(crate) struct ChatChoice {
    index: u32,
    message: ChatReplyMessage,
    /// `stop` or `length`.
    finish_reason: Option<String>,
}

/// The reply.
#[derive(ToSchema)]
#[schema(as = ChatReplyMessage)]
pub(crate) struct ChatReplyMessage {
    /// `assistant`.
    role: String,
    content: Option<String>,
}

/// Token counts.
#[derive(ToSchema)]
#[schema(as = ChatUsage)]
pub(crate) struct ChatUsage {
    /// The prompt, chat template included.
    prompt_tokens: u32,
    completion_tokens: u32,
    total_tokens: u32,
}

/// An error in OpenAI's format: `{"error": {...}}`.
#[derive(ToSchema)]
#[schema(as = ChatErrorBody)]
pub(crate) struct ChatErrorBody {
    error: ChatError,
}

/// What went wrong.
#[derive(ToSchema)]
#[schema(as = ChatError)]
pub(crate) struct ChatError {
    message: String,
    /// `invalid_request_error` or `server_error`.
    #[schema(rename = "type")]
    kind: String,
    /// The request field concerned.
    param: Option<String>,
    /// `model_not_found`, `context_length_exceeded`, `no_reader`, `rate_limit_exceeded`,
    /// `queue_timeout`.
    code: Option<String>,
}

/// The models served: the one reader.
#[derive(ToSchema)]
#[schema(as = ModelList)]
pub(crate) struct ModelList {
    /// `list`.
    object: String,
    data: Vec<ModelEntry>,
}

/// A served model.
#[derive(ToSchema)]
#[schema(as = ModelEntry)]
pub(crate) struct ModelEntry {
    /// The id requests name in `model`.
    id: String,
    /// `model`.
    object: String,
    created: u64,
    /// `evicortex`.
    owned_by: String,
}
