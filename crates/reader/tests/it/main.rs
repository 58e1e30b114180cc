//! Integration tests of the reader crate: the local GGUF reader on its real weights, the
//! chat-completions client, and the answer cache.

/// The answer cache resumes: a second read of the same prompt is a hit with the same answer.
mod answer_cache;
/// The client refuses a configuration it cannot use.
mod chat_completions;
/// Loading fails closed: altered bytes, missing files, wrong metadata.
mod integrity;
/// The local reader: tokenizer, chat template, greedy decoding, window refusal.
mod local_reader;

use std::{path::PathBuf, sync::OnceLock};

use evicortex_embed::ModelCache;
use evicortex_reader::{GgufManifest, LocalGgufReader, ReaderModelError, fetch_command};

/// The smallest committed reader, used by every test that decodes.
pub const TEST_MODEL: &str = "smollm2-135m-instruct-q4_1";

/// The test model, loaded once per test binary. Missing weights fail the test with the command
/// that installs them.
pub fn test_reader() -> &'static LocalGgufReader {
    static READER: OnceLock<LocalGgufReader> = OnceLock::new();
    READER.get_or_init(|| load_or_explain(TEST_MODEL))
}

/// Loads a committed reader or panics with the fetch command.
#[track_caller]
pub fn load_or_explain(name: &str) -> LocalGgufReader {
    match LocalGgufReader::load_pinned(name) {
        Ok(reader) => reader,
        Err(err @ ReaderModelError::ModelMissing { .. }) => {
            let manifest = GgufManifest::named(name).expect("committed");
            panic!(
                "{err}\nthis test needs the pinned reader weights: run `{}` (scripts/test does)",
                fetch_command(&manifest)
            )
        }
        Err(err) => panic!("loading reader {name}: {err}"),
    }
}

/// The model cache the environment names.
pub fn model_cache() -> ModelCache {
    ModelCache::from_env().expect("model cache location")
}

/// The evaluation data directory (`EVICORTEX_DATA_DIR`, else `../shared/data`).
pub fn data_file(rel: &str) -> PathBuf {
    let dir = match std::env::var_os("EVICORTEX_DATA_DIR") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data"),
    };
    let path = dir.join(rel);
    assert!(
        path.is_file(),
        "evaluation data {} is missing; set EVICORTEX_DATA_DIR to the directory holding locomo/",
        path.display()
    );
    path
}
