//! `evicortex-bench ann run --sketch`: the sign sketch in the graph's place. At each size and
//! filter, recall@50 of the sketch's turn candidates against the exact scan over the same rows
//! (read from the size store's embedding cache), the share of the exact path's packed turns the
//! sketch path also packs, and compile p50/p99 through the exact scan and through the sketch,
//! timed through the `Memory` facade in one pass over the questions per memory.

use std::{path::Path, sync::Arc};

use anyhow::Context;
use evicortex::{AnnSettings, DenseIndexRef, Encoder, IdentifiedVector, Namespace};
use evicortex_vector::{ExactIndex, VectorIndex, VectorIndexRead, WindowKey, WindowedIndex};

use super::{
    audit_compile::{
        AuditCompile, Timed, as_of_admitting, mean_recall, open_audit_memory, packed_agreement,
        said_by, wait_for_counts,
    },
    size_store::open_embeddings,
};

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
    let (conn, path) = open_embeddings(dir)?;
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
    settings: AnnSettings,
    as_of_fraction: Option<f64>,
) -> anyhow::Result<SketchOutcome> {
    let exact = open_audit_memory(dir, encoder, None)?;
    let sketch = open_audit_memory(dir, encoder, Some(settings))?;
    let turns = exact.evidence(namespace)?;
    let (as_of_time, admitted) = as_of_admitting(&turns, as_of_fraction);
    let as_of = as_of_time.map(|t| t.utc_micros());

    let vectors: Vec<IdentifiedVector> =
        questions.iter().map(|q| exact.embed_query(q)).collect::<Result<_, _>>()?;
    let admit = said_by(&turns, as_of);
    let rows = stored_rows(dir, encoder, &turns)?;
    let mut windowed = WindowedIndex::new(rows.clone());
    windowed.set_sketch(settings.sketch_for(windowed.len()));
    let recall = mean_recall(&windowed, &rows, &vectors, &admit)?;
    let size = windowed.len();
    drop((windowed, rows));

    let audit = AuditCompile::new(namespace, questions, &vectors, as_of_time)?;
    for memory in [&exact, &sketch] {
        audit.run(memory, 0)?;
        wait_for_counts(memory)?;
    }
    // One pass over the questions per memory, as a process serving one memory compiles them:
    // alternating question by question would leave each compile the other memory's cache lines.
    let (mut by_exact, mut by_sketch, mut served) = (vec![], vec![], 0);
    let (mut packed_exact, mut packed_sketch) = (vec![], vec![]);
    for i in 0..questions.len() {
        let (timed, _, packed) = audit.run(&exact, i)?;
        by_exact.push(timed);
        packed_exact.push(packed);
    }
    for i in 0..questions.len() {
        let (timed, index, packed) = audit.run(&sketch, i)?;
        by_sketch.push(timed);
        packed_sketch.push(packed);
        served += usize::from(matches!(index, Some(DenseIndexRef::Sketch { .. })));
    }
    Ok(SketchOutcome {
        rows: size,
        admitted,
        recall,
        packed_agreement: packed_agreement(&packed_exact, &packed_sketch),
        exact: by_exact,
        sketch: by_sketch,
        served,
    })
}
