//! `evicortex mcp` as a real child process, driven by the official Rust MCP client (rmcp) over
//! its stdin/stdout: handshake, tool listing, remember, recall, forget, and refused arguments.

use std::path::Path;

use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Value, json};

/// `evicortex --store STORE mcp MCP_ARGS` as a child process, once the handshake is done.
async fn mcp(store: &Path, mcp_args: &[&str]) -> RunningService<RoleClient, ()> {
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_evicortex")).configure(|cmd| {
        cmd.arg("--store").arg(store).arg("mcp").args(mcp_args);
    });
    ().serve(TokioChildProcess::new(command).expect("spawn")).await.expect("mcp handshake")
}

fn args(value: Value) -> rmcp::model::JsonObject {
    value.as_object().expect("object").clone()
}

#[tokio::test]
async fn mcp_client_handshake_and_tools_over_stdio() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let client = mcp(&store, &["--namespace", "agent-7"]).await;

    let info = client.peer_info().expect("server info after the handshake");
    let server_info = info.server_info.clone().expect("server info in the handshake");
    assert_eq!(server_info.name, "evicortex");
    let mut tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("list tools")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    tools.sort();
    assert_eq!(tools, ["answer", "forget", "recall", "remember"]);

    let remembered = client
        .call_tool(CallToolRequestParams::new("remember").with_arguments(args(json!({"turns": [
            {"session": "s1", "turn": 0, "role": "user", "text": "My sister Ana lives in Porto.", "time": "2024-05-02T10:00:00+01:00"},
            {"session": "s1", "turn": 1, "role": "assistant", "text": "Noted: Ana lives in Porto.", "time": "2024-05-02T10:00:05+01:00"},
            {"session": "s2", "turn": 0, "role": "user", "text": "I bought a cello.", "time": "2024-06-01T09:00:00Z"}
        ]}))))
        .await
        .expect("call remember");
    assert_eq!(remembered.is_error, Some(false), "{remembered:?}");
    let body = remembered.structured_content.expect("structured result");
    assert_eq!(body["appended"], 3, "{body}");

    let refused = client
        .call_tool(CallToolRequestParams::new("remember").with_arguments(args(json!({"turns": [
            {"session": "s3", "turn": 0, "role": "user", "text": "x", "time": "yesterday"}
        ]}))))
        .await
        .expect("call remember");
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    assert_eq!(refused.structured_content.expect("error body")["field"], "turns[0].time");

    let recalled = client
        .call_tool(CallToolRequestParams::new("recall").with_arguments(args(json!({
            "query": "Where does my sister live?", "budget": 200, "reader_tokenizer": "o200k_base"
        }))))
        .await
        .expect("call recall");
    assert_eq!(recalled.is_error, Some(false), "{recalled:?}");
    let context = recalled.structured_content.expect("compiled context").to_string();
    assert!(context.contains("Porto"), "{context}");

    let forgot = client
        .call_tool(
            CallToolRequestParams::new("forget").with_arguments(args(json!({"session": "s1"}))),
        )
        .await
        .expect("call forget");
    assert_eq!(forgot.is_error, Some(false), "{forgot:?}");
    assert_eq!(
        forgot.structured_content.expect("result")["erased"].as_array().map(Vec::len),
        Some(2)
    );

    let after = client
        .call_tool(CallToolRequestParams::new("recall").with_arguments(args(json!({
            "query": "Where does my sister live?", "budget": 200, "reader_tokenizer": "o200k_base"
        }))))
        .await
        .expect("call recall");
    let context = after.structured_content.expect("compiled context").to_string();
    assert!(!context.contains("Porto"), "forgotten text came back: {context}");

    client.cancel().await.expect("close the session");

    let verify = std::process::Command::new(env!("CARGO_BIN_EXE_evicortex"))
        .arg("--store")
        .arg(&store)
        .arg("verify")
        .output()
        .expect("run verify");
    assert!(verify.status.success(), "verify: {}", String::from_utf8_lossy(&verify.stderr));
}

/// `evicortex mcp --reader`: the `answer` tool reads with the real smallest reader; without a
/// reader the tool says how to start one.
#[tokio::test(flavor = "multi_thread")]
async fn answer_tool_reads_with_the_servers_reader() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let client = mcp(
        &store,
        &["--namespace", "agent-7", "--lexical-only", "--reader", "smollm2-135m-instruct-q4_1"],
    )
    .await;
    let remembered = client
        .call_tool(CallToolRequestParams::new("remember").with_arguments(args(json!({"turns": [
            {"session": "s1", "turn": 0, "role": "user", "text": "My sister lives in Porto.",
             "time": "2024-05-02T10:00:00Z"}
        ]}))))
        .await
        .expect("call remember");
    assert_eq!(remembered.is_error, Some(false), "{remembered:?}");
    let answered = client
        .call_tool(CallToolRequestParams::new("answer").with_arguments(args(json!({
            "query": "Where does my sister live?", "budget": 200, "max_new_tokens": 4
        }))))
        .await
        .expect("call answer");
    assert_eq!(answered.is_error, Some(false), "{answered:?}");
    let body = answered.structured_content.expect("answer report");
    assert_eq!(body["answer"]["reader"]["name"], "smollm2-135m-instruct-q4_1", "{body}");
    assert!(body["answer"]["generated_tokens"].as_u64().unwrap() <= 4, "{body}");
    assert!(body["context"]["text"].as_str().unwrap().contains("Porto"), "{body}");
    let refused = client
        .call_tool(CallToolRequestParams::new("answer").with_arguments(args(json!({
            "query": "Where does my sister live?", "budget": 100000
        }))))
        .await
        .expect("call answer");
    assert_eq!(refused.is_error, Some(true), "{refused:?}");
    let error = refused.structured_content.expect("error body");
    assert_eq!(error["field"], "budget", "{error}");
    client.cancel().await.expect("close the session");
}

/// The same question on the same store compiles the same context at every door: the MCP
/// `answer` tool (the HTTP route's code) and `evicortex answer`, each with its defaults (dense
/// retrieval with the store's encoder), give the reader the same context.
#[tokio::test(flavor = "multi_thread")]
async fn answer_compiles_the_same_context_as_the_command_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    // Ingested and embedded first, so that neither door sees a turn without its vector.
    crate::cli::ok(&store, &["ingest", crate::cli::sample().to_str().unwrap()]);
    let question = "What is my dog's name?";
    let client =
        mcp(&store, &["--namespace", "alice", "--reader", "smollm2-135m-instruct-q4_1"]).await;
    let answered = client
        .call_tool(CallToolRequestParams::new("answer").with_arguments(args(json!({
            "query": question, "budget": 300, "max_new_tokens": 4
        }))))
        .await
        .expect("call answer");
    assert_eq!(answered.is_error, Some(false), "{answered:?}");
    let mcp = answered.structured_content.expect("answer report");
    client.cancel().await.expect("close the session");

    let out = crate::cli::ok(
        &store,
        &[
            "answer",
            "--namespace",
            "alice",
            "--reader",
            "smollm2-135m-instruct-q4_1",
            "--query",
            question,
            "--budget",
            "300",
            "--max-new-tokens",
            "4",
            "--json",
        ],
    );
    let cli: Value = serde_json::from_str(&out).expect("answer --json");
    // The context block the reader read, its tokens and support score, field for field.
    assert_eq!(cli["context"], mcp["context"], "the doors compiled different contexts");
    assert_eq!(cli["compiler_abstained"], mcp["compiler_abstained"]);
    assert!(cli["context"]["text"].as_str().unwrap().contains("Biscuit"), "{cli}");
}
