//! `evicortex model` and `evicortex embed` as a real process: verification exit codes, one-text
//! embedding, the ingest hook and the resumable catch-up.

use std::{path::Path, process::Output};

fn evicortex(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_evicortex"));
    cmd.args(args).env_remove("EVICORTEX_HOME");
    for (key, value) in env {
        cmd.env(key, value);
    }
    cmd.output().expect("run evicortex")
}

#[track_caller]
fn expect_code(out: &Output, code: i32) -> (String, String) {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(code), "stdout:\n{stdout}\nstderr:\n{stderr}");
    (stdout, stderr)
}

/// The installed model directory; fails with the fetch command when it is absent.
fn installed_model() -> std::path::PathBuf {
    let out = evicortex(&["model", "path"], &[]);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "these tests need the pinned encoder: run `evicortex model fetch`\n{stderr}"
    );
    std::path::PathBuf::from(stdout.trim())
}

#[test]
fn model_verify_path_and_digest() {
    let dir = installed_model();
    let (stdout, _) = expect_code(&evicortex(&["model", "verify"], &[]), 0);
    assert!(stdout.starts_with("ok: 13 files"), "{stdout}");
    let (digest, _) = expect_code(&evicortex(&["model", "digest", dir.to_str().unwrap()], &[]), 0);
    assert_eq!(digest.trim(), "04b1622bdf2efd1182cf06be234900d203a263b6617ef5cc7919ce719d64fee1");

    let copy = tempfile::tempdir().unwrap();
    for entry in ["config.json", "tokenizer.json"] {
        fs_err::copy(dir.join(entry), copy.path().join(entry)).unwrap();
    }
    let (_, stderr) = expect_code(
        &evicortex(&["model", "verify", "--path", copy.path().to_str().unwrap()], &[]),
        4,
    );
    assert!(
        stderr.contains("missing") || stderr.contains("not in the pinned manifest"),
        "{stderr}"
    );
}

#[test]
fn a_missing_model_exits_5_naming_the_fetch_command() {
    let empty = tempfile::tempdir().unwrap();
    let env = [("EVICORTEX_MODELS_DIR", empty.path())];
    let (_, stderr) = expect_code(&evicortex(&["model", "path"], &env), 5);
    assert!(stderr.contains("evicortex model fetch"), "{stderr}");
    let (_, stderr) = expect_code(&evicortex(&["embed", "--role", "query", "hello"], &env), 5);
    assert!(stderr.contains("evicortex model fetch"), "{stderr}");
}

#[test]
fn embed_one_text_as_json_and_refuse_overlength() {
    installed_model();
    let (stdout, _) = expect_code(
        &evicortex(&["embed", "--role", "query", "--json", "where did I move in May?"], &[]),
        0,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["dimension"], 384);
    assert_eq!(json["role"], "query");
    assert_eq!(json["token_count"], 9);
    assert_eq!(json["vectors"][0]["vector"].as_array().unwrap().len(), 384);
    assert_eq!(json["identity_digest"].as_str().unwrap().len(), 64);

    let long = "word ".repeat(300);
    let (_, stderr) = expect_code(&evicortex(&["embed", "--role", "document", &long], &[]), 2);
    assert!(stderr.contains("302 tokens exceed"), "{stderr}");
    let (stdout, _) = expect_code(
        &evicortex(
            &["embed", "--role", "document", "--overlength", "window", "--json", &long],
            &[],
        ),
        0,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["vectors"].as_array().unwrap().len(), 2);
    assert_eq!(json["overlength"], "window:64");

    let (_, stderr) = expect_code(&evicortex(&["embed", "hello"], &[]), 2);
    assert!(stderr.contains("--role"), "{stderr}");
}

#[test]
fn ingest_embeds_new_turns_and_embed_catches_up_and_resumes() {
    installed_model();
    let store = tempfile::tempdir().unwrap();
    let store_arg = store.path().to_str().unwrap();
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample-conversation.jsonl");
    let (stdout, _) =
        expect_code(&evicortex(&["--store", store_arg, "ingest", "--no-embed", sample], &[]), 0);
    assert!(stdout.contains("embedding skipped"), "{stdout}");

    let (stdout, _) =
        expect_code(&evicortex(&["--store", store_arg, "embed", "--overlength", "window"], &[]), 0);
    assert!(stdout.starts_with("embedded "), "{stdout}");
    assert!(!stdout.starts_with("embedded 0 texts"), "{stdout}");
    let (stdout, _) =
        expect_code(&evicortex(&["--store", store_arg, "embed", "--overlength", "window"], &[]), 0);
    assert!(
        stdout.starts_with("embedded 0 texts"),
        "a second run resumes with nothing left: {stdout}"
    );
    assert!(store.path().join("embeddings.sqlite").is_file());

    let other = tempfile::tempdir().unwrap();
    let (stdout, _) = expect_code(
        &evicortex(&["--store", other.path().to_str().unwrap(), "ingest", sample], &[]),
        0,
    );
    assert!(stdout.contains("\nembedded "), "ingest embeds when the model is installed: {stdout}");
}

/// A store in a temporary directory into which `turns` (JSONL values) were ingested.
fn ingested(turns: &[serde_json::Value]) -> tempfile::TempDir {
    let store = tempfile::tempdir().unwrap();
    let input = store.path().join("turns.jsonl");
    let lines: Vec<String> = turns.iter().map(ToString::to_string).collect();
    fs_err::write(&input, lines.join("\n") + "\n").unwrap();
    let store_arg = store.path().to_str().unwrap();
    expect_code(&evicortex(&["--store", store_arg, "ingest", input.to_str().unwrap()], &[]), 0);
    store
}

/// `compile --json` of `query` in namespace `t` at `budget` o200k_base tokens, then `extra`.
fn compile_json<'a>(
    store_arg: &'a str,
    query: &'a str,
    budget: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![
        "--store",
        store_arg,
        "compile",
        "--namespace",
        "t",
        "--query",
        query,
        "--budget",
        budget,
        "--reader-tokenizer",
        "o200k_base",
        "--json",
    ];
    args.extend_from_slice(extra);
    args
}

/// B6: a turn over the encoder's maximum, embedded as windows by `embed --overlength window`,
/// is a dense candidate of a following `compile` (which takes the store's last policy), and the
/// advice to embed it as windows is not repeated.
#[test]
fn compile_uses_the_windowed_vectors_that_embed_wrote() {
    installed_model();
    let store = ingested(&[serde_json::json!({"namespace": "t", "session": "long", "turn": 0,
        "role": "user", "text": "word ".repeat(400), "time": "2024-01-01T00:00:00Z"})]);
    let store_arg = store.path().to_str().unwrap();
    let (stdout, _) =
        expect_code(&evicortex(&["--store", store_arg, "embed", "--overlength", "window"], &[]), 0);
    assert!(stdout.starts_with("embedded 1 texts"), "{stdout}");
    let (stdout, stderr) =
        expect_code(&evicortex(&compile_json(store_arg, "word", "1000", &[]), &[]), 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let item = &json["items"][0];
    assert!(!item["dense"].is_null(), "the windowed turn must be a dense candidate: {item}");
    assert!(!stderr.contains("--overlength window"), "the advice must not loop: {stderr}");
}

/// `compile --ann-from N` serves a namespace of at least N vectors from the sign sketch (or, with
/// `--ann-index graph`, from the HNSW graph it builds and persists), and says so in the
/// manifest; without the flags a namespace under the default threshold is scanned, and
/// `--ann-index exact` scans whatever the size.
#[test]
fn compile_with_ann_from_searches_the_sketch_or_graph_and_names_it() {
    installed_model();
    let turns: Vec<serde_json::Value> = (0..12)
        .map(|i| {
            serde_json::json!({"namespace": "t", "session": "s", "turn": i, "role": "user",
                "text": format!("note {i}: the blue kettle is on shelf {i}"),
                "time": "2024-01-01T00:00:00Z"})
        })
        .collect();
    let store = ingested(&turns);
    let store_arg = store.path().to_str().unwrap();
    let compile = |extra: &[&str]| {
        let args = compile_json(store_arg, "where is the kettle", "500", extra);
        let (stdout, stderr) = expect_code(&evicortex(&args, &[]), 0);
        let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        (json["dense_index"]["kind"].as_str().unwrap_or_default().to_owned(), stderr)
    };
    let (kind, stderr) = compile(&["--ann-from", "10", "--ann-index", "graph"]);
    assert_eq!(kind, "hnsw", "{stderr}");
    assert!(stderr.contains("HNSW graph for namespaces of at least 10 vectors"), "{stderr}");
    assert!(store.path().join("vector-index").is_dir());
    assert_eq!(compile(&["--ann-from", "13", "--ann-index", "graph"]).0, "exact", "12 < 13");
    assert_eq!(compile(&[]).0, "exact", "12 vectors are under the default threshold");
    let (kind, stderr) = compile(&["--ann-from", "10"]);
    assert_eq!(kind, "sketch", "{stderr}");
    assert!(stderr.contains("the sign sketch (1000 candidates"), "{stderr}");
    assert_eq!(compile(&["--ann-from", "10", "--ann-index", "sketch"]).0, "sketch");
    assert_eq!(compile(&["--ann-from", "13", "--ann-index", "sketch"]).0, "exact");
    let (kind, stderr) = compile(&["--ann-index", "exact"]);
    assert_eq!(kind, "exact", "{stderr}");
    assert!(stderr.contains("an exact scan whatever the size"), "{stderr}");
    let args = compile_json(store_arg, "q", "500", &["--ann-from", "10", "--ann-index", "exact"]);
    let (_, stderr) = expect_code(&evicortex(&args, &[]), 2);
    assert!(stderr.contains("--ann-from: --ann-index exact"), "{stderr}");
    let out = evicortex(
        &[
            "--store",
            "postgres://127.0.0.1:1/x",
            "compile",
            "--namespace",
            "t",
            "--query",
            "q",
            "--budget",
            "500",
            "--reader-tokenizer",
            "o200k_base",
            "--ann-from",
            "10",
        ],
        &[],
    );
    let (_, stderr) = expect_code(&out, 2);
    assert!(stderr.contains("--ann-from: a PostgreSQL store"), "{stderr}");
}

/// EVICORTEX_HOME names the store and nothing else: with it set (and no models under it),
/// ingest still embeds with the installed model and compile runs dense, as with `--store`.
#[test]
fn evicortex_home_names_the_store_only() {
    installed_model();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample-conversation.jsonl");
    let env = [("EVICORTEX_HOME", home.as_path())];
    let (stdout, _) = expect_code(&evicortex(&["ingest", sample], &env), 0);
    assert!(stdout.contains("\nembedded "), "ingest embeds under EVICORTEX_HOME: {stdout}");
    assert!(home.join("ledger.sqlite").is_file());
    assert!(!home.join("models").exists());
    let (stdout, _) = expect_code(
        &evicortex(
            &[
                "compile",
                "--namespace",
                "alice",
                "--query",
                "dog's name",
                "--budget",
                "200",
                "--reader-tokenizer",
                "o200k_base",
                "--json",
            ],
            &env,
        ),
        0,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json["config"]["dense"]["mode"], "on", "{json}");
}
