//! A memory's encoder with the content-addressed cache of its vectors.

use std::sync::Arc;

use evicortex_embed::Encoder;

use crate::embedding_cache::EmbeddingCache;

/// The encoder a memory embeds with, and the content-addressed cache of its vectors.
#[derive(Debug)]
pub(crate) struct Dense {
    pub(crate) encoder: Arc<dyn Encoder>,
    pub(crate) cache: Arc<EmbeddingCache>,
}
