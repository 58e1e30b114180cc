//! `evicortex stats`: counts of what the store holds.

use std::path::Path;

use crate::stdout::outln;

/// Arguments of `evicortex stats`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    evicortex stats\n  \
    evicortex stats --json | jq .turns")]
pub struct StatsArgs {
    /// Print JSON (fields include turns, namespaces, sessions, erased_turns, bytes_on_disk).
    #[arg(long)]
    pub json: bool,
}

/// Runs `evicortex stats` on the store in `store`.
pub fn run(store: &Path, args: &StatsArgs) -> anyhow::Result<()> {
    let memory = super::open_existing(store)?;
    let stats = memory.stats()?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&stats)?)?;
        return Ok(());
    }
    let s = &stats.ledger;
    outln!("store          {}", store.display())?;
    outln!("turns          {}", s.turns)?;
    outln!("namespaces     {}", s.namespaces)?;
    outln!("sessions       {}", s.sessions)?;
    outln!("erased turns   {}", s.erased_turns)?;
    outln!("redactions     {}", s.redactions)?;
    outln!("records        {}", s.records)?;
    outln!("head           {}", s.head.map_or("(empty)".to_owned(), |h| h.to_string()))?;
    outln!("chain head     {}", s.chain_head)?;
    outln!("format         v{}", s.format_version)?;
    outln!("ledger bytes   {}", s.bytes_on_disk)?;
    Ok(())
}
