//! The model catalogue: every pinned sentence encoder this crate knows, each with its committed
//! manifest (registry packages, versions, the digest of every file), its architecture, dimension
//! and the settings sentence-transformers uses for it (pooling, prefixes, maximum length). Its
//! identity follows from these alone, before any weight is downloaded.

use std::sync::OnceLock;

use crate::{
    bert_encoder::{BertEncoder, ModelBackend},
    encoder::Encoder,
    encoder_config::EncoderConfig,
    error::EmbedError,
    identity::EncoderIdentity,
    manifest::ModelManifest,
    model_cache::ModelCache,
    model_config::Architecture,
};

/// The catalogue name of the default encoder. Existing stores hold its vectors: its identity
/// must never change unless its output does.
pub const DEFAULT_MODEL: &str = "all-minilm-l6-v2";

/// One pinned encoder of the catalogue.
#[derive(Clone, Debug)]
pub struct PinnedModel {
    name: &'static str,
    summary: &'static str,
    architecture: Architecture,
    dimension: usize,
    manifest: ModelManifest,
    config: EncoderConfig,
}

impl PinnedModel {
    /// The catalogue name (`evicortex model fetch NAME`), also its directory in the model cache.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// One line on what it is.
    pub fn summary(&self) -> &'static str {
        self.summary
    }

    /// Its architecture; loading refuses artifacts of another.
    pub fn architecture(&self) -> Architecture {
        self.architecture
    }

    /// Its vector dimension.
    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The committed manifest: where it comes from and every file's digest.
    pub fn manifest(&self) -> &ModelManifest {
        &self.manifest
    }

    /// The settings sentence-transformers uses for it, overlength refused.
    pub fn default_config(&self) -> EncoderConfig {
        self.config.clone()
    }

    /// The identity its vectors carry under `config` on `backend`, computed from the manifest.
    pub fn identity(&self, config: &EncoderConfig, backend: ModelBackend) -> EncoderIdentity {
        EncoderIdentity::new(
            &self.manifest.name,
            Some(self.manifest.revision.clone()),
            self.manifest.directory_sha256,
            self.manifest.files.iter().map(|f| (f.path.clone(), f.sha256)).collect(),
            config,
            self.dimension,
            backend.name(),
        )
    }

    /// Verifies the installed copy in `cache` and loads it with `config` on the packed backend.
    /// Fails closed when the artifacts' architecture, dimension or resulting identity is not
    /// the catalogue's.
    pub fn load(
        &self,
        cache: &ModelCache,
        config: EncoderConfig,
    ) -> Result<BertEncoder, EmbedError> {
        let artifacts = cache.open_verified(&self.manifest)?;
        let encoder = BertEncoder::load(artifacts, config)?;
        if encoder.architecture() != self.architecture || encoder.dimension() != self.dimension {
            return Err(EmbedError::InvalidConfig {
                field: "architecture",
                reason: format!(
                    "{} loaded as {:?} with {} dimensions; the catalogue says {:?} with {}",
                    self.name,
                    encoder.architecture(),
                    encoder.dimension(),
                    self.architecture,
                    self.dimension
                ),
            });
        }
        self.identity(encoder.config(), encoder.backend())
            .digest()
            .ensure_matches(&encoder.identity_digest())?;
        Ok(encoder)
    }
}

/// Every pinned encoder, the default first.
pub fn catalogue() -> &'static [PinnedModel] {
    static CATALOGUE: OnceLock<Vec<PinnedModel>> = OnceLock::new();
    CATALOGUE.get_or_init(|| {
        vec![
            PinnedModel {
                name: DEFAULT_MODEL,
                summary: "sentence-transformers/all-MiniLM-L6-v2: 6-layer BERT, fast",
                architecture: Architecture::Bert,
                dimension: 384,
                manifest: ModelManifest::all_minilm_l6_v2(),
                config: EncoderConfig::all_minilm_l6_v2(),
            },
            PinnedModel {
                name: "all-mpnet-base-v2",
                summary: "sentence-transformers/all-mpnet-base-v2: 12-layer MPNet, stronger, slower",
                architecture: Architecture::Mpnet,
                dimension: 768,
                manifest: ModelManifest::all_mpnet_base_v2(),
                config: EncoderConfig::all_mpnet_base_v2(),
            },
        ]
    })
}

/// The catalogue entry named `name`.
pub fn pinned_model(name: &str) -> Result<&'static PinnedModel, EmbedError> {
    catalogue().iter().find(|model| model.name == name).ok_or_else(|| EmbedError::UnknownModel {
        name: name.to_owned(),
        known: catalogue().iter().map(|m| m.name).collect::<Vec<_>>().join(", "),
    })
}

/// Loads the pinned encoder `name` with `config` from the model cache named by the environment.
pub fn load_pinned(name: &str, config: EncoderConfig) -> Result<BertEncoder, EmbedError> {
    pinned_model(name)?.load(&ModelCache::from_env()?, config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encoder_config::Overlength;

    #[test]
    fn the_default_minilm_identity_is_unchanged() {
        let minilm = pinned_model(DEFAULT_MODEL).unwrap();
        // Recorded by the evaluation runs before the catalogue existed
        // (eval/results/locomo-dev/report.json: window of 64 tokens, packed backend): stores
        // built then hold vectors under this digest and must stay valid.
        let eval_config = EncoderConfig::all_minilm_l6_v2()
            .with_overlength(Overlength::Window { overlap_tokens: 64 });
        assert_eq!(
            minilm.identity(&eval_config, ModelBackend::Packed).digest().to_hex(),
            "3b78041862b83629a323c7dca4847bf6cddbeee7d009347b6f57dd4a8b865eef"
        );
        assert_eq!(
            minilm.identity(&minilm.default_config(), ModelBackend::Packed).digest().to_hex(),
            MINILM_DEFAULT_IDENTITY
        );
    }

    /// The default configuration's identity (overlength refused, packed backend).
    const MINILM_DEFAULT_IDENTITY: &str =
        "46fbe13c3ab4bcfbe160fd1ce9ebd16c297861064d7c2ac27e2f12f162b6e95f";

    #[test]
    fn names_are_unique_and_match_the_cache_directories() {
        let names: Vec<&str> = catalogue().iter().map(PinnedModel::name).collect();
        assert_eq!(names, vec!["all-minilm-l6-v2", "all-mpnet-base-v2"]);
        for model in catalogue() {
            assert_eq!(model.manifest().install_dir, model.name());
        }
        let err = pinned_model("bert-base").unwrap_err();
        assert!(err.to_string().contains("all-minilm-l6-v2, all-mpnet-base-v2"), "{err}");
    }

    #[test]
    fn identities_differ_between_models_and_backends() {
        let [minilm, mpnet] = catalogue() else { panic!("two models") };
        let a = minilm.identity(&minilm.default_config(), ModelBackend::Packed).digest();
        let b = mpnet.identity(&mpnet.default_config(), ModelBackend::Packed).digest();
        let c = minilm.identity(&minilm.default_config(), ModelBackend::Candle).digest();
        assert_ne!(a, b);
        assert_ne!(a, c);
    }
}
