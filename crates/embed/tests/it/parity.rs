use evicortex_embed::{
    BertEncoder, Encoder, EncoderConfig, ModelBackend, Overlength, Pooling, cosine, pinned_model,
};
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    model: String,
    revision: String,
    directory_sha256: String,
    max_tokens: usize,
    cases: Vec<GoldenCase>,
    relative_buckets: Option<RelativeBuckets>,
}

#[derive(Deserialize)]
struct GoldenCase {
    name: String,
    text: String,
    token_count: usize,
    overlength: String,
    pooling: String,
    vector: Vec<f32>,
}

#[derive(Deserialize)]
struct RelativeBuckets {
    num_buckets: usize,
    first_offset: i64,
    buckets: Vec<usize>,
}

fn golden(model: &str) -> Golden {
    let json = match model {
        "all-minilm-l6-v2" => include_str!("../golden/all-minilm-l6-v2.json"),
        "all-mpnet-base-v2" => include_str!("../golden/all-mpnet-base-v2.json"),
        other => panic!("no golden vectors for {other}"),
    };
    serde_json::from_str(json).unwrap()
}

#[test]
fn golden_vectors_cover_the_required_variety() {
    for name in ["all-minilm-l6-v2", "all-mpnet-base-v2"] {
        let golden = golden(name);
        let model = pinned_model(name).unwrap();
        let max = model.default_config().max_tokens;
        assert_eq!(golden.max_tokens, max, "{name}");
        assert!(golden.cases.iter().filter(|c| c.pooling == "mean").count() >= 16, "{name}");
        for required in ["short", "empty", "cjk", "emoji", "code", "python_code"] {
            assert!(golden.cases.iter().any(|c| c.name == required), "{name}: {required}");
        }
        assert!(golden.cases.iter().any(|c| c.overlength == "truncate"), "{name}");
        assert!(golden.cases.iter().any(|c| c.token_count == max), "{name}: exactly max");
        assert!(golden.cases.iter().any(|c| c.pooling == "cls"), "{name}");
        let manifest = model.manifest();
        assert_eq!(golden.model, manifest.name);
        assert_eq!(golden.revision, manifest.revision.as_str());
        assert_eq!(golden.directory_sha256, manifest.directory_sha256.to_hex());
    }
    assert!(golden("all-mpnet-base-v2").relative_buckets.is_some());
}

#[test]
fn mpnet_relative_buckets_match_the_reference_at_every_offset() {
    let reference = golden("all-mpnet-base-v2").relative_buckets.unwrap();
    let ours = evicortex_embed::mpnet_relative_buckets(
        reference.first_offset,
        reference.buckets.len(),
        reference.num_buckets,
    );
    let differ: Vec<i64> = (0..ours.len())
        .filter(|&i| ours[i] != reference.buckets[i])
        .map(|i| reference.first_offset + i as i64)
        .collect();
    assert!(differ.is_empty(), "buckets differ at offsets {differ:?}");
}

#[test]
fn packed_backend_matches_pytorch_sentence_transformers() {
    check_backend("all-minilm-l6-v2", ModelBackend::Packed);
}

#[test]
fn candle_backend_matches_pytorch_sentence_transformers() {
    check_backend("all-minilm-l6-v2", ModelBackend::Candle);
}

#[test]
fn mpnet_packed_backend_matches_pytorch_sentence_transformers() {
    check_backend("all-mpnet-base-v2", ModelBackend::Packed);
}

#[test]
fn mpnet_refuses_the_candle_backend() {
    let model = pinned_model("all-mpnet-base-v2").unwrap();
    let err = crate::support::model_on(model.name(), ModelBackend::Candle, model.default_config())
        .unwrap_err();
    assert!(err.to_string().contains("BERT only"), "{err}");
}

fn check_backend(name: &str, backend: ModelBackend) {
    let golden = golden(name);
    let config = pinned_model(name).unwrap().default_config();
    let load = |config: EncoderConfig| -> BertEncoder {
        crate::support::model_on(name, backend, config).unwrap()
    };
    let mean = load(config.clone().with_overlength(Overlength::Truncate));
    let mut cls_config: EncoderConfig = config;
    cls_config.pooling = Pooling::Cls;
    let cls = load(cls_config);
    let mut report = Vec::new();
    let mut failures = Vec::new();
    for case in &golden.cases {
        let encoder = if case.pooling == "cls" { &cls } else { &mean };
        let embedded = encoder.embed_documents(&[case.text.as_str()]).unwrap().remove(0);
        assert_eq!(embedded.token_count, case.token_count, "{}: token count", case.name);
        let vector = embedded.single().unwrap();
        let cos = cosine(vector, &case.vector);
        let max_abs =
            vector.iter().zip(&case.vector).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
        report.push(format!(
            "{:<28} tokens {:>4} cosine {cos:.9} max|diff| {max_abs:.2e}",
            case.name, case.token_count
        ));
        if cos < 0.9999 {
            failures.push(case.name.clone());
        }
    }
    eprintln!("{name} on {}:\n{}", backend.name(), report.join("\n"));
    assert!(failures.is_empty(), "cosine below 0.9999 for {failures:?}\n{}", report.join("\n"));
}
