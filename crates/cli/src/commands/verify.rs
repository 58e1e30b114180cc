//! `evicortex verify`: the full integrity check, read-only.

use std::path::Path;

use anyhow::Context;
use evicortex::Memory;

use crate::{progress, stdout::outln};

/// Arguments of `evicortex verify`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Opens the store read-only (even one that fails the cheap open-time \
    check), recomputes every record's digest and the whole hash chain, checks every redaction, \
    and names the first bad record. Exit code 4 when anything does not match.\n\n\
    Examples:\n  \
    evicortex verify\n  \
    evicortex --store /var/lib/evicortex verify --json")]
pub struct VerifyArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs `evicortex verify` on the store in `store`.
pub fn run(store: &Path, args: &VerifyArgs) -> anyhow::Result<()> {
    let memory = Memory::open_read_only(store)
        .with_context(|| format!("opening the store {} read-only", store.display()))?;
    if let Some(problem) = memory.open_problem() {
        eprintln!("warning: the open-time check failed: {problem}");
    }
    let bar = progress::bar(0, "verifying");
    let report = memory
        .verify_with_progress(&mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
        .with_context(|| format!("verifying {}", memory.ledger_path().display()))?;
    bar.finish_and_clear();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        outln!(
            "ok: {} records verified ({} turns, {} erased, {} redactions); head {}, chain {}",
            report.records,
            report.turns,
            report.erased_turns,
            report.redactions,
            report.head.map_or("(empty)".to_owned(), |h| h.to_string()),
            report.chain_head
        )?;
    }
    Ok(())
}
