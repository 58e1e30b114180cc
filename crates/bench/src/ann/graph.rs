//! `evicortex-bench ann run`, the graph rows: at one size and filter, recall@50 of the HNSW
//! graph against the exact scan, the graph's first compile, build, load and file size, and
//! compile latency through the exact scan, the graph and the product's rule.

use std::{
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use evicortex::{
    AnnSettings, DenseIndexRef, Encoder, HnswParams, IdentifiedVector, Memory, Namespace, TurnId,
    VECTOR_INDEX_DIR,
};
use evicortex_vector::{
    ExactIndex, HnswIndex, VectorIndex, VectorIndexRead, WindowKey, WindowedIndex,
};

use super::{
    audit_compile::{
        AuditCompile, INDEX_CACHE_BYTES, Timed, as_of_admitting, mean_recall, open_audit_memory,
        packed_agreement, said_by, wait_for_counts,
    },
    table::secs,
};
use crate::outln;

/// One row of the graph table.
pub(super) struct Outcome {
    pub(super) rows: usize,
    pub(super) admitted: String,
    pub(super) recall: f64,
    /// Mean over the questions of the share of the exact scan's packed turns that the graph's
    /// compile (its dense list and its seeded context list) also packs.
    pub(super) packed_agreement: f64,
    pub(super) first_compile: Option<Duration>,
    pub(super) build: Option<Duration>,
    pub(super) load: Option<Duration>,
    pub(super) file_bytes: u64,
    /// Each compile's total and stages, through the exact scan, the graph and the rule.
    pub(super) exact: Vec<Timed>,
    pub(super) graph: Vec<Timed>,
    pub(super) rule: Vec<Timed>,
    pub(super) rule_graph_served: usize,
}

/// What one row measures.
pub(super) struct Settings {
    pub(super) params: HnswParams,
    /// The product rule's threshold.
    pub(super) threshold: usize,
    /// The as-of filter's share of the namespace; `None`: no filter.
    pub(super) as_of_fraction: Option<f64>,
    /// See [`RunArgs::interleave_up_to`](super::run::RunArgs::interleave_up_to).
    pub(super) interleave_up_to: usize,
}

/// Audits the graph at one size and filter. Without a filter the graph's file is written afresh
/// (its first compile builds it), and the build, load and restart are timed too.
pub(super) fn measure(
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
    let started = Instant::now();
    audit.run(&graph, 0)?;
    let first_compile = (!filtered).then(|| started.elapsed());
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
        audit.run(&exact, 0)?;
        Some(exact)
    } else {
        drop(exact);
        None
    };
    let (load, build) = if filtered {
        (None, None)
    } else {
        (Some(started.elapsed()), Some(build_alone(&loaded, params)?))
    };
    let admit = said_by(&turns, as_of);
    let windowed = WindowedIndex::from_hnsw(loaded);
    let exact_rows = windowed.hnsw().expect("a graph").exact();
    let recall = mean_recall(&windowed, exact_rows, &vectors, &admit)?;
    let rows = windowed.len();
    let compiles = match exact {
        Some(exact) => {
            let memories = [exact, graph];
            time_together(&audit, memories, &|| open(rule_settings), rows, &admitted_share)?
        }
        None => time_in_turn(&audit, graph, &open, rule_settings, rows, &admitted_share)?,
    };
    if !filtered {
        time_restart(dir, encoder, graph_settings, &audit, rows)?;
    }
    Ok(Outcome {
        rows,
        admitted: admitted_share,
        recall,
        packed_agreement: packed_agreement(&compiles.packed_exact, &compiles.packed_graph),
        first_compile,
        build,
        load,
        file_bytes,
        exact: compiles.exact,
        graph: compiles.graph,
        rule: compiles.rule,
        rule_graph_served: compiles.rule_graph_served,
    })
}

/// The timed compiles of one row, every question through each memory.
#[derive(Default)]
struct TimedCompiles {
    exact: Vec<Timed>,
    graph: Vec<Timed>,
    rule: Vec<Timed>,
    /// Each question's packed turns through the exact scan and through the graph.
    packed_exact: Vec<Vec<TurnId>>,
    packed_graph: Vec<Vec<TurnId>>,
    rule_graph_served: usize,
}

impl TimedCompiles {
    /// Question `i` through the exact memory, then the graph's, each timed with its packed turns.
    fn exact_and_graph(
        &mut self,
        audit: &AuditCompile<'_>,
        exact: &Memory,
        graph: &Memory,
        i: usize,
    ) -> anyhow::Result<()> {
        self.packed_exact.push(compile_packed(audit, exact, i, &mut self.exact)?);
        self.packed_graph.push(compile_packed(audit, graph, i, &mut self.graph)?);
        Ok(())
    }

    /// Question `i` through the rule's memory, counting whether the graph served it.
    fn rule(&mut self, audit: &AuditCompile<'_>, rule: &Memory, i: usize) -> anyhow::Result<()> {
        let (timed, index, _) = audit.run(rule, i)?;
        self.rule.push(timed);
        self.rule_graph_served += usize::from(matches!(index, Some(DenseIndexRef::Hnsw { .. })));
        Ok(())
    }
}

/// Times question `i` through `memory` into `times`; returns the turns it packed.
fn compile_packed(
    audit: &AuditCompile<'_>,
    memory: &Memory,
    i: usize,
    times: &mut Vec<Timed>,
) -> anyhow::Result<Vec<TurnId>> {
    let (timed, _, packed) = audit.run(memory, i)?;
    times.push(timed);
    Ok(packed)
}

/// A first compile, then the background reader-token counts it started: the timed compiles are
/// a running server's, which has long finished them.
fn warm(audit: &AuditCompile<'_>, memory: &Memory) -> anyhow::Result<()> {
    audit.run(memory, 0)?;
    wait_for_counts(memory)
}

/// The exact, graph and rule memories open together and timed question by question in turn,
/// so that the machine's noise falls on the three alike.
fn time_together(
    audit: &AuditCompile<'_>,
    [exact, graph]: [Memory; 2],
    open_rule: &dyn Fn() -> Result<Memory, evicortex::OpenError>,
    rows: usize,
    admitted_share: &str,
) -> anyhow::Result<TimedCompiles> {
    let started = Instant::now();
    let mut compiles = TimedCompiles::default();
    let rule = open_rule()?;
    for memory in [&exact, &graph, &rule] {
        warm(audit, memory)?;
    }
    outln!(
        "size {rows} ({admitted_share} admitted): waited {} for the three memories' background \
         reader-token counts before timing",
        secs(started.elapsed())
    )?;
    for i in 0..audit.questions.len() {
        compiles.exact_and_graph(audit, &exact, &graph, i)?;
        compiles.rule(audit, &rule, i)?;
    }
    Ok(compiles)
}

/// The graph, exact and rule memories timed one after another, each dropped before the next
/// opens: above the interleaving limit they do not fit in memory together.
fn time_in_turn(
    audit: &AuditCompile<'_>,
    graph: Memory,
    open: &dyn Fn(Option<AnnSettings>) -> Result<Memory, evicortex::OpenError>,
    rule_settings: Option<AnnSettings>,
    rows: usize,
    admitted_share: &str,
) -> anyhow::Result<TimedCompiles> {
    let started = Instant::now();
    let mut compiles = TimedCompiles::default();
    let questions = audit.questions.len();
    warm(audit, &graph)?;
    for i in 0..questions {
        compiles.packed_graph.push(compile_packed(audit, &graph, i, &mut compiles.graph)?);
    }
    drop(graph);
    {
        let exact = open(None)?;
        warm(audit, &exact)?;
        for i in 0..questions {
            compiles.packed_exact.push(compile_packed(audit, &exact, i, &mut compiles.exact)?);
        }
    }
    let rule = open(rule_settings)?;
    warm(audit, &rule)?;
    for i in 0..questions {
        compiles.rule(audit, &rule, i)?;
    }
    outln!(
        "size {rows} ({admitted_share} admitted): the graph, exact and rule memories were timed \
         one after another, each dropped before the next opened (each warmed by a first \
         compile and its background reader-token counts), {} in all",
        secs(started.elapsed())
    )?;
    Ok(compiles)
}

/// The graph build alone, on a copy of the loaded rows: the first compile's time also holds
/// reading the vectors and writing the file.
fn build_alone(loaded: &HnswIndex<WindowKey>, params: HnswParams) -> anyhow::Result<Duration> {
    let mut copy = ExactIndex::new(loaded.exact().dim());
    for key in loaded.exact().row_map().keys() {
        copy.insert(*key, loaded.exact().get(*key).expect("a stored row"))?;
    }
    let started = Instant::now();
    let mut windowed = WindowedIndex::new(copy);
    windowed.build_hnsw(params, &mut |_, _| {})?;
    Ok(started.elapsed())
}

/// Prints the first compile after a restart (the graph file loaded, not rebuilt: the first
/// compile's time says which) beside the same restart with the lexical indexes analysed again,
/// as before they were kept on disk.
fn time_restart(
    dir: &Path,
    encoder: &Arc<dyn Encoder>,
    graph_settings: Option<AnnSettings>,
    audit: &AuditCompile<'_>,
    rows: usize,
) -> anyhow::Result<()> {
    let graph = open_audit_memory(dir, encoder, graph_settings)?;
    let started = Instant::now();
    audit.run(&graph, 0)?;
    let reload = started.elapsed();
    drop(graph);
    let rebuilt = Memory::builder(dir)
        .encoder(Arc::clone(encoder))
        .ann(graph_settings)
        .index_cache_bytes(INDEX_CACHE_BYTES)
        .lexical_files_from(None)
        .open()?;
    let started = Instant::now();
    audit.run(&rebuilt, 0)?;
    let rebuild = started.elapsed();
    outln!(
        "size {rows}: first compile after a restart (loads the graph and lexical index files) \
         {}; with the lexical indexes rebuilt instead {} ({:.2}x)",
        secs(reload),
        secs(rebuild),
        rebuild.as_secs_f64() / reload.as_secs_f64()
    )?;
    Ok(())
}
