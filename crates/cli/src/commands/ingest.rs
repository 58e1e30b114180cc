//! `evicortex ingest`: append turns from JSONL files to the ledger.

use std::{io::Read, path::Path};

use anyhow::Context;
use evicortex::front_end::parse_jsonl_numbered;
use evicortex::{DEFAULT_MAX_TEXT_BYTES, IngestOptions, Memory, Turn};

use crate::{progress, stdout::outln};

/// Arguments of `evicortex ingest`.
#[derive(Debug, clap::Args)]
#[command(after_help = "One turn per line, fields: namespace (or --namespace), session, turn \
    (integer), role (user|assistant|system|tool), optional speaker, text, time (RFC 3339 with \
    offset), optional meta (object). Unknown fields are refused.\n\n\
    All files are checked before anything is stored, against each other and against the \
    store, also with --commit-every: one bad or conflicting line rejects the whole call, naming \
    its file and line. Re-ingesting an identical turn is a no-op; the same (namespace, session, \
    turn) with other content is a conflict (exit code 2).\n\n\
    Examples:\n  \
    evicortex ingest examples/sample-conversation.jsonl\n  \
    evicortex ingest --namespace alice day1.jsonl day2.jsonl\n  \
    cat turns.jsonl | evicortex ingest -\n  \
    evicortex ingest --commit-every 1000 huge.jsonl")]
pub struct IngestArgs {
    /// JSONL files to ingest (`-` reads standard input).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<String>,
    /// Namespace of lines without a `namespace` field (lines naming another are refused).
    #[arg(long, value_name = "NS")]
    pub namespace: Option<String>,
    /// Refuse texts longer than this many bytes (never truncated).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_TEXT_BYTES)]
    pub max_text_bytes: usize,
    /// Commit every N turns instead of once for the whole call, printing an ack line after
    /// each durable batch. The input is still fully checked before the first commit, for
    /// conflicts with the store too (a concurrent writer can still conflict later).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub commit_every: Option<u64>,
    /// Do not embed the new turns (by default they are embedded when the encoder is installed;
    /// `evicortex embed` catches up later).
    #[arg(long)]
    pub no_embed: bool,
    /// Embedding of turns longer than 256 tokens: refuse (reported, not embedded), truncate,
    /// window or window:N. Default: the policy the store was last embedded with, else refuse.
    #[arg(long, value_name = "POLICY", value_parser = crate::commands::embed::parse_overlength)]
    pub overlength: Option<evicortex::Overlength>,
}

/// Runs `evicortex ingest` on the store in `store`.
pub fn run(store: &Path, args: &IngestArgs) -> anyhow::Result<()> {
    let default_namespace = args.namespace.as_deref().map(super::namespace_flag).transpose()?;
    let options = IngestOptions { default_namespace, max_text_bytes: args.max_text_bytes };

    let bar = progress::bar(args.files.len() as u64, "reading");
    let mut turns: Vec<Turn> = Vec::new();
    let mut origins: Vec<Origin<'_>> = Vec::new();
    for file in &args.files {
        let bytes = if file == "-" {
            let mut buf = Vec::new();
            std::io::stdin().read_to_end(&mut buf).context("reading standard input")?;
            buf
        } else {
            fs_err::read(file)?
        };
        let name = if file == "-" { "<stdin>" } else { file.as_str() };
        for (line, turn) in parse_jsonl_numbered(name, &bytes, &options)? {
            turns.push(turn);
            origins.push(Origin { file: name, line });
        }
        bar.inc(1);
    }
    bar.finish_and_clear();

    let _lock = evicortex::StoreLock::acquire(store)?;
    let memory =
        Memory::open(store).with_context(|| format!("opening the store {}", store.display()))?;
    // The whole input against itself and the store before the first commit, so that with
    // --commit-every a conflict on the last line still stores nothing.
    memory.check_append(&turns).map_err(|e| located(e, 0, &origins))?;
    let chunk = args.commit_every.map_or(turns.len().max(1), |n| n as usize);
    let bar = progress::bar(turns.len() as u64, "appending");
    let (mut new, mut present) = (0, 0);
    for (batch, slice) in turns.chunks(chunk).enumerate() {
        let receipt = memory.append(slice).map_err(|e| located(e, batch * chunk, &origins))?;
        new += receipt.appended();
        present += receipt.already_present();
        bar.inc(slice.len() as u64);
        if args.commit_every.is_some() {
            bar.suspend(|| {
                outln!(
                    "ack batch {batch}: {} turns ({} new), head {}",
                    slice.len(),
                    receipt.appended(),
                    receipt.head.map_or("(empty)".to_owned(), |h| h.to_string())
                )
            })?;
        }
    }
    bar.finish_and_clear();
    let head = memory.head()?;
    outln!(
        "ingested {} turns from {} file(s): {new} new, {present} already present; head {}",
        turns.len(),
        args.files.len(),
        head.map_or("(empty)".to_owned(), |h| h.to_string())
    )?;
    drop(memory);
    crate::commands::embed::after_ingest(store, args.no_embed, args.overlength)
}

/// Where a turn of the input came from.
#[derive(Debug, Clone, Copy)]
struct Origin<'a> {
    file: &'a str,
    line: usize,
}

impl std::fmt::Display for Origin<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// Names the file and line of the turn an append error is about (and of the earlier line it
/// conflicts with); `offset` is the position of the batch's first turn in the input.
fn located(
    err: impl Into<evicortex::AppendError>,
    offset: usize,
    origins: &[Origin<'_>],
) -> anyhow::Error {
    let err: evicortex::AppendError = err.into();
    let ledger = &err;
    let at = |index: Option<usize>| index.and_then(|i| origins.get(offset + i)).copied();
    match (at(ledger.batch_index()), at(ledger.earlier_in_batch())) {
        (Some(origin), Some(first)) => {
            anyhow::Error::new(err).context(format!("{origin} (first given at {first})"))
        }
        (Some(origin), None) => anyhow::Error::new(err).context(origin.to_string()),
        _ => err.into(),
    }
}
