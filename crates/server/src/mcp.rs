//! The MCP tool server (stdio): `remember`, `recall`, `answer` (with a reader) and `forget` over
//! one namespace.
//!
//! An MCP server is started by an agent host for one user, so the namespace is fixed on the
//! command line and no tool can name another one. Tool arguments go through the same validation
//! as the HTTP bodies; a refused call is a tool error (`isError: true`) whose structured content is
//! the same `{error, field}` object the HTTP API returns.

use std::sync::Arc;

use evicortex::{Memory, Namespace};
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, schemars, tool, tool_handler, tool_router};
use serde::{Deserialize, Serialize};

use crate::dto::{AppendRequest, CompileRequest, EraseRequest, TurnInput};
use crate::{
    ApiError, RequestQueues, ServerConfig as Limits, answer_request::AnswerReader,
    compile_request::Readers, json_body::parse_json, operations,
};

/// Arguments of the `remember` tool.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RememberArgs {
    /// The turns to store, as one atomic batch.
    pub turns: Vec<TurnInput>,
}

/// Arguments of the `recall` tool.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// The question to recall evidence for.
    pub query: String,
    /// Hard budget in the reader's tokens for the whole context block.
    pub budget: u32,
    /// The reader's tokenizer: `o200k_base` (GPT-4o class) or `cl100k_base`.
    pub reader_tokenizer: String,
    /// Only evidence said at or before this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// Compile settings that differ from the server's default, e.g. `{"rrf_k": 5.0}` (the
    /// compiled context records the full configuration); unknown settings are refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Arguments of the `answer` tool.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AnswerArgs {
    /// The question.
    pub query: String,
    /// Hard budget of the compiled context in the server reader's own tokens.
    pub budget: u32,
    /// Only evidence said at or before this RFC 3339 time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    /// Most tokens the reader may generate (default 64, at most 512).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_new_tokens: Option<u32>,
    /// Compile settings that differ from the server's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub options: Option<serde_json::Map<String, serde_json::Value>>,
}

/// Arguments of the `forget` tool: exactly one of the three.
#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// Erase every turn of this session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Erase this one record (an id returned by `remember`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<u64>,
    /// Erase everything in this namespace (must be `true` when given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all: Option<bool>,
}

/// The MCP server of one namespace.
#[derive(Debug, Clone)]
pub struct McpServer {
    memory: Arc<Memory>,
    readers: Arc<Readers>,
    namespace: Namespace,
    limits: Limits,
    reader: Option<AnswerReader>,
    /// `answer` and `recall` wait here as HTTP's answers and compiles do; a full queue is a tool
    /// error saying when to retry.
    queues: RequestQueues,
    tool_router: ToolRouter<McpServer>,
}

#[tool_router]
impl McpServer {
    /// A server exposing `namespace` of `memory` (hybrid retrieval when the memory has an
    /// encoder, BM25 only otherwise).
    pub fn new(memory: Arc<Memory>, namespace: Namespace, limits: Limits) -> McpServer {
        let readers = Arc::new(Readers::default());
        let tool_router = McpServer::tool_router();
        let queues = RequestQueues::new(&limits);
        McpServer { memory, readers, namespace, limits, reader: None, queues, tool_router }
    }

    /// The same server, answering the `answer` tool with `reader`.
    pub fn with_reader(mut self, reader: AnswerReader) -> McpServer {
        self.reader = Some(reader);
        self
    }

    #[tool(description = "Answer a question from long-term memory: compiles the cited turns that \
                       support it within a budget of the reader's own tokens, has the server's \
                       reader read them, and returns its answer with the record ids it cited, or \
                       an abstention when memory does not support an answer.")]
    async fn answer(
        &self,
        Parameters(args): Parameters<AnswerArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let reader = match crate::answer_request::served_reader(self.reader.as_ref()) {
            Ok(reader) => Some(reader.clone()),
            Err(refusal) => return Ok(tool_result::<()>(Err(refusal))),
        };
        let ticket = match self.queues.answer().await {
            Ok(ticket) => ticket,
            Err(refusal) => return Ok(tool_result::<()>(Err(refusal))),
        };
        self.run(move |memory, _, namespace| {
            let _ticket = ticket;
            let request: crate::answer_request::AnswerRequest = reparse(&args)?;
            crate::answer_request::answer(memory, reader.as_ref(), namespace, request)
        })
        .await
    }

    #[tool(
        description = "Store conversation turns verbatim in long-term memory (atomic and durable). \
                       Re-sending an identical turn is a no-op."
    )]
    async fn remember(
        &self,
        Parameters(args): Parameters<RememberArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let max_turns = self.limits.max_turns_per_request;
        self.run(move |memory, _, namespace| {
            let request: AppendRequest = reparse(&args)?;
            operations::append(memory, namespace, request, max_turns)
        })
        .await
    }

    #[tool(
        description = "Recall what was said: the original turns relevant to a question, cited and \
                       packed within a budget of the reader's tokens (or an abstention when memory \
                       does not support an answer). Returns the compiled context: `text` to put in \
                       the prompt, plus the items, exclusions and configuration."
    )]
    async fn recall(
        &self,
        Parameters(args): Parameters<RecallArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        let ticket = match self.queues.compile().await {
            Ok(ticket) => ticket,
            Err(refusal) => return Ok(tool_result::<()>(Err(refusal))),
        };
        self.run(move |memory, readers, namespace| {
            let _ticket = ticket;
            let request: CompileRequest = reparse(&args)?;
            operations::compile(memory, readers, namespace, request)
        })
        .await
    }

    #[tool(
        description = "Erase turns from long-term memory: a whole session, one record, or everything. \
                       The text and everything derived from it are removed."
    )]
    async fn forget(
        &self,
        Parameters(args): Parameters<ForgetArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        self.run(move |memory, _, namespace| {
            let request: EraseRequest = reparse(&args)?;
            operations::erase(memory, namespace, request)
        })
        .await
    }
}

impl McpServer {
    /// Runs `call` on a blocking thread and renders its result as a tool result.
    async fn run<T, F>(&self, call: F) -> Result<CallToolResult, ErrorData>
    where
        T: Serialize + Send + 'static,
        F: FnOnce(&Memory, &Readers, &Namespace) -> Result<T, ApiError> + Send + 'static,
    {
        let memory = Arc::clone(&self.memory);
        let readers = Arc::clone(&self.readers);
        let namespace = self.namespace.clone();
        let outcome = tokio::task::spawn_blocking(move || call(&memory, &readers, &namespace))
            .await
            .map_err(|e| ErrorData::internal_error(format!("store task failed: {e}"), None))?;
        Ok(tool_result(outcome))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for McpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("evicortex", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "Long-term memory for namespace {}. Call `remember` with each new turn, `recall` \
                 before answering to get cited context within a token budget (or `answer`, when \
                 this server has a reader, for the answer itself), `forget` to erase.",
                self.namespace
            ))
    }
}

/// Serves `server` on this process's stdin and stdout until the client disconnects.
pub async fn serve_mcp_stdio(server: McpServer) -> Result<(), std::io::Error> {
    let running = server
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| std::io::Error::other(format!("mcp handshake: {e}")))?;
    running.waiting().await.map_err(|e| std::io::Error::other(format!("mcp service: {e}")))?;
    Ok(())
}

/// Re-reads tool arguments through the HTTP body types, so that both front ends validate alike
/// and errors carry the same field paths.
fn reparse<A: Serialize, T: serde::de::DeserializeOwned>(args: &A) -> Result<T, ApiError> {
    let bytes = serde_json::to_vec(args)
        .map_err(|e| ApiError::MalformedJson { field: None, message: e.to_string() })?;
    parse_json(&bytes)
}

fn tool_result<T: Serialize>(outcome: Result<T, ApiError>) -> CallToolResult {
    let rendered = match &outcome {
        Ok(value) => serde_json::to_value(value),
        Err(err) => serde_json::to_value(err.body()),
    };
    match (outcome.is_ok(), rendered) {
        (true, Ok(value)) => CallToolResult::structured(value),
        (false, Ok(value)) => CallToolResult::structured_error(value),
        (_, Err(e)) => CallToolResult::structured_error(serde_json::json!({
            "error": format!("rendering the result: {e}"),
            "field": null,
        })),
    }
}
