//! Pinned, verified sentence encoder: all-MiniLM-L6-v2 on candle, f32 on the CPU.
//!
//! [`ModelCache::fetch`] downloads the pinned artefacts and checks every file against the
//! manifest committed with this crate; [`VerifiedArtifacts`] hands only digest-checked bytes to
//! [`BertEncoder::load`]; the [`Encoder`] trait embeds queries and documents with explicit
//! pooling, normalisation, maximum length and overlength policy, all recorded in the
//! [`EncoderIdentity`] that is stored with every vector.
//!
//! ```no_run
//! use evicortex_embed::{BertEncoder, EncoderConfig, Encoder, ModelCache, ModelManifest};
//! let manifest = ModelManifest::all_minilm_l6_v2();
//! let artifacts = ModelCache::from_env()?.open_verified(&manifest)?;
//! let encoder = BertEncoder::load(artifacts, EncoderConfig::all_minilm_l6_v2())?;
//! let query = encoder.embed_query("where did I move in May?")?;
//! assert_eq!(query.single().unwrap().len(), 384);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod artifact;
mod bert;
mod bert_encoder;
mod block_kernels;
mod encoder;
mod encoder_config;
mod error;
mod gemm_peak;
mod identity;
mod kernels;
mod manifest;
mod model_cache;
mod multiversion;
mod packed_bert;
mod pooling;
mod tokenize;

pub use crate::{
    artifact::{VerifiedArtifacts, directory_digest},
    bert::BertConfig,
    bert_encoder::{BertEncoder, ModelBackend},
    encoder::{BatchLimits, EmbeddedWindow, EmbeddingRole, Encoder, TextEmbedding, plan_batches},
    encoder_config::{DEFAULT_WINDOW_OVERLAP, EncoderConfig, Normalization, Overlength, Pooling},
    error::{ArtifactError, EmbedError, FetchError},
    gemm_peak::measure_sgemm_gflops,
    identity::{
        EncoderIdentity, EncoderIdentityDigest, IMPLEMENTATION_VERSION, IdentifiedVector, cosine,
    },
    manifest::{ManifestFile, ModelManifest, Revision, Sha256Digest, WheelSource},
    model_cache::{FetchOutcome, ModelCache},
};

/// The command that installs the pinned model, for error messages.
pub const FETCH_COMMAND: &str = "evicortex model fetch";

/// Loads the pinned all-MiniLM-L6-v2 from the model cache named by the environment.
pub fn load_pinned_minilm(config: EncoderConfig) -> Result<BertEncoder, EmbedError> {
    let manifest = ModelManifest::all_minilm_l6_v2();
    let artifacts = ModelCache::from_env()?.open_verified(&manifest)?;
    BertEncoder::load(artifacts, config)
}
