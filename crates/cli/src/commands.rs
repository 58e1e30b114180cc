//! One module per subcommand, each with its `clap::Args` struct and a `run` function.

pub mod answer;
pub mod compile;
pub mod embed;
pub mod encoders;
pub mod erase;
pub mod eval;
pub mod export;
pub mod ingest;
pub mod keys;
pub mod mcp;
pub mod migrate;
pub mod model;
pub mod serve;
pub mod stats;
pub mod verify;

use std::path::Path;

use anyhow::Context;
use evicortex::{Memory, Namespace};

use crate::exit::UsageError;

/// The namespace `--namespace` names, or a usage error (exit 2) naming the flag.
pub fn namespace_flag(raw: &str) -> Result<Namespace, UsageError> {
    Namespace::new(raw).map_err(|e| UsageError(format!("--namespace: {e}")))
}

/// Opens an existing store for reading: refuses a missing store, and one that fails the
/// open-time integrity check (exit code 4; `verify` inspects such a store).
pub fn open_existing(store: &Path) -> anyhow::Result<Memory> {
    let memory = Memory::open_read_only(store)
        .with_context(|| format!("opening the store {}", store.display()))?;
    memory.require_intact().context("run `evicortex verify` to find the first bad record")?;
    Ok(memory)
}
