//! `evicortex encoders`: which encoders embed the store's turns and are fused by compile.

use std::path::Path;

use anyhow::Context;

use crate::stdout::outln;

/// Arguments of `evicortex encoders`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    evicortex encoders\n  \
    evicortex encoders --set all-minilm-l6-v2,all-mpnet-base-v2\n  \
    evicortex embed   # then embeds the turns with every encoder named")]
pub struct EncodersArgs {
    /// Name the store's encoders (catalogue names, comma-separated, the leading one first: it
    /// decides abstention support and context vectors; the others' dense lists are fused
    /// beside its own). Vectors of encoders no longer named stay cached for a later return.
    #[arg(long, value_name = "NAMES", value_delimiter = ',')]
    pub set: Option<Vec<String>>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `evicortex encoders` on the store in `store`.
pub fn run(store: &Path, args: &EncodersArgs) -> anyhow::Result<()> {
    if let Some(names) = &args.set {
        let _lock = evicortex::StoreLock::acquire(store)?;
        let names: Vec<String> = names.iter().map(|n| n.trim().to_owned()).collect();
        evicortex::check_store_encoders(&names)
            .map_err(|e| crate::exit::UsageError(format!("--set: {e}")))?;
        evicortex::set_store_encoders(store, &names).context("naming the store's encoders")?;
    }
    let names = evicortex::store_encoder_names(store).context("reading the store's encoders")?;
    if args.json {
        outln!("{}", serde_json::json!({ "encoders": names }))?;
        return Ok(());
    }
    for (i, name) in names.iter().enumerate() {
        let role = if i == 0 { "leading" } else { "fused" };
        outln!("{role:8} {name}")?;
    }
    if args.set.is_some() {
        outln!(
            "`evicortex embed` embeds the stored turns with every encoder named; a running \
             `evicortex serve` uses them after a restart"
        )?;
    }
    Ok(())
}
