//! The one error type every handler returns, and its mapping to a status and a JSON body.
//!
//! Client mistakes map to 4xx with the offending field's path; only failures of the server itself
//! (storage, integrity) map to 5xx. The body is always `{"error": "...", "field": "..." | null}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

/// Body of every error response.
#[derive(Debug, Serialize, serde::Deserialize, ToSchema)]
pub struct ErrorBody {
    /// What went wrong, lowercase, for humans.
    pub error: String,
    /// Path of the offending input field (e.g. `turns[2].time`), when one is to blame.
    pub field: Option<String>,
}

/// Everything a request can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApiError {
    /// No `Authorization: Bearer` header.
    #[error("missing api key: send Authorization: Bearer <key>")]
    MissingKey,
    /// A header that is not a bearer token, or a key that is not stored.
    #[error("invalid api key")]
    InvalidKey,
    /// The key does not grant this namespace. Identical whether the namespace exists or not.
    #[error("this key does not grant access to the requested namespace")]
    NamespaceForbidden,
    /// The route needs an admin key.
    #[error("this route needs an admin key")]
    AdminOnly,
    /// No such route.
    #[error("no route for {method} {path}")]
    NoRoute {
        /// The request method.
        method: String,
        /// The request path.
        path: String,
    },
    /// The route exists, but not with this method.
    #[error("method {method} is not allowed on {path}")]
    MethodNotAllowed {
        /// The request method.
        method: String,
        /// The request path.
        path: String,
    },
    /// The body is not JSON (syntax error, truncation, wrong encoding).
    #[error("malformed json: {message}")]
    MalformedJson {
        /// Where the parser stopped.
        field: Option<String>,
        /// The parser's complaint.
        message: String,
    },
    /// Well-formed input with a field of the wrong shape or value.
    #[error("{field}: {message}")]
    InvalidField {
        /// Path of the field, e.g. `turns[3].role`.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// Nothing inside the caller's namespace matches (e.g. an erase target). Said the same way
    /// whether or not the thing exists in another namespace.
    #[error("{message}")]
    NotFound {
        /// The field naming what was not found.
        field: Option<String>,
        /// What was not found.
        message: String,
    },
    /// The body is larger than the configured limit.
    #[error("request body exceeds the limit of {limit_bytes} bytes")]
    BodyTooLarge {
        /// The limit.
        limit_bytes: usize,
    },
    /// The request conflicts with what is stored (e.g. a turn that already exists).
    #[error("{message}")]
    Conflict {
        /// The field that conflicts, when known.
        field: Option<String>,
        /// What conflicts.
        message: String,
    },
    /// A needed model or tokenizer is not installed.
    #[error("{message}")]
    Unavailable {
        /// What is missing and how to install it.
        message: String,
    },
    /// The disk is full: the write was rolled back and succeeds once space is freed.
    #[error("insufficient storage: {message}")]
    InsufficientStorage {
        /// The store's error.
        message: String,
    },
    /// The store failed to read or write.
    #[error("storage failure: {message}")]
    Storage {
        /// The store's error.
        message: String,
    },
    /// The store's integrity is in doubt: fail closed.
    #[error("integrity failure: {message}")]
    Integrity {
        /// The store's error.
        message: String,
    },
    /// The queue of a costly request (answer, compile) is full: refused at once, 429.
    #[error("{message}")]
    QueueFull {
        /// Which queue, its limits and the flag that sets them.
        message: String,
        /// The `Retry-After` estimate, in seconds.
        retry_after_s: u64,
    },
    /// A queued request waited the server's time limit without starting: 503.
    #[error("{message}")]
    QueueTimeout {
        /// Which queue and the limit.
        message: String,
        /// The `Retry-After` estimate, in seconds.
        retry_after_s: u64,
    },
}

impl ApiError {
    /// The HTTP status for this error.
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::MissingKey | ApiError::InvalidKey => StatusCode::UNAUTHORIZED,
            ApiError::NamespaceForbidden | ApiError::AdminOnly => StatusCode::FORBIDDEN,
            ApiError::NoRoute { .. } | ApiError::NotFound { .. } => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::MalformedJson { .. } => StatusCode::BAD_REQUEST,
            ApiError::InvalidField { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::Conflict { .. } => StatusCode::CONFLICT,
            ApiError::Unavailable { .. } | ApiError::QueueTimeout { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiError::QueueFull { .. } => StatusCode::TOO_MANY_REQUESTS,
            ApiError::InsufficientStorage { .. } => StatusCode::INSUFFICIENT_STORAGE,
            ApiError::Storage { .. } | ApiError::Integrity { .. } => {
                StatusCode::INTERNAL_SERVER_ERROR
            }
        }
    }

    /// The field path to report, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ApiError::MalformedJson { field, .. }
            | ApiError::Conflict { field, .. }
            | ApiError::NotFound { field, .. } => field.as_deref(),
            ApiError::InvalidField { field, .. } => Some(field),
            _ => None,
        }
    }

    /// Seconds a client should wait before sending the request again (the `Retry-After`
    /// header), for a refusal of a full or slow queue.
    pub fn retry_after_s(&self) -> Option<u64> {
        match self {
            ApiError::QueueFull { retry_after_s, .. }
            | ApiError::QueueTimeout { retry_after_s, .. } => Some(*retry_after_s),
            _ => None,
        }
    }

    /// Shorthand for [`ApiError::InvalidField`].
    pub fn invalid(field: impl Into<String>, message: impl std::fmt::Display) -> ApiError {
        ApiError::InvalidField { field: field.into(), message: message.to_string() }
    }

    /// The JSON body of this error. A server error's message keeps the file names it gives but
    /// not their folders: the server's layout is not the client's business (the server's log
    /// keeps the whole message).
    pub fn body(&self) -> ErrorBody {
        let error = if self.status().is_server_error() {
            without_folders(&self.to_string())
        } else {
            self.to_string()
        };
        ErrorBody { error, field: self.field().map(str::to_owned) }
    }
}

/// `message` with each absolute path (a word starting with `/`, up to the next `: ` or the end)
/// shortened to `…/` and its last component.
fn without_folders(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(start) = rest.find('/') {
        let starts_word = start == 0 || rest[..start].ends_with(' ');
        if !starts_word {
            out.push_str(&rest[..=start]);
            rest = &rest[start + 1..];
            continue;
        }
        out.push_str(&rest[..start]);
        let path_len = rest[start..].find(": ").unwrap_or(rest.len() - start);
        let path = &rest[start..start + path_len];
        let last = path.trim_end_matches('/').rsplit('/').next().unwrap_or_default();
        out.push_str("…/");
        out.push_str(last);
        rest = &rest[start + path_len..];
    }
    out.push_str(rest);
    out
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        // A queue's time limit is load, not a failure: the queue logs it as a warning.
        if status.is_server_error() && !matches!(self, ApiError::QueueTimeout { .. }) {
            tracing::error!(error = %self, "request failed");
        }
        let mut response = (status, axum::Json(self.body())).into_response();
        if let Some(seconds) = self.retry_after_s() {
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_error_names_files_but_not_their_folders() {
        let err = ApiError::InsufficientStorage {
            message: "sqlite error on /srv/mem store/ledger.sqlite: database or disk is full"
                .to_owned(),
        };
        assert_eq!(
            err.body().error,
            "insufficient storage: sqlite error on …/ledger.sqlite: database or disk is full"
        );
        let err = ApiError::Storage {
            message: "vector index file: /a/b/vector-index/: I/O (os error 5), 3/4 done".to_owned(),
        };
        assert_eq!(
            err.body().error,
            "storage failure: vector index file: …/vector-index: I/O (os error 5), 3/4 done"
        );
        // A client's own words in a 4xx are returned as they were.
        let err = ApiError::invalid("query", "/etc/passwd: no");
        assert_eq!(err.body().error, "query: /etc/passwd: no");
    }

    #[test]
    fn client_errors_are_4xx_and_name_their_field() {
        let err = ApiError::invalid("turns[2].time", "is not RFC 3339");
        assert_eq!(err.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let body = err.body();
        assert_eq!(body.field.as_deref(), Some("turns[2].time"));
        assert_eq!(body.error, "turns[2].time: is not RFC 3339");
        for err in [
            ApiError::MissingKey,
            ApiError::InvalidKey,
            ApiError::NamespaceForbidden,
            ApiError::AdminOnly,
            ApiError::BodyTooLarge { limit_bytes: 1 },
            ApiError::MalformedJson { field: None, message: "eof".into() },
        ] {
            assert!(err.status().is_client_error(), "{err:?}");
        }
    }
}
