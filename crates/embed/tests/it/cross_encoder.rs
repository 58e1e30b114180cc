//! The cross-encoder against transformers, on a small BERT sequence classifier with random
//! weights that `bench/tiny_cross_encoder.py` writes with the bench venv (nothing generated is
//! committed). Loaded the way a user's own model is: a directory and its recorded digest.

use std::{path::PathBuf, process::Command, sync::OnceLock};

use evicortex_embed::{
    ArtifactError, CrossEncoder, CrossEncoderConfig, EmbedError, PairOverlength, VerifiedArtifacts,
    directory_digest,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    max_tokens: usize,
    pairs: Vec<Pair>,
}

#[derive(Deserialize)]
struct Pair {
    query: String,
    passage: String,
    tokens: usize,
    logit: f32,
}

/// The bench venv's python: `$EVICORTEX_BENCH_VENV`, else the user's cache.
fn bench_python() -> PathBuf {
    let venv = match std::env::var_os("EVICORTEX_BENCH_VENV").filter(|v| !v.is_empty()) {
        Some(venv) => PathBuf::from(venv),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cache"));
            cache.join("evicortex/bench-venv")
        }
    };
    venv.join("bin/python")
}

/// Generates the tiny model once per test run; fails with how to make the venv.
fn tiny_model() -> &'static (PathBuf, Reference) {
    static MODEL: OnceLock<(PathBuf, Reference)> = OnceLock::new();
    MODEL.get_or_init(|| {
        let python = bench_python();
        assert!(
            python.is_file(),
            "the cross-encoder test generates its model with PyTorch: {} is missing; run \
             `bench/setup_venv.sh` (or set EVICORTEX_BENCH_VENV)",
            python.display()
        );
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("tiny-cross-encoder");
        let _ = fs_err::remove_dir_all(&root);
        let dir = root.join("model");
        let reference = root.join("reference.json");
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../bench/tiny_cross_encoder.py");
        let output = Command::new(&python)
            .arg(&script)
            .arg("--out-dir")
            .arg(&dir)
            .arg("--reference")
            .arg(&reference)
            .output()
            .expect("run the generator");
        assert!(
            output.status.success(),
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&output.stderr)
        );
        let reference: Reference =
            serde_json::from_str(&fs_err::read_to_string(&reference).unwrap()).unwrap();
        (dir, reference)
    })
}

fn load(overlength: PairOverlength) -> CrossEncoder {
    let (dir, reference) = tiny_model();
    let digest = directory_digest(dir).unwrap();
    let artifacts = VerifiedArtifacts::open_local(dir, "tiny-cross-encoder", digest).unwrap();
    CrossEncoder::load(
        artifacts,
        CrossEncoderConfig { max_tokens: reference.max_tokens, overlength },
    )
    .unwrap()
}

#[test]
fn logits_match_transformers_on_every_pair() {
    let (_, reference) = tiny_model();
    let encoder = load(PairOverlength::TruncatePassage);
    assert!(reference.pairs.iter().any(|p| p.tokens > reference.max_tokens), "a truncated pair");
    assert!(reference.pairs.iter().any(|p| p.passage.is_empty()), "an empty passage");
    let mut worst = 0f32;
    let mut report = Vec::new();
    for (i, pair) in reference.pairs.iter().enumerate() {
        assert_eq!(encoder.count_pair_tokens(&pair.query, &pair.passage).unwrap(), pair.tokens);
        // One pair at a time and all together must agree with the reference.
        let alone = encoder.score(&pair.query, &[pair.passage.as_str()]).unwrap()[0];
        let diff = (alone - pair.logit).abs();
        worst = worst.max(diff);
        report.push(format!(
            "pair {i}: tokens {:>3} logit {:>10.6} ours {alone:>10.6}",
            pair.tokens, pair.logit
        ));
    }
    eprintln!("{}\nworst |diff| {worst:.2e}", report.join("\n"));
    assert!(worst <= 1e-4, "worst |logit diff| {worst:e}\n{}", report.join("\n"));

    let query = &reference.pairs[0].query;
    let same_query: Vec<&Pair> = reference.pairs.iter().filter(|p| &p.query == query).collect();
    let passages: Vec<&str> = same_query.iter().map(|p| p.passage.as_str()).collect();
    let together = encoder.score(query, &passages).unwrap();
    for (pair, score) in same_query.iter().zip(together) {
        assert!((score - pair.logit).abs() <= 1e-4, "batched {score} vs {}", pair.logit);
    }
}

#[test]
fn an_overlength_pair_is_refused_by_default_and_named() {
    let (_, reference) = tiny_model();
    let encoder = load(PairOverlength::Refuse);
    let long = reference.pairs.iter().position(|p| p.tokens > reference.max_tokens).unwrap();
    let pair = &reference.pairs[long];
    let err = encoder.score(&pair.query, &["fits", &pair.passage]).unwrap_err();
    assert!(
        matches!(err, EmbedError::Overlength { text_index: 1, tokens, .. } if tokens == pair.tokens),
        "{err}"
    );
    assert!(encoder.name().contains(":refuse:"), "{}", encoder.name());
}

#[test]
fn a_changed_file_fails_the_recorded_digest() {
    let (dir, _) = tiny_model();
    let digest = directory_digest(dir).unwrap();
    let copy = tempfile::tempdir().unwrap();
    for entry in fs_err::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        fs_err::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
    }
    VerifiedArtifacts::open_local(copy.path(), "copy", digest).unwrap();
    let config = copy.path().join("config.json");
    let text =
        fs_err::read_to_string(&config).unwrap().replace("\"hidden_act\"", "\"hidden_act\" ");
    fs_err::write(&config, text).unwrap();
    let err = VerifiedArtifacts::open_local(copy.path(), "copy", digest).unwrap_err();
    assert!(matches!(err, ArtifactError::DirectoryDigestMismatch { .. }), "{err}");
}

#[test]
fn a_sentence_encoder_is_not_taken_for_a_cross_encoder() {
    let artifacts = crate::support::pinned_artifacts();
    let err = CrossEncoder::load(
        artifacts,
        CrossEncoderConfig { max_tokens: 128, overlength: PairOverlength::Refuse },
    )
    .unwrap_err();
    assert!(err.to_string().contains("BertForSequenceClassification"), "{err}");
}
