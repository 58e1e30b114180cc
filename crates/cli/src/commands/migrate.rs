//! `evicortex migrate`: upgrade a store whose ledger has an older format version.

use std::path::Path;

use anyhow::Context;

use crate::stdout::outln;

/// Arguments of `evicortex migrate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Upgrades the ledger to the current format version in place, in one \
    transaction: it verifies the whole old chain first (exit code 4, nothing changed, when it \
    does not verify), gives every live turn a fresh content salt, recomputes every digest and \
    the chain, checks the result, commits, and scrubs the old digests from the files. The old \
    chain head is printed and kept in the ledger's metadata for whoever recorded it elsewhere. \
    A store already current is left alone. Stop servers using the store first.\n\n\
    Examples:\n  \
    evicortex migrate\n  \
    evicortex migrate --store /var/lib/evicortex --json")]
pub struct MigrateArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `evicortex migrate` on the store in `store`.
pub fn run(store: &Path, args: &MigrateArgs) -> anyhow::Result<()> {
    let report = evicortex::migrate_store(store)
        .with_context(|| format!("migrating the store {}", store.display()))?;
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else if report.records == 0 && report.previous_chain_head.is_none() {
        outln!("already at ledger format version {}; nothing to do", report.to_version)?;
    } else {
        outln!(
            "migrated ledger format version {} to {}: {} records ({} erased turns); \
             old chain head {}, new chain head {}",
            report.from_version,
            report.to_version,
            report.records,
            report.erased_turns,
            report.previous_chain_head.map_or("(none)".to_owned(), |h| h.to_string()),
            report.chain_head
        )?;
    }
    Ok(())
}
