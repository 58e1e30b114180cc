//! `evicortex verify`: the full integrity check, read-only.

use std::path::Path;

use anyhow::Context;
use evicortex::{Memory, VerifyError};

use crate::{progress, stdout::outln};

/// Arguments of `evicortex verify`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Opens the store read-only (even one that fails the cheap open-time \
    check), recomputes every record's digest and the whole hash chain, checks every redaction, \
    and names the first bad record. Exit code 4 when anything does not match; with --json the \
    failure is printed as JSON too (`ok: false`, `error`, `first_bad_record`).\n\n\
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
    let verified = memory.verify_with_progress(&mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let report = match verified {
        Ok(report) => report,
        Err(failure) => {
            if args.json {
                // A script asking for JSON gets it exactly when verification fails too.
                let first_bad_record = match &failure {
                    VerifyError::BadRecord { position, .. } => Some(position.raw()),
                    _ => None,
                };
                let json = serde_json::json!({
                    "ok": false,
                    "error": failure.to_string(),
                    "first_bad_record": first_bad_record,
                    "open_problem": memory.open_problem(),
                });
                outln!("{}", serde_json::to_string_pretty(&json)?)?;
            }
            return Err(anyhow::Error::new(failure)
                .context(format!("verifying {}", memory.ledger_path().display())));
        }
    };
    if args.json {
        let json = evicortex::front_end::VerifyResponse::from(&report);
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
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
