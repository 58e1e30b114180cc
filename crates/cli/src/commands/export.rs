//! `evicortex export`: turns as JSONL that `ingest` takes back.

use std::{io::Write, path::Path};

/// Arguments of `evicortex export`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Writes live (unerased) turns in ledger order, one JSON object per \
    line, in the format `ingest` reads; texts round-trip byte for byte.\n\n\
    Examples:\n  \
    evicortex export > backup.jsonl\n  \
    evicortex export --namespace alice --output alice.jsonl\n  \
    evicortex --store copy ingest backup.jsonl")]
pub struct ExportArgs {
    /// Export only this namespace.
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Write to this file instead of standard output.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
}

/// Runs `evicortex export` on the store in `store`.
pub fn run(store: &Path, args: &ExportArgs) -> anyhow::Result<()> {
    let namespace = args.namespace.as_deref().map(super::namespace_flag).transpose()?;
    let memory = super::open_existing(store)?;
    let summary = match &args.output {
        Some(path) => {
            let file = fs_err::File::create(path)?;
            let mut out = std::io::BufWriter::new(file);
            let summary = memory.export(namespace.as_ref(), &mut out)?;
            out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            summary
        }
        None => {
            // A reader that goes away early (`| head`) is not a failure: see `stdout.rs`.
            let mut out = std::io::BufWriter::new(crate::stdout::stdout());
            let summary = memory.export(namespace.as_ref(), &mut out)?;
            out.flush()?;
            summary
        }
    };
    eprintln!("exported {} turns", summary.turns);
    Ok(())
}
