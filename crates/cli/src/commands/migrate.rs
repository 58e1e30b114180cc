//! `evicortex migrate`: upgrade a store whose ledger has an older format version, or copy an
//! embedded store's ledger into PostgreSQL (`--to postgres://...`).

use std::path::Path;

use anyhow::Context;

use crate::{progress, stdout::outln};

/// Arguments of `evicortex migrate`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Upgrades the ledger to the current format version in place, in one \
    transaction: it verifies the whole old chain first (exit code 4, nothing changed, when it \
    does not verify), gives every live turn a fresh content salt, recomputes every digest and \
    the chain, checks the result, commits, and scrubs the old digests from the files. The old \
    chain head is printed and kept in the ledger's metadata for whoever recorded it elsewhere. \
    A store already current is left alone. A store another evicortex process holds (a \
    server) is refused, naming it: stop it first.\n\n\
    With --to postgres://..., the ledger of the store --from (default --store) is copied record \
    for record into the empty PostgreSQL ledger at that URL, in one transaction (nothing is \
    written when the source does not verify or the target is not empty), then both ledgers \
    are verified and their reports compared: the same records, head and chain head. Then the \
    store's embedding cache (its vectors, and the overlength policy it was embedded with) and \
    its encoder list are copied into the database's derived directory on this machine \
    (EVICORTEX_DERIVED_DIR, else the user's cache), unless that directory already holds them, \
    so that nothing is embedded again; other machines' processes compute their own. The \
    indexes are rebuilt from the ledger by the first process that opens the URL. The \
    embedded store is left as it is.\n\n\
    Examples:\n  \
    evicortex migrate\n  \
    evicortex migrate --store /var/lib/evicortex --json\n  \
    evicortex migrate --from /var/lib/evicortex \\\n    \
    --to postgres://evicortex@db.internal/evicortex")]
pub struct MigrateArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// The embedded store whose ledger `--to` copies (default: --store).
    #[arg(long, value_name = "DIR", requires = "to")]
    pub from: Option<std::path::PathBuf>,
    /// Copy the ledger into the empty PostgreSQL ledger at this URL instead of upgrading it.
    #[arg(long, value_name = "URL")]
    pub to: Option<String>,
}

/// Runs `evicortex migrate` on the store in `store`.
pub fn run(store: &Path, args: &MigrateArgs) -> anyhow::Result<()> {
    if let Some(url) = &args.to {
        return to_postgres(args.from.as_deref().unwrap_or(store), url, args.json);
    }
    // Migration rewrites every record: no other process may write meanwhile. A missing store
    // is not created for the lock; the migration reports it.
    let _lock = if store.is_dir() { Some(evicortex::StoreLock::acquire(store)?) } else { None };
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

fn to_postgres(from: &Path, url: &str, json: bool) -> anyhow::Result<()> {
    let shown = evicortex::redact_postgres_password(url);
    let bar = progress::bar(0, "copying");
    let copied = evicortex::migrate_to_postgres(from, url, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    });
    bar.finish_and_clear();
    let migration =
        copied.with_context(|| format!("copying the ledger of {} to {shown}", from.display()))?;
    let (embedded, postgres) = (&migration.check.embedded, &migration.check.postgres);
    if json {
        let report = serde_json::json!({
            "to": shown,
            "embedded": embedded,
            "postgres": postgres,
            "derived_dir": migration.derived_dir,
            "embedding_cache": migration.embedding_cache,
            "encoders": migration.encoders,
        });
        outln!("{}", serde_json::to_string_pretty(&report)?)?;
    } else {
        for (name, r) in [(from.display().to_string(), embedded), (shown, postgres)] {
            outln!(
                "verified {name}: {} records ({} turns, {} erased, {} redactions), head {}, chain head {}",
                r.records,
                r.turns,
                r.erased_turns,
                r.redactions,
                r.head.map_or("(empty)".to_owned(), |h| h.to_string()),
                r.chain_head
            )?;
        }
        outln!("copied: both ledgers verify with the same records, head and chain head")?;
        let database = "the database";
        for (what, carried, to) in [
            ("embedding cache", migration.embedding_cache, database),
            ("encoder list", migration.encoders, database),
        ] {
            match carried {
                evicortex::CarriedFile::Copied => outln!("{what}: copied to {to}")?,
                evicortex::CarriedFile::Kept => outln!("{what}: {to} already holds one; kept it")?,
                evicortex::CarriedFile::Absent => outln!("{what}: none in {}", from.display())?,
            }
        }
    }
    Ok(())
}
