//! HTTP and MCP servers for EviCortex.
//!
//! [`router`] is the JSON API (axum) over an [`AppState`]: a [`evicortex::Memory`], the
//! [`KeyStore`] of per-namespace API keys, and the [`ServerConfig`] limits; it also serves the
//! web inspector at `/ui`, static assets compiled into the binary that call the same API. [`serve_http`] runs it
//! on a listener until a shutdown signal and drains in-flight requests. [`McpServer`] exposes one
//! namespace as the MCP tools `remember`, `recall`, `answer` and `forget`, served on stdio by
//! [`serve_mcp_stdio`]. [`openapi`] is the OpenAPI document, generated from the same code.
//! [`chat_completions_router`] serves a reader at the OpenAI-compatible `/v1/chat/completions`.
//!
//! Every store call runs on tokio's blocking pool; the facade serialises writers and lets readers
//! run concurrently. A 200 on an append means the turns are on disk.
//!
//! ```
//! use std::sync::Arc;
//! use axum::{body::Body, http::Request};
//! use evicortex::{Memory, Namespace};
//! use evicortex_server::{AppState, KeyScope, KeyStore, ServerConfig, router};
//! use tower::ServiceExt;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let memory = Memory::open(dir.path()).unwrap(); // BM25 only: no encoder
//! let keys = KeyStore::open(dir.path()).unwrap();
//! let key = keys.create(&KeyScope::Namespace(Namespace::new("alice").unwrap())).unwrap();
//! let state = AppState::new(Arc::new(memory), keys, ServerConfig::default());
//! let body = r#"{"turns": [{"session": "s1", "turn": 0, "role": "user",
//!     "text": "I moved to Lisbon in May.", "time": "2024-05-02T10:00:00+01:00"}]}"#;
//! let request = Request::post("/v1/namespaces/alice/turns")
//!     .header("authorization", format!("Bearer {}", key.secret))
//!     .body(Body::from(body))
//!     .unwrap();
//! let runtime = tokio::runtime::Runtime::new().unwrap();
//! let response = runtime.block_on(router(state).oneshot(request)).unwrap();
//! assert_eq!(response.status(), 200);
//! ```
#![warn(missing_docs)]

mod answer_request;
mod api_error;
mod auth;
mod chat_completions;
mod chat_schemas;
mod compile_request;
mod dto;
mod export_body;
mod facade_error;
mod http_server;
mod json_body;
mod key_import;
mod key_store;
mod mcp;
mod openapi;
mod operations;
mod request_queue;
mod response_schemas;
mod router;
mod routes;
mod state;
mod ui;

pub use crate::{
    answer_request::{
        AnswerReader, AnswerRequest, DEFAULT_MAX_NEW_TOKENS, MAX_NEW_TOKENS_LIMIT, answer,
    },
    api_error::{ApiError, ErrorBody},
    auth::Caller,
    chat_completions::chat_completions_router,
    compile_request::{READER_TOKENIZERS, Readers},
    dto::{
        AppendRequest, AppendResponse, AppendedTurn, CompileRequest, EraseRequest, EraseResponse,
        ExportResponse, ExportedTurn, HealthResponse, NamespaceStatsResponse, NamespacesResponse,
        SessionSummary, SessionsResponse, TurnInput, VerifyResponse,
    },
    facade_error::facade_error,
    http_server::{ServeError, serve_http, termination_signal},
    json_body::{JsonBody, parse_json},
    key_store::{KEY_STORE_FILE, KeyListing, KeyScope, KeyStore, KeyStoreError, NewKey},
    mcp::{AnswerArgs, ForgetArgs, McpServer, RecallArgs, RememberArgs, serve_mcp_stdio},
    openapi::openapi,
    request_queue::{RequestQueues, Ticket},
    router::router,
    state::{AppState, ServerConfig},
};
