use evicortex_embed::ModelCache;
use evicortex_reader::{
    GGUF_FILE, GgufManifest, LocalGgufReader, ReaderModelError, reader_install_dir,
};

use crate::{TEST_MODEL, model_cache, test_reader};

/// A private cache holding a copy of the installed test model.
fn copied_cache() -> (tempfile::TempDir, ModelCache, GgufManifest) {
    test_reader(); // fails with the fetch command when the weights are missing
    let manifest = GgufManifest::named(TEST_MODEL).unwrap();
    let source = reader_install_dir(&model_cache(), &manifest).join(GGUF_FILE);
    let tmp = tempfile::tempdir().unwrap();
    let cache = ModelCache::at(tmp.path());
    let dir = reader_install_dir(&cache, &manifest);
    fs_err::create_dir_all(&dir).unwrap();
    fs_err::copy(&source, dir.join(GGUF_FILE)).unwrap();
    (tmp, cache, manifest)
}

#[test]
fn a_missing_model_names_the_fetch_command() {
    let tmp = tempfile::tempdir().unwrap();
    let manifest = GgufManifest::named(TEST_MODEL).unwrap();
    let err = LocalGgufReader::load(&ModelCache::at(tmp.path()), &manifest).unwrap_err();
    assert!(matches!(err, ReaderModelError::ModelMissing { .. }), "{err}");
    assert!(err.to_string().contains("evicortex model fetch smollm2-135m-instruct-q4_1"), "{err}");
    assert!(!err.is_integrity_failure());
}

#[test]
fn altered_or_extra_bytes_fail_closed() {
    let (_tmp, cache, manifest) = copied_cache();
    let path = reader_install_dir(&cache, &manifest).join(GGUF_FILE);
    let mut bytes = fs_err::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    fs_err::write(&path, &bytes).unwrap();
    let err = LocalGgufReader::load(&cache, &manifest).unwrap_err();
    assert!(matches!(err, ReaderModelError::DigestMismatch { what: "sha256", .. }), "{err}");
    assert!(err.is_integrity_failure());

    bytes[last] ^= 1;
    fs_err::write(&path, &bytes).unwrap();
    LocalGgufReader::load(&cache, &manifest).expect("restored bytes load");
    fs_err::write(path.with_file_name("extra.bin"), b"x").unwrap();
    let err = LocalGgufReader::load(&cache, &manifest).unwrap_err();
    assert!(matches!(err, ReaderModelError::UnexpectedFile { .. }), "{err}");
}

#[test]
fn metadata_that_differs_from_the_manifest_fails_closed() {
    let (_tmp, cache, mut manifest) = copied_cache();
    manifest.expect.tokenizer_pre = "qwen2".to_owned();
    let err = LocalGgufReader::load(&cache, &manifest).unwrap_err();
    match &err {
        ReaderModelError::MetadataMismatch { key, expected, found, .. } => {
            assert_eq!(
                (key.as_str(), expected.as_str(), found.as_str()),
                ("tokenizer.ggml.pre", "qwen2", "smollm")
            );
        }
        other => panic!("expected MetadataMismatch, got {other}"),
    }
    assert!(err.is_integrity_failure());
}
