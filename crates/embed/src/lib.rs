//! Pinned, verified sentence encoders: all-MiniLM-L6-v2 (BERT) and all-mpnet-base-v2 (MPNet), f32
//! on the CPU, and a BERT cross-encoder for reranking.
//!
//! The [`catalogue`] lists every pinned encoder with its committed manifest (registry packages,
//! the digest of every file), architecture and settings; `evicortex-fetch` downloads and installs
//! them. [`ModelCache::open_verified`] reads an installed copy and checks every file against the
//! manifest; [`VerifiedArtifacts`] hands only digest-checked bytes to [`BertEncoder::load`]; the
//! [`Encoder`] trait embeds queries and documents with explicit pooling, normalisation, maximum
//! length and overlength policy, all recorded in the [`EncoderIdentity`] that is stored with
//! every vector.
//!
//! ```no_run
//! use evicortex_embed::{Encoder, pinned_model};
//! let mpnet = pinned_model("all-mpnet-base-v2")?;
//! let encoder = evicortex_embed::load_pinned(mpnet.name(), mpnet.default_config())?;
//! let query = encoder.embed_query("where did I move in May?")?;
//! assert_eq!(query.single().unwrap().len(), 768);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

mod artifact;
mod bert;
mod bert_encoder;
mod block_kernels;
mod catalogue;
mod cross_encoder;
mod encoder;
mod encoder_config;
mod error;
mod identity;
mod kernels;
mod manifest;
mod model_cache;
mod model_config;
mod multiversion;
mod packed_model;
mod packed_weights;
mod pooling;
pub mod thread_priority;
mod tokenize;

pub use crate::{
    artifact::{VerifiedArtifacts, directory_digest},
    bert::BertConfig,
    bert_encoder::{BertEncoder, ModelBackend},
    catalogue::{DEFAULT_MODEL, PinnedModel, catalogue, load_pinned, pinned_model},
    cross_encoder::{CrossEncoder, CrossEncoderConfig, PairOverlength},
    encoder::{BatchLimits, EmbeddedWindow, EmbeddingRole, Encoder, TextEmbedding, plan_batches},
    encoder_config::{DEFAULT_WINDOW_OVERLAP, EncoderConfig, Normalization, Overlength, Pooling},
    error::{ArtifactError, EmbedError, FetchError},
    identity::{
        EncoderIdentity, EncoderIdentityDigest, IMPLEMENTATION_VERSION, IdentifiedVector, cosine,
    },
    manifest::check_relative_path,
    manifest::{
        ManifestFile, ModelManifest, ModelSource, Revision, Sha256Digest, SplitZipSource,
        WheelPart, WheelSource,
    },
    model_cache::{InstallState, ModelCache},
    model_config::{Architecture, ModelConfig, MpnetConfig},
    packed_weights::mpnet_relative_buckets,
};

/// The encoder's tokenizer on its own (no weights), for the fuzz targets in `fuzz/`: not part of
/// the supported API.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub use crate::tokenize::{EncoderTokenizer, ModelInput};

/// The command that installs the pinned models, for error messages (`NAME` defaults to
/// [`DEFAULT_MODEL`]).
pub const FETCH_COMMAND: &str = "evicortex model fetch";

/// Loads the pinned all-MiniLM-L6-v2 ([`DEFAULT_MODEL`]) from the model cache named by the
/// environment.
pub fn load_pinned_minilm(config: EncoderConfig) -> Result<BertEncoder, EmbedError> {
    load_pinned(DEFAULT_MODEL, config)
}
