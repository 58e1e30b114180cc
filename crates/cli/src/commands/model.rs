//! `evicortex model`: the catalogue of pinned encoders; fetch, list, locate, verify and digest
//! their artifacts.

use std::{ffi::OsString, path::PathBuf};

use anyhow::Context;
use evicortex::{
    GGUF_FILE, GgufManifest, LocalGgufReader, ReaderFetchOutcome, fetch_reader_model,
    reader_install_dir,
};
use evicortex_embed::{
    DEFAULT_MODEL, InstallState, ModelBackend, ModelCache, ModelSource, PinnedModel,
    VerifiedArtifacts, catalogue, directory_digest, pinned_model,
};
use evicortex_fetch::FetchOutcome;

use crate::stdout::outln;

/// Arguments of `evicortex model`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    evicortex model list\n  \
    evicortex model fetch\n  \
    evicortex model verify")]
pub struct ModelArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ModelCommand,
}

/// The `model` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum ModelCommand {
    /// Download a pinned model with pip (wheels from PyPI, no code run), extract its model
    /// directory, verify every file against the committed manifest, install atomically.
    #[command(after_help = "The model cache is $EVICORTEX_MODELS_DIR, else \
        ${XDG_CACHE_HOME:-$HOME/.cache}/evicortex/models. pip is run as \
        `$EVICORTEX_PYTHON -m pip` (default python3). Does nothing when a verified copy is \
        installed; replaces a copy that fails verification. `evicortex model list` names the \
        models.\n\n\
        Examples:\n  evicortex model fetch\n  evicortex model fetch all-mpnet-base-v2\n  \
        evicortex model fetch --all")]
    Fetch {
        /// The catalogue name (default: all-minilm-l6-v2), or a reader's name (`evicortex
        /// model list`).
        #[arg(value_name = "NAME", conflicts_with = "all")]
        name: Option<String>,
        /// Fetch every encoder of the catalogue (readers are fetched by name).
        #[arg(long)]
        all: bool,
    },
    /// List the catalogue: each model's architecture, dimension, maximum length, size, whether
    /// it is installed, its packages and the identity its vectors carry.
    List,
    /// Print a model's verified directory (exit code 5 when it is not installed).
    Path {
        /// The catalogue name (default: all-minilm-l6-v2).
        #[arg(value_name = "NAME")]
        name: Option<String>,
    },
    /// Check an installed model, or DIR, against the pinned manifest: every file, its SHA-256,
    /// nothing missing, nothing extra, no symlinks.
    #[command(after_help = "Examples:\n  evicortex model verify\n  evicortex model verify \
        all-mpnet-base-v2\n  evicortex model verify --path ./my-copy")]
    Verify {
        /// The catalogue name (default: all-minilm-l6-v2).
        #[arg(value_name = "NAME")]
        name: Option<String>,
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

/// The catalogue entry `name` (default: the default model); an unknown name is a usage error.
pub fn named(name: Option<&str>) -> anyhow::Result<&'static PinnedModel> {
    pinned_model(name.unwrap_or(DEFAULT_MODEL))
        .map_err(|err| crate::exit::UsageError(err.to_string()).into())
}

/// Runs `evicortex model`.
pub fn run(args: &ModelArgs) -> anyhow::Result<()> {
    match &args.command {
        ModelCommand::Fetch { name, all } => {
            if let Some(reader) = reader_named(name.as_deref()) {
                return fetch_reader(&reader);
            }
            let models: Vec<&PinnedModel> =
                if *all { catalogue().iter().collect() } else { vec![named(name.as_deref())?] };
            for model in models {
                fetch_one(model)?;
            }
        }
        ModelCommand::List => list()?,
        ModelCommand::Path { name } if reader_named(name.as_deref()).is_some() => {
            let reader = reader_named(name.as_deref()).expect("checked");
            let cache = ModelCache::from_env()?;
            let file = reader_install_dir(&cache, &reader).join(GGUF_FILE);
            if !file.is_file() {
                LocalGgufReader::load(&cache, &reader)?;
            }
            outln!("{}", file.display())?;
        }
        ModelCommand::Verify { name, path: None } if reader_named(name.as_deref()).is_some() => {
            let reader = reader_named(name.as_deref()).expect("checked");
            let loaded = LocalGgufReader::load(&ModelCache::from_env()?, &reader)?;
            outln!(
                "ok: {} verified (sha256 {}, GGUF metadata as pinned): {}",
                reader.name,
                reader.gguf.sha256.to_hex(),
                evicortex::Reader::identity(&loaded).label()
            )?;
        }
        ModelCommand::Path { name } => {
            let model = named(name.as_deref())?;
            let artifacts = ModelCache::from_env()?.open_verified(model.manifest())?;
            outln!("{}", artifacts.root().display())?;
        }
        ModelCommand::Verify { name, path } => {
            let model = named(name.as_deref())?;
            let manifest = model.manifest();
            let dir = match path {
                Some(dir) => dir.clone(),
                None => ModelCache::from_env()?.install_dir(manifest),
            };
            let artifacts = VerifiedArtifacts::open_pinned(&dir, manifest)?;
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

/// Installs the pinned GGUF reader `manifest` (its wheels' parts joined and digest-checked).
fn fetch_reader(manifest: &GgufManifest) -> anyhow::Result<()> {
    let cache = ModelCache::from_env()?;
    let python: OsString = std::env::var_os("EVICORTEX_PYTHON").unwrap_or_else(|| "python3".into());
    let spinner = crate::progress::spinner(&format!("fetching {}", manifest.name));
    let outcome = fetch_reader_model(&cache, manifest, &python);
    spinner.finish_and_clear();
    match outcome.with_context(|| format!("fetching {}", manifest.name))? {
        ReaderFetchOutcome::AlreadyInstalled(dir) => {
            outln!("{} already installed and verified: {}", manifest.name, dir.display())?
        }
        ReaderFetchOutcome::Installed(dir) => {
            outln!("installed {} (sha256 verified): {}", manifest.name, dir.display())?
        }
    }
    Ok(())
}

/// The committed reader named `name`, if it is one.
fn reader_named(name: Option<&str>) -> Option<GgufManifest> {
    name.and_then(|name| GgufManifest::named(name).ok())
}

fn fetch_one(model: &PinnedModel) -> anyhow::Result<()> {
    let manifest = model.manifest();
    let cache = ModelCache::from_env()?;
    let python: OsString = std::env::var_os("EVICORTEX_PYTHON").unwrap_or_else(|| "python3".into());
    let spinner = crate::progress::spinner(&format!("fetching {}", model.name()));
    let outcome = evicortex_fetch::fetch(&cache, manifest, &python);
    spinner.finish_and_clear();
    match outcome.with_context(|| format!("fetching {}", model.name()))? {
        FetchOutcome::AlreadyInstalled(dir) => outln!(
            "{} ({} {}) already installed and verified: {}",
            model.name(),
            manifest.name,
            manifest.revision,
            dir.display()
        )?,
        FetchOutcome::Installed(dir) => outln!(
            "installed {} ({} {}, {} files verified): {}",
            model.name(),
            manifest.name,
            manifest.revision,
            manifest.files.len(),
            dir.display()
        )?,
        FetchOutcome::Replaced(dir) => outln!(
            "replaced a copy that failed verification; installed {} ({} {}): {}",
            model.name(),
            manifest.name,
            manifest.revision,
            dir.display()
        )?,
    }
    Ok(())
}

fn list() -> anyhow::Result<()> {
    let cache = ModelCache::from_env()?;
    outln!("model cache: {}", cache.root().display())?;
    outln!()?;
    outln!(
        "| name | architecture | dim | max tokens | pooling | size MiB | installed | identity (default settings, packed) | packages |"
    )?;
    outln!("|---|---|--:|--:|---|--:|---|---|---|")?;
    for model in catalogue() {
        let manifest = model.manifest();
        let config = model.default_config();
        let installed = match cache.install_state(manifest) {
            InstallState::Installed => "yes",
            InstallState::Missing => "no",
            InstallState::Incomplete => "incomplete (fetch again)",
        };
        let packages = match &manifest.source {
            ModelSource::Wheel(_) => manifest.source.requirements().join(" "),
            ModelSource::SplitZip(split) => format!(
                "{} .. {} (split zip, {} parts)",
                split.parts.first().map_or("", |p| p.pypi_requirement.as_str()),
                split.parts.last().map_or("", |p| p.pypi_requirement.as_str()),
                split.parts.len()
            ),
        };
        outln!(
            "| {}{} | {} | {} | {} | {} | {:.1} | {} | {} | {} |",
            model.name(),
            if model.name() == DEFAULT_MODEL { " (default)" } else { "" },
            model.architecture().model_type(),
            model.dimension(),
            config.max_tokens,
            format!("{:?}", config.pooling).to_lowercase(),
            manifest.total_size() as f64 / (1024.0 * 1024.0),
            installed,
            model.identity(&config, ModelBackend::Packed).digest(),
            packages,
        )?;
    }
    outln!()?;
    outln!("readers (`evicortex answer --reader NAME`; the first is the default):")?;
    outln!()?;
    outln!("| name | model | architecture | size MiB | installed | packages |")?;
    outln!("|---|---|---|--:|---|---|")?;
    for reader in GgufManifest::committed() {
        let installed = reader_install_dir(&cache, &reader).join(GGUF_FILE).is_file();
        let packages: Vec<&str> =
            reader.parts.iter().map(|p| p.source.pypi_requirement.as_str()).collect();
        outln!(
            "| {} | {} | {} | {:.1} | {} | {} |",
            reader.name,
            reader.model,
            reader.expect.architecture,
            reader.gguf.size as f64 / (1024.0 * 1024.0),
            if installed { "yes" } else { "no" },
            if packages.len() > 2 {
                format!(
                    "{} .. {} ({} wheels)",
                    packages[0],
                    packages[packages.len() - 1],
                    packages.len()
                )
            } else {
                packages.join(" ")
            },
        )?;
    }
    outln!()?;
    outln!(
        "installed = every pinned file present with its pinned size; `evicortex model verify \
         NAME` checks every digest (as every load does)."
    )?;
    Ok(())
}
