//! An OpenAI-compatible `POST /v1/chat/completions` (and `GET /v1/models`) serving one
//! [`Reader`], which `evicortex serve --reader` mounts for admin keys (a server without one
//! answers both with 503). Non-streaming only; greedy
//! decoding only. The wire format is the reader crate's, which its client speaks too.

use std::{
    sync::Arc,
    time::{SystemTime, UNIX_EPOCH},
};

use axum::{
    Json, Router,
    extract::{State, rejection::JsonRejection},
    http::StatusCode,
    response::{IntoResponse, Response},
    routing::{get, post},
};
use serde_json::json;

use evicortex::{
    DecodingSettings, Reader, ReaderReadError as ReadError,
    front_end::{
        ChatApiError, ChatApiErrorBody, ChatChoice, ChatCompletionRequest, ChatCompletionResponse,
        ChatReplyMessage, ChatUsage, FinishReason,
    },
};

use crate::RequestQueues;

#[derive(Clone)]
pub(crate) struct ServedReader {
    model_id: Arc<str>,
    reader: Arc<dyn Reader>,
    queues: RequestQueues,
}

/// A router serving `reader` as model `model_id` at `/v1/chat/completions` and `/v1/models`.
/// Completions take their place in the answer queue of `queues` (the server's, so that they and
/// `POST .../answer` share the one reader); a full queue is a 429 with `Retry-After`.
pub fn chat_completions_router(
    model_id: &str,
    reader: Arc<dyn Reader>,
    queues: RequestQueues,
) -> Router {
    let state = ServedReader { model_id: Arc::from(model_id), reader, queues };
    Router::new()
        .route("/v1/chat/completions", post(chat_completions))
        .route("/v1/models", get(models))
        .with_state(state)
}

/// The routes of a server started without a reader: 503 in OpenAI's error format, so that a
/// client learns why rather than meeting a 404.
pub(crate) fn no_reader_router() -> Router {
    let no_reader = || async {
        error(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            None,
            Some("no_reader"),
            "this server has no reader: start it with `evicortex serve --reader NAME`".to_owned(),
        )
    };
    Router::new().route("/v1/chat/completions", post(no_reader)).route("/v1/models", get(no_reader))
}

/// The one model served.
#[utoipa::path(
    get, path = "/v1/models",
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "the reader the server was started with", body = crate::chat_schemas::ModelList),
        (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody, description = "not an admin key"),
        (status = 503, body = crate::chat_schemas::ChatErrorBody, description = "the server has no reader (`code`: `no_reader`)"),
    )
)]
pub(crate) async fn models(State(served): State<ServedReader>) -> Json<serde_json::Value> {
    Json(json!({
        "object": "list",
        "data": [{"id": &*served.model_id, "object": "model", "created": 0,
                  "owned_by": "evicortex"}]
    }))
}

/// An OpenAI-compatible chat completion by the server's reader, for admin keys.
#[utoipa::path(
    post, path = "/v1/chat/completions",
    request_body = crate::chat_schemas::ChatCompletionRequest,
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, description = "the reader's reply", body = crate::chat_schemas::ChatCompletionResponse),
        (status = 400, body = crate::chat_schemas::ChatErrorBody, description = "a field the server does not serve (`param` names it), or a prompt over the reader's window (`code`: `context_length_exceeded`)"),
        (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody, description = "not an admin key"),
        (status = 404, body = crate::chat_schemas::ChatErrorBody, description = "`model` is not the served model (`code`: `model_not_found`)"),
        (status = 429, body = crate::chat_schemas::ChatErrorBody, description = "the answer queue, shared with `POST .../answer`, is full (`code`: `rate_limit_exceeded`)", headers(("Retry-After" = u64, description = "seconds until a place is likely free"))),
        (status = 503, body = crate::chat_schemas::ChatErrorBody, description = "the server has no reader (`code`: `no_reader`), or the request waited `--max-queue-wait-secs` (`code`: `queue_timeout`, with Retry-After)", headers(("Retry-After" = u64, description = "seconds until a place is likely free, when the queue timed out"))),
    )
)]
pub(crate) async fn chat_completions(
    State(served): State<ServedReader>,
    body: Result<Json<ChatCompletionRequest>, JsonRejection>,
) -> Response {
    let Json(request) = match body {
        Ok(body) => body,
        Err(rejection) => return invalid(None, None, rejection.body_text()),
    };
    if request.model != *served.model_id {
        return error(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            Some("model"),
            Some("model_not_found"),
            format!(
                "model {:?} is not served here; this server serves {:?}",
                request.model, served.model_id
            ),
        );
    }
    if request.stream == Some(true) {
        return invalid(Some("stream"), None, "streaming is not supported".to_owned());
    }
    if request.n.is_some_and(|n| n != 1) {
        return invalid(Some("n"), None, "only n = 1 is supported".to_owned());
    }
    if request.temperature.is_some_and(|t| t != 0.0) {
        return invalid(
            Some("temperature"),
            None,
            "only greedy decoding (temperature 0) is served".to_owned(),
        );
    }
    if request.top_p.is_some_and(|p| p != 1.0) {
        return invalid(Some("top_p"), None, "only top_p = 1 is served".to_owned());
    }
    let max_new_tokens = match (request.max_tokens, request.max_completion_tokens) {
        (Some(a), Some(b)) if a != b => {
            return invalid(
                Some("max_tokens"),
                None,
                "max_tokens and max_completion_tokens disagree".to_owned(),
            );
        }
        (Some(n), _) | (None, Some(n)) => Some(n),
        (None, None) => None,
    };
    let ticket = match served.queues.answer().await {
        Ok(ticket) => ticket,
        Err(refusal) => return busy(&refusal),
    };
    let reader = Arc::clone(&served.reader);
    let messages = request.messages;
    let outcome = tokio::task::spawn_blocking(move || {
        // Held until the read ends, even when the client hangs up.
        let _ticket = ticket;
        // Without a limit the reply may run to the end of the window, as the API specifies.
        let max_new_tokens = match max_new_tokens {
            Some(n) => n,
            None => match (reader.context_window(), reader.count_prompt(&messages)?) {
                (Some(window), Some(prompt)) => window.saturating_sub(prompt).max(1),
                _ => {
                    return Err(ReadError::InvalidDecoding {
                        field: "max_tokens",
                        reason: "is required by this reader".to_owned(),
                    });
                }
            },
        };
        reader.read(&messages, &DecodingSettings::greedy(max_new_tokens))
    })
    .await;
    let output = match outcome {
        Ok(Ok(output)) => output,
        Ok(Err(err)) => return read_error(err),
        Err(join) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                None,
                None,
                format!("the reader panicked: {join}"),
            );
        }
    };
    let created = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let fingerprint = served.reader.identity().digest();
    let response = ChatCompletionResponse {
        id: format!(
            "chatcmpl-{}",
            &blake3::hash(format!("{created}{fingerprint}{}", output.text).as_bytes()).to_hex()
                [..24]
        ),
        object: "chat.completion".to_owned(),
        created,
        model: served.model_id.to_string(),
        choices: vec![ChatChoice {
            index: 0,
            message: ChatReplyMessage { role: "assistant".to_owned(), content: Some(output.text) },
            finish_reason: Some(
                match output.finish {
                    FinishReason::Stop => "stop",
                    FinishReason::Length => "length",
                }
                .to_owned(),
            ),
        }],
        usage: Some(ChatUsage {
            prompt_tokens: output.prompt_tokens,
            completion_tokens: output.generated_tokens,
            total_tokens: output.prompt_tokens + output.generated_tokens,
        }),
        system_fingerprint: Some(fingerprint),
    };
    (StatusCode::OK, Json(response)).into_response()
}

fn read_error(err: ReadError) -> Response {
    let message = err.to_string();
    match err {
        ReadError::PromptTooLong { .. } => {
            invalid(Some("messages"), Some("context_length_exceeded"), message)
        }
        ReadError::ControlTokenInContent { .. } | ReadError::InvalidMessages { .. } => {
            invalid(Some("messages"), None, message)
        }
        ReadError::InvalidDecoding { field, .. } => invalid(Some(field), None, message),
        _ => error(StatusCode::INTERNAL_SERVER_ERROR, "server_error", None, None, message),
    }
}

/// A full or timed-out answer queue, as the OpenAI API says it (429 `rate_limit_exceeded`,
/// which OpenAI's clients retry after `Retry-After`).
fn busy(refusal: &crate::ApiError) -> Response {
    let (kind, code) = match refusal.status() {
        StatusCode::TOO_MANY_REQUESTS => ("rate_limit_error", "rate_limit_exceeded"),
        _ => ("server_error", "queue_timeout"),
    };
    let mut response = error(refusal.status(), kind, None, Some(code), refusal.to_string());
    if let Some(seconds) = refusal.retry_after_s() {
        response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
    }
    response
}

fn invalid(param: Option<&str>, code: Option<&str>, message: String) -> Response {
    error(StatusCode::BAD_REQUEST, "invalid_request_error", param, code, message)
}

fn error(
    status: StatusCode,
    kind: &str,
    param: Option<&str>,
    code: Option<&str>,
    message: String,
) -> Response {
    let body = ChatApiErrorBody {
        error: ChatApiError {
            message,
            kind: kind.to_owned(),
            param: param.map(str::to_owned),
            code: code.map(str::to_owned),
        },
    };
    (status, Json(body)).into_response()
}
