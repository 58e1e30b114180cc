use std::{path::PathBuf, process::Command};

use evicortex_embed::{
    CrossEncoder, CrossEncoderConfig, PairOverlength, VerifiedArtifacts, directory_digest,
};
use evicortex_rerank::{CrossEncoderReranker, MAX_RERANK_DEPTH, Reranker};

/// The small cross-encoder `bench/tiny_cross_encoder.py` writes with the bench venv.
fn tiny_cross_encoder() -> (CrossEncoder, serde_json::Value) {
    let venv = std::env::var_os("EVICORTEX_BENCH_VENV")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
            cache.join("evicortex/bench-venv")
        });
    let python = venv.join("bin/python");
    assert!(
        python.is_file(),
        "the reranker test generates its model with PyTorch: {} is missing; run \
         `bench/setup_venv.sh` (or set EVICORTEX_BENCH_VENV)",
        python.display()
    );
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("model");
    let reference = root.path().join("reference.json");
    let status = Command::new(&python)
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/tiny_cross_encoder.py"))
        .arg("--out-dir")
        .arg(&dir)
        .arg("--reference")
        .arg(&reference)
        .status()
        .unwrap();
    assert!(status.success(), "bench/tiny_cross_encoder.py failed");
    let reference: serde_json::Value =
        serde_json::from_str(&fs_err::read_to_string(&reference).unwrap()).unwrap();
    let artifacts =
        VerifiedArtifacts::open_local(&dir, "tiny", directory_digest(&dir).unwrap()).unwrap();
    let config = CrossEncoderConfig {
        max_tokens: reference["max_tokens"].as_u64().unwrap() as usize,
        overlength: PairOverlength::TruncatePassage,
    };
    (CrossEncoder::load(artifacts, config).unwrap(), reference)
}

#[test]
fn the_seam_records_the_raw_logits_and_refuses_more_than_its_depth() {
    let (encoder, reference) = tiny_cross_encoder();
    let reranker = CrossEncoderReranker::new(encoder);
    assert!(reranker.name().starts_with("cross-encoder:tiny@"), "{}", reranker.name());
    let pairs = reference["pairs"].as_array().unwrap();
    let question = pairs[0]["query"].as_str().unwrap();
    let passages: Vec<&str> = pairs
        .iter()
        .filter(|p| p["query"].as_str() == Some(question))
        .map(|p| p["passage"].as_str().unwrap())
        .collect();
    let scores = reranker.score(question, &passages).unwrap();
    let expected: Vec<f64> = pairs
        .iter()
        .filter(|p| p["query"].as_str() == Some(question))
        .map(|p| p["logit"].as_f64().unwrap())
        .collect();
    for (score, logit) in scores.iter().zip(&expected) {
        assert!((f64::from(*score) - logit).abs() <= 1e-4, "{score} vs {logit}");
    }
    let too_many = vec!["a passage"; MAX_RERANK_DEPTH + 1];
    let err = reranker.score(question, &too_many).unwrap_err();
    assert!(err.reason.contains("depth"), "{}", err.reason);
}
