//! `evicortex compile`: a cited context for a question, packed into a reader-token budget, or an
//! abstention.

use std::{io::Write, path::Path};

use anyhow::Context;
use evicortex::{
    CatchUpLimits, CompileRequest, DenseRequest, EmbeddingCache, Memory, QueryVector,
    compiler::{
        AbstentionConfig, CompileConfig, CompileQuery, DenseConfig, Expansion, RerankConfig,
        Reranker, SupportSignal, TermOverlapReranker, reader_tokenizer,
    },
    embed_pending,
};
use evicortex_core::{EventTime, Namespace, TokenBudget};
use evicortex_embed::{Encoder, EncoderConfig, Overlength};

use crate::exit::UsageError;

/// Arguments of `evicortex compile`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints the prompt block (or the abstention), with --explain the ranks and \
    reasons behind it, with --json the full manifest: items with per-retriever ranks and scores, \
    excluded candidates with their reason, tokens used, encoder identity and configuration. \
    With --dense on (the default) the pinned encoder embeds the question and any turns not yet \
    embedded; --dense off needs no model.\n\n\
    Examples:\n  \
    evicortex compile --namespace alice --query \"Where am I moving?\" --budget 300 --reader-tokenizer o200k_base\n  \
    evicortex compile --namespace alice --query \"dog's name\" --budget 200 --reader-tokenizer cl100k_base --dense off --explain\n  \
    evicortex compile --namespace alice --query Q --budget 500 --reader-tokenizer ./tokenizer.json --json"
)]
pub struct CompileArgs {
    /// The namespace to compile from.
    #[arg(long, value_name = "NS")]
    pub namespace: String,
    /// The question.
    #[arg(long, value_name = "Q")]
    pub query: String,
    /// Only turns said at or before this RFC 3339 time (with offset) are used.
    #[arg(long, value_name = "TIME")]
    pub as_of: Option<String>,
    /// The budget in reader tokens for the whole block, headers and citations included.
    #[arg(long, value_name = "N")]
    pub budget: u32,
    /// The reader's tokenizer: o200k_base, cl100k_base or a path to a tokenizer.json.
    #[arg(long, value_name = "NAME")]
    pub reader_tokenizer: String,
    /// Dense retrieval with the pinned encoder.
    #[arg(long, value_enum, default_value = "on")]
    pub dense: Switch,
    /// Candidates taken from each retriever.
    #[arg(long, default_value_t = 50, value_name = "N")]
    pub top_n: usize,
    /// The RRF constant k.
    #[arg(long, default_value_t = 10.0, value_name = "K")]
    pub rrf_k: f32,
    /// Rerank the best 16 fused candidates with the term-overlap reranker.
    #[arg(long, value_enum, default_value = "off")]
    pub rerank: Switch,
    /// Add up to N neighbouring turns of the same session around each selected turn when they fit.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub expand: u32,
    /// With --expand, add only neighbours of at most this many reader tokens.
    #[arg(long, value_name = "TOKENS", requires = "expand")]
    pub expand_max_tokens: Option<u32>,
    /// Abstain when the support score is below this (dense cosine with --dense on, else lexical
    /// coverage).
    #[arg(long, value_name = "SCORE")]
    pub abstain_below: Option<f32>,
    /// Also list the turns the filters removed from the unfiltered top-N.
    #[arg(long)]
    pub report_filtered: bool,
    /// Print the JSON manifest.
    #[arg(long)]
    pub json: bool,
    /// Print the ranks, scores and exclusion reasons after the text.
    #[arg(long)]
    pub explain: bool,
}

/// An on/off option.
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    /// Enabled.
    On,
    /// Disabled.
    Off,
}

/// Runs `evicortex compile`.
pub fn run(store: &Path, args: &CompileArgs) -> anyhow::Result<()> {
    let namespace = Namespace::new(&args.namespace).context("--namespace")?;
    let as_of = match &args.as_of {
        Some(raw) => {
            Some(EventTime::parse_rfc3339(raw).map_err(|e| UsageError(format!("--as-of: {e}")))?)
        }
        None => None,
    };
    let reader = reader_tokenizer(&args.reader_tokenizer)
        .map_err(|e| UsageError(format!("--reader-tokenizer: {e}")))?;
    let dense = match args.dense {
        Switch::On => DenseConfig::On { top_n: args.top_n },
        Switch::Off => DenseConfig::Off,
    };
    let config = CompileConfig {
        rrf_k: args.rrf_k,
        rerank: match args.rerank {
            Switch::On => RerankConfig::On { depth: 16, weight: 1.0 },
            Switch::Off => RerankConfig::Off,
        },
        expansion: match args.expand {
            0 => Expansion::None,
            radius => Expansion::AdjacentTurns { radius, max_tokens: args.expand_max_tokens },
        },
        abstention: AbstentionConfig {
            signal: match dense {
                DenseConfig::On { .. } => SupportSignal::MaxDenseCosine,
                DenseConfig::Off => SupportSignal::LexicalCoverage,
            },
            threshold: args.abstain_below,
        },
        report_filtered: args.report_filtered,
        ..CompileConfig::hybrid(args.top_n, dense)
    };
    config.validate().map_err(|e| UsageError(e.to_string()))?;
    if !store.join(evicortex::LEDGER_FILE).is_file() {
        return Err(UsageError(format!(
            "no store at {} (run `evicortex ingest` first)",
            store.display()
        ))
        .into());
    }
    let memory =
        Memory::open(store).with_context(|| format!("opening the store {}", store.display()))?;
    let query = CompileQuery {
        namespace,
        question: args.query.clone(),
        as_of,
        budget: TokenBudget::new(args.budget),
    };
    let term_overlap = TermOverlapReranker;
    let reranker = (args.rerank == Switch::On).then_some(&term_overlap as &dyn Reranker);

    let context = match dense {
        DenseConfig::Off => memory.compile(&CompileRequest {
            query,
            config,
            reader: reader.as_ref(),
            dense: None,
            reranker,
        })?,
        DenseConfig::On { .. } => {
            let encoder_config =
                EncoderConfig::all_minilm_l6_v2().with_overlength(Overlength::Refuse);
            let encoder = evicortex_embed::load_pinned_minilm(encoder_config)
                .context("loading the pinned encoder")?;
            let cache =
                EmbeddingCache::attach_to(&memory).context("opening the embedding cache")?;
            catch_up(&memory, &cache, &encoder)?;
            let dense = DenseRequest {
                cache: &cache,
                identity: encoder.identity(),
                query: QueryVector::Encode(&encoder),
            };
            memory.compile(&CompileRequest {
                query,
                config,
                reader: reader.as_ref(),
                dense: Some(dense),
                reranker,
            })?
        }
    };

    let mut out = crate::stdout::stdout();
    if args.json {
        writeln!(out, "{}", context.to_json())?;
    } else {
        if context.abstain {
            let reason = context.abstain_reason.as_ref().map(serde_json::to_string).transpose()?;
            writeln!(out, "abstain: {}", reason.unwrap_or_default())?;
        } else {
            write!(out, "{}", context.text)?;
        }
        if args.explain {
            writeln!(out, "---")?;
            write!(out, "{}", context.explain())?;
        }
    }
    Ok(())
}

/// Embeds turns not yet in the cache, with a progress bar on a terminal.
fn catch_up(memory: &Memory, cache: &EmbeddingCache, encoder: &dyn Encoder) -> anyhow::Result<()> {
    let bar = crate::progress::bar(0, "embedding");
    let report = embed_pending(memory, cache, encoder, CatchUpLimits::default(), &mut |p| {
        bar.set_length(p.total_texts);
        bar.set_position(p.done_texts);
    })
    .context("embedding turns not yet in the cache")?;
    bar.finish_and_clear();
    if !report.refused.is_empty() {
        eprintln!(
            "note: {} turn(s) longer than the encoder's maximum have no vector and are lexical candidates only \
             (embed them with `evicortex embed --overlength window`)",
            report.refused.len()
        );
    }
    Ok(())
}
