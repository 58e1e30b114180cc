//! What every row of `evicortex-bench ann run` measures alike (graph, sketch and PostgreSQL):
//! one question compiled through the facade and timed, recall@50 and packed-turn agreement
//! against the exact scan, and the as-of filter that admits a share of the namespace.

use std::{
    collections::{HashMap, HashSet},
    path::Path,
    sync::Arc,
    time::{Duration, Instant},
};

use evicortex::{
    AnnSettings, CompileConfig, CompileQuery, CompileRequest, DEFAULT_TOP_N, DenseIndexRef,
    Encoder, EventTime, IdentifiedVector, Memory, Namespace, StageTimings, TokenBudget, TurnId,
    reader_tokenizer,
};
use evicortex_vector::{ExactIndex, VectorIndexRead, WindowKey, WindowedIndex};

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

/// One compile's wall time and its stages.
pub(super) type Timed = (Duration, StageTimings);

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

/// Whether a turn of `turns` was said at or before `as_of` (UTC microseconds; every turn when
/// `None`): the audit's as-of filter, applied to the exact and approximate searches alike.
pub(super) fn said_by(
    turns: &[evicortex::Evidence],
    as_of: Option<i64>,
) -> impl Fn(TurnId) -> bool + use<> {
    let time_of: HashMap<TurnId, i64> =
        turns.iter().map(|e| (e.id, e.turn.time.utc_micros())).collect();
    move |turn| as_of.is_none_or(|t| time_of.get(&turn).is_some_and(|&x| x <= t))
}

/// Mean over the questions of the share of the exact path's packed turns that the other path's
/// compile also packs.
pub(super) fn packed_agreement(exact: &[Vec<TurnId>], other: &[Vec<TurnId>]) -> f64 {
    exact
        .iter()
        .zip(other)
        .map(|(exact, other)| {
            let other: HashSet<&TurnId> = other.iter().collect();
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
        let truth: HashSet<TurnId> = truth.iter().copied().collect();
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
