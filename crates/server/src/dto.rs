//! Request and response bodies of the HTTP API, with their OpenAPI schemas.
//!
//! Request bodies refuse unknown fields, so a misspelt option is an error rather than silently
//! ignored. Ids and times reuse the validating `evicortex-core` types, so a bad value is refused
//! while parsing, with the path of the field.

/// The responses every door gives, in the facade's one shape.
pub use evicortex::front_end::{
    AppendResponse, AppendedTurn, EraseResponse, NamespaceStatsResponse, VerifyResponse,
};
use evicortex::{EventTime, SessionId, TurnId};
use rmcp::schemars;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Body of `POST /v1/namespaces/{ns}/turns`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AppendRequest {
    /// The turns to append, as one atomic batch (at least one). Each is checked field by field by
    /// the same validator as the JSONL ingest format (duplicate keys refused at any depth).
    #[schema(value_type = Vec<TurnInput>)]
    #[serde(deserialize_with = "evicortex::front_end::deserialize_turn_objects")]
    pub turns: Vec<serde_json::Map<String, serde_json::Value>>,
}

/// One turn: the fields of the JSONL ingest format without `namespace`, which comes from the path.
#[derive(Debug, Clone, Deserialize, Serialize, ToSchema, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TurnInput {
    /// Session id inside the namespace (1 to 256 bytes, no control characters).
    #[schema(example = "2024-05-02-chat")]
    pub session: String,
    /// Index of the turn inside its session (0-based).
    #[schema(example = 0)]
    pub turn: u32,
    /// `user`, `assistant`, `system` or `tool`.
    #[schema(example = "user")]
    pub role: String,
    /// Speaker name, where known (omit rather than send an empty string).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The verbatim text (at most 1 MiB; never truncated).
    #[schema(example = "I moved to Lisbon in May.")]
    pub text: String,
    /// When it was said: RFC 3339 with an explicit offset, microsecond precision at most.
    #[schema(example = "2024-05-02T10:00:00+01:00")]
    pub time: String,
    /// Free-form source metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Body of `POST /v1/namespaces/{ns}/erase`: exactly one of the three targets.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EraseRequest {
    /// Erase every turn of this session.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub session: Option<SessionId>,
    /// Erase this one record (its id in the namespace, as append returned it).
    #[serde(default)]
    #[schema(value_type = Option<u64>)]
    pub record: Option<TurnId>,
    /// Erase every turn of the namespace (must be `true` when given).
    #[serde(default)]
    pub all: Option<bool>,
}

/// Response of `GET /v1/namespaces/{ns}/export`: the live turns of this namespace only, in
/// ledger order. Each is a line of `evicortex export --namespace NS`, byte for byte; an append
/// to `.../turns` takes them back once `namespace` is dropped (the path gives it).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ExportResponse {
    /// The namespace.
    pub namespace: String,
    /// The live turns, in ledger order (an unknown namespace has none).
    pub turns: Vec<ExportedTurn>,
}

/// One exported turn: a line of the JSONL ingest format, texts byte for byte. The fields of
/// [`TurnInput`], with the namespace.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ExportedTurn {
    /// The namespace (the one in the path).
    pub namespace: String,
    /// Session id inside the namespace.
    pub session: String,
    /// Index of the turn inside its session (0-based).
    pub turn: u32,
    /// `user`, `assistant`, `system` or `tool`.
    pub role: String,
    /// Speaker name, where the turn has one (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The verbatim text.
    pub text: String,
    /// When it was said: RFC 3339 with the offset it was given with.
    pub time: String,
    /// Source metadata, where the turn has any (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub meta: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Response of `GET /v1/namespaces`: the namespaces the calling key may read.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct NamespacesResponse {
    /// Whether the key is an admin key (every namespace, and `GET /v1/verify`).
    pub admin: bool,
    /// A namespace key: its own namespace alone. An admin key: every namespace in the store.
    pub namespaces: Vec<String>,
}

/// Response of `GET /v1/namespaces/{ns}/sessions`: the sessions of this namespace only.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionsResponse {
    /// The namespace.
    pub namespace: String,
    /// Sessions with at least one live turn, in order of their first turn's time.
    pub sessions: Vec<SessionSummary>,
}

/// One session of a namespace.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct SessionSummary {
    /// The session id.
    pub session: String,
    /// Live turns.
    pub turns: u64,
    /// The earliest turn's time (RFC 3339, with its offset).
    pub first: String,
    /// The latest turn's time (RFC 3339, with its offset).
    pub last: String,
}

/// Body of `POST /v1/namespaces/{ns}/compile`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompileRequest {
    /// The question to compile context for.
    pub query: String,
    /// Hard budget in reader tokens, counting all formatting.
    pub budget: u32,
    /// The reader's tokenizer, e.g. `o200k_base`.
    pub reader_tokenizer: String,
    /// Only evidence said at or before this time (RFC 3339 with offset); default: no limit.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub as_of: Option<EventTime>,
    /// Compiler options (candidate limits, fusion constants, reranker, expansion); every one that
    /// is given is recorded in the output.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub options: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Response of `GET /healthz`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct HealthResponse {
    /// `ok`.
    pub status: String,
    /// The server's version.
    pub version: String,
}
