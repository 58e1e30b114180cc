use evicortex_embed::{Encoder, EncoderConfig, ModelBackend, Overlength, Pooling, cosine};
use serde::Deserialize;

#[derive(Deserialize)]
struct Golden {
    revision: String,
    directory_sha256: String,
    cases: Vec<GoldenCase>,
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

fn golden() -> Golden {
    serde_json::from_str(include_str!("../golden/all-minilm-l6-v2.json")).unwrap()
}

#[test]
fn golden_vectors_cover_the_required_variety() {
    let golden = golden();
    assert!(golden.cases.iter().filter(|c| c.pooling == "mean").count() >= 16);
    assert!(golden.cases.iter().any(|c| c.overlength == "truncate"));
    assert!(golden.cases.iter().any(|c| c.token_count == 256));
    assert!(golden.cases.iter().any(|c| c.pooling == "cls"));
    let manifest = evicortex_embed::ModelManifest::all_minilm_l6_v2();
    assert_eq!(golden.revision, manifest.revision.as_str());
    assert_eq!(golden.directory_sha256, manifest.directory_sha256.to_hex());
}

#[test]
fn packed_backend_matches_pytorch_sentence_transformers() {
    check_backend(ModelBackend::Packed);
}

#[test]
fn candle_backend_matches_pytorch_sentence_transformers() {
    check_backend(ModelBackend::Candle);
}

fn check_backend(backend: ModelBackend) {
    let golden = golden();
    let mean = crate::support::encoder_on(
        backend,
        EncoderConfig::all_minilm_l6_v2().with_overlength(Overlength::Truncate),
    )
    .unwrap();
    let mut cls_config = EncoderConfig::all_minilm_l6_v2();
    cls_config.pooling = Pooling::Cls;
    let cls = crate::support::encoder_on(backend, cls_config).unwrap();
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
    eprintln!("{}:\n{}", backend.name(), report.join("\n"));
    assert!(failures.is_empty(), "cosine below 0.9999 for {failures:?}\n{}", report.join("\n"));
}
