//! `ModelCache`: where verified model directories live, and how an installed one is opened (every
//! file checked against the committed manifest). Downloading lives in `evicortex-fetch`: this
//! crate only ever reads verified bytes.

use std::path::{Path, PathBuf};

use crate::{artifact::VerifiedArtifacts, error::ArtifactError, manifest::ModelManifest};

/// The model cache directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelCache {
    root: PathBuf,
}

impl ModelCache {
    /// The cache at `root`.
    pub fn at(root: impl Into<PathBuf>) -> ModelCache {
        ModelCache { root: root.into() }
    }

    /// The cache named by the environment: `EVICORTEX_MODELS_DIR`, else
    /// `${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/models`. (`EVICORTEX_HOME` names the store
    /// only, as `--store` does: models are shared by every store.)
    pub fn from_env() -> Result<ModelCache, ArtifactError> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = var("EVICORTEX_MODELS_DIR") {
            return Ok(ModelCache::at(dir));
        }
        let cache = match (var("XDG_CACHE_HOME"), var("HOME")) {
            (Some(xdg), _) => PathBuf::from(xdg),
            (None, Some(home)) => PathBuf::from(home).join(".cache"),
            (None, None) => {
                return Err(ArtifactError::InvalidConfig {
                    file: "environment".to_owned(),
                    field: "HOME".to_owned(),
                    reason: "is unset; set EVICORTEX_MODELS_DIR".to_owned(),
                });
            }
        };
        Ok(ModelCache::at(cache.join("evicortex").join("models")))
    }

    /// The cache directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `manifest`'s model is installed: `<root>/<install_dir>/<revision>`.
    pub fn install_dir(&self, manifest: &ModelManifest) -> PathBuf {
        self.root.join(&manifest.install_dir).join(manifest.revision.as_str())
    }

    /// Reads and verifies the installed model; [`ArtifactError::ModelMissing`] names the fetch
    /// command when it is not there.
    pub fn open_verified(
        &self,
        manifest: &ModelManifest,
    ) -> Result<VerifiedArtifacts, ArtifactError> {
        VerifiedArtifacts::open_pinned(&self.install_dir(manifest), manifest)
    }

    /// What is at the model's install directory, judged by file names and sizes only (cheap;
    /// every load and `model verify` check the digests).
    pub fn install_state(&self, manifest: &ModelManifest) -> InstallState {
        let dir = self.install_dir(manifest);
        if !dir.exists() {
            return InstallState::Missing;
        }
        let complete = manifest.files.iter().all(|file| {
            fs_err::symlink_metadata(dir.join(&file.path))
                .is_ok_and(|meta| meta.is_file() && meta.len() == file.size)
        });
        if complete { InstallState::Installed } else { InstallState::Incomplete }
    }
}

/// What [`ModelCache::install_state`] found.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum InstallState {
    /// Nothing is installed.
    Missing,
    /// Every manifest file is present with its pinned size (digests unchecked).
    Installed,
    /// The directory exists but a file is missing or of another size.
    Incomplete,
}
