//! `evicortex bench ann run --sketch`: the sign sketch in the graph's place. At each size and
//! filter, recall@50 of the sketch's turn candidates against the exact scan over the same rows
//! (read from the size store's embedding cache), the share of the exact path's packed turns the
//! sketch path also packs, and compile p50/p99 through the exact scan and through the sketch,
//! timed question by question in turn through the `Memory` facade.

use std::{collections::HashSet, path::Path, sync::Arc, time::Instant};

use anyhow::Context;
use evicortex::{
    AnnSettings, CompileConfig, CompileQuery, CompileRequest, DenseConfig, DenseIndexRef, Encoder,
    EventTime, IdentifiedVector, Memory, Namespace, SketchParams, TokenBudget, TurnId,
    reader_tokenizer,
};
use evicortex_vector::{ExactIndex, VectorIndex, VectorIndexRead, WindowKey, WindowedIndex};

use super::run::{INDEX_CACHE_BYTES, RECALL_AT, Timed, exact_turns, wait_for_counts};

/// One row of the sketch audit.
pub(super) struct SketchOutcome {
    pub(super) rows: usize,
    pub(super) admitted: String,
    pub(super) recall: f64,
    /// Mean over the questions of the share of the exact path's packed turns the sketch path
    /// also packs.
    pub(super) packed_agreement: f64,
    pub(super) exact: Vec<Timed>,
    pub(super) sketch: Vec<Timed>,
    /// Compiles whose dense list the sketch served.
    pub(super) served: usize,
}

/// The size store's vectors, as the memory's index holds them: each turn's windows in order.
fn stored_rows(
    dir: &Path,
    encoder: &Arc<dyn Encoder>,
    turns: &[evicortex::Evidence],
) -> anyhow::Result<ExactIndex<WindowKey>> {
    let path = dir.join(evicortex::EMBEDDINGS_FILE);
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .with_context(|| format!("opening {}", path.display()))?;
    let identity = encoder.identity();
    let mut windows = conn.prepare(
        "SELECT vector FROM vectors WHERE identity = ?1 AND text_digest = ?2 \
         ORDER BY window_index",
    )?;
    let mut index = ExactIndex::new(identity.dimension);
    for e in turns {
        let digest = evicortex::TextDigest::of(&evicortex_compiler::turn_document(&e.turn));
        let blobs = windows
            .query_map(rusqlite::params![identity.digest().as_bytes(), digest.as_bytes()], |r| {
                r.get::<_, Vec<u8>>(0)
            })?
            .collect::<Result<Vec<_>, _>>()
            .with_context(|| format!("reading {}", path.display()))?;
        for (window, blob) in blobs.iter().enumerate() {
            anyhow::ensure!(
                blob.len() == identity.dimension * 4,
                "a vector of {} bytes in {} (expected {})",
                blob.len(),
                path.display(),
                identity.dimension * 4
            );
            let vector: Vec<f32> = blob
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes(b.try_into().expect("4 bytes")))
                .collect();
            index.insert((e.id, window as u32), &vector)?;
        }
    }
    Ok(index)
}

/// Audits the sketch at one size and filter (`as_of_fraction`: the share of the namespace the
/// as-of time admits, `None` for none).
pub(super) fn measure(
    dir: &Path,
    namespace: &Namespace,
    encoder: &Arc<dyn Encoder>,
    questions: &[String],
    params: SketchParams,
    as_of_fraction: Option<f64>,
) -> anyhow::Result<SketchOutcome> {
    let open = |ann: Option<AnnSettings>| {
        Memory::builder(dir)
            .encoder(Arc::clone(encoder))
            .ann(ann)
            .index_cache_bytes(INDEX_CACHE_BYTES)
            .open()
    };
    let exact = open(None)?;
    // Threshold 1: the sketch serves every search.
    let sketch =
        open(Some(AnnSettings { threshold: 1, sketch: Some(params), ..AnnSettings::default() }))?;
    let turns = exact.evidence(namespace)?;
    let as_of_time: Option<EventTime> = as_of_fraction.map(|fraction| {
        let mut times: Vec<EventTime> = turns.iter().map(|e| e.turn.time).collect();
        times.sort_unstable_by_key(|t| t.utc_micros());
        let at = ((times.len() as f64 * fraction) as usize).min(times.len() - 1);
        times[at]
    });
    let as_of = as_of_time.map(|t| t.utc_micros());
    let admitted =
        turns.iter().filter(|e| as_of.is_none_or(|t| e.turn.time.utc_micros() <= t)).count();
    let admitted = format!("{:.1}%", 100.0 * admitted as f64 / turns.len() as f64);

    let vectors: Vec<IdentifiedVector> =
        questions.iter().map(|q| exact.embed_query(q)).collect::<Result<_, _>>()?;
    let time_of: std::collections::HashMap<TurnId, i64> =
        turns.iter().map(|e| (e.id, e.turn.time.utc_micros())).collect();
    let admit = |turn: TurnId| as_of.is_none_or(|t| time_of.get(&turn).is_some_and(|&x| x <= t));
    let rows = stored_rows(dir, encoder, &turns)?;
    let mut windowed = WindowedIndex::new(rows.clone());
    windowed.set_sketch(Some(params));
    let mut recall_sum = 0.0;
    for v in &vectors {
        let found = windowed.search(&v.vector, RECALL_AT, &mut |k| admit(k))?;
        let truth = exact_turns(&rows, &v.vector, RECALL_AT, &admit)?;
        let truth: HashSet<TurnId> = truth.iter().copied().collect();
        let hit = found.iter().filter(|h| truth.contains(&h.key)).count();
        recall_sum += hit as f64 / truth.len().max(1) as f64;
    }
    let recall = recall_sum / vectors.len() as f64;
    let size = windowed.len();
    drop((windowed, rows));

    let reader = reader_tokenizer("o200k_base")?;
    let config = CompileConfig::default_with(10, DenseConfig::On { top_n: RECALL_AT });
    let compile = |memory: &Memory, i: usize| {
        let query = CompileQuery {
            namespace: namespace.clone(),
            question: questions[i].clone(),
            as_of: as_of_time,
            budget: TokenBudget::new(2048),
        };
        let started = Instant::now();
        let report = memory.compile_report(&CompileRequest {
            query: &query,
            config: &config,
            reader: &*reader,
            query_vectors: std::slice::from_ref(&vectors[i]),
        })?;
        let elapsed = started.elapsed();
        let by_sketch = matches!(report.context.dense_index, Some(DenseIndexRef::Sketch { .. }));
        let packed: Vec<TurnId> = report.context.items.iter().map(|item| item.record).collect();
        anyhow::Ok(((elapsed, report.stages), by_sketch, packed))
    };
    for memory in [&exact, &sketch] {
        compile(memory, 0)?;
        wait_for_counts(memory)?;
    }
    let (mut by_exact, mut by_sketch, mut served, mut agreement) = (vec![], vec![], 0, 0.0);
    for i in 0..questions.len() {
        let (timed, _, packed_exact) = compile(&exact, i)?;
        by_exact.push(timed);
        let (timed, sketched, packed_sketch) = compile(&sketch, i)?;
        by_sketch.push(timed);
        served += usize::from(sketched);
        let packed: HashSet<&TurnId> = packed_sketch.iter().collect();
        let kept = packed_exact.iter().filter(|id| packed.contains(id)).count();
        agreement +=
            if packed_exact.is_empty() { 1.0 } else { kept as f64 / packed_exact.len() as f64 };
    }
    Ok(SketchOutcome {
        rows: size,
        admitted,
        recall,
        packed_agreement: agreement / questions.len().max(1) as f64,
        exact: by_exact,
        sketch: by_sketch,
        served,
    })
}
