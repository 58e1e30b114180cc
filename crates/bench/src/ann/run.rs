//! `evicortex-bench ann run`: at each size, a store holding the first turns of the audit
//! namespace (their vectors come from the audit store's embedding cache, content-addressed, so
//! nothing is embedded again), then through the `Memory` facade:
//! - recall@50 of the HNSW graph's turn candidates against the exact cosine scan over the same
//!   rows, for every LongMemEval S dev question, without a filter and with as-of times that
//!   admit a share of the namespace (10% by default), and the share of the exact scan's packed
//!   turns that the graph's compile also packs (its context list is seeded by the graph's beam);
//! - the first compile that builds and writes the graph, the file's bytes, the graph build alone,
//!   and the first compile after a restart (which loads the graph and lexical index files),
//!   beside the same restart with the lexical indexes rebuilt from the ledger;
//! - compile p50/p99 (and the dense stage alone) with the graph serving every search, with the
//!   exact scan, and with the product's rule (the graph only when a search's filters admit at
//!   least the threshold's vectors), in the same run, the question embedded beforehand and timed
//!   apart, with how many of the product's searches the graph served. The timed compiles run
//!   after the background reader-token counts their memories started have finished, as in a
//!   server that has been up for a while.

use std::path::{Path, PathBuf};

use anyhow::Context;
use evicortex::{
    AnnSettings, DEFAULT_ANN_THRESHOLD, Encoder, Evidence, HnswParams, Memory, Namespace,
    SketchParams,
};

use super::{
    audit_set::AUDIT_NAMESPACE,
    graph, pgvector, prepare,
    size_store::{audit_size, cached_windows, size_store},
    sketch, table,
};
use crate::{ann::load_encoder, outln};

/// Arguments of `evicortex-bench ann run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The audit store made by `bench ann prepare` and embedded.
    #[arg(long, value_name = "DIR")]
    pub audit_store: PathBuf,
    /// Vectors in the namespace at each size (each a prefix of the audit namespace).
    #[arg(long, value_delimiter = ',', default_value = "10000,100000")]
    pub sizes: Vec<usize>,
    /// Fractions of the namespace the as-of filters admit (one filtered row per fraction).
    #[arg(long, value_delimiter = ',', default_value = "0.1")]
    pub as_of_fraction: Vec<f64>,
    /// The LongMemEval S file (default: under the data directory).
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// The question split (default: `longmemeval/split.tsv` under the data directory).
    #[arg(long, value_name = "FILE")]
    pub split: Option<PathBuf>,
    /// The graph's search beam (default: the product's, `HnswParams::default()`).
    #[arg(long, value_name = "N")]
    pub ef_search: Option<usize>,
    /// The product rule's threshold: vectors from which the graph is built, and that a search's
    /// filters must admit for the graph to serve it (default: the product's,
    /// `DEFAULT_ANN_THRESHOLD`).
    #[arg(long, value_name = "VECTORS")]
    pub threshold: Option<usize>,
    /// Also audit a store whose ledger is on this PostgreSQL server (a database
    /// `evicortex_ann_audit_<size>` is dropped and made afresh at each size): pgvector's dense
    /// list against the exact scan, ingest and compile latency beside the embedded store's.
    #[arg(long, value_name = "URL")]
    pub postgres: Option<String>,
    /// Gives each audit database this `maintenance_work_mem` (`ALTER DATABASE ... SET`), as an
    /// administrator would for a namespace whose HNSW graph outgrows what an index build takes
    /// on its own (1 GiB: about 280,000 vectors of 384 dimensions).
    #[arg(long, value_name = "MIB", requires = "postgres")]
    pub pg_maintenance_work_mem_mib: Option<u64>,
    /// Only the PostgreSQL audit: the embedded graph's rows are skipped (at 1M they build the
    /// graph twice, about 40 minutes); the PostgreSQL rows keep their anchor, the embedded
    /// exact scan timed in the same run.
    #[arg(long, requires = "postgres")]
    pub postgres_only: bool,
    /// Up to this many vectors the exact, graph and rule memories are open together and timed
    /// question by question in turn (the machine's noise falls on the three alike); above it
    /// they would not fit in memory together (several GB each at 1M) and are timed one after
    /// another, each dropped before the next opens.
    #[arg(long, value_name = "VECTORS", default_value_t = 300_000)]
    pub interleave_up_to: usize,
    /// Audit the sign sketch instead of the graph: recall@50, packed turns and compile latency
    /// through the sketch beside the exact scan (no graph is built)
    #[arg(long, conflicts_with_all = ["postgres_only", "ef_search", "threshold"])]
    pub sketch: bool,
    /// The sketch's candidates rescored exactly at every size (default: the product's,
    /// `AnnSettings::sketch_from`)
    #[arg(long, value_name = "N", requires = "sketch")]
    pub sketch_candidates: Option<usize>,
    /// The turns of the sketch's search that seed the context list, at every size (default: the
    /// product's, which doubles them from `DEFAULT_MORE_SEEDS_FROM` vectors)
    #[arg(long, value_name = "N", requires = "sketch")]
    pub sketch_seeds: Option<usize>,
}

/// The gate on recall@50.
const RECALL_GATE: f64 = 0.99;

/// Runs `run`.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    let questions = dev_questions(args)?;
    let encoder = load_encoder(prepare::AUDIT_OVERLENGTH)?;
    let namespace = Namespace::new(AUDIT_NAMESPACE)?;
    let (turns, windows) = embedded_turns(&args.audit_store, &encoder)?;
    let mut params = HnswParams::default();
    if let Some(ef) = args.ef_search {
        params.ef_search = ef;
    }
    let threshold = args.threshold.unwrap_or(DEFAULT_ANN_THRESHOLD);
    outln!(
        "ann audit: {} dev questions, namespace {AUDIT_NAMESPACE:?} of {} turns; graph {params:?}; \
         the rule's threshold is {threshold} vectors (the product's default {DEFAULT_ANN_THRESHOLD})",
        questions.len(),
        turns.len()
    )?;
    let sketch_settings = sketch_settings(args);
    if args.sketch {
        outln!(
            "sign sketch {:?} in the graph's place (from {:?} vectors: {:?})",
            sketch_settings.sketch,
            sketch_settings.sketch_large.map(|(from, _)| from),
            sketch_settings.sketch_large.map(|(_, params)| params)
        )?;
        table::print_sketch_header()?;
    } else if !args.postgres_only {
        table::print_graph_header()?;
    }
    let mut failed = false;
    let mut pg_rows = Vec::new();
    let mut pg_throughput = Vec::new();
    let mut stage_rows = Vec::new();
    for &size in &args.sizes {
        let (keep, vectors) = prefix_holding(&windows, size)?;
        let dir = size_store(&args.audit_store, size);
        audit_size(&args.audit_store, &dir, &turns[..keep], &encoder)?;
        let filters = std::iter::once(None).chain(args.as_of_fraction.iter().map(|&f| Some(f)));
        // `--postgres-only`: none of the embedded graph rows.
        for fraction in filters.clone().filter(|_| args.sketch) {
            let outcome =
                sketch::measure(&dir, &namespace, &encoder, &questions, sketch_settings, fraction)?;
            for (path, stages) in [("exact", &outcome.exact), ("sketch", &outcome.sketch)] {
                stage_rows.push(table::stage_row(outcome.rows, &outcome.admitted, path, stages));
            }
            failed |= outcome.recall < RECALL_GATE;
            outln!("{}", table::sketch_line(&outcome, RECALL_GATE, questions.len()))?;
        }
        for fraction in filters.filter(|_| !args.postgres_only && !args.sketch) {
            let settings = graph::Settings {
                params,
                threshold,
                as_of_fraction: fraction,
                interleave_up_to: args.interleave_up_to,
            };
            let outcome = graph::measure(&dir, &namespace, &encoder, &questions, &settings)?;
            for (path, stages) in [("exact", &outcome.exact), ("graph", &outcome.graph)] {
                stage_rows.push(table::stage_row(outcome.rows, &outcome.admitted, path, stages));
            }
            failed |= outcome.recall < RECALL_GATE;
            outln!("{}", table::graph_line(&outcome, RECALL_GATE, questions.len()))?;
        }
        if let Some(server) = &args.postgres {
            let (rows, throughput) = pgvector::measure(&pgvector::PgAudit {
                server,
                audit_store: &args.audit_store,
                size_dir: &dir,
                size,
                vectors,
                turns: &turns[..keep],
                encoder: &encoder,
                questions: &questions,
                as_of_fraction: args.as_of_fraction.first().copied().unwrap_or(0.1),
                maintenance_work_mem_mib: args.pg_maintenance_work_mem_mib,
            })?;
            pg_rows.extend(rows);
            pg_throughput.extend(throughput);
        }
    }
    table::print_stage_table(&stage_rows)?;
    failed |= pg_rows.iter().any(|row| row.recall() < RECALL_GATE);
    table::print_pg_tables(
        &pg_rows,
        &pg_throughput,
        args.pg_maintenance_work_mem_mib,
        RECALL_GATE,
    )?;
    anyhow::ensure!(!failed, "recall@50 below {RECALL_GATE} at some size");
    Ok(())
}

/// The questions of the LongMemEval S dev split (the test split is never run).
fn dev_questions(args: &RunArgs) -> anyhow::Result<Vec<String>> {
    let (data, split) = prepare::read_longmemeval(args.dataset.as_deref(), args.split.as_deref())?;
    let questions: Vec<String> = data
        .questions
        .iter()
        .filter(|q| {
            matches!(split.assignment.get(q.id()), Some(evicortex_eval::split::SplitName::Dev))
        })
        .map(|q| q.question.clone())
        .collect();
    anyhow::ensure!(!questions.is_empty(), "no dev question in the split");
    Ok(questions)
}

/// The audit namespace's turns whose vectors are in the audit store's cache, with the vectors
/// (windows) each has: an embedding run not finished leaves the longest texts for last, so the
/// sizes are prefixes of the embedded turns.
fn embedded_turns(
    audit_store: &Path,
    encoder: &std::sync::Arc<dyn Encoder>,
) -> anyhow::Result<(Vec<Evidence>, Vec<usize>)> {
    let namespace = Namespace::new(AUDIT_NAMESPACE)?;
    let audit =
        Memory::open(audit_store).with_context(|| format!("opening {}", audit_store.display()))?;
    let all_turns = audit.evidence(&namespace)?;
    anyhow::ensure!(!all_turns.is_empty(), "the audit store has no {AUDIT_NAMESPACE:?} namespace");
    drop(audit);
    let cached = cached_windows(audit_store, encoder, &all_turns)?;
    let (mut turns, mut windows) = (Vec::new(), Vec::new());
    for (turn, count) in all_turns.iter().zip(cached) {
        if count > 0 {
            turns.push(turn.clone());
            windows.push(count);
        }
    }
    outln!(
        "{} of the {} audit turns have their vectors in the audit store's cache; the sizes are \
         prefixes of those, in the audit order",
        turns.len(),
        all_turns.len()
    )?;
    Ok((turns, windows))
}

/// The sketch's settings: threshold 1, so that the sketch serves every search; the product's
/// parameters at each size unless `--sketch-candidates` or `--sketch-seeds` gives one.
fn sketch_settings(args: &RunArgs) -> AnnSettings {
    let mut settings = AnnSettings { threshold: 1, ..AnnSettings::sketch_from(1) };
    if args.sketch_candidates.is_some() || args.sketch_seeds.is_some() {
        let default = SketchParams::default();
        settings.sketch = Some(SketchParams {
            candidates: args.sketch_candidates.unwrap_or(default.candidates),
            seeds: args.sketch_seeds.unwrap_or(default.seeds),
        });
        settings.sketch_large = None;
    }
    settings
}

/// The turns of the prefix holding `size` vectors, given each turn's `windows`, and the
/// vectors counted on the way (the count also takes the first turn past the prefix, when there
/// is one).
fn prefix_holding(windows: &[usize], size: usize) -> anyhow::Result<(usize, usize)> {
    let mut vectors = 0usize;
    let take = windows.iter().take_while(|&&w| {
        let before = vectors;
        vectors += w;
        before < size
    });
    let keep = take.count();
    anyhow::ensure!(
        vectors >= size,
        "the audit namespace holds {vectors} vectors, fewer than {size}: prepare more"
    );
    Ok((keep, vectors))
}
