//! `evicortex erase`: forget a namespace, a session or one record.

use std::path::Path;

use anyhow::Context;
use evicortex::front_end::erase_target;
use evicortex::{Memory, SessionId, TurnId};

use crate::{exit::UsageError, stdout::outln};

/// Arguments of `evicortex erase`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Appends a redaction record to the ledger and removes the erased texts \
    (and speaker names and meta) physically from every file of the store, WAL and free pages \
    included. `verify` still passes: the chain keeps each erased record's digest.\n\n\
    Examples:\n  \
    evicortex erase --namespace alice\n  \
    evicortex erase --namespace alice --session 2024-05-02\n  \
    evicortex erase --namespace alice --record 17")]
pub struct EraseArgs {
    /// The namespace to erase from (all of it, unless --session or --record narrows it).
    #[arg(long, value_name = "NS")]
    pub namespace: String,
    /// Erase only this session of the namespace.
    #[arg(long, value_name = "S", conflicts_with = "record")]
    pub session: Option<String>,
    /// Erase only this record: its number in the namespace (the `[#N]` of a compiled context).
    #[arg(long, value_name = "SEQ")]
    pub record: Option<u64>,
}

/// Runs `evicortex erase` on the store in `store`.
pub fn run(store: &Path, args: &EraseArgs) -> anyhow::Result<()> {
    let namespace = super::namespace_flag(&args.namespace)?;
    let session = match &args.session {
        Some(session) => {
            Some(SessionId::new(session).map_err(|e| UsageError(format!("--session: {e}")))?)
        }
        None => None,
    };
    // Neither --session nor --record: the whole namespace.
    let all = (session.is_none() && args.record.is_none()).then_some(true);
    let target = erase_target(&namespace, session, args.record.map(TurnId::from_raw), all, "erase")
        .map_err(|e| UsageError(format!("{}: {}", e.field, e.reason)))?;
    let _lock = evicortex::StoreLock::acquire(store)?;
    // The memory purges every derived store it holds (the embedding cache included) itself.
    let memory =
        Memory::open(store).with_context(|| format!("opening the store {}", store.display()))?;
    let receipt = memory.erase(&target).with_context(|| format!("erasing {target}"))?;
    match receipt.redaction {
        Some(redaction) => outln!(
            "erased {} turn(s) of {target} (redaction record {redaction}); {} already erased; files scrubbed",
            receipt.erased.len(),
            receipt.already_erased
        ),
        None => outln!(
            "nothing left to erase in {target}: {} turn(s) were already erased; files scrubbed again",
            receipt.already_erased
        ),
    }?;
    Ok(())
}
