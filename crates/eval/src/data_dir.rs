//! Where the evaluation data lives: `$EVICORTEX_DATA_DIR`, else `../shared/data` beside the
//! repository.

use std::path::{Path, PathBuf};

/// The environment variable that overrides the data directory.
pub const DATA_DIR_ENV: &str = "EVICORTEX_DATA_DIR";

/// The data directory: `$EVICORTEX_DATA_DIR` if set, else `<repository_root>/../shared/data`.
pub fn data_dir(repository_root: &Path) -> PathBuf {
    match std::env::var_os(DATA_DIR_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => repository_root.join("..").join("shared").join("data"),
    }
}
