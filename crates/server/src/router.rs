//! The router of the HTTP API: the handlers of [`crate::routes`], the OpenAPI document, the
//! served reader's routes for admin keys, and the answers for a path or method that is not there.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::routing::{get, post};

use crate::{ApiError, AppState, Caller, routes};

/// The complete router of the HTTP API over `state`.
pub fn router(state: AppState) -> Router {
    let body_limit = state.config().body_limit_bytes;
    let served_reader = match state.reader() {
        Some(r) => {
            let model_id = r.reader.identity().label();
            crate::chat_completions_router(&model_id, r.reader.clone(), state.queues().clone())
        }
        None => crate::chat_completions::no_reader_router(),
    }
    .layer(axum::middleware::from_fn_with_state(state.clone(), admin_only))
    .layer(DefaultBodyLimit::max(body_limit));
    let api = Router::new()
        .route("/healthz", get(routes::healthz))
        .route("/openapi.json", get(crate::openapi::openapi_json))
        .route("/v1/verify", get(routes::verify))
        .route("/v1/namespaces/{ns}/turns", post(routes::append_turns))
        .route("/v1/namespaces/{ns}/compile", post(routes::compile))
        .route("/v1/namespaces/{ns}/answer", post(routes::answer))
        .route("/v1/namespaces/{ns}/erase", post(routes::erase))
        .route("/v1/namespaces/{ns}/stats", get(routes::namespace_stats))
        .route("/v1/namespaces/{ns}/export", get(routes::export))
        .route("/v1/namespaces", get(routes::namespaces))
        .route("/v1/namespaces/{ns}/sessions", get(routes::sessions))
        .merge(crate::ui::routes())
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state);
    api.merge(served_reader)
}

/// Only admin keys reach the served reader: it runs the server's model for any prompt.
async fn admin_only(
    caller: Caller,
    request: axum::extract::Request,
    next: axum::middleware::Next,
) -> Result<axum::response::Response, ApiError> {
    caller.require_admin()?;
    Ok(next.run(request).await)
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed { method: method.to_string(), path: uri.path().to_owned() }
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::NoRoute { method: method.to_string(), path: uri.path().to_owned() }
}
