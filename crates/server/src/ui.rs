//! The web inspector at `/ui`: a page, a script and a style sheet, compiled into the binary. It is
//! a front end over the same JSON API (same keys, same 401/403): the server hands out only these
//! static files, and the script calls the API with the key the user typed.

use axum::Router;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;

/// What the page may load and do: its own script, style and API alone; no inline script or
/// style, no eval, no frames, no forms posted anywhere, no other origin.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; \
     frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("../ui/index.html");
const APP_JS: &str = include_str!("../ui/app.js");
const STYLE_CSS: &str = include_str!("../ui/style.css");

/// The inspector's routes: `/ui` (also `/ui/`), `/ui/app.js`, `/ui/style.css`.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/ui/", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/ui/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/ui/style.css", get(|| async { asset("text/css; charset=utf-8", STYLE_CSS) }))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (CONTENT_TYPE, content_type),
            (CONTENT_SECURITY_POLICY, CONTENT_SECURITY_POLICY_VALUE),
            (X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (X_FRAME_OPTIONS, "DENY"),
            (REFERRER_POLICY, "no-referrer"),
            (CACHE_CONTROL, "no-store"),
        ],
        body,
    )
        .into_response()
}
