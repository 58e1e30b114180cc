//! The real rerankers a memory can be configured with, by name, and the store of candidate
//! vectors the second stage keeps (a derived store: erasure purges it).

use std::{
    collections::HashSet,
    path::PathBuf,
    str::FromStr,
    sync::{Arc, Mutex, PoisonError},
};

use evicortex_core::TextDigest;
use evicortex_embed::{
    CrossEncoder, CrossEncoderConfig, EmbedError, EncoderIdentityDigest, Overlength,
    PairOverlength, Sha256Digest, VerifiedArtifacts,
};
use evicortex_rerank::{
    CandidateVectors, CosineReranker, CrossEncoderReranker, InMemoryVectors, Reranker,
};

use crate::{DerivedStore, DerivedStoreError, EraseReceipt};

/// The catalogue encoder [`RerankerSpec::MPNET_COSINE`] names.
pub const SECOND_STAGE_MODEL: &str = "all-mpnet-base-v2";

/// Candidate texts whose second-stage vectors a memory keeps in memory.
const CANDIDATE_VECTOR_CAPACITY: usize = 200_000;

/// A reranker, by what a user writes in a flag or a configuration file:
///
/// - `mpnet-cosine` (= `cosine:all-mpnet-base-v2`), or `cosine:NAME` for any catalogue encoder:
///   the fused candidates scored by cosine with the question under that encoder, each candidate
///   embedded once (texts over the encoder's maximum as windows overlapping by 64 tokens, scored
///   by their best window);
/// - `cross-encoder:DIR@SHA256`: a BERT cross-encoder (MS MARCO format) read from the local
///   directory `DIR`, whose files must hash to `SHA256` (`evicortex model digest DIR` prints it);
///   pairs over 512 tokens have their passage cut.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RerankerSpec {
    /// Cosine under the catalogue encoder `model`.
    EncoderCosine {
        /// The catalogue name.
        model: String,
    },
    /// A cross-encoder from a verified local directory.
    CrossEncoder {
        /// The model directory.
        dir: PathBuf,
        /// The digest over all its files.
        sha256: Sha256Digest,
    },
}

impl RerankerSpec {
    /// The default second stage: all-mpnet-base-v2 by cosine.
    pub const MPNET_COSINE: &'static str = "mpnet-cosine";
}

/// A reranker specification that does not parse.
#[derive(Debug, thiserror::Error)]
#[error(
    "reranker {given:?}: {reason} (expected mpnet-cosine, cosine:MODEL or cross-encoder:DIR@SHA256)"
)]
pub struct RerankerSpecError {
    given: String,
    reason: String,
}

impl FromStr for RerankerSpec {
    type Err = RerankerSpecError;

    fn from_str(raw: &str) -> Result<RerankerSpec, RerankerSpecError> {
        let fail = |reason: String| RerankerSpecError { given: raw.to_owned(), reason };
        if raw == RerankerSpec::MPNET_COSINE {
            return Ok(RerankerSpec::EncoderCosine { model: SECOND_STAGE_MODEL.to_owned() });
        }
        if let Some(model) = raw.strip_prefix("cosine:") {
            evicortex_embed::pinned_model(model).map_err(|err| fail(err.to_string()))?;
            return Ok(RerankerSpec::EncoderCosine { model: model.to_owned() });
        }
        if let Some(rest) = raw.strip_prefix("cross-encoder:") {
            let Some((dir, digest)) = rest.rsplit_once('@') else {
                return Err(fail("the directory's digest is missing (DIR@SHA256)".to_owned()));
            };
            if dir.is_empty() {
                return Err(fail("the directory is empty".to_owned()));
            }
            let sha256 =
                Sha256Digest::parse_hex("sha256", digest).map_err(|err| fail(err.to_string()))?;
            return Ok(RerankerSpec::CrossEncoder { dir: PathBuf::from(dir), sha256 });
        }
        Err(fail("unknown kind".to_owned()))
    }
}

impl std::fmt::Display for RerankerSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RerankerSpec::EncoderCosine { model } => write!(f, "cosine:{model}"),
            RerankerSpec::CrossEncoder { dir, sha256 } => {
                write!(f, "cross-encoder:{}@{}", dir.display(), sha256.to_hex())
            }
        }
    }
}

/// A loaded reranker and, for the second stage, the derived store of its candidate vectors
/// (which the memory purges on erasure).
#[derive(Debug, Clone)]
pub struct LoadedReranker {
    /// The reranker compile calls.
    pub reranker: Arc<dyn Reranker>,
    /// What it derives from turns and keeps, if anything.
    pub derived: Option<Arc<dyn DerivedStore>>,
}

/// Loads the reranker `spec` names: catalogue encoders from the model cache named by the
/// environment, cross-encoders from their directory; every file checked against its digest.
pub fn load_reranker(spec: &RerankerSpec) -> Result<LoadedReranker, EmbedError> {
    match spec {
        RerankerSpec::EncoderCosine { model } => {
            let pinned = evicortex_embed::pinned_model(model)?;
            let config =
                pinned.default_config().with_overlength(Overlength::Window { overlap_tokens: 64 });
            let encoder = Arc::new(evicortex_embed::load_pinned(model, config)?);
            let vectors = Arc::new(ErasableVectors::new(CANDIDATE_VECTOR_CAPACITY));
            Ok(LoadedReranker {
                reranker: Arc::new(CosineReranker::new(encoder, vectors.clone())),
                derived: Some(vectors),
            })
        }
        RerankerSpec::CrossEncoder { dir, sha256 } => {
            let name = dir
                .file_name()
                .map_or_else(|| "cross-encoder".to_owned(), |n| n.to_string_lossy().into_owned());
            let artifacts = VerifiedArtifacts::open_local(dir, &name, *sha256)?;
            let config =
                CrossEncoderConfig { max_tokens: 512, overlength: PairOverlength::TruncatePassage };
            let encoder = CrossEncoder::load(artifacts, config)?;
            Ok(LoadedReranker {
                reranker: Arc::new(CrossEncoderReranker::new(encoder)),
                derived: None,
            })
        }
    }
}

/// The second stage's candidate vectors: in memory, by (identity, text), purged of every text an
/// erasure orphans. A text once purged is never stored again by this memory (a compile that read
/// it before the erasure cannot write its vector back afterwards); it is embedded anew whenever
/// it is a candidate again.
#[derive(Debug)]
pub struct ErasableVectors {
    vectors: InMemoryVectors,
    purged: Mutex<HashSet<TextDigest>>,
}

impl ErasableVectors {
    /// An empty store for at most `capacity` texts.
    pub fn new(capacity: usize) -> ErasableVectors {
        ErasableVectors { vectors: InMemoryVectors::new(capacity), purged: Mutex::default() }
    }

    /// Texts held now.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

impl CandidateVectors for ErasableVectors {
    fn get(&self, identity: &EncoderIdentityDigest, text: &TextDigest) -> Option<Arc<[Vec<f32>]>> {
        self.vectors.get(identity, text)
    }

    fn put(&self, identity: &EncoderIdentityDigest, text: &TextDigest, vectors: Arc<[Vec<f32>]>) {
        // Checked and stored under the lock purge holds, so a put either precedes the purge
        // (which removes it) or sees the text purged.
        let purged = self.purged.lock().unwrap_or_else(PoisonError::into_inner);
        if !purged.contains(text) {
            self.vectors.put(identity, text, vectors);
        }
    }
}

impl DerivedStore for ErasableVectors {
    fn name(&self) -> &'static str {
        "second-stage candidate vectors"
    }

    fn purge(&self, receipt: &EraseReceipt) -> Result<(), DerivedStoreError> {
        let mut purged = self.purged.lock().unwrap_or_else(PoisonError::into_inner);
        purged.extend(receipt.erased_texts.iter().copied());
        self.vectors.remove_texts(&receipt.erased_texts);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_print_back() {
        let mpnet: RerankerSpec = "mpnet-cosine".parse().unwrap();
        assert_eq!(mpnet, RerankerSpec::EncoderCosine { model: "all-mpnet-base-v2".into() });
        assert_eq!(mpnet.to_string(), "cosine:all-mpnet-base-v2");
        assert_eq!("cosine:all-mpnet-base-v2".parse::<RerankerSpec>().unwrap(), mpnet);
        let hex = "ab".repeat(32);
        let cross: RerankerSpec = format!("cross-encoder:models/ms@marco@{hex}").parse().unwrap();
        assert_eq!(
            cross,
            RerankerSpec::CrossEncoder {
                dir: PathBuf::from("models/ms@marco"),
                sha256: Sha256Digest::parse_hex("t", &hex).unwrap()
            }
        );
        assert_eq!(cross.to_string(), format!("cross-encoder:models/ms@marco@{hex}"));
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        for (raw, reason) in [
            ("term-overlap", "unknown kind"),
            ("cosine:no-such-model", "no-such-model"),
            ("cross-encoder:dir", "digest is missing"),
            ("cross-encoder:dir@xyz", "sha256"),
            ("cross-encoder:@abc", "directory is empty"),
        ] {
            let err = raw.parse::<RerankerSpec>().unwrap_err().to_string();
            assert!(err.contains(reason) && err.contains(raw), "{raw}: {err}");
        }
    }

    #[test]
    fn a_purged_text_is_removed_and_never_stored_again() {
        let store = ErasableVectors::new(10);
        let id = EncoderIdentityDigest::from_bytes([1; 32]);
        let (a, b) = (TextDigest::of("a"), TextDigest::of("b"));
        let v: Arc<[Vec<f32>]> = Arc::from(vec![vec![1.0]]);
        store.put(&id, &a, v.clone());
        store.put(&id, &b, v.clone());
        let receipt = EraseReceipt {
            redaction: None,
            erased: Vec::new(),
            already_erased: 0,
            erased_texts: vec![a],
        };
        store.purge(&receipt).unwrap();
        assert!(store.get(&id, &a).is_none());
        assert!(store.get(&id, &b).is_some());
        store.put(&id, &a, v);
        assert!(store.get(&id, &a).is_none(), "a compile that read the text before the erasure");
        assert_eq!(store.len(), 1);
    }
}
