//! The HTTP handlers: parse, authorise, call the facade on the blocking pool, render.

use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};

use crate::dto::{
    AppendRequest, AppendResponse, CompileRequest, EraseRequest, EraseResponse, ExportResponse,
    HealthResponse, NamespaceStatsResponse, NamespacesResponse, SessionsResponse, VerifyResponse,
};
use crate::{ApiError, AppState, Caller, ErrorBody, JsonBody, operations};

/// The namespace of a `{ns}` path, if the caller may use it. A path that does not decode is
/// treated like any other namespace the caller has no key for.
pub(crate) fn path_namespace(
    caller: &Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<evicortex::Namespace, ApiError> {
    match path {
        Ok(Path(raw)) => caller.namespace(&raw),
        Err(rejection) => match caller.require_admin() {
            Ok(()) => Err(ApiError::invalid("namespace", rejection.body_text())),
            Err(_) => Err(ApiError::NamespaceForbidden),
        },
    }
}

/// Liveness: no key needed, touches no data.
#[utoipa::path(get, path = "/healthz", responses((status = 200, body = HealthResponse)))]
pub(crate) async fn healthz() -> Json<HealthResponse> {
    Json(HealthResponse { status: "ok".to_owned(), version: env!("CARGO_PKG_VERSION").to_owned() })
}

/// Appends a batch of turns atomically and durably: a 200 means every turn is on disk.
/// Re-sending an identical turn is a no-op (`already_present`); the same session and turn index
/// with different content is a 409.
#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/turns",
    params(("ns" = String, Path, description = "namespace")),
    request_body = AppendRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, body = AppendResponse),
        (status = 400, body = ErrorBody, description = "malformed json"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "turn already stored with other content"),
        (status = 413, body = ErrorBody), (status = 422, body = ErrorBody, description = "invalid field"),
        (status = 500, body = ErrorBody, description = "the disk failed the write (fsync or write error); the batch is not stored"),
        (status = 503, body = ErrorBody, description = "writes refused since an earlier disk failure, until the server is restarted"),
        (status = 507, body = ErrorBody, description = "the disk is full; nothing of the batch is stored"),
    )
)]
pub(crate) async fn append_turns(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    JsonBody(request): JsonBody<AppendRequest>,
) -> Result<Json<AppendResponse>, ApiError> {
    let namespace = path_namespace(&caller, path)?;
    let max_turns = state.config().max_turns_per_request;
    state
        .blocking(move |memory, _| operations::append(memory, &namespace, request, max_turns))
        .await
        .map(Json)
}

/// Compiles a cited context for a question within a budget of reader tokens, or abstains. The
/// response is the compiled context: prompt-ready `text`, `items` with per-retriever ranks and
/// scores, `excluded` candidates with reasons, `tokens_used`, the abstention decision, the
/// encoder identity and the full configuration.
#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/compile",
    params(("ns" = String, Path, description = "namespace")),
    request_body = CompileRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "compiled context (format evicortex-compiled-context-2)", body = crate::response_schemas::CompiledContext),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "invalid query, budget, tokenizer or options"),
        (status = 429, body = ErrorBody, description = "the compile queue is full (one compile runs per core, `--max-queued-compiles` wait); nothing was done", headers(("Retry-After" = u64, description = "seconds until a place is likely free, estimated from the measured compile time"))),
        (status = 503, body = ErrorBody, description = "the compile waited `--max-queue-wait-secs` without starting; nothing was done", headers(("Retry-After" = u64, description = "seconds until a place is likely free"))),
    )
)]
pub(crate) async fn compile(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    JsonBody(request): JsonBody<CompileRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let namespace = path_namespace(&caller, path)?;
    state
        .compiling(move |memory, readers| operations::compile(memory, readers, &namespace, request))
        .await
        .map(Json)
}

/// Answers a question from memory: compiles a context counted in the server reader's own
/// tokens, has the reader read it, and returns its answer with the records it cited, or the
/// abstention (the compiler's, when nothing supports the question: the reader is then not
/// asked). The reader's whole prompt is counted first; one over its window is a 422 on
/// `budget` with the numbers. 503 when the server was started without a reader.
#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/answer",
    params(("ns" = String, Path, description = "namespace")),
    request_body = crate::answer_request::AnswerRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, description = "answer, citations, reader identity, tokens, seconds and the context read", body = crate::response_schemas::AnswerResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "invalid query, budget (prompt over the reader's window), max_new_tokens or options"),
        (status = 429, body = ErrorBody, description = "the answer queue is full (one answer runs on the loaded reader, `--max-queued-answers` wait); nothing was done", headers(("Retry-After" = u64, description = "seconds until a place is likely free, estimated from the measured answer time"))),
        (status = 503, body = ErrorBody, description = "the server has no reader (no Retry-After), or the answer waited `--max-queue-wait-secs` without starting (with Retry-After)", headers(("Retry-After" = u64, description = "seconds until a place is likely free, when the queue timed out"))),
    )
)]
pub(crate) async fn answer(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    JsonBody(request): JsonBody<crate::answer_request::AnswerRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let namespace = path_namespace(&caller, path)?;
    // Without a reader the 503 comes at once, not after a place in the queue.
    let reader = Some(crate::answer_request::served_reader(state.reader())?.clone());
    state
        .answering(move |memory, _| {
            crate::answer_request::answer(memory, reader.as_ref(), &namespace, request)
        })
        .await
        .map(Json)
}

/// Erases turns: a session, one record, or the whole namespace. The text and everything derived
/// from it are removed; the ledger still verifies.
#[utoipa::path(
    post, path = "/v1/namespaces/{ns}/erase",
    params(("ns" = String, Path, description = "namespace")),
    request_body = EraseRequest,
    security(("bearer" = [])),
    responses(
        (status = 200, body = EraseResponse),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody, description = "nothing in this namespace matches"),
        (status = 422, body = ErrorBody),
        (status = 500, body = ErrorBody, description = "the disk failed; the message says whether the erasure committed"),
        (status = 503, body = ErrorBody, description = "writes refused since an earlier disk failure, until the server is restarted"),
        (status = 507, body = ErrorBody, description = "the disk is full"),
    )
)]
pub(crate) async fn erase(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
    JsonBody(request): JsonBody<EraseRequest>,
) -> Result<Json<EraseResponse>, ApiError> {
    let namespace = path_namespace(&caller, path)?;
    state.blocking(move |memory, _| operations::erase(memory, &namespace, request)).await.map(Json)
}

/// Counts of one namespace. Nothing about other namespaces is revealed.
#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/stats",
    params(("ns" = String, Path, description = "namespace")),
    security(("bearer" = [])),
    responses((status = 200, body = NamespaceStatsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody))
)]
pub(crate) async fn namespace_stats(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<NamespaceStatsResponse>, ApiError> {
    let namespace = path_namespace(&caller, path)?;
    state.blocking(move |memory, _| operations::namespace_stats(memory, &namespace)).await.map(Json)
}

/// The live turns of one namespace, in ledger order, as `evicortex export --namespace NS`
/// writes them (each turn a line of its output, byte for byte), streamed. An unknown namespace
/// has none. Nothing about other namespaces is revealed.
#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/export",
    params(("ns" = String, Path, description = "namespace")),
    security(("bearer" = [])),
    responses(
        (status = 200, body = ExportResponse),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 500, body = ErrorBody, description = "integrity failure, naming the first bad record; once the body has started, the connection is aborted instead"),
    )
)]
pub(crate) async fn export(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<axum::response::Response, ApiError> {
    let namespace = path_namespace(&caller, path)?;
    crate::export_body::export_response(&state, namespace).await
}

/// The namespaces the key may read: a namespace key its own, an admin key every namespace.
#[utoipa::path(
    get, path = "/v1/namespaces",
    security(("bearer" = [])),
    responses((status = 200, body = NamespacesResponse), (status = 401, body = ErrorBody))
)]
pub(crate) async fn namespaces(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<NamespacesResponse>, ApiError> {
    state.blocking(move |memory, _| operations::namespaces(memory, &caller.0)).await.map(Json)
}

/// The sessions of one namespace with their turn counts and time spans, in time order.
#[utoipa::path(
    get, path = "/v1/namespaces/{ns}/sessions",
    params(("ns" = String, Path, description = "namespace")),
    security(("bearer" = [])),
    responses((status = 200, body = SessionsResponse), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody))
)]
pub(crate) async fn sessions(
    State(state): State<AppState>,
    caller: Caller,
    path: Result<Path<String>, PathRejection>,
) -> Result<Json<SessionsResponse>, ApiError> {
    let namespace = path_namespace(&caller, path)?;
    state.blocking(move |memory, _| operations::sessions(memory, &namespace)).await.map(Json)
}

/// Full integrity check of the ledger (admin keys only: the security requirement's role
/// `admin`).
#[utoipa::path(
    get, path = "/v1/verify",
    security(("bearer" = ["admin"])),
    responses(
        (status = 200, body = VerifyResponse),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 500, body = ErrorBody, description = "integrity failure, naming the first bad record"),
    )
)]
pub(crate) async fn verify(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<VerifyResponse>, ApiError> {
    caller.require_admin()?;
    state.blocking(|memory, _| operations::verify(memory)).await.map(Json)
}
