//! `evicortex embed`: embed one text with a catalogue encoder, or catch the store's embedding
//! cache up with its ledger.

use std::{path::Path, time::Instant};

use anyhow::Context;
use evicortex::{CatchUpLimits, EmbedReport, EmbeddingRole, Memory, Overlength};

use crate::{exit::UsageError, stdout::outln};

/// Arguments of `evicortex embed`.
#[derive(Debug, clap::Args)]
#[command(after_help = "With TEXT, prints its vector(s) and embeds nothing in the store: with \
    --encoder NAME, any catalogue encoder (`evicortex model list`); without it, the store's \
    leading encoder (`evicortex encoders`), the pinned default when the store names none. Without \
    TEXT, embeds every live turn of the store that has no vector under the encoder's identity: \
    identical texts once, shortest first, committed in chunks, so an interrupted run resumes. \
    Under `--overlength refuse` (the default) longer turns are not embedded and are listed \
    (exit code 2); `--overlength window` embeds them as overlapping windows.\n\n\
    Examples:\n  \
    evicortex embed --role query --json \"where did I move in May?\"\n  \
    evicortex embed --encoder all-mpnet-base-v2 --role query \"a question\"\n  \
    evicortex embed --role document --overlength truncate \"a long text ...\"\n  \
    evicortex --store ./mem embed --overlength window")]
pub struct EmbedArgs {
    /// The text to embed. Without it, embeds the store's pending turns.
    #[arg(value_name = "TEXT")]
    pub text: Option<String>,
    /// The role of TEXT (required with TEXT; the store's turns are documents).
    #[arg(long, value_enum)]
    pub role: Option<RoleArg>,
    /// The catalogue encoder TEXT is embedded with (`evicortex model list`). Default: the
    /// store's leading encoder, else the pinned default. The store's turns are embedded with
    /// the store's encoders (`evicortex encoders --set`).
    #[arg(long, value_name = "NAME", requires = "text")]
    pub encoder: Option<String>,
    /// Longer than 256 tokens: refuse, truncate, window (64-token overlap) or window:N.
    /// Default: the policy the store was last embedded with, else refuse.
    #[arg(long, value_name = "POLICY", value_parser = parse_overlength)]
    pub overlength: Option<Overlength>,
    /// Print JSON (with TEXT): identity, token count and every vector.
    #[arg(long)]
    pub json: bool,
    /// Texts embedded and committed together when catching up.
    #[arg(long, default_value_t = CatchUpLimits::default().chunk_texts, value_name = "N")]
    pub chunk_texts: usize,
}

/// `--role`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RoleArg {
    /// A question asked of the memory.
    Query,
    /// Stored evidence.
    Document,
}

/// Parses `--overlength`.
pub fn parse_overlength(value: &str) -> Result<Overlength, String> {
    value.parse()
}

/// Opens the store in `store` with its encoders, under `overlength` or the policy it was last
/// embedded with.
fn open_with_encoders(store: &Path, overlength: Option<Overlength>) -> anyhow::Result<Memory> {
    let mut builder = Memory::builder(store);
    builder.store_encoders(overlength).context("loading the store's encoders")?;
    builder.open().with_context(|| format!("opening the store {}", store.display()))
}

/// Runs `evicortex embed`.
pub fn run(store: &Path, args: &EmbedArgs) -> anyhow::Result<()> {
    match &args.text {
        Some(text) => {
            let role = match args.role {
                Some(RoleArg::Query) => EmbeddingRole::Query,
                Some(RoleArg::Document) => EmbeddingRole::Document,
                None => {
                    return Err(UsageError(
                        "--role query|document is required with TEXT".to_owned(),
                    )
                    .into());
                }
            };
            embed_text(store, text, role, args)
        }
        None => {
            if args.role == Some(RoleArg::Query) {
                return Err(UsageError(
                    "the store's turns are embedded as documents; --role query needs TEXT"
                        .to_owned(),
                )
                .into());
            }
            if args.json {
                return Err(UsageError("--json needs TEXT".to_owned()).into());
            }
            crate::commands::open_existing(store)?;
            let _lock = evicortex::StoreLock::acquire(store)?;
            let memory = open_with_encoders(store, args.overlength)?;
            let report = catch_up(&memory, CatchUpLimits { chunk_texts: args.chunk_texts.max(1) })?;
            print_report(&report)?;
            if !report.refused.is_empty() {
                return Err(UsageError(format!(
                    "{} turns are longer than the encoder's 256 tokens and were not embedded (first: namespace {} record {}, {} tokens); \
                     rerun with --overlength window or truncate to embed them",
                    report.refused.len(),
                    report.refused[0].namespace,
                    report.refused[0].turn.raw(),
                    report.refused[0].tokens
                ))
                .into());
            }
            Ok(())
        }
    }
}

fn embed_text(
    store: &Path,
    text: &str,
    role: EmbeddingRole,
    args: &EmbedArgs,
) -> anyhow::Result<()> {
    let name = match &args.encoder {
        Some(name) => {
            evicortex::check_catalogue_encoder(name)
                .map_err(|err| UsageError(format!("--encoder {name}: {err}")))?;
            name.clone()
        }
        None => evicortex::store_encoder_names(store)
            .context("reading the store's encoders")?
            .swap_remove(0),
    };
    let overlength = args.overlength.unwrap_or(Overlength::Refuse);
    let encoder = evicortex::load_catalogue_encoder(&name, overlength)
        .with_context(|| format!("loading the encoder {name}"))?;
    let embedded = encoder.embed(role, &[text])?.remove(0);
    if args.json {
        let identity = encoder.identity();
        let windows: Vec<serde_json::Value> = embedded
            .windows
            .iter()
            .map(|w| {
                serde_json::json!({
                    "content_tokens": [w.content_tokens.start, w.content_tokens.end],
                    "vector": w.vector,
                })
            })
            .collect();
        let out = serde_json::json!({
            "identity_digest": encoder.identity_digest().to_hex(),
            "model": identity.model,
            "revision": identity.revision,
            "role": match role { EmbeddingRole::Query => "query", EmbeddingRole::Document => "document" },
            "max_tokens": identity.max_tokens,
            "overlength": identity.overlength.to_string(),
            "token_count": embedded.token_count,
            "dimension": identity.dimension,
            "vectors": windows,
        });
        outln!("{out}")?;
    } else {
        for window in &embedded.windows {
            let values: Vec<String> = window.vector.iter().map(|x| x.to_string()).collect();
            outln!("{}", values.join(" "))?;
        }
    }
    Ok(())
}

/// Embeds the store's pending turns with a progress bar (turns/s, ETA) on a terminal.
pub fn catch_up(memory: &Memory, limits: CatchUpLimits) -> anyhow::Result<EmbedReport> {
    let bar = crate::progress::tokens_bar("embedding");
    let started = Instant::now();
    let report = memory.catch_up(None, limits, &mut |p| {
        // Each encoder of the store starts a pass of its own.
        if p.done_texts == 0 {
            bar.reset();
        }
        bar.set_length(p.total_tokens);
        bar.set_position(p.done_tokens);
        let secs = started.elapsed().as_secs_f64().max(1e-9);
        bar.set_message(format!(
            "{}/{} turns, {:.0} turns/s, {:.0} tokens/s",
            p.done_texts,
            p.total_texts,
            p.done_texts as f64 / secs,
            p.done_tokens as f64 / secs
        ));
    });
    bar.finish_and_clear();
    Ok(report?)
}

/// Prints what a catch-up did, a line per encoder.
pub fn print_report(report: &EmbedReport) -> std::io::Result<()> {
    print_one(report)?;
    report.also.iter().try_for_each(print_one)
}

fn print_one(report: &EmbedReport) -> std::io::Result<()> {
    outln!(
        "embedded {} texts ({} tokens, {} vectors) in {:.1}s ({:.0} tokens/s); {} live turns, {} distinct texts, {} already cached, {} refused as overlength; identity {} ({})",
        report.embedded_texts,
        report.embedded_tokens,
        report.vectors_written,
        report.seconds,
        report.embedded_tokens as f64 / report.seconds.max(1e-9),
        report.live_turns,
        report.distinct_texts,
        report.already_cached,
        report.refused.len(),
        report.identity,
        report.model
    )
}

/// The ingest hook: embeds the new turns when the encoder is installed, says so when it is not.
pub fn after_ingest(
    store: &Path,
    no_embed: bool,
    overlength: Option<Overlength>,
) -> anyhow::Result<()> {
    if no_embed {
        outln!("embedding skipped (--no-embed); `evicortex embed` embeds pending turns later")?;
        return Ok(());
    }
    let mut builder = Memory::builder(store);
    match builder.store_encoders(overlength) {
        Ok(_) => {}
        Err(err)
            if evicortex::ErrorClass::of(&err) == Some(evicortex::ErrorClass::ModelMissing) =>
        {
            let name = match &err {
                evicortex::StoreEncodersError::Load { name, .. } => name.as_str(),
                _ => evicortex::DEFAULT_MODEL,
            };
            eprintln!(
                "note: the encoder {name} is not installed, so the turns were stored without \
                 vectors; run `evicortex model fetch {name}`, then `evicortex embed`"
            );
            return Ok(());
        }
        Err(err) => return Err(err).context("loading the store's encoders"),
    }
    let memory =
        builder.open().with_context(|| format!("opening the store {}", store.display()))?;
    let report = catch_up(&memory, CatchUpLimits::default())?;
    print_report(&report)?;
    if let Some(first) = report.refused.first() {
        eprintln!(
            "warning: {} turns are longer than the encoder's 256 tokens and were not embedded \
             (first: namespace {} record {}, {} tokens); `evicortex embed --overlength window` embeds them as \
             windows, which compile then uses",
            report.refused.len(),
            first.namespace,
            first.turn.raw(),
            first.tokens
        );
    }
    Ok(())
}
