//! The in-memory indexes compile reads: per namespace, the corpus, its BM25 index and its vector
//! index under the memory's encoder, each recording the namespace record it covers.
//!
//! The cache is keyed by namespace alone and bounded in bytes: when the estimated size of all
//! namespaces exceeds the budget, the least recently compiled ones are dropped (and rebuilt from
//! the ledger when next asked for). New turns are added incrementally; an erasure drops the
//! namespace (purge), and an erasure made by another process (a new redaction count) rebuilds it,
//! so erased text never survives in an index.
//!
//! A namespace holding at least [`AnnSettings::threshold`] vectors is searched through an HNSW
//! graph instead of the exact scan (see [`crate::ann`]); the graph is persisted in
//! `DIR/vector-index/` as derived data, loaded on the next open when current, and removed by
//! every erasure of the namespace.

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard},
};

use evicortex_compiler::{
    CompileConfig, ContextVectors, Corpus, DenseConfig, WindowIndex, turn_document,
};
use evicortex_core::{Evidence, Namespace, TextDigest, TurnId};
use evicortex_ledger::LedgerPosition;
use evicortex_lexical::{Analyzer, Bm25Index, Bm25Params};
use evicortex_vector::{ExactIndex, VectorIndexRead, WindowedIndex};

use crate::{
    AnnSettings, CompileError, DerivedStore, DerivedStoreError, EraseReceipt, ErrorClass, ann,
    dense::Dense, derived_view::DerivedView, lexical_file,
};

/// The BM25 parameters of the cached lexical indexes (the compiler's stated starting point).
pub(crate) const BM25: Bm25Params = Bm25Params { k1: 1.2, b: 0.75 };

/// The analyzer of the cached lexical indexes: the default configuration's.
pub(crate) fn cached_analyzer() -> Analyzer {
    CompileConfig::default_for(false).lexical.analyzer
}

/// The default budget of the index cache.
pub const DEFAULT_INDEX_CACHE_BYTES: usize = 1 << 30;

/// The compile indexes of the namespaces compiled recently.
#[derive(Debug)]
pub(crate) struct IndexCache {
    budget_bytes: usize,
    entries: Mutex<Entries>,
    /// When namespaces are searched through an HNSW graph (`None`: always exact).
    pub(crate) ann: Option<AnnSettings>,
    /// Where graphs are persisted (`None`: kept in memory only, as for a read-only store).
    pub(crate) ann_dir: Option<PathBuf>,
    /// Where lexical indexes are persisted (`None`: kept in memory only, as for a read-only
    /// store); erasures remove files there even when none are written or read.
    pub(crate) lexical_dir: Option<PathBuf>,
    /// Turns a namespace must hold for its lexical indexes to be written (`None`: never written
    /// or read).
    pub(crate) lexical_files_from: Option<usize>,
    /// The file locked across processes while index files are checked and renamed into place,
    /// and while an erasure removes them (`None` with no persisted files).
    files_lock: Option<PathBuf>,
}

/// The lock file of the index files, in the store's (or derived) directory.
pub const INDEX_FILES_LOCK: &str = "index-files.lock";

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Namespace, Entry>,
    clock: u64,
}

#[derive(Debug)]
struct Entry {
    slot: Arc<RwLock<NamespaceIndexes>>,
    bytes: usize,
    last_used: u64,
}

impl IndexCache {
    /// A cache whose graphs and lexical indexes are persisted in `DIR/vector-index/` and
    /// `DIR/lexical-index/` when `dir` is given (`None`: kept in memory only, as for a read-only
    /// store).
    pub(crate) fn new(
        budget_bytes: usize,
        ann: Option<AnnSettings>,
        dir: Option<&std::path::Path>,
        lexical_files_from: Option<usize>,
    ) -> IndexCache {
        IndexCache {
            budget_bytes,
            entries: Mutex::default(),
            ann,
            ann_dir: dir.map(|d| d.join(crate::VECTOR_INDEX_DIR)),
            lexical_dir: dir.map(|d| d.join(crate::LEXICAL_INDEX_DIR)),
            lexical_files_from,
            files_lock: dir.map(|d| d.join(INDEX_FILES_LOCK)),
        }
    }

    /// Holds the index files' lock across processes until dropped (`None` when no file is
    /// persisted). A writer checks that no erasure followed what its file covers and renames
    /// the file into place under it, and an erasure's purge removes files under it. So a purge
    /// that ran after an erasure committed always finds, and removes, any file written without
    /// seeing that erasure. The in-process writer lock alone left that race open between
    /// processes: a `compile` beside a server that erases.
    pub(crate) fn lock_files(&self) -> std::io::Result<Option<std::fs::File>> {
        let Some(path) = &self.files_lock else { return Ok(None) };
        let mut options = std::fs::OpenOptions::new();
        options.read(true).write(true).create(true).truncate(false);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            options.mode(evicortex_ledger::PRIVATE_FILE_MODE);
        }
        // std's error kinds are kept; the callers name the file.
        #[allow(clippy::disallowed_methods)]
        let file = options.open(path)?;
        file.lock()?;
        Ok(Some(file))
    }

    /// The lock file's path, for errors.
    pub(crate) fn files_lock_path(&self) -> PathBuf {
        self.files_lock.clone().unwrap_or_default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The indexes of `namespace`, shared: as they are when the last refresh recorded `key`
    /// (nothing to refresh), else after `refresh` has run under the slot's exclusive lock.
    /// Concurrent compiles of one namespace search side by side; only a catch-up excludes the
    /// others. A refresh by another caller between the two locks only makes what this one
    /// reads newer.
    pub(crate) fn refreshed<'a>(
        &self,
        namespace: &Namespace,
        slot: &'a Arc<RwLock<NamespaceIndexes>>,
        key: Option<FreshKey>,
        refresh: impl FnOnce(&mut NamespaceIndexes) -> Result<(), CompileError>,
    ) -> Result<RwLockReadGuard<'a, NamespaceIndexes>, CompileError> {
        if key.is_some() {
            let indexes = slot.read().unwrap_or_else(PoisonError::into_inner);
            if indexes.fresh_for == key {
                return Ok(indexes);
            }
        }
        let bytes = {
            let mut indexes = slot.write().unwrap_or_else(PoisonError::into_inner);
            // A refresh that fails half way must not leave an old key standing.
            indexes.fresh_for = None;
            refresh(&mut indexes)?;
            indexes.fresh_for = key;
            indexes.heap_bytes()
        };
        self.resized(namespace, slot, bytes);
        Ok(slot.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The indexes of `namespace` (empty when not cached), marked as just used.
    pub(crate) fn slot(&self, namespace: &Namespace) -> Arc<RwLock<NamespaceIndexes>> {
        let mut entries = self.lock();
        entries.clock += 1;
        let clock = entries.clock;
        let entry = entries.map.entry(namespace.clone()).or_insert_with(|| Entry {
            slot: Arc::new(RwLock::new(NamespaceIndexes::empty(namespace))),
            bytes: 0,
            last_used: clock,
        });
        entry.last_used = clock;
        Arc::clone(&entry.slot)
    }

    /// Records the size of `namespace`'s indexes after a refresh, then drops the least recently
    /// used namespaces while the total exceeds the budget (never the one just refreshed, which
    /// the caller is using: a namespace larger than the budget is built, used and dropped).
    pub(crate) fn resized(
        &self,
        namespace: &Namespace,
        slot: &Arc<RwLock<NamespaceIndexes>>,
        bytes: usize,
    ) {
        let mut entries = self.lock();
        match entries.map.get_mut(namespace) {
            Some(entry) if Arc::ptr_eq(&entry.slot, slot) => entry.bytes = bytes,
            // Dropped meanwhile (an erasure, or eviction): nothing to account for.
            _ => return,
        }
        loop {
            let total: usize = entries.map.values().map(|e| e.bytes).sum();
            if total <= self.budget_bytes {
                return;
            }
            let oldest = entries
                .map
                .iter()
                .filter(|(ns, _)| *ns != namespace)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(ns, _)| ns.clone());
            match oldest {
                Some(ns) => {
                    tracing::debug!(namespace = %ns, "index cache over budget: dropping");
                    entries.map.remove(&ns);
                }
                None => {
                    // Not silent: every compile of this namespace now rebuilds its indexes.
                    tracing::warn!(
                        namespace = %namespace,
                        bytes,
                        budget = self.budget_bytes,
                        "a namespace's indexes exceed the whole index cache budget: they are \
                         rebuilt at every compile (raise the budget: --index-cache-mib)"
                    );
                    entries.map.remove(namespace);
                    return;
                }
            }
        }
    }

    #[cfg(test)]
    /// Estimated bytes held, and namespaces cached (for tests and statistics).
    pub(crate) fn usage(&self) -> (usize, usize) {
        let entries = self.lock();
        (entries.map.values().map(|e| e.bytes).sum(), entries.map.len())
    }
}

impl DerivedStore for IndexCache {
    fn name(&self) -> &'static str {
        "compile indexes"
    }

    fn purge(&self, receipt: &EraseReceipt) -> Result<(), DerivedStoreError> {
        let mut entries = self.lock();
        for erased in &receipt.erased {
            entries.map.remove(&erased.namespace);
        }
        drop(entries);
        let _files = self.lock_files().map_err(|e| {
            let e =
                std::io::Error::new(e.kind(), format!("{}: {e}", self.files_lock_path().display()));
            DerivedStoreError::new("index files lock", ErrorClass::Internal, e)
        })?;
        let namespaces: HashSet<&Namespace> = receipt.erased.iter().map(|e| &e.namespace).collect();
        let dirs =
            [(&self.ann_dir, "vector index files"), (&self.lexical_dir, "lexical index files")];
        for (dir, what) in dirs {
            let Some(dir) = dir else { continue };
            for namespace in &namespaces {
                ann::remove_files(dir, namespace)
                    .map_err(|e| DerivedStoreError::new(what, ErrorClass::Internal, e))?;
            }
        }
        Ok(())
    }
}

/// One namespace's corpus and indexes, and the namespace record they cover.
#[derive(Debug)]
pub(crate) struct NamespaceIndexes {
    pub(crate) corpus: Corpus,
    pub(crate) lexical: Bm25Index,
    /// The ledger head when these were last refreshed (`None`: never built); any write to the
    /// store moves it, so an unchanged head means nothing to read.
    ledger_head: Option<LedgerPosition>,
    /// The namespace's last record number when these were last refreshed: every record up to it
    /// is in the corpus (or was erased before the refresh).
    covers: Option<TurnId>,
    pub(crate) dense: Option<DenseIndex>,
    /// The vector indexes under the memory's also-encoders, in their order (filled by the
    /// first refresh that asks for them).
    pub(crate) also_dense: Vec<Option<DenseIndex>>,
    /// BM25 over window documents, for the radius, parameters and analyzer last asked for.
    pub(crate) window: Option<WindowIndex>,
    /// Context vectors, for the radius last asked for.
    pub(crate) context_vectors: Option<ContextVectors>,
    /// Turns that got their vectors since the context vectors were last brought up to date.
    vectors_added: Vec<TurnId>,
    /// Turns the lexical index file held when last written or loaded by this process.
    pub(crate) lexical_saved: Option<usize>,
    text_bytes: usize,
    /// What the last refresh was asked for and saw (see [`FreshKey`]).
    fresh_for: Option<FreshKey>,
    /// The reader tokenizers a background precount was started in (see
    /// [`crate::token_precount`]).
    precounted: Mutex<HashSet<String>>,
}

/// What a refresh depended on, read before it: the ledger head, the embedding caches' write
/// generations (leading encoder, then the others) and what was asked (the compile settings
/// the context indexes follow). Both counters only grow, so a caller whose key equals the
/// one recorded at the last refresh would find nothing to refresh: it reads the indexes
/// under the shared lock without taking the exclusive one. Without this, every compile took
/// the exclusive lock, and concurrent compiles of one namespace ran in turn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FreshKey {
    head: LedgerPosition,
    generations: Vec<u64>,
    asked: String,
}

impl FreshKey {
    /// The key now; `None` for an empty ledger (always refreshed).
    pub(crate) fn now(
        view: DerivedView<'_>,
        dense: Option<&Dense>,
        also: &[Dense],
        asked: String,
    ) -> Result<Option<FreshKey>, CompileError> {
        let generations =
            dense.into_iter().chain(also).map(|d| d.cache.write_generation()).collect();
        Ok(view.head()?.map(|head| FreshKey { head, generations, asked }))
    }
}

/// The vector index of a namespace under the memory's encoder.
#[derive(Debug)]
pub(crate) struct DenseIndex {
    pub(crate) index: WindowedIndex,
    /// Turns in the corpus without a vector yet (catch-up has not reached them), in ledger
    /// order, with their document's digest (what the embedding cache is keyed by).
    pub(crate) missing: Vec<(TurnId, TextDigest)>,
    /// The embedding cache's write generation at the last lookup, and how many of `missing`
    /// (a prefix) that lookup covered: of that prefix, only the turns whose documents were
    /// written since are looked up again, so that a long backlog is not looked up again at
    /// every compile while the embedder works through it.
    looked_up: Option<(u64, usize)>,
    /// Rows of the graph in its index file (`None`: no file written or loaded by this process).
    pub(crate) saved_rows: Option<usize>,
    /// Whether a PostgreSQL store's pgvector tables hold every vector of this index (after
    /// that, only the vectors added are stored).
    pg_synced: bool,
}

impl NamespaceIndexes {
    fn empty(namespace: &Namespace) -> NamespaceIndexes {
        NamespaceIndexes {
            corpus: Corpus::new(namespace.clone(), Vec::new(), [])
                .expect("an empty corpus is valid"),
            lexical: Bm25Index::with_analyzer(BM25, cached_analyzer()),
            ledger_head: None,
            covers: None,
            dense: None,
            also_dense: Vec::new(),
            window: None,
            context_vectors: None,
            vectors_added: Vec::new(),
            lexical_saved: None,
            text_bytes: 0,
            fresh_for: None,
            precounted: Mutex::default(),
        }
    }

    /// Whether this is the first call for `tokenizer`: the caller then starts its precount.
    pub(crate) fn claim_precount(&self, tokenizer: &str) -> bool {
        let mut started = self.precounted.lock().unwrap_or_else(PoisonError::into_inner);
        // Asked at every compile: no allocation once started.
        !started.contains(tokenizer) && started.insert(tokenizer.to_owned())
    }

    /// Estimated heap bytes: texts held by the corpus (and their tokens, counts and postings),
    /// plus the vectors (`f32` and `i8` copies).
    pub(crate) fn heap_bytes(&self) -> usize {
        let vectors: usize = std::iter::once(&self.dense)
            .chain(&self.also_dense)
            .flatten()
            .map(|d| d.index.heap_bytes())
            .sum();
        let window = self.window.as_ref().map_or(0, |w| self.text_bytes * 8 + w.heap_bytes());
        let context = self.context_vectors.as_ref().map_or(0, ContextVectors::heap_bytes);
        self.text_bytes * 4 + self.corpus.len() * 320 + vectors + window + context
    }

    /// Brings the context indexes `config` asks for up to the corpus and its vectors: built
    /// when missing or asked for with other settings, else extended by the windows that new
    /// records or new vectors changed.
    pub(crate) fn refresh_context(
        &mut self,
        config: &CompileConfig,
        namespace: &Namespace,
    ) -> Result<(), CompileError> {
        let lexical_err = |source| CompileError::Lexical { namespace: namespace.clone(), source };
        let radius = config.context.lexical_radius;
        if radius > 0 && config.lexical.top_n > 0 {
            let params = Bm25Params { k1: config.lexical.k1, b: config.lexical.b };
            let analyzer = config.lexical.analyzer;
            match &mut self.window {
                Some(w)
                    if w.radius() == radius
                        && w.built_for() <= self.corpus.len()
                        && w.index().params() == params
                        && w.index().analyzer() == analyzer =>
                {
                    if w.built_for() < self.corpus.len() {
                        let _span = tracing::debug_span!("window_index_extend", %namespace, radius)
                            .entered();
                        w.extend(&self.corpus).map_err(lexical_err)?;
                    }
                }
                _ => {
                    let _span = tracing::debug_span!("window_index", %namespace, radius).entered();
                    self.window = Some(
                        WindowIndex::build(&self.corpus, radius, params, analyzer)
                            .map_err(lexical_err)?,
                    );
                }
            }
        }
        let radius = config.context.dense_radius;
        if let (true, DenseConfig::On { .. }, Some(dense)) =
            (radius > 0, config.dense, self.dense.as_ref())
        {
            let with_vectors = self.corpus.len() - dense.missing.len();
            let dim = dense.index.dim();
            let turn_vector = |id| turn_vector(&dense.index, id, dim);
            match &mut self.context_vectors {
                Some(c) if c.radius() == radius && c.built_for() <= self.corpus.len() => {
                    if c.built_for() < self.corpus.len() || c.vectors_seen() != with_vectors {
                        let _span =
                            tracing::debug_span!("context_vectors_update", %namespace, radius)
                                .entered();
                        let embedded = self.vectors_added.iter().copied();
                        c.update(&self.corpus, embedded, with_vectors, |id| {
                            turn_vector(id).map(Cow::Owned)
                        });
                    }
                }
                _ => {
                    let _span =
                        tracing::debug_span!("context_vectors", %namespace, radius).entered();
                    let turn_vectors: HashMap<TurnId, Vec<f32>> = self
                        .corpus
                        .evidence()
                        .iter()
                        .filter_map(|e| Some((e.id, turn_vector(e.id)?)))
                        .collect();
                    self.context_vectors = Some(ContextVectors::build(
                        &self.corpus,
                        radius,
                        dim,
                        with_vectors,
                        |id| turn_vectors.get(&id).map(Vec::as_slice),
                    ));
                }
            }
            self.vectors_added.clear();
        }
        Ok(())
    }

    /// Brings the corpus, the lexical index and (when `dense` is given) the vector indexes of
    /// `dense` and `also` to the ledger head: new turns incrementally, a full rebuild after an
    /// erasure.
    pub(crate) fn refresh(
        &mut self,
        view: DerivedView<'_>,
        namespace: &Namespace,
        dense: Option<&Dense>,
        also: &[Dense],
    ) -> Result<(), CompileError> {
        let head = view.head()?;
        if head.is_none() || head != self.ledger_head {
            let _span = tracing::debug_span!("refresh_indexes", %namespace).entered();
            // Only the records since the last refresh are read: counting redactions over the
            // whole ledger cost more than the rest of a compile after each append.
            let built_at = match self.ledger_head {
                Some(at) if !view.ledger.erased_after(Some(at))? => Some(at),
                _ => None,
            };
            // Read before the turns: a lower bound of what they hold.
            let covers = view.ledger.namespace_head(namespace)?;
            // Records the turn index holds already (a saved one was loaded).
            let mut indexed = 0;
            let new_records = match built_at {
                // Appends that committed after `head` was read may already be in the corpus.
                Some(_) => view.evidence_after(namespace, self.corpus.last_record())?,
                None => {
                    *self = NamespaceIndexes::empty(namespace);
                    let live = view.evidence(namespace)?;
                    if let Some(saved) = lexical_file::load(view, namespace, &live)? {
                        indexed = saved.records;
                        self.lexical = saved.lexical;
                        self.window = saved.window;
                        self.lexical_saved = Some(saved.records);
                    }
                    live
                }
            };
            for e in &new_records {
                self.text_bytes += e.turn.text.len();
            }
            for e in &new_records[indexed..] {
                self.lexical.add(e.id, &turn_document(&e.turn)).map_err(|source| {
                    CompileError::Lexical { namespace: namespace.clone(), source }
                })?;
            }
            for index in std::iter::once(&mut self.dense).chain(&mut self.also_dense).flatten() {
                index.missing.extend(new_records.iter().map(pending));
            }
            for e in new_records {
                self.corpus.push(e).map_err(|source| CompileError::Corpus {
                    namespace: namespace.clone(),
                    source,
                })?;
            }
            if let Some(covers) = covers {
                self.lexical.mark_covered(covers).map_err(|source| CompileError::Lexical {
                    namespace: namespace.clone(),
                    source,
                })?;
            }
            self.ledger_head = head;
            self.covers = covers;
        }
        if let Some(dense) = dense {
            let added =
                refresh_dense(&mut self.dense, &self.corpus, self.covers, view, dense, namespace)?;
            if self.context_vectors.is_some() {
                self.vectors_added.extend(added);
                self.vectors_added.dedup();
            }
            self.also_dense.resize_with(also.len(), || None);
            for (slot, dense) in self.also_dense.iter_mut().zip(also) {
                refresh_dense(slot, &self.corpus, self.covers, view, dense, namespace)?;
            }
        }
        Ok(())
    }

    /// A lexical index of this corpus under other BM25 parameters or another analyzer,
    /// covering the same position.
    pub(crate) fn lexical_with(
        &self,
        params: Bm25Params,
        analyzer: Analyzer,
        namespace: &Namespace,
    ) -> Result<Bm25Index, CompileError> {
        let lexical_err = |source| CompileError::Lexical { namespace: namespace.clone(), source };
        let mut lexical =
            Bm25Index::with_analyzer(params.validate().map_err(lexical_err)?, analyzer);
        for e in self.corpus.evidence() {
            lexical.add(e.id, &turn_document(&e.turn)).map_err(lexical_err)?;
        }
        if let Some(covers) = self.covers {
            lexical.mark_covered(covers).map_err(lexical_err)?;
        }
        Ok(lexical)
    }
}

/// Adds to the index in `slot` (built, or loaded from its file, when empty) the vectors of
/// turns that have one now under `dense`'s encoder; records the namespace's record up to which
/// every turn has been offered to the encoder. Returns the turns that got vectors.
fn refresh_dense(
    slot: &mut Option<DenseIndex>,
    corpus: &Corpus,
    covers: Option<TurnId>,
    view: DerivedView<'_>,
    dense: &Dense,
    namespace: &Namespace,
) -> Result<Vec<TurnId>, CompileError> {
    let vector_err = |source| CompileError::Vector { namespace: namespace.clone(), source };
    if slot.is_none() {
        let loaded = ann::load(view, dense, namespace)?;
        *slot = Some(match loaded {
            Some((index, covers)) => DenseIndex {
                saved_rows: Some(index.len()),
                index,
                missing: corpus.evidence().iter().filter(|e| e.id > covers).map(pending).collect(),
                looked_up: None,
                pg_synced: false,
            },
            None => DenseIndex {
                index: WindowedIndex::new(ExactIndex::new(dense.encoder.identity().dimension)),
                missing: corpus.evidence().iter().map(pending).collect(),
                looked_up: None,
                saved_rows: None,
                pg_synced: false,
            },
        });
    }
    let index = slot.as_mut().expect("set above");
    let generation = dense.cache.write_generation();
    let (covered, written) = match index.looked_up {
        Some((seen, covered)) if seen == generation => (covered, Some(HashSet::new())),
        Some((seen, covered)) => (covered, dense.cache.written_since(seen)),
        None => (0, None),
    };
    let to_look_up = to_look_up(&index.missing, covered, written.as_ref());
    let mut added = Vec::new();
    if !to_look_up.is_empty() {
        let _span =
            tracing::debug_span!("vector_index", %namespace, n_turns = to_look_up.len()).entered();
        let digest = dense.encoder.identity_digest();
        let vectors = dense.cache.namespace_vectors(&to_look_up, &digest)?;
        let mut window = 0u32;
        let mut rows = Vec::with_capacity(vectors.turns.len());
        for (row, turn) in vectors.turns.iter().enumerate() {
            window = if row > 0 && vectors.turns[row - 1] == *turn { window + 1 } else { 0 };
            rows.push(((*turn, window), vectors.row(row)));
        }
        index.index.extend_windows(rows).map_err(vector_err)?;
        added.extend(vectors.turns.iter().copied());
        added.dedup();
        let still_missing: HashSet<TurnId> = vectors.missing.iter().copied().collect();
        let found: HashSet<TurnId> = to_look_up
            .iter()
            .map(|(turn, _)| *turn)
            .filter(|turn| !still_missing.contains(turn))
            .collect();
        index.missing.retain(|(turn, _)| !found.contains(turn));
    }
    index.looked_up = Some((generation, index.missing.len()));
    if let Some(pg) = view.pg_dense {
        let turns = index.pg_synced.then_some(added.as_slice());
        pg.sync(dense, namespace, &index.index, corpus, turns)?;
        index.pg_synced = true;
    }
    index.mark_covered(covers, namespace)?;
    ann::grow(view, dense, namespace, index, covers)?;
    Ok(added)
}

impl DenseIndex {
    /// Dense coverage: the namespace's last record (`covers`) when every turn has been offered
    /// to the encoder, else the record just before the first turn still waiting for its vector.
    fn mark_covered(
        &mut self,
        covers: Option<TurnId>,
        namespace: &Namespace,
    ) -> Result<(), CompileError> {
        let covered = match self.missing.first() {
            Some((first, _)) => first.raw().checked_sub(1).map(TurnId::from_raw),
            None => covers,
        };
        if let Some(covered) = covered
            && self.index.covers().is_none_or(|c| c < covered)
        {
            self.index
                .mark_covered(covered)
                .map_err(|source| CompileError::Vector { namespace: namespace.clone(), source })?;
        }
        Ok(())
    }
}

/// The turns of `missing` worth looking up: those after the first `covered` (never looked up),
/// and of the first `covered`, the ones whose documents were `written` since the lookup that
/// covered them (`None`: the log does not reach back that far, all of them).
fn to_look_up(
    missing: &[(TurnId, TextDigest)],
    covered: usize,
    written: Option<&HashSet<TextDigest>>,
) -> Vec<(TurnId, TextDigest)> {
    let covered = covered.min(missing.len());
    match written {
        // Nothing written since: the common case of a compile, without a pass over the backlog.
        Some(written) if written.is_empty() => missing[covered..].to_vec(),
        Some(written) => missing[..covered]
            .iter()
            .filter(|(_, text)| written.contains(text))
            .chain(&missing[covered..])
            .copied()
            .collect(),
        None => missing.to_vec(),
    }
}

/// A turn waiting for its vector, with the digest of the document it waits for.
pub(crate) fn pending(e: &Evidence) -> (TurnId, TextDigest) {
    (e.id, TextDigest::of(&turn_document(&e.turn)))
}

/// A turn's vector for its context windows: a turn embedded as several windows counts once, as
/// its windows' normalised sum. `None` when it has no vector yet.
fn turn_vector(index: &WindowedIndex, id: TurnId, dim: usize) -> Option<Vec<f32>> {
    let mut sum = vec![0.0f32; dim];
    let mut any = false;
    for window in index.windows_of(id) {
        sum.iter_mut().zip(window).for_each(|(s, x)| *s += x);
        any = true;
    }
    let norm = sum.iter().map(|x| x * x).sum::<f32>().sqrt();
    (any && norm > 0.0).then(|| {
        sum.iter_mut().for_each(|x| *x /= norm);
        sum
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(i: u64) -> (TurnId, TextDigest) {
        (TurnId::from_raw(i), TextDigest::of(&format!("text {i}")))
    }

    #[test]
    fn only_turns_never_looked_up_or_written_since_are_looked_up_again() {
        let missing: Vec<_> = (1..=6).map(turn).collect();
        let written: HashSet<TextDigest> = [turn(2).1, turn(5).1, turn(9).1].into();
        // 1-4 were looked up before; 5 and 6 arrived since.
        let ids = |v: Vec<(TurnId, TextDigest)>| v.iter().map(|(t, _)| t.raw()).collect::<Vec<_>>();
        assert_eq!(ids(to_look_up(&missing, 4, Some(&written))), [2, 5, 6]);
        assert_eq!(ids(to_look_up(&missing, 4, Some(&HashSet::new()))), [5, 6]);
        assert_eq!(ids(to_look_up(&missing, 4, None)), [1, 2, 3, 4, 5, 6], "the log fell short");
        assert_eq!(ids(to_look_up(&missing, 9, Some(&written))), [2, 5]);
    }
}
