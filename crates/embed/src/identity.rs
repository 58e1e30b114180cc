//! `EncoderIdentity`: everything that determines the vectors an encoder produces, in a canonical
//! encoding whose BLAKE3 digest is stored with every vector. Vectors are only ever compared with
//! vectors of the same identity digest.

use std::{collections::BTreeMap, fmt};

use serde::{Deserialize, Serialize};

use crate::{
    encoder_config::{EncoderConfig, Normalization, Overlength, Pooling},
    error::EmbedError,
    manifest::{Revision, Sha256Digest},
};

/// Version of the numerical implementation; bumped whenever a change could alter any vector.
pub const IMPLEMENTATION_VERSION: &str = "evicortex-embed/bert-f32/2";

/// The identity of an encoder: model, artifacts and every setting that changes its output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderIdentity {
    /// Version of this identity's encoding.
    pub schema: u32,
    /// Model name.
    pub model: String,
    /// Pinned hub revision, absent for a local directory (its digest pins it instead).
    pub revision: Option<Revision>,
    /// Digest over every artifact file.
    pub artifacts_sha256: Sha256Digest,
    /// SHA-256 of every artifact file, by relative path.
    pub artifacts: BTreeMap<String, Sha256Digest>,
    /// Pooling of token states into one vector.
    pub pooling: Pooling,
    /// Prefix put before query text.
    pub query_prefix: String,
    /// Prefix put before document text.
    pub document_prefix: String,
    /// Maximum length in tokens, special tokens included.
    pub max_tokens: usize,
    /// What happens to longer text.
    pub overlength: Overlength,
    /// Normalisation of the pooled vector.
    pub normalization: Normalization,
    /// Floating-point type of the computation and of the stored vectors.
    pub dtype: String,
    /// Vector dimension.
    pub dimension: usize,
    /// [`IMPLEMENTATION_VERSION`] of the code that produced the vectors, `+` the model backend.
    pub implementation: String,
}

/// BLAKE3 digest of an [`EncoderIdentity`]'s canonical encoding.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EncoderIdentityDigest([u8; 32]);

impl EncoderIdentity {
    /// The identity of an encoder with `config` over the given artifacts.
    pub(crate) fn new(
        model: &str,
        revision: Option<Revision>,
        artifacts_sha256: Sha256Digest,
        artifacts: BTreeMap<String, Sha256Digest>,
        config: &EncoderConfig,
        dimension: usize,
        backend: &str,
    ) -> EncoderIdentity {
        EncoderIdentity {
            schema: 1,
            model: model.to_owned(),
            revision,
            artifacts_sha256,
            artifacts,
            pooling: config.pooling,
            query_prefix: config.query_prefix.clone(),
            document_prefix: config.document_prefix.clone(),
            max_tokens: config.max_tokens,
            overlength: config.overlength,
            normalization: config.normalization,
            dtype: "f32".to_owned(),
            dimension,
            implementation: format!("{IMPLEMENTATION_VERSION}+{backend}"),
        }
    }

    /// The canonical encoding: compact JSON, fields in declaration order, maps sorted by key.
    pub fn canonical_json(&self) -> String {
        serde_json::to_string(self).expect("an identity always serialises")
    }

    /// Parses an identity stored earlier with [`EncoderIdentity::canonical_json`].
    pub fn from_canonical_json(json: &str) -> Result<EncoderIdentity, serde_json::Error> {
        serde_json::from_str(json)
    }

    /// BLAKE3 of the canonical encoding.
    pub fn digest(&self) -> EncoderIdentityDigest {
        EncoderIdentityDigest(*blake3::hash(self.canonical_json().as_bytes()).as_bytes())
    }
}

impl EncoderIdentityDigest {
    /// Wraps raw bytes.
    pub const fn from_bytes(bytes: [u8; 32]) -> EncoderIdentityDigest {
        EncoderIdentityDigest(bytes)
    }

    /// The raw bytes.
    pub const fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Fails with [`EmbedError::IdentityMismatch`] unless `found` is this digest.
    pub fn ensure_matches(&self, found: &EncoderIdentityDigest) -> Result<(), EmbedError> {
        if self == found {
            Ok(())
        } else {
            Err(EmbedError::IdentityMismatch { expected: self.to_hex(), found: found.to_hex() })
        }
    }
}

impl fmt::Display for EncoderIdentityDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for EncoderIdentityDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EncoderIdentityDigest({})", self.to_hex())
    }
}

/// A vector together with the identity of the encoder that produced it.
#[derive(Clone, Debug, PartialEq)]
pub struct IdentifiedVector {
    /// The producing encoder's identity digest.
    pub identity: EncoderIdentityDigest,
    /// The vector.
    pub vector: Vec<f32>,
}

impl IdentifiedVector {
    /// Cosine similarity (the dot product of normalised vectors); fails closed when the two
    /// vectors come from different encoder identities.
    pub fn cosine(&self, other: &IdentifiedVector) -> Result<f32, EmbedError> {
        self.identity.ensure_matches(&other.identity)?;
        Ok(cosine(&self.vector, &other.vector))
    }
}

/// Cosine similarity of two vectors of the same length.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "cosine of vectors of different dimension");
    let (mut dot, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        dot += f64::from(*x) * f64::from(*y);
        aa += f64::from(*x) * f64::from(*x);
        bb += f64::from(*y) * f64::from(*y);
    }
    (dot / (aa.sqrt() * bb.sqrt()).max(1e-30)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity(config: &EncoderConfig) -> EncoderIdentity {
        let artifacts = BTreeMap::from([("model.safetensors".to_owned(), Sha256Digest::of(b"w"))]);
        EncoderIdentity::new(
            "m",
            Some(Revision::new("1110a243fdf4706b3f48f1d95db1a4f5529b4d41").unwrap()),
            Sha256Digest::of(b"dir"),
            artifacts,
            config,
            384,
            "packed",
        )
    }

    #[test]
    fn every_setting_changes_the_digest_and_the_encoding_round_trips() {
        let base = EncoderConfig::all_minilm_l6_v2();
        let id = identity(&base);
        let again = EncoderIdentity::from_canonical_json(&id.canonical_json()).unwrap();
        assert_eq!(again.digest(), id.digest());

        let mut variants = Vec::new();
        let mut c = base.clone();
        c.pooling = Pooling::Cls;
        variants.push(c);
        let mut c = base.clone();
        c.query_prefix = "query: ".to_owned();
        variants.push(c);
        let mut c = base.clone();
        c.max_tokens = 128;
        variants.push(c);
        let mut c = base.clone();
        c.overlength = Overlength::Truncate;
        variants.push(c);
        let mut c = base.clone();
        c.overlength = Overlength::Window { overlap_tokens: 32 };
        variants.push(c);
        let mut c = base.clone();
        c.normalization = Normalization::None;
        variants.push(c);
        for variant in variants {
            assert_ne!(identity(&variant).digest(), id.digest(), "{variant:?}");
        }
    }

    #[test]
    fn vectors_of_different_identities_do_not_compare() {
        let mut other = EncoderConfig::all_minilm_l6_v2();
        other.pooling = Pooling::Cls;
        let a = IdentifiedVector {
            identity: identity(&EncoderConfig::all_minilm_l6_v2()).digest(),
            vector: vec![1.0, 0.0],
        };
        let b = IdentifiedVector { identity: identity(&other).digest(), vector: vec![1.0, 0.0] };
        assert_eq!(a.cosine(&a.clone()).unwrap(), 1.0);
        let err = a.cosine(&b).unwrap_err();
        assert!(matches!(err, EmbedError::IdentityMismatch { .. }), "{err}");
    }
}
