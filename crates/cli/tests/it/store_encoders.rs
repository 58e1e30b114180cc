//! `evicortex encoders` as a real process: naming the store's encoders, refusing bad lists
//! without touching the stored one, and ingest, embed and compile using every encoder named.

use std::process::Output;

use crate::model_catalogue::expect_code;

/// `evicortex --store STORE ARGS...`.
fn evicortex(store: &std::path::Path, args: &[&str]) -> Output {
    let store = store.to_str().expect("a UTF-8 path");
    crate::model_catalogue::evicortex(&[&["--store", store], args].concat())
}

#[test]
fn the_named_encoders_embed_ingested_turns_and_compile_fuses_them() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let shown = expect_code(&evicortex(&store, &["encoders", "--json"]), 0);
    assert_eq!(shown.trim(), r#"{"encoders":["all-minilm-l6-v2"]}"#);

    let set = expect_code(
        &evicortex(&store, &["encoders", "--set", "all-minilm-l6-v2,all-mpnet-base-v2"]),
        0,
    );
    assert!(set.contains("leading  all-minilm-l6-v2\nfused    all-mpnet-base-v2"), "{set}");
    for bad in ["all-minilm-l6-v2,all-minilm-l6-v2", "all-minilm-l6-v2,nope", ""] {
        let out = expect_code(&evicortex(&store, &["encoders", "--set", bad]), 2);
        assert!(out.contains("--set"), "{out}");
    }
    let shown = expect_code(&evicortex(&store, &["encoders", "--json"]), 0);
    assert_eq!(shown.trim(), r#"{"encoders":["all-minilm-l6-v2","all-mpnet-base-v2"]}"#);

    let sample = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/sample-conversation.jsonl");
    let ingested = expect_code(&evicortex(&store, &["ingest", sample]), 0);
    assert!(ingested.contains("(sentence-transformers/all-MiniLM-L6-v2)"), "{ingested}");
    assert!(ingested.contains("(sentence-transformers/all-mpnet-base-v2)"), "{ingested}");
    let compiled = expect_code(
        &evicortex(
            &store,
            &[
                "compile",
                "--namespace",
                "alice",
                "--query",
                "Where does Biscuit go every morning?",
                "--budget",
                "400",
                "--reader-tokenizer",
                "o200k_base",
                "--json",
            ],
        ),
        0,
    );
    let context: serde_json::Value = serde_json::from_str(&compiled).unwrap();
    let also = &context["also_dense"][0];
    assert!(also["encoder"]["model"].as_str().unwrap().contains("all-mpnet-base-v2"), "{also}");
    assert_eq!(also["pending"], 0);
    assert!(compiled.contains("\"dense_2\""), "the fused list ranks the cited turns");
}

/// `embed TEXT` embeds with the store's leading encoder, and `--encoder NAME` with any catalogue
/// encoder, whatever the store names; an unknown name is a usage error naming the option.
#[test]
fn embed_text_uses_the_store_encoder_or_the_one_named() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let embedded = |args: &[&str]| -> serde_json::Value {
        let args = [&["embed", "--role", "query", "--json"], args, &["where did I move?"]].concat();
        serde_json::from_str(&expect_code(&evicortex(&store, &args), 0)).unwrap()
    };
    let model = |json: &serde_json::Value| json["model"].as_str().unwrap().to_owned();

    let default = embedded(&[]);
    assert_eq!(default["dimension"], 384);
    assert!(model(&default).contains("all-MiniLM-L6-v2"), "{default}");
    let named = embedded(&["--encoder", "all-mpnet-base-v2"]);
    assert_eq!(named["dimension"], 768);
    assert!(model(&named).contains("all-mpnet-base-v2"), "{named}");
    assert_eq!(named["vectors"][0]["vector"].as_array().unwrap().len(), 768);

    expect_code(&evicortex(&store, &["encoders", "--set", "all-mpnet-base-v2"]), 0);
    let leading = embedded(&[]);
    assert_eq!(leading["identity_digest"], named["identity_digest"]);
    let minilm = embedded(&["--encoder", "all-minilm-l6-v2"]);
    assert_eq!(minilm["identity_digest"], default["identity_digest"]);

    let out = expect_code(
        &evicortex(&store, &["embed", "--role", "query", "--encoder", "nope", "hello"]),
        2,
    );
    assert!(out.contains("--encoder nope"), "{out}");
    let out = expect_code(&evicortex(&store, &["embed", "--encoder", "all-mpnet-base-v2"]), 2);
    assert!(out.contains("<TEXT>"), "{out}");
}
