//! `evicortex compile`: a cited context for a question, packed into a reader-token budget, or an
//! abstention.

use std::{io::Write, path::Path};

use anyhow::Context;
use evicortex::{
    AbstentionConfig, CompileConfig, CompileQuery, CompileRequest, CompiledContext, DenseConfig,
    EventTime, Expansion, Memory, Namespace, RerankConfig, SupportSignal, TokenBudget,
    reader_tokenizer,
};

use crate::exit::UsageError;

/// Arguments of `evicortex compile`.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Prints the prompt block (or the abstention), with --explain the ranks and \
    reasons behind it, with --json the full manifest: items with per-retriever ranks and scores, \
    excluded candidates with their reason, tokens used, encoder identity and configuration. \
    With --dense on (the default) the pinned encoder embeds the question and any turns not yet \
    embedded (unless another process, such as `evicortex serve`, holds the store: it embeds \
    them); --dense off needs no model.\n\n\
    Examples:\n  \
    evicortex compile --namespace alice --query \"Where am I moving?\" \\\n      \
    --budget 300 --reader-tokenizer o200k_base\n  \
    evicortex compile --namespace alice --query \"dog's name\" --budget 200 \\\n      \
    --reader-tokenizer cl100k_base --dense off --explain\n  \
    evicortex compile --namespace alice --query Q --budget 500 \\\n      \
    --reader-tokenizer ./tokenizer.json --json\n  \
    evicortex compile --namespace alice --query \"How many trips?\" --budget 500 \\\n      \
    --reader-tokenizer o200k_base --explain \\\n      \
    --options '{\"session\": {\"mode\": \"score_list\", \"turns\": 2, \"sessions\": 5}}'"
)]
pub struct CompileArgs {
    #[command(flatten)]
    pub question: QuestionArgs,
    /// The reader's tokenizer: o200k_base, cl100k_base or a path to a tokenizer.json.
    #[arg(long, value_name = "NAME")]
    pub reader_tokenizer: String,
    /// Dense retrieval with the pinned encoder.
    #[arg(long, value_enum, default_value = "on")]
    pub dense: Switch,
    /// Turns longer than the encoder's 256 tokens: refuse (lexical candidates only), truncate,
    /// window (64-token overlap) or window:N. Default: the policy the store was last embedded
    /// with (`ingest`/`embed --overlength`), else refuse.
    #[arg(long, value_name = "POLICY", value_parser = crate::commands::embed::parse_overlength)]
    pub overlength: Option<evicortex::Overlength>,
    /// Candidates taken from each retriever.
    #[arg(long, default_value_t = evicortex::DEFAULT_TOP_N, value_name = "N")]
    pub top_n: usize,
    /// The RRF constant k.
    #[arg(long, default_value_t = 10.0, value_name = "K")]
    pub rrf_k: f32,
    /// Rerank the best 16 fused candidates with the reranker --reranker names.
    #[arg(long, value_enum, default_value = "off")]
    pub rerank: Switch,
    /// The reranker --rerank on uses: mpnet-cosine (all-mpnet-base-v2 scores the fused
    /// candidates by cosine; `evicortex model fetch all-mpnet-base-v2`), cosine:MODEL (any
    /// catalogue encoder) or cross-encoder:DIR@SHA256 (a BERT cross-encoder from a local
    /// directory with the digest `evicortex model digest DIR` prints).
    #[arg(long, value_name = "SPEC", default_value = evicortex::RerankerSpec::MPNET_COSINE)]
    pub reranker: evicortex::RerankerSpec,
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
    /// Compile settings as a JSON object, the HTTP API's `options`: any field of the compiled
    /// context's `config`, applied over the flags (objects merge field by field), e.g.
    /// '{"session": {"mode": "score_list", "turns": 2, "sessions": 5}}'.
    #[arg(long, value_name = "JSON")]
    pub options: Option<String>,
    /// Print the JSON manifest.
    #[arg(long)]
    pub json: bool,
    /// Search a namespace of at least N vectors through `--ann-index` (default: the sign sketch
    /// from 30,000 vectors), as `serve --ann-from` does
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub ann_from: Option<u64>,
    /// What searches a namespace of at least `--ann-from` vectors: the sign sketch of its exact
    /// index (the default; nothing built or persisted), the store's persisted HNSW graph (built
    /// on first need), or, with `exact`, nothing: every vector is scanned (see
    /// docs/vector-index.md)
    #[arg(long, value_enum)]
    pub ann_index: Option<AnnIndex>,
    /// Print the ranks, scores and exclusion reasons after the text.
    #[arg(long)]
    pub explain: bool,
}

/// The question `compile` and `answer` are asked, and where from.
#[derive(Debug, clap::Args)]
pub struct QuestionArgs {
    /// The namespace to read from.
    #[arg(long, value_name = "NS")]
    pub namespace: String,
    /// The question.
    #[arg(long, value_name = "Q")]
    pub query: String,
    /// Only turns said at or before this RFC 3339 time (with offset) are used.
    #[arg(long, value_name = "TIME")]
    pub as_of: Option<String>,
    /// The budget in the reader's tokens for the whole context block, headers and citations
    /// included.
    #[arg(long, value_name = "N")]
    pub budget: u32,
}

impl QuestionArgs {
    /// The question to compile; a bad namespace or time is a usage error naming its flag.
    pub fn query(&self) -> anyhow::Result<CompileQuery> {
        let namespace = Namespace::new(&self.namespace).context("--namespace")?;
        let as_of = match &self.as_of {
            Some(raw) => Some(
                EventTime::parse_rfc3339(raw).map_err(|e| UsageError(format!("--as-of: {e}")))?,
            ),
            None => None,
        };
        Ok(CompileQuery {
            namespace,
            question: self.query.clone(),
            as_of,
            budget: TokenBudget::new(self.budget),
        })
    }
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
    let query = args.question.query()?;
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
        ..CompileConfig::default_with(args.top_n, dense)
    };
    let config = match &args.options {
        Some(json) => with_options(&config, json)?,
        None => config,
    };
    config.validate().map_err(|e| UsageError(e.to_string()))?;
    let dense = config.dense;
    let mut builder = Memory::builder(store);
    store_for_compile(store, &config, &mut builder)?;
    // A usage error before anything is read from the store (a database's settings included).
    use_ann(&mut builder, store, args.ann_from, args.ann_index)?;
    if config.rerank != RerankConfig::Off {
        builder.loaded_reranker(load_reranker(&args.reranker)?);
    }
    if dense != DenseConfig::Off {
        builder.store_encoders(args.overlength).context("loading the store's encoders")?;
    }
    let memory =
        builder.open().with_context(|| format!("opening the store {}", store.display()))?;
    caught_up(&memory, &query.namespace, &config)?;
    let request = CompileRequest {
        query: &query,
        config: &config,
        reader: reader.as_ref(),
        query_vectors: &[],
    };
    let context = memory.compile(&request)?;

    let mut out = crate::stdout::stdout();
    if args.json {
        writeln!(out, "{}", context.to_json())?;
    } else {
        match &context.abstain_reason {
            Some(reason) => writeln!(out, "abstain: {reason}")?,
            None => write!(out, "{}", context.text)?,
        }
        if args.explain {
            writeln!(out, "---")?;
            write!(out, "{}", context.explain())?;
        }
    }
    note_dense_lag(&context);
    Ok(())
}

/// `config` with the settings of `--options` applied; a bad one is a usage error naming the
/// field.
fn with_options(config: &CompileConfig, json: &str) -> anyhow::Result<CompileConfig> {
    let set: serde_json::Map<String, serde_json::Value> = serde_json::from_str(json)
        .map_err(|e| UsageError(format!("--options: not a JSON object: {e}")))?;
    evicortex::front_end::apply_compile_options(config, &set)
        .map_err(|e| UsageError(format!("--options: {e}")).into())
}

/// The approximate index of `--ann-from` namespaces (`--ann-index`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AnnIndex {
    /// The sign sketch of the exact index: candidates chosen by one bit a dimension, rescored
    /// exactly (the default, from 30,000 vectors).
    Sketch,
    /// An HNSW graph, built on first need and persisted in the store's vector-index/ directory
    /// (default from 60,000 vectors).
    Graph,
    /// No approximate index: every vector is scanned exactly.
    Exact,
}

/// Sets the approximate index from `--ann-from` and `--ann-index`, saying on stderr what was
/// chosen when either is given (neither: the store's default, the sign sketch from
/// [`evicortex::DEFAULT_SKETCH_FROM`] vectors on an embedded store). Refused on a PostgreSQL
/// store, whose dense search is pgvector's.
pub fn use_ann(
    builder: &mut evicortex::MemoryBuilder,
    store: &Path,
    from: Option<u64>,
    index: Option<AnnIndex>,
) -> anyhow::Result<()> {
    if from.is_none() && index.is_none() {
        return Ok(());
    }
    if store.to_str().is_some_and(evicortex::is_postgres_url) {
        let flag = if from.is_some() { "--ann-from" } else { "--ann-index" };
        return Err(UsageError(format!(
            "{flag}: a PostgreSQL store searches its vectors with pgvector's HNSW index"
        ))
        .into());
    }
    let index = index.unwrap_or(AnnIndex::Sketch);
    if index == AnnIndex::Exact {
        if from.is_some() {
            return Err(UsageError(
                "--ann-from: --ann-index exact scans every vector whatever the size".to_owned(),
            )
            .into());
        }
        eprintln!("dense search: an exact scan whatever the size");
        builder.ann(None);
        return Ok(());
    }
    let threshold = match from {
        Some(from) => {
            usize::try_from(from).map_err(|_| UsageError("--ann-from: too large".into()))?
        }
        None if index == AnnIndex::Graph => evicortex::DEFAULT_ANN_THRESHOLD,
        None => evicortex::DEFAULT_SKETCH_FROM,
    };
    let settings = match index {
        AnnIndex::Sketch => evicortex::AnnSettings::sketch_from(threshold),
        _ => evicortex::AnnSettings { threshold, ..evicortex::AnnSettings::default() },
    };
    match settings.sketch {
        Some(params) => eprintln!(
            "dense search: the sign sketch ({} candidates rescored exactly) for namespaces of at \
             least {threshold} vectors",
            params.candidates
        ),
        None => {
            eprintln!("dense search: an HNSW graph for namespaces of at least {threshold} vectors")
        }
    }
    builder.ann(Some(settings));
    Ok(())
}

/// Loads the reranker `spec` names, saying which on stderr.
pub fn load_reranker(spec: &evicortex::RerankerSpec) -> anyhow::Result<evicortex::LoadedReranker> {
    let loaded =
        evicortex::load_reranker(spec).with_context(|| format!("loading the reranker {spec}"))?;
    eprintln!("reranker: {}", loaded.reranker.name());
    Ok(loaded)
}

/// Refuses a missing store, and says how the compile opens it. With dense retrieval it takes
/// the store's writer lock when no other process holds it, so that it may embed the namespace's
/// pending turns first; when another process holds it (a server, which embeds the turns itself),
/// it opens beside that writer ([`evicortex::MemoryBuilder::beside_writer`]), embeds none and
/// says so ([`caught_up`]). A lexical compile never takes the lock, so an ingest is never
/// refused for it: it always opens beside the writer.
pub(crate) fn store_for_compile(
    store: &Path,
    config: &CompileConfig,
    builder: &mut evicortex::MemoryBuilder,
) -> anyhow::Result<()> {
    let postgres = store.to_str().is_some_and(evicortex::is_postgres_url);
    if !postgres && !store.join(evicortex::LEDGER_FILE).is_file() {
        return Err(UsageError(format!(
            "no store at {} (run `evicortex ingest` first)",
            store.display()
        ))
        .into());
    }
    match config.dense {
        DenseConfig::Off => builder.beside_writer(),
        DenseConfig::On { .. } => builder.lock_store_or_beside(),
    };
    Ok(())
}

/// Embeds the namespace's pending turns when this compile holds the store, else says why it
/// embeds none.
pub(crate) fn caught_up(
    memory: &Memory,
    namespace: &Namespace,
    config: &CompileConfig,
) -> anyhow::Result<()> {
    match memory.store_lock_refusal() {
        Some(evicortex::StoreLockError::Busy { holder, .. }) => eprintln!(
            "note: the store is in use by another evicortex process ({holder}): this compile \
             embeds no turns (only the process holding the store writes to it); turns without \
             a vector yet are lexical candidates only"
        ),
        Some(err) => eprintln!("note: {err}: this compile embeds no turns"),
        None => catch_up(memory, namespace, config)?,
    }
    Ok(())
}

/// Embeds the namespace's turns not yet in the cache when `config` reads vectors, with a
/// progress bar on a terminal.
fn catch_up(memory: &Memory, namespace: &Namespace, config: &CompileConfig) -> anyhow::Result<()> {
    // The bar only once there is something to embed: a lexical compile shows none.
    let mut bar = None;
    let report = memory
        .catch_up_for_compile(namespace, config, &mut |p| {
            let bar = bar.get_or_insert_with(|| crate::progress::bar(0, "embedding"));
            bar.set_length(p.total_texts);
            bar.set_position(p.done_texts);
        })
        .context("embedding turns not yet in the cache")?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    let refused = report.map(|r| r.refused).unwrap_or_default();
    if let Some(first) = refused.first() {
        eprintln!(
            "note: {} turn(s) of namespace {namespace} are longer than the encoder's maximum and \
             are lexical candidates only (first: record {}, {} tokens); compile with \
             --overlength window to embed them as windows",
            refused.len(),
            first.turn.raw(),
            first.tokens
        );
    }
    Ok(())
}

/// Says on stderr when turns of the namespace are not dense candidates yet.
fn note_dense_lag(context: &CompiledContext) {
    if let Some(pending) = context.coverage.dense_pending.filter(|&n| n > 0) {
        eprintln!(
            "note: {pending} turn(s) of namespace {} have no vector yet and were lexical \
             candidates only",
            context.namespace
        );
    }
}
