//! `evicortex-bench ann`: the approximate (HNSW) vector index audited against exact cosine on
//! real embeddings, and its compile-path latency beside the exact scan measured in the same run.

mod audit_compile;
mod audit_set;
mod graph;
mod pgvector;
mod prepare;
mod run;
mod size_store;
mod sketch;
mod table;

use std::sync::Arc;

use anyhow::Context;
use evicortex::{Encoder, Overlength};

/// Arguments of `evicortex-bench ann`.
#[derive(Debug, clap::Args)]
pub struct AnnBenchArgs {
    /// What to do.
    #[command(subcommand)]
    pub step: AnnStep,
}

/// The steps of the ANN audit.
#[derive(Debug, clap::Subcommand)]
pub enum AnnStep {
    /// Writes the audit namespace (real LongMemEval S turns and sentence pieces) into a store of
    /// its own; embed it afterwards with `evicortex --store DIR embed --overlength window`.
    Prepare(prepare::PrepareArgs),
    /// Audits the HNSW graph against the exact scan at each size: recall@50 (with and without
    /// an as-of filter), build time, bytes, and compile latency beside the exact scan.
    Run(run::RunArgs),
}

/// Runs `evicortex-bench ann`.
pub fn run(args: &AnnBenchArgs) -> anyhow::Result<()> {
    match &args.step {
        AnnStep::Prepare(args) => prepare::run(args),
        AnnStep::Run(args) => run::run(args),
    }
}

/// The pinned encoder with the given overlength policy.
fn load_encoder(overlength: Overlength) -> anyhow::Result<Arc<dyn Encoder>> {
    evicortex::load_pinned_encoder(overlength).context("loading the pinned encoder")
}
