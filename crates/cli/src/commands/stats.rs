//! `evicortex stats`: counts of what the store holds.

use std::path::Path;

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
        println!("{}", serde_json::to_string_pretty(&stats)?);
        return Ok(());
    }
    let s = &stats.ledger;
    println!("store          {}", store.display());
    println!("turns          {}", s.turns);
    println!("namespaces     {}", s.namespaces);
    println!("sessions       {}", s.sessions);
    println!("erased turns   {}", s.erased_turns);
    println!("redactions     {}", s.redactions);
    println!("records        {}", s.records);
    println!("head           {}", s.head.map_or("(empty)".to_owned(), |h| h.to_string()));
    println!("chain head     {}", s.chain_head);
    println!("format         v{}", s.format_version);
    println!("ledger bytes   {}", s.bytes_on_disk);
    Ok(())
}
