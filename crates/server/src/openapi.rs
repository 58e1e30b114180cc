//! The OpenAPI description, generated from the route and body definitions.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::dto;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "EviCortex",
        description = "Evidence-first long-term memory: append turns, compile cited context within a token budget, answer from it with a reader, export, erase."
    ),
    paths(
        crate::routes::healthz,
        crate::openapi::openapi_json,
        crate::routes::verify,
        crate::routes::append_turns,
        crate::routes::compile,
        crate::routes::answer,
        crate::routes::erase,
        crate::routes::namespace_stats,
        crate::routes::export,
        crate::routes::namespaces,
        crate::routes::sessions,
        crate::chat_completions::chat_completions,
        crate::chat_completions::models,
    ),
    components(schemas(
        crate::ErrorBody,
        dto::AppendRequest,
        dto::TurnInput,
        dto::AppendResponse,
        dto::AppendedTurn,
        dto::CompileRequest,
        crate::answer_request::AnswerRequest,
        dto::EraseRequest,
        dto::EraseResponse,
        dto::NamespaceStatsResponse,
        dto::ExportResponse,
        dto::ExportedTurn,
        dto::NamespacesResponse,
        dto::SessionsResponse,
        dto::SessionSummary,
        dto::VerifyResponse,
        dto::HealthResponse,
        crate::response_schemas::CompiledContext,
        crate::response_schemas::ContextItem,
        crate::response_schemas::ExcludedCandidate,
        crate::response_schemas::Tagged,
        crate::response_schemas::RankScore,
        crate::response_schemas::EncoderRef,
        crate::response_schemas::Coverage,
        crate::response_schemas::BudgetParts,
        crate::response_schemas::AnswerResponse,
        crate::response_schemas::ReaderAnswer,
        crate::response_schemas::AnswerContext,
        crate::chat_schemas::ChatCompletionRequest,
        crate::chat_schemas::ChatRole,
        crate::chat_schemas::ChatMessage,
        crate::chat_schemas::ChatCompletionResponse,
        crate::chat_schemas::ChatChoice,
        crate::chat_schemas::ChatReplyMessage,
        crate::chat_schemas::ChatUsage,
        crate::chat_schemas::ChatErrorBody,
        crate::chat_schemas::ChatError,
        crate::chat_schemas::ModelList,
        crate::chat_schemas::ModelEntry,
    )),
    modifiers(&BearerAuth)
)]
struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("evk_...")
                    .description(Some(
                        "An API key (`evicortex keys create`). A namespace key reaches the \
                         operations on its own namespace (`{ns}`) and `GET /v1/namespaces`; an \
                         admin key reaches every operation. An operation whose requirement names \
                         the role `admin` takes admin keys only.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI 3.1 document of the HTTP API.
pub fn openapi() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The OpenAPI description of this API, generated from the code.
#[utoipa::path(get, path = "/openapi.json", responses((status = 200, description = "OpenAPI 3.1 document")))]
pub(crate) async fn openapi_json() -> axum::Json<utoipa::openapi::OpenApi> {
    axum::Json(openapi())
}
