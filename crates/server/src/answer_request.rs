//! How the servers answer: the reader the server was started with (`serve --reader NAME`), the
//! request body, and the call into [`evicortex::Memory::answer`].

use std::sync::Arc;

use evicortex::front_end::requested_decoding;
use evicortex::{EventTime, Memory, Namespace, Reader, ReaderTokenizer};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::{ApiError, compile_request::prepared_question, facade_error};

/// The bounds of `max_new_tokens`, as every door applies them.
pub use evicortex::front_end::{DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS_LIMIT};

/// The reader a server answers with: a local model counts budgets in its own tokenizer; a remote
/// endpoint needs the tokenizer its model uses.
#[derive(Debug, Clone)]
pub struct AnswerReader {
    /// Who reads.
    pub reader: Arc<dyn Reader>,
    /// The budget tokenizer, for a reader without one of its own.
    pub tokenizer: Option<Arc<dyn ReaderTokenizer>>,
}

/// Body of `POST /v1/namespaces/{ns}/answer` (and the MCP tool `answer`).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerRequest {
    /// The question.
    pub query: String,
    /// Hard budget of the compiled context in the server reader's own tokens.
    pub budget: u32,
    /// Only evidence said at or before this time (RFC 3339 with offset); default: no limit.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub as_of: Option<EventTime>,
    /// Most tokens the reader may generate (default 64, at most 512).
    #[serde(default)]
    pub max_new_tokens: Option<u32>,
    /// Compiler options, as for compile.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub options: Option<serde_json::Map<String, serde_json::Value>>,
}

/// The server's reader, or the 503 that says how to start it with one.
pub fn served_reader(reader: Option<&AnswerReader>) -> Result<&AnswerReader, ApiError> {
    reader.ok_or_else(|| ApiError::Unavailable {
        message: "this server has no reader: start it with `evicortex serve --reader NAME`"
            .to_owned(),
    })
}

/// Answers `request` over `namespace` with `reader` (503 when the server has none).
pub fn answer(
    memory: &Memory,
    reader: Option<&AnswerReader>,
    namespace: &Namespace,
    request: AnswerRequest,
) -> Result<serde_json::Value, ApiError> {
    let reader = served_reader(reader)?;
    let decoding = requested_decoding(request.max_new_tokens)
        .map_err(|e| ApiError::invalid(e.field, e.reason))?;
    let AnswerRequest { query, budget, as_of, options, .. } = request;
    let question = prepared_question(memory, namespace, query, as_of, budget, options.as_ref())?;
    let answer_request = question.answer_request(reader.tokenizer.as_deref(), decoding);
    let report =
        memory.answer(&answer_request, reader.reader.as_ref()).map_err(|e| facade_error(&e))?;
    Ok(report.to_json())
}
