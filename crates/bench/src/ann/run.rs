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

use std::{
    path::{Path, PathBuf},
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use evicortex::{
    AnnSettings, CatchUpLimits, CompileConfig, CompileQuery, CompileRequest, DEFAULT_ANN_THRESHOLD,
    DEFAULT_TOP_N, DenseIndexRef, Encoder, EventTime, HnswParams, IdentifiedVector, Memory,
    Namespace, SketchParams, StageTimings, TokenBudget, TurnId, VECTOR_INDEX_DIR, reader_tokenizer,
};
use evicortex_vector::{
    ExactIndex, HnswIndex, VectorIndex, VectorIndexRead, WindowKey, WindowedIndex,
};

use super::{audit_set::AUDIT_NAMESPACE, prepare};

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

/// Waits for `memory`'s background reader-token counts, started by its first compile: the timed
/// compiles are a running server's, which has long finished them.
pub(super) fn wait_for_counts(memory: &Memory) -> anyhow::Result<()> {
    anyhow::ensure!(
        memory.wait_for_token_counts(Duration::from_secs(1800)),
        "the background reader-token counts did not finish in 30 minutes"
    );
    Ok(())
}

/// The bench's memories keep their one namespace's indexes whatever their size (the product's
/// default budget, 1 GiB, holds a namespace of 100,000 vectors, not one of 1M).
pub(super) const INDEX_CACHE_BYTES: usize = 64 << 30;

/// Candidates compared: as many as the compile's dense list holds.
pub(super) const RECALL_AT: usize = DEFAULT_TOP_N;

/// What the audit compiles with: the product's default (`evicortex compile`, the servers), so
/// that its latencies are those users see; its dense list is as deep as the recall measured.
pub(super) fn audit_config() -> CompileConfig {
    CompileConfig::default_for(true)
}

/// Runs `run`.
pub fn run(args: &RunArgs) -> anyhow::Result<()> {
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
    let encoder = load_encoder(prepare::AUDIT_OVERLENGTH)?;
    let namespace = Namespace::new(AUDIT_NAMESPACE)?;
    let audit = Memory::open(&args.audit_store)
        .with_context(|| format!("opening {}", args.audit_store.display()))?;
    let all_turns = audit.evidence(&namespace)?;
    anyhow::ensure!(!all_turns.is_empty(), "the audit store has no {AUDIT_NAMESPACE:?} namespace");
    drop(audit);
    // Only turns whose vectors are in the audit store's cache (an embedding run not finished
    // leaves the longest texts for last): the sizes are prefixes of the embedded turns.
    let cached = cached_windows(&args.audit_store, &encoder, &all_turns)?;
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
    // Threshold 1: the sketch serves every search; the product's parameters at each size
    // unless one is given.
    let mut sketch_settings = AnnSettings { threshold: 1, ..AnnSettings::sketch_from(1) };
    if args.sketch_candidates.is_some() || args.sketch_seeds.is_some() {
        let default = SketchParams::default();
        sketch_settings.sketch = Some(SketchParams {
            candidates: args.sketch_candidates.unwrap_or(default.candidates),
            seeds: args.sketch_seeds.unwrap_or(default.seeds),
        });
        sketch_settings.sketch_large = None;
    }
    if args.sketch {
        outln!(
            "sign sketch {:?} in the graph's place (from {:?} vectors: {:?})",
            sketch_settings.sketch,
            sketch_settings.sketch_large.map(|(from, _)| from),
            sketch_settings.sketch_large.map(|(_, params)| params)
        )?;
        outln!(
            "| vectors | as-of admits | recall@50 sketch vs exact | gate | packed turns also packed by the sketch | compile p50 / p99 exact | compile p50 / p99 sketch | dense p50 / p99 exact | dense p50 / p99 sketch | served by sketch | load avg |"
        )?;
        outln!("|---|---|---|---|---|---|---|---|---|---|---|")?;
    } else if !args.postgres_only {
        outln!(
            "| vectors | as-of admits | recall@50 graph vs exact | gate | packed turns also packed by the graph | first compile (read, build, write) | graph build alone | load | file MiB | compile p50 / p99 exact | compile p50 / p99 graph | compile p50 / p99 rule | dense p50 / p99 exact | dense p50 / p99 graph | dense p50 / p99 rule | rule served by graph | load avg |"
        )?;
        outln!("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")?;
    }
    let mut failed = false;
    let mut pg_rows = Vec::new();
    let mut pg_throughput = Vec::new();
    let mut stage_rows = Vec::new();
    for &size in &args.sizes {
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
        let dir = size_store(&args.audit_store, size);
        audit_size(&args.audit_store, &dir, &turns[..keep], &encoder)?;
        let filters = std::iter::once(None).chain(args.as_of_fraction.iter().map(|&f| Some(f)));
        // `--postgres-only`: none of the embedded graph rows.
        for fraction in filters.clone().filter(|_| args.sketch) {
            let outcome = super::sketch::measure(
                &dir,
                &namespace,
                &encoder,
                &questions,
                sketch_settings,
                fraction,
            )?;
            for (path, stages) in [("exact", &outcome.exact), ("sketch", &outcome.sketch)] {
                stage_rows.push(stage_row(outcome.rows, &outcome.admitted, path, stages));
            }
            failed |= outcome.recall < RECALL_GATE;
            outln!(
                "| {} | {} | {:.4} | {} | {:.4} | {} | {} | {} | {} | {}/{} | {} |",
                outcome.rows,
                outcome.admitted,
                outcome.recall,
                if outcome.recall >= RECALL_GATE { "pass" } else { "FAIL" },
                outcome.packed_agreement,
                pair(&column(&outcome.exact, total)),
                pair(&column(&outcome.sketch, total)),
                pair(&column(&outcome.exact, dense)),
                pair(&column(&outcome.sketch, dense)),
                outcome.served,
                questions.len(),
                load_average(),
            )?;
        }
        for fraction in filters.filter(|_| !args.postgres_only && !args.sketch) {
            let settings = Settings {
                params,
                threshold,
                as_of_fraction: fraction,
                interleave_up_to: args.interleave_up_to,
            };
            let outcome = measure(&dir, &namespace, &encoder, &questions, &settings)?;
            let rows = outcome.rows;
            for (path, stages) in [("exact", &outcome.exact), ("graph", &outcome.graph)] {
                stage_rows.push(stage_row(rows, &outcome.admitted, path, stages));
            }
            failed |= outcome.recall < RECALL_GATE;
            outln!(
                "| {rows} | {} | {:.4} | {} | {:.4} | {} | {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {}/{} | {} |",
                outcome.admitted,
                outcome.recall,
                if outcome.recall >= RECALL_GATE { "pass" } else { "FAIL" },
                outcome.packed_agreement,
                outcome.first_compile.map_or("-".to_owned(), secs),
                outcome.build.map_or("-".to_owned(), secs),
                outcome.load.map_or("-".to_owned(), secs),
                outcome.file_bytes as f64 / (1 << 20) as f64,
                pair(&column(&outcome.exact, total)),
                pair(&column(&outcome.graph, total)),
                pair(&column(&outcome.rule, total)),
                pair(&column(&outcome.exact, dense)),
                pair(&column(&outcome.graph, dense)),
                pair(&column(&outcome.rule, dense)),
                outcome.rule_graph_served,
                questions.len(),
                load_average(),
            )?;
        }
        if let Some(server) = &args.postgres {
            let (rows, throughput) = super::pgvector::measure(&super::pgvector::PgAudit {
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
    if !stage_rows.is_empty() {
        outln!(
            "\nwhere a compile's time goes (p50 of each stage over the questions; `other` is the \
             compile's total less its stages: the facade's freshness check, the index lookup, \
             the report):"
        )?;
        outln!(
            "| vectors | as-of admits | dense path | compile | lexical | dense | fuse | pack | other |"
        )?;
        outln!("|---|---|---|---|---|---|---|---|---|")?;
        for row in &stage_rows {
            outln!("{row}")?;
        }
    }
    if !pg_rows.is_empty() {
        outln!("\nthe same sizes on PostgreSQL (dense candidates from pgvector):")?;
        if let Some(mib) = args.pg_maintenance_work_mem_mib {
            outln!("each audit database: ALTER DATABASE ... SET maintenance_work_mem = '{mib}MB'")?;
        }
        outln!("{}", super::pgvector::PgRow::HEADER)?;
        for row in &pg_rows {
            failed |= row.recall() < RECALL_GATE;
            outln!("{}", row.line(RECALL_GATE))?;
        }
        outln!("\nconcurrent compiles on one PostgreSQL handle (unfiltered questions):")?;
        outln!("{}", super::pgvector::PgThroughput::HEADER)?;
        for row in &pg_throughput {
            outln!("{}", row.line())?;
        }
    }
    anyhow::ensure!(!failed, "recall@50 below {RECALL_GATE} at some size");
    Ok(())
}

/// Vectors (windows) the audit store's cache holds for each turn's document under the encoder.
fn cached_windows(
    audit_store: &Path,
    encoder: &Arc<dyn Encoder>,
    turns: &[evicortex::Evidence],
) -> anyhow::Result<Vec<usize>> {
    let (conn, path) = open_embeddings(audit_store)?;
    let identity = encoder.identity().digest();
    let mut count =
        conn.prepare("SELECT count(*) FROM vectors WHERE identity = ?1 AND text_digest = ?2")?;
    turns
        .iter()
        .map(|e| {
            let digest = evicortex::TextDigest::of(&evicortex_compiler::turn_document(&e.turn));
            let n: i64 = count
                .query_row(rusqlite::params![identity.as_bytes(), digest.as_bytes()], |r| r.get(0))
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(n as usize)
        })
        .collect()
}

/// A store's embedding cache, read-only, with its path for messages.
pub(super) fn open_embeddings(store: &Path) -> anyhow::Result<(rusqlite::Connection, PathBuf)> {
    let path = store.join(evicortex::EMBEDDINGS_FILE);
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {}", path.display()))?;
    Ok((conn, path))
}

fn size_store(audit_store: &Path, size: usize) -> PathBuf {
    let name = audit_store.file_name().map_or("ann-audit".into(), |n| n.to_string_lossy());
    audit_store.with_file_name(format!("{name}-{size}"))
}

/// Fills the store of one size with `turns` (idempotent), its embedding cache seeded from the
/// audit store's; returns the vectors its namespace holds. Nothing may need embedding.
fn audit_size(
    audit_store: &Path,
    dir: &Path,
    turns: &[evicortex::Evidence],
    encoder: &Arc<dyn Encoder>,
) -> anyhow::Result<()> {
    let cache = dir.join(evicortex::EMBEDDINGS_FILE);
    if !cache.exists() {
        evicortex::front_end::create_private_dir(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
        fs_err::copy(audit_store.join(evicortex::EMBEDDINGS_FILE), &cache)?;
    }
    let memory = Memory::builder(dir).encoder(Arc::clone(encoder)).ann(None).open()?;
    let owned: Vec<evicortex::Turn> = turns.iter().map(|e| e.turn.clone()).collect();
    for batch in owned.chunks(20_000) {
        memory.append(batch)?;
    }
    let report = memory.catch_up(None, CatchUpLimits::default(), &mut |_| {})?;
    anyhow::ensure!(
        report.embedded_texts == 0,
        "{} texts had no vector in the audit store's cache: embed the audit store first",
        report.embedded_texts
    );
    Ok(())
}

struct Outcome {
    rows: usize,
    admitted: String,
    recall: f64,
    /// Mean over the questions of the share of the exact scan's packed turns that the graph's
    /// compile (its dense list and its seeded context list) also packs.
    packed_agreement: f64,
    first_compile: Option<Duration>,
    build: Option<Duration>,
    load: Option<Duration>,
    file_bytes: u64,
    /// Each compile's total and stages, through the exact scan, the graph and the rule.
    exact: Vec<Timed>,
    graph: Vec<Timed>,
    rule: Vec<Timed>,
    rule_graph_served: usize,
}

/// What one row measures.
struct Settings {
    params: HnswParams,
    /// The product rule's threshold.
    threshold: usize,
    /// The as-of filter's share of the namespace; `None`: no filter.
    as_of_fraction: Option<f64>,
    /// See [`RunArgs::interleave_up_to`].
    interleave_up_to: usize,
}

fn measure(
    dir: &Path,
    namespace: &Namespace,
    encoder: &Arc<dyn Encoder>,
    questions: &[String],
    settings: &Settings,
) -> anyhow::Result<Outcome> {
    let params = settings.params;
    // Threshold 1: the graph serves every search that admits anything.
    let graph_settings = Some(AnnSettings { threshold: 1, params, ..AnnSettings::default() });
    let rule_settings =
        Some(AnnSettings { threshold: settings.threshold, params, ..AnnSettings::default() });
    let filtered = settings.as_of_fraction.is_some();
    let index_dir = dir.join(VECTOR_INDEX_DIR);
    let (mut first_compile, mut build, mut load) = (None, None, None);
    let turns = Memory::open(dir)?.evidence(namespace)?;
    let (as_of_time, admitted_share) = as_of_admitting(&turns, settings.as_of_fraction);
    let as_of = as_of_time.map(|t| t.utc_micros());
    let open = |ann: Option<AnnSettings>| open_audit_memory(dir, encoder, ann);
    let exact = open(None)?;
    if !filtered && index_dir.exists() {
        fs_err::remove_dir_all(&index_dir)?;
    }
    let graph = open(graph_settings)?;
    let vectors: Vec<IdentifiedVector> =
        questions.iter().map(|q| exact.embed_query(q)).collect::<Result<_, _>>()?;
    let audit = AuditCompile::new(namespace, questions, &vectors, as_of_time)?;
    let compile_served = |memory: &Memory, i: usize| {
        let ((total, stages), index, packed) = audit.run(memory, i)?;
        let by_graph = matches!(index, Some(DenseIndexRef::Hnsw { .. }));
        anyhow::Ok((total, stages, by_graph, packed))
    };
    let compile_with = |memory: &Memory, i: usize| {
        compile_served(memory, i).map(|(total, stages, _, _)| (total, stages))
    };
    // Each question's packed turns through the exact scan and through the graph.
    let compile_packed = |memory: &Memory, i: usize, times: &mut Vec<Timed>| {
        let (total, stages, _, packed) = compile_served(memory, i)?;
        times.push((total, stages));
        anyhow::Ok(packed)
    };
    let started = Instant::now();
    compile_with(&graph, 0)?;
    if !filtered {
        first_compile = Some(started.elapsed());
    }
    let file = fs_err::read_dir(&index_dir)?
        .next()
        .context("the graph memory wrote no index file")??
        .path();
    let file_bytes = fs_err::metadata(&file)?.len();
    let started = Instant::now();
    let (_, loaded) = HnswIndex::<WindowKey>::load(&file)?;
    // Above the interleaving limit, three memories of this size do not fit beside each other:
    // the exact one is built only when its turn comes.
    let interleaved = loaded.exact().len() <= settings.interleave_up_to;
    let exact = if interleaved {
        compile_with(&exact, 0)?;
        Some(exact)
    } else {
        drop(exact);
        None
    };
    if !filtered {
        load = Some(started.elapsed());
        let mut copy = ExactIndex::new(loaded.exact().dim());
        for key in loaded.exact().row_map().keys() {
            copy.insert(*key, loaded.exact().get(*key).expect("a stored row"))?;
        }
        let started = Instant::now();
        let mut windowed = WindowedIndex::new(copy);
        windowed.build_hnsw(params, &mut |_, _| {})?;
        build = Some(started.elapsed());
    }
    let admit = said_by(&turns, as_of);
    let windowed = WindowedIndex::from_hnsw(loaded);
    let exact_rows = windowed.hnsw().expect("a graph").exact();
    let recall = mean_recall(&windowed, exact_rows, &vectors, &admit)?;

    // The timed compiles are a running server's: each memory's first compile started the
    // background count of every turn's reader tokens, and a server has long finished it.
    let warm = |memory: &Memory| {
        compile_with(memory, 0)?;
        wait_for_counts(memory)
    };
    let started = Instant::now();
    let (mut by_exact, mut by_graph, mut by_rule) = (vec![], vec![], vec![]);
    let (mut packed_exact, mut packed_graph) = (vec![], vec![]);
    let mut rule_graph_served = 0;
    if let Some(exact) = exact {
        let rule = open(rule_settings)?;
        for memory in [&exact, &graph, &rule] {
            warm(memory)?;
        }
        outln!(
            "size {} ({admitted_share} admitted): waited {} for the three memories' background \
             reader-token counts before timing",
            windowed.len(),
            secs(started.elapsed())
        )?;
        for i in 0..questions.len() {
            packed_exact.push(compile_packed(&exact, i, &mut by_exact)?);
            packed_graph.push(compile_packed(&graph, i, &mut by_graph)?);
            let (total, stages, served_by_graph, _) = compile_served(&rule, i)?;
            by_rule.push((total, stages));
            rule_graph_served += usize::from(served_by_graph);
        }
        drop(graph);
    } else {
        let time_all = |memory: &Memory, times: &mut Vec<Timed>, packed: &mut Vec<Vec<TurnId>>| {
            warm(memory)?;
            for i in 0..questions.len() {
                packed.push(compile_packed(memory, i, times)?);
            }
            anyhow::Ok(())
        };
        time_all(&graph, &mut by_graph, &mut packed_graph)?;
        drop(graph);
        time_all(&open(None)?, &mut by_exact, &mut packed_exact)?;
        let rule = open(rule_settings)?;
        warm(&rule)?;
        for i in 0..questions.len() {
            let (total, stages, served_by_graph, _) = compile_served(&rule, i)?;
            by_rule.push((total, stages));
            rule_graph_served += usize::from(served_by_graph);
        }
        outln!(
            "size {} ({admitted_share} admitted): the graph, exact and rule memories were timed \
             one after another, each dropped before the next opened (each warmed by a first \
             compile and its background reader-token counts), {} in all",
            windowed.len(),
            secs(started.elapsed())
        )?;
    }
    if !filtered {
        // A restart: the file is loaded, not rebuilt (the first compile's time says which).
        let graph = open(graph_settings)?;
        let started = Instant::now();
        compile_with(&graph, 0)?;
        let reload = started.elapsed();
        drop(graph);
        // The anchor: the same restart with the lexical indexes analysed again, as before they
        // were kept on disk.
        let rebuilt = Memory::builder(dir)
            .encoder(Arc::clone(encoder))
            .ann(graph_settings)
            .index_cache_bytes(INDEX_CACHE_BYTES)
            .lexical_files_from(None)
            .open()?;
        let started = Instant::now();
        compile_with(&rebuilt, 0)?;
        let rebuild = started.elapsed();
        outln!(
            "size {}: first compile after a restart (loads the graph and lexical index files) \
             {}; with the lexical indexes rebuilt instead {} ({:.2}x)",
            windowed.len(),
            secs(reload),
            secs(rebuild),
            rebuild.as_secs_f64() / reload.as_secs_f64()
        )?;
    }
    let packed_agreement = packed_agreement(&packed_exact, &packed_graph);
    Ok(Outcome {
        rows: windowed.len(),
        admitted: admitted_share,
        recall,
        packed_agreement,
        first_compile,
        build,
        load,
        file_bytes,
        exact: by_exact,
        graph: by_graph,
        rule: by_rule,
        rule_graph_served,
    })
}

/// One compile's wall time and its stages.
pub(super) type Timed = (Duration, StageTimings);

fn total(c: &Timed) -> Duration {
    c.0
}

fn dense(c: &Timed) -> Duration {
    c.1.dense
}

/// One measure of every compile.
fn column(compiles: &[Timed], pick: fn(&Timed) -> Duration) -> Vec<Duration> {
    compiles.iter().map(pick).collect()
}

/// One line of the stage table: the p50 of each stage and of the rest.
fn stage_row(rows: usize, admitted: &str, path: &str, compiles: &[Timed]) -> String {
    let p50 = |pick: fn(&Timed) -> Duration| {
        format!("{:.2} ms", percentile_ms(&column(compiles, pick), 0.5))
    };
    format!(
        "| {rows} | {admitted} | {path} | {} | {} | {} | {} | {} | {} |",
        p50(total),
        p50(|c| c.1.lexical),
        p50(dense),
        p50(|c| c.1.fuse),
        p50(|c| c.1.pack),
        p50(|c| c.0.saturating_sub(c.1.lexical + c.1.dense + c.1.fuse + c.1.pack)),
    )
}

/// The exact top `n` turns (a turn scores as its best window), as [`WindowedIndex`] ranks them.
pub(super) fn exact_turns(
    exact: &ExactIndex<WindowKey>,
    query: &[f32],
    n: usize,
    admit: &dyn Fn(TurnId) -> bool,
) -> anyhow::Result<Vec<TurnId>> {
    let mut want = n;
    loop {
        let windows = exact.search(query, want, &mut |(turn, _)| admit(turn))?;
        let mut turns: Vec<TurnId> = Vec::with_capacity(n);
        for w in &windows {
            if !turns.contains(&w.key.0) {
                turns.push(w.key.0);
            }
        }
        if turns.len() >= n || windows.len() < want {
            turns.truncate(n);
            return Ok(turns);
        }
        want *= 2;
    }
}

/// The as-of time that admits `fraction` of `turns` (by event time), and the share it admits
/// as printed ("10.0%"); no time and "100.0%" without a fraction.
pub(super) fn as_of_admitting(
    turns: &[evicortex::Evidence],
    fraction: Option<f64>,
) -> (Option<EventTime>, String) {
    let as_of_time: Option<EventTime> = fraction.map(|fraction| {
        let mut times: Vec<EventTime> = turns.iter().map(|e| e.turn.time).collect();
        times.sort_unstable_by_key(|t| t.utc_micros());
        let at = ((times.len() as f64 * fraction) as usize).min(times.len() - 1);
        times[at]
    });
    let as_of = as_of_time.map(|t| t.utc_micros());
    let admitted =
        turns.iter().filter(|e| as_of.is_none_or(|t| e.turn.time.utc_micros() <= t)).count();
    (as_of_time, format!("{:.1}%", 100.0 * admitted as f64 / turns.len() as f64))
}

/// Mean over the questions of the share of the exact path's packed turns that the other path's
/// compile also packs.
/// Whether a turn of `turns` was said at or before `as_of` (UTC microseconds; every turn when
/// `None`): the audit's as-of filter, applied to the exact and approximate searches alike.
pub(super) fn said_by(
    turns: &[evicortex::Evidence],
    as_of: Option<i64>,
) -> impl Fn(TurnId) -> bool + use<> {
    let time_of: std::collections::HashMap<TurnId, i64> =
        turns.iter().map(|e| (e.id, e.turn.time.utc_micros())).collect();
    move |turn| as_of.is_none_or(|t| time_of.get(&turn).is_some_and(|&x| x <= t))
}

pub(super) fn packed_agreement(exact: &[Vec<TurnId>], other: &[Vec<TurnId>]) -> f64 {
    exact
        .iter()
        .zip(other)
        .map(|(exact, other)| {
            let other: std::collections::HashSet<&TurnId> = other.iter().collect();
            let kept = exact.iter().filter(|id| other.contains(id)).count();
            if exact.is_empty() { 1.0 } else { kept as f64 / exact.len() as f64 }
        })
        .sum::<f64>()
        / exact.len().max(1) as f64
}

/// Mean recall@50 over the question vectors of `index`'s turns against the exact top turns of
/// `exact` (the same rows), among the turns `admit` accepts.
pub(super) fn mean_recall(
    index: &WindowedIndex,
    exact: &ExactIndex<WindowKey>,
    vectors: &[IdentifiedVector],
    admit: &dyn Fn(TurnId) -> bool,
) -> anyhow::Result<f64> {
    let mut sum = 0.0;
    for v in vectors {
        let found = index.search(&v.vector, RECALL_AT, &mut |k| admit(k))?;
        let truth = exact_turns(exact, &v.vector, RECALL_AT, admit)?;
        let truth: std::collections::HashSet<TurnId> = truth.iter().copied().collect();
        let hit = found.iter().filter(|h| truth.contains(&h.key)).count();
        sum += hit as f64 / truth.len().max(1) as f64;
    }
    Ok(sum / vectors.len() as f64)
}

/// The audit's compile of one question through the facade, timed: the question embedded
/// beforehand, the default configuration with the dense list at [`RECALL_AT`], 2,048 tokens.
pub(super) struct AuditCompile<'a> {
    pub(super) namespace: &'a Namespace,
    pub(super) questions: &'a [String],
    pub(super) vectors: &'a [IdentifiedVector],
    pub(super) as_of: Option<EventTime>,
    pub(super) config: CompileConfig,
    pub(super) reader: Box<dyn evicortex::ReaderTokenizer>,
}

impl<'a> AuditCompile<'a> {
    /// The audit's compile of `questions` (embedded as `vectors`) in `namespace`, at `as_of`.
    pub(super) fn new(
        namespace: &'a Namespace,
        questions: &'a [String],
        vectors: &'a [IdentifiedVector],
        as_of: Option<EventTime>,
    ) -> anyhow::Result<AuditCompile<'a>> {
        Ok(AuditCompile {
            namespace,
            questions,
            vectors,
            as_of,
            config: audit_config(),
            reader: reader_tokenizer("o200k_base")?,
        })
    }

    /// Question `i` through `memory`: its wall time and stages, the index that served its dense
    /// list, and the turns it packed.
    pub(super) fn run(
        &self,
        memory: &Memory,
        i: usize,
    ) -> anyhow::Result<(Timed, Option<DenseIndexRef>, Vec<TurnId>)> {
        let query = CompileQuery {
            namespace: self.namespace.clone(),
            question: self.questions[i].clone(),
            as_of: self.as_of,
            budget: TokenBudget::new(2048),
        };
        let started = Instant::now();
        let report = memory.compile_report(&CompileRequest {
            query: &query,
            config: &self.config,
            reader: &*self.reader,
            query_vectors: std::slice::from_ref(&self.vectors[i]),
        })?;
        let elapsed = started.elapsed();
        let packed = report.context.items.iter().map(|item| item.record).collect();
        Ok(((elapsed, report.stages), report.context.dense_index, packed))
    }
}

/// A memory over the size store with `ann`, holding its one namespace's indexes whatever their
/// size.
pub(super) fn open_audit_memory(
    dir: &Path,
    encoder: &Arc<dyn Encoder>,
    ann: Option<AnnSettings>,
) -> Result<Memory, evicortex::OpenError> {
    Memory::builder(dir)
        .encoder(Arc::clone(encoder))
        .ann(ann)
        .index_cache_bytes(INDEX_CACHE_BYTES)
        .open()
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

pub(super) fn pair(times: &[Duration]) -> String {
    format!("{:.2} / {:.2} ms", percentile_ms(times, 0.5), percentile_ms(times, 0.99))
}

/// The `p` quantile of `times` in milliseconds (nearest rank).
fn percentile_ms(times: &[Duration], p: f64) -> f64 {
    let mut ms: Vec<f64> = times.iter().map(|d| d.as_secs_f64() * 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    ms[((ms.len() as f64 - 1.0) * p).round() as usize]
}

pub(super) fn load_average() -> String {
    fs_err::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
