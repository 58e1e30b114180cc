//! `evicortex serve` and `evicortex mcp` on a store whose ledger is a PostgreSQL database, as
//! real processes: what they append is compiled back (dense candidates from pgvector),
//! erasure takes it out, shutdown is clean and the ledger verifies. Needs a server:
//! `scripts/postgres start`, then export the URL it prints as EVICORTEX_TEST_POSTGRES_URL.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use serde_json::{Value, json};

use crate::cli::{sigterm, spawn_serve};
use crate::test_db::TestDb;

/// `evicortex --store URL` with the derived files in `derived`.
pub(crate) fn evicortex(url: &str, derived: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_evicortex"));
    command.arg("--store").arg(url).env("EVICORTEX_DERIVED_DIR", derived);
    command
}

pub(crate) fn ok(mut command: Command) -> String {
    let out = command.output().expect("run evicortex");
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{command:?} failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

const TURNS: &str = r#"[
    {"session": "s1", "turn": 0, "role": "user", "text": "My sister Ana lives in Porto.", "time": "2024-05-02T10:00:00+01:00"},
    {"session": "s1", "turn": 1, "role": "assistant", "text": "Noted: Ana lives in Porto.", "time": "2024-05-02T10:00:05+01:00"},
    {"session": "s2", "turn": 0, "role": "user", "text": "I bought a cello.", "time": "2024-06-01T09:00:00Z"}
]"#;

#[test]
fn serve_on_a_postgres_store_appends_compiles_from_pgvector_erases_and_exits_cleanly() {
    let db = TestDb::new();
    let derived = tempfile::tempdir().unwrap();
    let mut keys = evicortex(&db.url, derived.path());
    keys.args(["keys", "create", "--namespace", "alice"]);
    let key = ok(keys).lines().last().expect("a key").trim().to_owned();

    let mut serve = evicortex(&db.url, derived.path());
    serve.args(["serve", "--listen", "127.0.0.1:0"]).stderr(Stdio::inherit());
    let (mut server, base) = spawn_serve(serve);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = reqwest::Client::builder().timeout(Duration::from_secs(120)).build().unwrap();
    let post = |path: &str, body: Value| {
        let request = client.post(format!("{base}{path}")).bearer_auth(&key).json(&body);
        runtime.block_on(async {
            let response = request.send().await.expect("request");
            let status = response.status();
            let body: Value = response.json().await.expect("json body");
            assert!(status.is_success(), "{path}: {status} {body}");
            body
        })
    };
    let turns: Value = serde_json::from_str(TURNS).unwrap();
    let appended = post("/v1/namespaces/alice/turns", json!({ "turns": turns }));
    assert_eq!(appended["appended"], 3, "{appended}");

    let ask = json!({"query": "Where does my sister live?", "budget": 200, "reader_tokenizer": "o200k_base"});
    // The server embeds appended turns in the background: compile until none waits.
    let started = Instant::now();
    let context = loop {
        let context = post("/v1/namespaces/alice/compile", ask.clone());
        if context["coverage"]["dense_pending"] == 0 {
            break context;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "turns still pending: {context}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let kind = context["dense_index"]["kind"].as_str().unwrap_or_default().to_owned();
    assert!(kind.starts_with("pgvector"), "{context}");
    assert!(context["text"].as_str().unwrap().contains("Porto"), "{context}");

    let erased = post("/v1/namespaces/alice/erase", json!({"session": "s1"}));
    assert_eq!(erased["erased"].as_array().map(Vec::len), Some(2), "{erased}");
    let after = post("/v1/namespaces/alice/compile", ask);
    assert!(!after["text"].as_str().unwrap().contains("Porto"), "erased text came back: {after}");

    sigterm(&server);
    let status = server.wait().expect("wait for the server");
    assert!(status.success(), "server exit after SIGTERM: {status}");

    let mut verify = evicortex(&db.url, derived.path());
    verify.args(["verify", "--json"]);
    let report: Value = serde_json::from_str(&ok(verify)).unwrap();
    assert_eq!((report["ok"].clone(), report["erased_turns"].clone()), (json!(true), json!(2)));
}

fn args(value: Value) -> rmcp::model::JsonObject {
    value.as_object().expect("object").clone()
}

#[test]
fn mcp_on_a_postgres_store_remembers_recalls_from_pgvector_and_forgets() {
    // The test database is made with the blocking client, outside any async runtime.
    let db = TestDb::new();
    let derived = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(mcp_session(&db, derived.path()));
    let mut verify = evicortex(&db.url, derived.path());
    verify.arg("verify");
    ok(verify);
}

async fn mcp_session(db: &TestDb, derived: &Path) {
    let url = db.url.clone();
    let derived_path = derived.to_owned();
    let command = tokio::process::Command::new(env!("CARGO_BIN_EXE_evicortex")).configure(|cmd| {
        cmd.arg("--store").arg(&url).env("EVICORTEX_DERIVED_DIR", &derived_path).args([
            "mcp",
            "--namespace",
            "agent-7",
        ]);
    });
    let client =
        ().serve(TokioChildProcess::new(command).expect("spawn")).await.expect("mcp handshake");
    let call = |name: &'static str, arguments: Value| {
        let client = &client;
        async move {
            let result = client
                .call_tool(CallToolRequestParams::new(name).with_arguments(args(arguments)))
                .await
                .expect("call tool");
            assert_eq!(result.is_error, Some(false), "{name}: {result:?}");
            result.structured_content.expect("structured result")
        }
    };
    let turns: Value = serde_json::from_str(TURNS).unwrap();
    let remembered = call("remember", json!({ "turns": turns })).await;
    assert_eq!(remembered["appended"], 3, "{remembered}");

    let ask = json!({"query": "Where does my sister live?", "budget": 200, "reader_tokenizer": "o200k_base"});
    let started = Instant::now();
    let context = loop {
        let context = call("recall", ask.clone()).await;
        if context["coverage"]["dense_pending"] == 0 {
            break context;
        }
        assert!(started.elapsed() < Duration::from_secs(120), "turns still pending: {context}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let kind = context["dense_index"]["kind"].as_str().unwrap_or_default().to_owned();
    assert!(kind.starts_with("pgvector"), "{context}");
    assert!(context.to_string().contains("Porto"), "{context}");

    let forgot = call("forget", json!({"session": "s1"})).await;
    assert_eq!(forgot["erased"].as_array().map(Vec::len), Some(2), "{forgot}");
    let after = call("recall", ask).await;
    assert!(!after.to_string().contains("Porto"), "forgotten text came back: {after}");
    client.cancel().await.expect("close the session");
}

#[test]
fn the_answer_cache_of_a_postgres_store_defaults_to_its_derived_directory() {
    let db = TestDb::new();
    let derived = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let file = elsewhere.path().join("answers.jsonl");
    fs_err::write(&file, "").unwrap();
    let mut import = evicortex(&db.url, derived.path());
    import.args(["eval", "answers", "import", "--file"]).arg(&file);
    let out = ok(import);
    let cache = derived.path().join("answers.sqlite");
    assert!(out.contains(&format!("imported 0 answers ({} <->", cache.display())), "{out}");
    assert!(cache.exists(), "{out}");
    let mut export = evicortex(&db.url, derived.path());
    export.args(["eval", "answers", "export", "--file"]).arg(&file);
    let out = ok(export);
    assert!(out.contains(&format!("exported 0 answers ({} <->", cache.display())), "{out}");
}
