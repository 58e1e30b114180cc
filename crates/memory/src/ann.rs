//! The approximate candidate layer behind compile: when a namespace holds at least
//! [`AnnSettings::threshold`] vectors, an HNSW graph is built over them and persisted beside the
//! store as derived data, and a search whose filters are estimated to admit at least that many
//! vectors takes its dense candidates from the graph (filters applied inside the traversal)
//! instead of the exact scan.
//!
//! An index file (`DIR/vector-index/<namespace hash>-<encoder hash>.hnsw`, layout in
//! `docs/vector-index.md`) records the namespace, the encoder identity, the graph's parameters
//! and the namespace's record it covers. It is used on open only when all of them match and no
//! turn of the namespace was erased after that record; otherwise it is removed and the graph
//! rebuilt from the embedding cache. A current file is extended with the turns after the record
//! it covers. Only graphs that cover the namespace's last record are written (so a later erasure
//! always lies after the record recorded), under the writer lock of derived data and the index
//! files' lock across processes ([`crate::index_cache::IndexCache::lock_files`]), and never after
//! an erasure of the namespace they missed; every erasure removes the namespace's files.

use evicortex_ledger::EvidenceLedger;
use std::{path::Path, time::Instant};

use evicortex_core::{Namespace, TurnId};
use evicortex_vector::{
    HnswParams, IndexFileError, IndexFileMeta, IndexFileState, SketchParams, VectorIndexRead,
    WindowedIndex, index_file_name, index_file_prefix, index_file_state, read_index_header,
    remove_index_file,
};

use crate::{
    CompileError, OpenError, dense::Dense, derived_view::DerivedView, index_cache::DenseIndex,
    index_files,
};

/// The directory of the vector index files inside a store directory.
pub const VECTOR_INDEX_DIR: &str = "vector-index";

/// Vectors a namespace must hold for an HNSW graph to be built, and that a search's filters
/// must admit for the graph to serve it, when [`AnnSettings::default`] is asked for. Measured by
/// `evicortex-bench ann run` at 100k real vectors (`bench/README.md`): the graph's dense stage
/// cost 1.10 of the exact scan's with a filter admitting 50% and 0.88 at 75% (0.81 unfiltered),
/// a crossover near 56k admitted vectors. The graph is not on by default; the sign sketch is
/// (see [`crate::MemoryBuilder::ann`]).
pub const DEFAULT_ANN_THRESHOLD: usize = 60_000;

/// Vectors from which a namespace of an embedded store is searched by the sign sketch when the
/// builder is not told otherwise ([`crate::MemoryBuilder::ann`]). Measured by `evicortex-bench
/// ann run --sketch` on real LongMemEval embeddings (`bench/README.md`): the sketch's compile took
/// 0.96 of the exact scan's p50 at 10k vectors, 0.73 at 30k, 0.44 at 60k, 0.33 at 100k and
/// 0.17 at 1M, with recall@50 at least 0.999 at every size, unfiltered and with an as-of filter
/// admitting 10%; it packed 99.76% of the exact path's packed turns alike at 100k and 99.47% at
/// 1M (with the seeds of [`DEFAULT_MORE_SEEDS_FROM`]; 98.8% with 256).
pub const DEFAULT_SKETCH_FROM: usize = 30_000;

/// Vectors from which the sketch's default parameters seed the dense context list with twice as
/// many turns ([`AnnSettings::sketch_large`]): the seeds choose which windows the context list
/// scores, and a fixed number of them is a smaller share of a larger namespace. On the 1M audit
/// (`bench/README.md`) 512 seeds packed 99.47% of the exact path's packed turns alike, 256 seeds
/// 98.80%; at 100k, 256 seeds packed 99.76%. Sizes between were not audited.
pub const DEFAULT_MORE_SEEDS_FROM: usize = 300_000;

/// When compile searches a namespace's vectors through an HNSW graph instead of scanning them.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AnnSettings {
    /// Vectors (one per turn, or per window of a long turn) from which the graph is built, and
    /// the vectors a search's filters (as-of, erasure) must be estimated to admit for the graph
    /// to serve it: the traversal's cost grows as the filter narrows while the exact scan's
    /// does not, so the crossover is a count of admitted vectors, not a share.
    pub threshold: usize,
    /// The graph's parameters (recorded in index files and compiled contexts).
    pub params: HnswParams,
    /// Set: a namespace at or above the threshold is searched by the sign sketch of its exact
    /// index instead of a graph (`ExactIndex::search_sketched`): no graph is built, loaded or
    /// written, and every search, filtered or not, takes the sketch's path.
    pub sketch: Option<SketchParams>,
    /// With `sketch`: from this many vectors, these parameters in its place.
    pub sketch_large: Option<(usize, SketchParams)>,
}

impl AnnSettings {
    /// The sign sketch with its default parameters for namespaces of at least `threshold`
    /// vectors ([`DEFAULT_SKETCH_FROM`] is the product's).
    pub fn sketch_from(threshold: usize) -> AnnSettings {
        let default = SketchParams::default();
        AnnSettings {
            threshold,
            sketch: Some(default),
            sketch_large: Some((
                DEFAULT_MORE_SEEDS_FROM,
                SketchParams { seeds: 2 * default.seeds, ..default },
            )),
            ..AnnSettings::default()
        }
    }

    /// The sketch's parameters for a namespace of `rows` vectors; `None` where it does not
    /// search by sketch.
    pub fn sketch_for(&self, rows: usize) -> Option<SketchParams> {
        let sketch = self.sketch.filter(|_| rows >= self.threshold)?;
        Some(match self.sketch_large {
            Some((from, large)) if rows >= from => large,
            _ => sketch,
        })
    }
}

impl Default for AnnSettings {
    fn default() -> AnnSettings {
        AnnSettings {
            threshold: DEFAULT_ANN_THRESHOLD,
            params: HnswParams::default(),
            sketch: None,
            sketch_large: None,
        }
    }
}

fn file_err(namespace: &Namespace, source: IndexFileError) -> CompileError {
    CompileError::IndexFile { namespace: namespace.clone(), source }
}

fn meta(dense: &Dense, namespace: &Namespace) -> IndexFileMeta {
    IndexFileMeta {
        namespace: namespace.clone(),
        encoder: *dense.encoder.identity_digest().as_bytes(),
    }
}

/// The namespace's graph from its index file, with the namespace record it covers, when the file
/// is current and large enough to serve; a stale or unreadable file is removed.
pub(crate) fn load(
    view: DerivedView<'_>,
    dense: &Dense,
    namespace: &Namespace,
) -> Result<Option<(WindowedIndex, TurnId)>, CompileError> {
    let cache = &view.indexes;
    let (Some(settings), Some(dir)) = (cache.ann, cache.ann_dir.as_deref()) else {
        return Ok(None);
    };
    if settings.sketch.is_some() {
        return Ok(None);
    }
    let meta = meta(dense, namespace);
    let path = dir.join(index_file_name(namespace, &meta.encoder));
    let last_erasure = view.last_erasure(namespace)?;
    let state = index_file_state(&path, &meta, &settings.params, last_erasure)
        .map_err(|e| file_err(namespace, e))?;
    let discard = |reason: &str| {
        tracing::info!(path = %path.display(), reason, "vector index file not used: rebuilding");
        remove_index_file(&path).map_err(|e| file_err(namespace, e))
    };
    match state {
        IndexFileState::Missing => Ok(None),
        IndexFileState::Stale { reason } => discard(&reason).map(|_| None),
        IndexFileState::Current { header } if header.rows < settings.threshold => Ok(None),
        IndexFileState::Current { .. } => {
            let started = Instant::now();
            match WindowedIndex::load_hnsw(&path) {
                Ok((header, mut index)) => {
                    index.set_min_admitted(settings.threshold);
                    let covers = header.covers.expect("a current file records its position");
                    tracing::debug!(
                        path = %path.display(),
                        rows = header.rows,
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "vector index file loaded"
                    );
                    Ok(Some((index, covers)))
                }
                Err(IndexFileError::Corrupted { detail, .. }) => discard(&detail).map(|_| None),
                // Removed meanwhile (an erasure in another process).
                Err(IndexFileError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    Ok(None)
                }
                Err(e) => Err(file_err(namespace, e)),
            }
        }
    }
}

/// Makes a namespace at the threshold search by sketch when the settings ask for it; otherwise
/// replaces the exact index by a graph once it reaches the threshold, and writes the graph when
/// it covers the namespace's last record (`head`) and has grown by more than an eighth since last written.
pub(crate) fn grow(
    view: DerivedView<'_>,
    dense: &Dense,
    namespace: &Namespace,
    index: &mut DenseIndex,
    head: Option<TurnId>,
) -> Result<(), CompileError> {
    let cache = &view.indexes;
    let Some(settings) = cache.ann else { return Ok(()) };
    if settings.sketch.is_some() {
        index.index.set_sketch(settings.sketch_for(index.index.len()));
        return Ok(());
    }
    if index.index.hnsw().is_none() {
        if index.index.len() < settings.threshold {
            return Ok(());
        }
        let started = Instant::now();
        let _span =
            tracing::debug_span!("hnsw_build", %namespace, rows = index.index.len()).entered();
        index
            .index
            .build_hnsw(settings.params, &mut |_, _| {})
            .map_err(|source| CompileError::Vector { namespace: namespace.clone(), source })?;
        index.index.set_min_admitted(settings.threshold);
        tracing::info!(
            %namespace,
            rows = index.index.len(),
            elapsed_ms = started.elapsed().as_millis() as u64,
            "HNSW graph built"
        );
    }
    let Some(dir) = cache.ann_dir.as_deref() else { return Ok(()) };
    let rows = index.index.len();
    let Some(covers) = index.index.covers() else { return Ok(()) };
    if Some(covers) != head || index.saved_rows.is_some_and(|s| rows - s <= s / 8) {
        return Ok(());
    }
    let Some(_guard) = index_files::begin_write(view, namespace, covers, dir)? else {
        return Ok(());
    };
    let meta = meta(dense, namespace);
    let path = dir.join(index_file_name(namespace, &meta.encoder));
    index.index.save_hnsw(&path, &meta).map_err(|e| file_err(namespace, e))?;
    index.saved_rows = Some(rows);
    Ok(())
}

/// Removes every index file of `namespace` in `dir` (any encoder); an absent directory holds
/// none.
pub(crate) fn remove_files(dir: &Path, namespace: &Namespace) -> Result<(), IndexFileError> {
    let prefix = index_file_prefix(namespace);
    let entries = match fs_err::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(IndexFileError::Io { path: dir.to_owned(), source }),
    };
    for entry in entries {
        let entry = entry.map_err(|source| IndexFileError::Io { path: dir.to_owned(), source })?;
        let name = entry.file_name();
        if name.to_str().is_some_and(|n| n.starts_with(&prefix)) {
            remove_index_file(&entry.path())?;
        }
    }
    Ok(())
}

/// Removes the index files that an erasure interrupted before its purge left behind: those of a
/// namespace erased after the position they cover, and those that cannot be read; and the
/// temporary files of writers killed before their rename.
pub(crate) fn reconcile(dir: &Path, ledger: &dyn EvidenceLedger) -> Result<(), OpenError> {
    index_files::reconcile(dir, "hnsw", |path| match read_index_header(path) {
        Ok(header) => {
            let erased = ledger.last_erasure(&header.meta.namespace)?;
            Ok(header.covers.is_none() || erased.is_some_and(|e| Some(e) > header.covers))
        }
        Err(IndexFileError::Corrupted { .. }) => Ok(true),
        Err(source) => Err(OpenError::IndexFile { source }),
    })
}
