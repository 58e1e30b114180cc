use evicortex_embed::{EmbedError, EmbeddingRole, Encoder, EncoderConfig, Overlength, cosine};

use crate::support::{default_encoder, encoder_with};

fn long_text() -> String {
    "The quick brown fox jumps over the lazy dog while I write my notes about the trip. ".repeat(30)
}

#[test]
fn overlength_is_refused_before_the_model_runs_with_its_token_count() {
    let encoder = default_encoder();
    let text = long_text();
    let tokens = encoder.count_tokens(EmbeddingRole::Document, &text).unwrap();
    assert!(tokens > 256);
    let err = encoder.embed_documents(&["short one", &text]).unwrap_err();
    match err {
        EmbedError::Overlength { text_index, tokens: counted, max_tokens } => {
            assert_eq!((text_index, counted, max_tokens), (1, tokens, 256));
        }
        other => panic!("expected overlength, got {other}"),
    }
}

#[test]
fn windows_cover_the_text_and_map_back_to_it() {
    let encoder = encoder_with(
        EncoderConfig::all_minilm_l6_v2()
            .with_overlength(Overlength::Window { overlap_tokens: 32 }),
    )
    .unwrap();
    let text = long_text();
    let out = encoder.embed_documents(&["a short turn", &text]).unwrap();
    assert_eq!(out[0].windows.len(), 1);
    let windows = &out[1].windows;
    let content = out[1].token_count - 2;
    assert!(windows.len() >= 2, "{} windows", windows.len());
    assert_eq!(windows[0].content_tokens.start, 0);
    assert_eq!(windows.last().unwrap().content_tokens.end, content);
    for pair in windows.windows(2) {
        assert_eq!(pair[0].content_tokens.end - pair[1].content_tokens.start, 32);
        assert!(pair[0].content_tokens.len() <= 254);
    }
    // The first window is the truncated text.
    let truncated =
        encoder_with(EncoderConfig::all_minilm_l6_v2().with_overlength(Overlength::Truncate))
            .unwrap();
    let head = truncated.embed_documents(&[&text]).unwrap().remove(0);
    assert!(cosine(&windows[0].vector, head.single().unwrap()) > 0.99999);
}

#[test]
fn batching_and_order_do_not_change_vectors() {
    let encoder = default_encoder();
    let texts = [
        "I moved to Lisbon in May.",
        "short",
        "A somewhat longer sentence about my sister visiting Sintra in the rain.",
        "",
    ];
    let together = encoder.embed_documents(&texts).unwrap();
    for (text, batched) in texts.iter().zip(&together) {
        let alone = encoder.embed_documents(&[text]).unwrap().remove(0);
        let cos = cosine(alone.single().unwrap(), batched.single().unwrap());
        assert!(cos > 0.99999, "{text:?}: {cos}");
        let norm: f32 = batched.single().unwrap().iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{text:?}: norm {norm}");
    }
}

#[test]
fn query_and_document_roles_use_their_recorded_prefixes() {
    let encoder = default_encoder();
    assert_eq!(encoder.identity().query_prefix, "");
    assert_eq!(encoder.identity().document_prefix, "");
    let q = encoder.embed_query("where did I move?").unwrap();
    let d = encoder.embed_documents(&["where did I move?"]).unwrap().remove(0);
    assert_eq!(q, d, "empty prefixes: both roles embed the same text");

    let mut config = EncoderConfig::all_minilm_l6_v2();
    config.query_prefix = "query: ".to_owned();
    let prefixed = encoder_with(config).unwrap();
    assert_ne!(prefixed.identity_digest(), encoder.identity_digest());
    let q = prefixed.embed_query("where did I move?").unwrap();
    let d = prefixed.embed_documents(&["where did I move?"]).unwrap().remove(0);
    assert_eq!(q.token_count, d.token_count + 2, "`query:` adds two tokens");
    assert!(cosine(q.single().unwrap(), d.single().unwrap()) < 0.9999);
}

#[test]
fn identity_pins_model_revision_artifacts_and_settings() {
    let identity = default_encoder().identity();
    assert_eq!(identity.model, "sentence-transformers/all-MiniLM-L6-v2");
    assert_eq!(
        identity.revision.as_ref().unwrap().as_str(),
        "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"
    );
    assert_eq!(identity.artifacts.len(), 13);
    assert_eq!(identity.max_tokens, 256);
    assert_eq!(identity.dtype, "f32");
    assert_eq!(identity.dimension, 384);
    // Loading again gives the same digest: it depends on nothing but artifacts and settings.
    let again = encoder_with(EncoderConfig::all_minilm_l6_v2()).unwrap();
    assert_eq!(again.identity_digest(), default_encoder().identity_digest());
    expect_test::expect!["46fbe13c3ab4bcfbe160fd1ce9ebd16c297861064d7c2ac27e2f12f162b6e95f"]
        .assert_eq(&default_encoder().identity_digest().to_hex());
}
