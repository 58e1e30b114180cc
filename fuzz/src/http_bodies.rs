//! The HTTP request bodies, through the server's own deserialisation (`parse_json` into the DTOs)
//! and the checks the handlers then make: the turn validator for appends, the compile options on
//! the server's default configuration and a real compile over a small store, the erase target.
//! The first byte picks the body. Properties: no panic; a refused body is a 400 or 422 that names
//! a field (422 always does); an accepted turn round-trips through its JSON form.

use std::sync::OnceLock;

use evicortex::front_end::{apply_compile_options, turn_from_json};
use evicortex::{
    CompileConfig, CompileQuery, CompileRequest as MemoryCompileRequest, DenseConfig,
    IngestOptions, Memory, Namespace, TokenBudget, reader_tokenizer,
};
use evicortex_server::{ApiError, AppendRequest, CompileRequest, EraseRequest, parse_json};

pub(crate) struct Store {
    _dir: tempfile::TempDir,
    pub(crate) memory: Memory,
}

/// A lexical-only store with a few turns, opened once (as a server opens it once).
pub(crate) fn store() -> &'static Store {
    static STORE: OnceLock<Store> = OnceLock::new();
    STORE.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let memory = Memory::open(dir.path()).unwrap();
        let lines = [
            r#"{"namespace":"fuzz","session":"s1","turn":0,"role":"user","text":"I moved to Lisbon in May.","time":"2024-05-02T10:00:00+01:00"}"#,
            r#"{"namespace":"fuzz","session":"s1","turn":1,"role":"assistant","text":"Lisbon is lovely in spring.","time":"2024-05-02T10:00:05+01:00"}"#,
            r#"{"namespace":"fuzz","session":"s2","turn":0,"role":"user","speaker":"Ana","text":"My sister visits me in June.","time":"2024-06-01T09:00:00Z"}"#,
        ];
        let turns =
            evicortex::parse_jsonl("seed", lines.join("\n").as_bytes(), &IngestOptions::default())
                .unwrap();
        memory.append(&turns).unwrap();
        Store { _dir: dir, memory }
    })
}

fn namespace() -> Namespace {
    Namespace::new("fuzz").unwrap()
}

/// A refused body is a client error, and an unprocessable one names its field.
fn check_refusal(err: &ApiError) {
    let status = err.status().as_u16();
    assert!(status == 400 || status == 422, "a body refused with {status}: {err}");
    if status == 422 {
        assert!(err.field().is_some_and(|f| !f.is_empty()), "422 without a field: {err}");
    }
}

fn append(body: &[u8]) {
    let request: AppendRequest = match parse_json(body) {
        Ok(request) => request,
        Err(err) => return check_refusal(&err),
    };
    let options =
        IngestOptions { default_namespace: Some(namespace()), ..IngestOptions::default() };
    for object in &request.turns {
        let Ok(turn) = turn_from_json(object, &options) else { continue };
        let line = evicortex::front_end::export_line(&turn);
        let again: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(&line).unwrap();
        let again = turn_from_json(&again, &options)
            .unwrap_or_else(|e| panic!("an accepted turn is refused as JSON: {e}\n{line}"));
        assert_eq!(turn, again, "a turn changed through its JSON form");
    }
}

fn compile(body: &[u8]) {
    let request: CompileRequest = match parse_json(body) {
        Ok(request) => request,
        Err(err) => return check_refusal(&err),
    };
    let defaults = CompileConfig::hybrid(evicortex::DEFAULT_TOP_N, DenseConfig::Off);
    let config = match &request.options {
        None => defaults,
        Some(options) => match apply_compile_options(&defaults, options) {
            Ok(config) => config,
            Err(_) => return,
        },
    };
    // Loading a tokenizer by path is not what a request may do: the server accepts only these.
    if !["o200k_base", "cl100k_base"].contains(&request.reader_tokenizer.as_str()) {
        return;
    }
    let reader = reader_tokenizer(&request.reader_tokenizer).unwrap();
    let query = CompileQuery {
        namespace: namespace(),
        question: request.query,
        as_of: request.as_of,
        budget: TokenBudget::new(request.budget),
    };
    let compile = MemoryCompileRequest {
        query: &query,
        config: &config,
        reader: reader.as_ref(),
        query_vectors: &[],
    };
    if let Ok(context) = store().memory.compile(&compile) {
        serde_json::to_value(&context).expect("a compiled context renders as JSON");
    }
}

fn erase(body: &[u8]) {
    match parse_json::<EraseRequest>(body) {
        Ok(request) => {
            let _ = (request.session, request.record, request.all);
        }
        Err(err) => check_refusal(&err),
    }
}

fn options(body: &[u8]) {
    let Ok(serde_json::Value::Object(options)) = serde_json::from_slice(body) else { return };
    let defaults = CompileConfig::hybrid(evicortex::DEFAULT_TOP_N, DenseConfig::Off);
    match apply_compile_options(&defaults, &options) {
        Ok(config) => {
            // What is accepted is recorded in the output: it must apply again unchanged.
            let serde_json::Value::Object(recorded) = serde_json::to_value(&config).unwrap() else {
                panic!("a configuration renders as an object")
            };
            let again = apply_compile_options(&defaults, &recorded)
                .unwrap_or_else(|e| panic!("a recorded configuration is refused: {e}"));
            assert_eq!(
                serde_json::to_value(&again).unwrap(),
                serde_json::to_value(&config).unwrap()
            );
        }
        Err(err) => {
            let _ = err.field();
            assert!(!err.to_string().is_empty());
        }
    }
}

/// One input (what libFuzzer calls the target with): panics on a violated property.
pub fn run(data: &[u8]) {
    let Some((&which, body)) = data.split_first() else { return };
    match which % 4 {
        0 => append(body),
        1 => compile(body),
        2 => erase(body),
        _ => options(body),
    }
}
