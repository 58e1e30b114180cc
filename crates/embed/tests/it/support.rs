//! Loading the real pinned encoder for tests.

use std::sync::OnceLock;

use evicortex_embed::{
    ArtifactError, BertEncoder, DEFAULT_MODEL, EmbedError, EncoderConfig, ModelBackend, ModelCache,
    VerifiedArtifacts, pinned_model,
};

/// The verified pinned artifacts of the default model; fails with the fetch command when they
/// are absent.
pub fn pinned_artifacts() -> VerifiedArtifacts {
    artifacts_of(DEFAULT_MODEL)
}

/// The verified artifacts of the catalogue model `name`; fails with the fetch command when they
/// are absent.
pub fn artifacts_of(name: &str) -> VerifiedArtifacts {
    let manifest = pinned_model(name).unwrap().manifest();
    let cache = ModelCache::from_env().expect("model cache location");
    match cache.open_verified(manifest) {
        Ok(artifacts) => artifacts,
        Err(err @ ArtifactError::ModelMissing { .. }) => {
            panic!(
                "{err}\nthe encoder tests need the pinned weights: run `evicortex model fetch --all` (scripts/test does)"
            )
        }
        Err(err) => panic!("pinned model failed verification: {err}"),
    }
}

/// The catalogue model `name` with `config` on `backend`.
pub fn model_on(
    name: &str,
    backend: ModelBackend,
    config: EncoderConfig,
) -> Result<BertEncoder, EmbedError> {
    BertEncoder::load_with_backend(artifacts_of(name), config, backend)
}

/// A freshly loaded encoder with `config` (default backend).
pub fn encoder_with(config: EncoderConfig) -> Result<BertEncoder, EmbedError> {
    BertEncoder::load(pinned_artifacts(), config)
}

/// The shared default encoder (mean pooling, L2, 256 tokens, overlength refused).
pub fn default_encoder() -> &'static BertEncoder {
    static ENCODER: OnceLock<BertEncoder> = OnceLock::new();
    ENCODER.get_or_init(|| encoder_with(EncoderConfig::all_minilm_l6_v2()).expect("load encoder"))
}
