//! The pinned encoder a memory embeds with, loaded from the verified model cache.

use std::sync::Arc;

use evicortex_embed::{EmbedError, Encoder, EncoderConfig, Overlength};

/// The configuration of the pinned sentence encoder (all-MiniLM-L6-v2) with `overlength` as its
/// policy for texts longer than its 256 tokens.
pub fn pinned_encoder_config(overlength: Overlength) -> EncoderConfig {
    EncoderConfig::all_minilm_l6_v2().with_overlength(overlength)
}

/// Loads the pinned encoder from the model cache named by the environment, every file checked
/// against its committed digest. A missing model is an error of class
/// [`crate::ErrorClass::ModelMissing`] naming the command that installs it.
pub fn load_pinned_encoder(overlength: Overlength) -> Result<Arc<dyn Encoder>, EmbedError> {
    Ok(Arc::new(evicortex_embed::load_pinned_minilm(pinned_encoder_config(overlength))?))
}

/// Loads the catalogue encoder `name` (`evicortex model list`) with its sentence-transformers
/// settings and `overlength`, every file checked against its committed digest.
pub fn load_catalogue_encoder(
    name: &str,
    overlength: Overlength,
) -> Result<Arc<dyn Encoder>, EmbedError> {
    let config = evicortex_embed::pinned_model(name)?.default_config().with_overlength(overlength);
    Ok(Arc::new(evicortex_embed::load_pinned(name, config)?))
}

/// Whether `name` is a catalogue encoder (an error listing the known ones otherwise).
pub fn check_catalogue_encoder(name: &str) -> Result<(), EmbedError> {
    evicortex_embed::pinned_model(name).map(|_| ())
}
