use evicortex_embed::{ArtifactError, ModelCache, ModelManifest, VerifiedArtifacts};

#[test]
fn a_tampered_copy_fails_closed() {
    let manifest = ModelManifest::all_minilm_l6_v2();
    let installed = crate::support::pinned_artifacts();
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("model");
    for (rel, _) in installed.file_digests() {
        let path = copy.join(rel);
        fs_err::create_dir_all(path.parent().unwrap()).unwrap();
        fs_err::write(&path, installed.bytes(rel).unwrap()).unwrap();
    }
    VerifiedArtifacts::open_pinned(&copy, &manifest).unwrap();

    let mut config = installed.bytes("config.json").unwrap().to_vec();
    config[10] ^= 1;
    fs_err::write(copy.join("config.json"), &config).unwrap();
    let err = VerifiedArtifacts::open_pinned(&copy, &manifest).unwrap_err();
    assert!(matches!(err, ArtifactError::DigestMismatch { .. }), "{err}");
    assert!(err.is_integrity_failure());

    fs_err::write(copy.join("config.json"), installed.bytes("config.json").unwrap()).unwrap();
    fs_err::write(copy.join("pytorch_model.bin"), b"pickle").unwrap();
    let err = VerifiedArtifacts::open_pinned(&copy, &manifest).unwrap_err();
    assert!(
        matches!(err, ArtifactError::UnexpectedFile { ref file, .. } if file == "pytorch_model.bin"),
        "{err}"
    );
}

#[test]
fn a_missing_model_names_the_fetch_command() {
    let tmp = tempfile::tempdir().unwrap();
    let err =
        ModelCache::at(tmp.path()).open_verified(&ModelManifest::all_minilm_l6_v2()).unwrap_err();
    assert!(err.to_string().contains("evicortex model fetch all-minilm-l6-v2"), "{err}");
}
