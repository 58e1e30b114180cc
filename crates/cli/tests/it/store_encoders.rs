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
