//! Loading the real pinned encoder for tests.

use std::sync::OnceLock;

use evicortex_embed::{
    ArtifactError, BertEncoder, EmbedError, EncoderConfig, ModelBackend, ModelCache, ModelManifest,
    VerifiedArtifacts,
};

/// The verified pinned artefacts; fails with the fetch command when they are absent.
pub fn pinned_artifacts() -> VerifiedArtifacts {
    let manifest = ModelManifest::all_minilm_l6_v2();
    let cache = ModelCache::from_env().expect("model cache location");
    match cache.open_verified(&manifest) {
        Ok(artifacts) => artifacts,
        Err(err @ ArtifactError::ModelMissing { .. }) => {
            panic!(
                "{err}\nthe encoder tests need the pinned weights: run `evicortex model fetch` (scripts/test does)"
            )
        }
        Err(err) => panic!("pinned model failed verification: {err}"),
    }
}

/// A freshly loaded encoder with `config` (default backend).
pub fn encoder_with(config: EncoderConfig) -> Result<BertEncoder, EmbedError> {
    BertEncoder::load(pinned_artifacts(), config)
}

/// A freshly loaded encoder with `config` on `backend`.
pub fn encoder_on(backend: ModelBackend, config: EncoderConfig) -> Result<BertEncoder, EmbedError> {
    BertEncoder::load_with_backend(pinned_artifacts(), config, backend)
}

/// The shared default encoder (mean pooling, L2, 256 tokens, overlength refused).
pub fn default_encoder() -> &'static BertEncoder {
    static ENCODER: OnceLock<BertEncoder> = OnceLock::new();
    ENCODER.get_or_init(|| encoder_with(EncoderConfig::all_minilm_l6_v2()).expect("load encoder"))
}
