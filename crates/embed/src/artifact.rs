//! Locating and verifying model artifacts: every file is read once, digest-checked, and only
//! those verified bytes are ever handed to the tokenizer and the model.
//!
//! Fail closed: symlinks, special files and paths escaping the artifact root are refused, a pinned
//! directory must hold exactly the manifest's files, a local directory must match a recorded
//! digest over all its files, and weights must be safetensors (pickle files are never read).

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use crate::{
    error::ArtifactError,
    manifest::{ModelManifest, Revision, Sha256Digest, check_relative_path, listing_digest},
};

/// Verified artifact files, held in memory exactly as they were digest-checked.
#[derive(Debug)]
pub struct VerifiedArtifacts {
    root: PathBuf,
    model_name: String,
    revision: Option<Revision>,
    directory_sha256: Sha256Digest,
    files: BTreeMap<String, VerifiedFile>,
}

/// One verified file.
#[derive(Debug)]
struct VerifiedFile {
    sha256: Sha256Digest,
    bytes: Vec<u8>,
}

impl VerifiedArtifacts {
    /// Reads `dir` and checks that it holds exactly the files of `manifest`, each with its pinned
    /// SHA-256.
    pub fn open_pinned(
        dir: &Path,
        manifest: &ModelManifest,
    ) -> Result<VerifiedArtifacts, ArtifactError> {
        let _span = tracing::info_span!("verify_pinned_artifacts", dir = %dir.display()).entered();
        if !dir.exists() {
            return Err(ArtifactError::ModelMissing {
                model: manifest.name.clone(),
                fetch_name: manifest.install_dir.clone(),
                dir: dir.to_owned(),
            });
        }
        let found = scan_dir(dir)?;
        for rel in found.keys() {
            if manifest.file(rel).is_none() {
                return Err(ArtifactError::UnexpectedFile {
                    dir: dir.to_owned(),
                    file: rel.clone(),
                });
            }
        }
        let mut files = BTreeMap::new();
        for entry in &manifest.files {
            let Some(path) = found.get(&entry.path) else {
                return Err(ArtifactError::MissingFile {
                    dir: dir.to_owned(),
                    file: entry.path.clone(),
                });
            };
            let bytes = fs_err::read(path).map_err(|err| ArtifactError::io(path, err))?;
            let sha256 = Sha256Digest::of(&bytes);
            if sha256 != entry.sha256 {
                return Err(ArtifactError::DigestMismatch {
                    path: path.clone(),
                    expected: entry.sha256.to_hex(),
                    actual: sha256.to_hex(),
                });
            }
            files.insert(entry.path.clone(), VerifiedFile { sha256, bytes });
        }
        let artifacts = VerifiedArtifacts {
            root: dir.to_owned(),
            model_name: manifest.name.clone(),
            revision: Some(manifest.revision.clone()),
            directory_sha256: manifest.directory_sha256,
            files,
        };
        artifacts.require_safetensors()?;
        Ok(artifacts)
    }

    /// Reads a local model directory and checks the digest over all its files against the
    /// recorded `expected` one (computed earlier with [`directory_digest`]).
    pub fn open_local(
        dir: &Path,
        model_name: &str,
        expected: Sha256Digest,
    ) -> Result<VerifiedArtifacts, ArtifactError> {
        let _span = tracing::info_span!("verify_local_artifacts", dir = %dir.display()).entered();
        let found = scan_dir(dir)?;
        let mut files = BTreeMap::new();
        for (rel, path) in &found {
            let bytes = fs_err::read(path).map_err(|err| ArtifactError::io(path, err))?;
            files.insert(rel.clone(), VerifiedFile { sha256: Sha256Digest::of(&bytes), bytes });
        }
        let actual = listing_digest(files.iter().map(|(rel, file)| (rel.as_str(), file.sha256)));
        if actual != expected {
            return Err(ArtifactError::DirectoryDigestMismatch {
                dir: dir.to_owned(),
                expected: expected.to_hex(),
                actual: actual.to_hex(),
            });
        }
        let artifacts = VerifiedArtifacts {
            root: dir.to_owned(),
            model_name: model_name.to_owned(),
            revision: None,
            directory_sha256: actual,
            files,
        };
        artifacts.require_safetensors()?;
        Ok(artifacts)
    }

    /// The directory the files were read from.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The model's name.
    pub fn model_name(&self) -> &str {
        &self.model_name
    }

    /// The pinned hub revision, if the artifacts came from a pinned manifest.
    pub fn revision(&self) -> Option<&Revision> {
        self.revision.as_ref()
    }

    /// Digest over all files.
    pub fn directory_sha256(&self) -> Sha256Digest {
        self.directory_sha256
    }

    /// Every file with its digest, sorted by path.
    pub fn file_digests(&self) -> impl Iterator<Item = (&str, Sha256Digest)> {
        self.files.iter().map(|(rel, file)| (rel.as_str(), file.sha256))
    }

    /// The verified bytes of `rel`.
    pub fn bytes(&self, rel: &str) -> Result<&[u8], ArtifactError> {
        self.files.get(rel).map(|file| file.bytes.as_slice()).ok_or_else(|| {
            ArtifactError::MissingFile { dir: self.root.clone(), file: rel.to_owned() }
        })
    }

    /// Moves the verified bytes of `rel` out (used for the weights, to avoid a copy).
    pub(crate) fn take_bytes(&mut self, rel: &str) -> Result<Vec<u8>, ArtifactError> {
        self.files.get_mut(rel).map(|file| std::mem::take(&mut file.bytes)).ok_or_else(|| {
            ArtifactError::MissingFile { dir: self.root.clone(), file: rel.to_owned() }
        })
    }

    fn require_safetensors(&self) -> Result<(), ArtifactError> {
        if self.files.contains_key("model.safetensors") {
            return Ok(());
        }
        let pickle = self.files.keys().find(|rel| {
            [".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle"].iter().any(|ext| rel.ends_with(ext))
        });
        match pickle {
            Some(file) => {
                Err(ArtifactError::PickleOnly { dir: self.root.clone(), file: file.clone() })
            }
            None => Err(ArtifactError::NoSafetensors { dir: self.root.clone() }),
        }
    }
}

/// The digest `evicortex model digest DIR` prints: SHA-256 over the `sha256sum`-style listing
/// (`<hex>  <relative path>\n`, sorted by path) of every regular file under `dir`.
pub fn directory_digest(dir: &Path) -> Result<Sha256Digest, ArtifactError> {
    let found = scan_dir(dir)?;
    let mut digests = Vec::with_capacity(found.len());
    for (rel, path) in &found {
        let bytes = fs_err::read(path).map_err(|err| ArtifactError::io(path, err))?;
        digests.push((rel.as_str(), Sha256Digest::of(&bytes)));
    }
    Ok(listing_digest(digests.into_iter()))
}

/// Every regular file under `dir`, keyed by `/`-separated relative path. Refuses symlinks
/// (including `dir` itself) and anything that is not a file or directory.
fn scan_dir(dir: &Path) -> Result<BTreeMap<String, PathBuf>, ArtifactError> {
    let meta = fs_err::symlink_metadata(dir).map_err(|err| ArtifactError::io(dir, err))?;
    if meta.file_type().is_symlink() {
        return Err(ArtifactError::Symlink { path: dir.to_owned() });
    }
    if !meta.is_dir() {
        return Err(ArtifactError::NotRegular { path: dir.to_owned() });
    }
    let mut found = BTreeMap::new();
    let mut pending = vec![(dir.to_owned(), String::new())];
    while let Some((abs, rel_prefix)) = pending.pop() {
        let entries = fs_err::read_dir(&abs).map_err(|err| ArtifactError::io(&abs, err))?;
        for entry in entries {
            let entry = entry.map_err(|err| ArtifactError::io(&abs, err))?;
            let path = entry.path();
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                return Err(ArtifactError::PathEscapes { path: path.display().to_string() });
            };
            let rel = format!("{rel_prefix}{name}");
            check_relative_path(&rel)?;
            let file_type = fs_err::symlink_metadata(&path)
                .map_err(|err| ArtifactError::io(&path, err))?
                .file_type();
            if file_type.is_symlink() {
                return Err(ArtifactError::Symlink { path });
            } else if file_type.is_dir() {
                pending.push((path, format!("{rel}/")));
            } else if file_type.is_file() {
                found.insert(rel, path);
            } else {
                return Err(ArtifactError::NotRegular { path });
            }
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, rel: &str, bytes: &[u8]) {
        let path = dir.join(rel);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(path, bytes).unwrap();
    }

    #[test]
    fn relative_paths_that_escape_are_refused() {
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a\\b", "a/\u{7}"] {
            assert!(
                matches!(check_relative_path(bad), Err(ArtifactError::PathEscapes { .. })),
                "{bad:?}"
            );
        }
        for good in ["config.json", "1_Pooling/config.json", ".gitattributes"] {
            check_relative_path(good).unwrap();
        }
    }

    #[test]
    fn local_directory_must_match_its_recorded_digest() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "model.safetensors", b"weights");
        write(tmp.path(), "sub/config.json", b"{}");
        let digest = directory_digest(tmp.path()).unwrap();
        let artifacts = VerifiedArtifacts::open_local(tmp.path(), "local", digest).unwrap();
        assert_eq!(artifacts.bytes("sub/config.json").unwrap(), b"{}");

        write(tmp.path(), "sub/config.json", b"{\"changed\":1}");
        let err = VerifiedArtifacts::open_local(tmp.path(), "local", digest).unwrap_err();
        assert!(matches!(err, ArtifactError::DirectoryDigestMismatch { .. }), "{err}");
        assert!(err.is_integrity_failure());
    }

    #[test]
    fn pickle_only_directory_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "pytorch_model.bin", b"pickle");
        write(tmp.path(), "config.json", b"{}");
        let digest = directory_digest(tmp.path()).unwrap();
        let err = VerifiedArtifacts::open_local(tmp.path(), "local", digest).unwrap_err();
        assert!(
            matches!(err, ArtifactError::PickleOnly { ref file, .. } if file == "pytorch_model.bin"),
            "{err}"
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_inside_the_artifact_root_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret", b"outside");
        write(tmp.path(), "model.safetensors", b"weights");
        std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("config.json"))
            .unwrap();
        let err = directory_digest(tmp.path()).unwrap_err();
        assert!(matches!(err, ArtifactError::Symlink { .. }), "{err}");

        let link = outside.path().join("link");
        std::os::unix::fs::symlink(tmp.path(), &link).unwrap();
        let err = directory_digest(&link).unwrap_err();
        assert!(matches!(err, ArtifactError::Symlink { .. }), "{err}");
    }

    #[test]
    fn pinned_directory_with_extra_or_missing_or_altered_files_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        write(tmp.path(), "model.safetensors", b"weights");
        write(tmp.path(), "config.json", b"{}");
        let files = |entries: &[(&str, &[u8])]| {
            entries
                .iter()
                .map(|(path, bytes)| crate::manifest::ManifestFile {
                    path: (*path).to_owned(),
                    size: bytes.len() as u64,
                    sha256: Sha256Digest::of(bytes),
                })
                .collect::<Vec<_>>()
        };
        let mut manifest = ModelManifest::all_minilm_l6_v2();
        manifest.files = files(&[("config.json", b"{}"), ("model.safetensors", b"weights")]);
        VerifiedArtifacts::open_pinned(tmp.path(), &manifest).unwrap();

        manifest.files = files(&[("config.json", b"{}"), ("model.safetensors", b"other")]);
        let err = VerifiedArtifacts::open_pinned(tmp.path(), &manifest).unwrap_err();
        assert!(matches!(err, ArtifactError::DigestMismatch { .. }), "{err}");

        manifest.files = files(&[("model.safetensors", b"weights")]);
        let err = VerifiedArtifacts::open_pinned(tmp.path(), &manifest).unwrap_err();
        assert!(matches!(err, ArtifactError::UnexpectedFile { .. }), "{err}");

        manifest.files =
            files(&[("config.json", b"{}"), ("model.safetensors", b"weights"), ("vocab.txt", b"")]);
        let err = VerifiedArtifacts::open_pinned(tmp.path(), &manifest).unwrap_err();
        assert!(matches!(err, ArtifactError::MissingFile { .. }), "{err}");
    }
}
