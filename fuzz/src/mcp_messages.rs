//! MCP messages (`evicortex mcp`): a JSON-RPC message as rmcp decodes it, then a `tools/call`'s
//! arguments the way the tool router does (`serde_json::from_value` into the tool's argument
//! type) and the server's re-validation (into the HTTP DTO, then the turn validator). The first
//! byte picks a whole message or the arguments of one tool directly. Properties: no panic; a
//! refusal after the arguments parsed is a 400 or 422 naming a field.

use evicortex::front_end::turn_from_json;
use evicortex::{IngestOptions, Namespace};
use evicortex_server::{
    ApiError, AppendRequest, CompileRequest, EraseRequest, ForgetArgs, RecallArgs, RememberArgs,
    parse_json,
};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

fn check_refusal(err: &ApiError) {
    let status = err.status().as_u16();
    assert!(status == 400 || status == 422, "arguments refused with {status}: {err}");
    if status == 422 {
        assert!(err.field().is_some_and(|f| !f.is_empty()), "422 without a field: {err}");
    }
}

/// What the server does with a tool's parsed arguments before touching the store.
fn reparse<A: Serialize, T: DeserializeOwned>(args: &A) -> Option<T> {
    let bytes = serde_json::to_vec(args).expect("parsed arguments serialise");
    parse_json(&bytes).map_err(|e| check_refusal(&e)).ok()
}

fn call(tool: &str, arguments: Map<String, Value>) {
    let arguments = Value::Object(arguments);
    match tool {
        "remember" => {
            let Ok(args) = serde_json::from_value::<RememberArgs>(arguments) else { return };
            let Some(request) = reparse::<_, AppendRequest>(&args) else { return };
            let options = IngestOptions {
                default_namespace: Some(Namespace::new("fuzz").unwrap()),
                ..IngestOptions::default()
            };
            for (i, object) in request.turns.iter().enumerate() {
                if let Err(e) = turn_from_json(object, &options) {
                    assert!(!e.field.is_empty(), "turns[{i}]: a refusal without a field: {e}");
                }
            }
        }
        "recall" => {
            let Ok(args) = serde_json::from_value::<RecallArgs>(arguments) else { return };
            let _ = reparse::<_, CompileRequest>(&args);
        }
        "forget" => {
            let Ok(args) = serde_json::from_value::<ForgetArgs>(arguments) else { return };
            let _ = reparse::<_, EraseRequest>(&args);
        }
        _ => {}
    }
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    let tool = match which % 4 {
        0 => {
            let Ok(message) = serde_json::from_slice::<ClientJsonRpcMessage>(body) else { return };
            if let JsonRpcMessage::Request(request) = message
                && let ClientRequest::CallToolRequest(call_tool) = request.request
            {
                let params = call_tool.params;
                call(&params.name, params.arguments.unwrap_or_default());
            }
            return;
        }
        1 => "remember",
        2 => "recall",
        _ => "forget",
    };
    if let Ok(Value::Object(arguments)) = serde_json::from_slice(body) {
        call(tool, arguments);
    }
}
