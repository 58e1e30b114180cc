//! The in-memory indexes compile reads: per namespace, the corpus, its BM25 index and its vector
//! index under the memory's encoder, each recording the namespace record it covers.
//!
//! The cache is keyed by namespace alone and bounded in bytes: when the estimated size of all
//! namespaces exceeds the budget, the least recently compiled ones are dropped (and rebuilt from
//! the ledger when next asked for). New turns are added incrementally. An erasure made by the
//! holder of an embedded store's lock is applied in place (see [`erase_in_place`]); any other
//! drops the namespace (purge), and an erasure found in the ledger that the indexes do not
//! reflect (its namespace's last redaction record is not theirs) rebuilds it, so erased text
//! never survives in an index.
//!
//! A namespace holding at least [`AnnSettings::threshold`] vectors is searched through an HNSW
//! graph instead of the exact scan (see [`crate::ann`]); the graph is persisted in
//! `DIR/vector-index/` as derived data, loaded on the next open when current, and removed by
//! every erasure of the namespace.

use std::{
    borrow::Cow,
    collections::{HashMap, HashSet},
    path::PathBuf,
    sync::{
        Arc, Mutex, PoisonError, RwLock, RwLockReadGuard,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use evicortex_compiler::{
    CompileConfig, ContextVectors, Corpus, DenseConfig, WindowIndex, turn_document,
};
use evicortex_core::{Namespace, TurnId};
use evicortex_ledger::LedgerPosition;
use evicortex_lexical::{Analyzer, Bm25Index, Bm25Params};
use evicortex_vector::VectorIndexRead;

use crate::{
    AnnSettings, CompileError, DerivedStore, DerivedStoreError, EraseReceipt, ErrorClass, ann,
    dense::Dense, derived_view::DerivedView, lexical_file,
};

mod dense_index;
mod erase_in_place;

pub(crate) use dense_index::{DenseIndex, pending};
use dense_index::{refresh_dense, turn_vector};
use erase_in_place::PendingErasure;

/// The BM25 parameters of the cached lexical indexes (the compiler's stated starting point).
pub(crate) const BM25: Bm25Params = Bm25Params { k1: 1.2, b: 0.75 };

/// The analyzer of the cached lexical indexes: the default configuration's.
pub(crate) fn cached_analyzer() -> Analyzer {
    CompileConfig::default_for(false).lexical.analyzer
}

/// Most records whose terms a refresh keeps for the window index (see
/// `NamespaceIndexes::analysed`).
const ANALYSED_KEPT: usize = 4_096;

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
    /// Write lexical files off the request path once a namespace has been quiet this long
    /// (`None`: inside the compile that finds one due).
    pub(crate) lexical_quiet: Option<Duration>,
    /// Whether this memory's erasures are applied to the cached indexes in place (else the
    /// namespace is dropped and rebuilt). Only where every erasure goes through this memory:
    /// the holder of an embedded store's lock. A memory beside another writer, or a server
    /// sharing a database, learns of other erasures from the ledger, and rebuilds.
    pub(crate) erase_in_place: bool,
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
    /// The namespace last warned about for exceeding the budget alone (warned once, not at
    /// every refresh of a namespace that keeps growing).
    oversized: Option<Namespace>,
}

#[derive(Debug)]
struct Entry {
    slot: Arc<RwLock<NamespaceIndexes>>,
    bytes: usize,
    last_used: u64,
    /// Erasures of this process not yet applied to the slot, in order (see
    /// [`IndexCache::erase_in_place`]).
    pending: Vec<PendingErasure>,
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
            lexical_quiet: None,
            erase_in_place: false,
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
            self.apply_pending(namespace, slot, &mut indexes);
            refresh(&mut indexes)?;
            indexes.fresh_for = key;
            indexes.last_refresh = Instant::now();
            indexes.heap_bytes()
        };
        self.resized(namespace, slot, bytes);
        Ok(slot.read().unwrap_or_else(PoisonError::into_inner))
    }

    /// The namespaces cached, with their indexes.
    pub(crate) fn cached(&self) -> Vec<(Namespace, Arc<RwLock<NamespaceIndexes>>)> {
        let entries = self.lock();
        entries.map.iter().map(|(ns, e)| (ns.clone(), Arc::clone(&e.slot))).collect()
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
            pending: Vec::new(),
        });
        entry.last_used = clock;
        Arc::clone(&entry.slot)
    }

    /// Records the size of `namespace`'s indexes after a refresh, then drops the least recently
    /// used namespaces while the total exceeds the budget (never the one just refreshed, which
    /// the caller is using: a namespace larger than the whole budget stays, alone, with a warning).
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
                if entries.oversized.as_ref() == Some(namespace) {
                    entries.oversized = None;
                }
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
                None if entries.oversized.as_ref() == Some(namespace) => return,
                None => {
                    // Kept: a rebuild at every compile would allocate as much again and cost
                    // seconds a compile; the budget still bounds every other namespace.
                    entries.oversized = Some(namespace.clone());
                    tracing::warn!(
                        namespace = %namespace,
                        bytes,
                        budget = self.budget_bytes,
                        "a namespace's indexes alone exceed the index cache budget: kept, and \
                         every other namespace is dropped (raise the budget: --index-cache-mib)"
                    );
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
        let mut by_namespace: HashMap<&Namespace, Vec<TurnId>> = HashMap::new();
        for erased in &receipt.erased {
            by_namespace.entry(&erased.namespace).or_default().push(erased.id);
        }
        for (namespace, turns) in by_namespace {
            if !self.erase_in_place {
                entries.map.remove(namespace);
            } else if let Some(entry) = entries.map.get_mut(namespace) {
                // Applied once the writer lock is released (see `apply_pending_erasures`).
                entry.pending.push(PendingErasure { turns, redaction: receipt.redaction });
            }
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
    /// The redaction record of the namespace's last erasure these reflect (`None`: none):
    /// while it is still the last, erasures elsewhere in the ledger need no rebuild.
    pub(crate) erasures_applied: Option<TurnId>,
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
    /// The terms of the records the last refreshes added to the turn index, by corpus position,
    /// under its analyzer: the window index takes them instead of analysing each turn again.
    analysed: Vec<(usize, Vec<String>)>,
    /// Turns the lexical index file held when last written or loaded by this process.
    /// (0: none; a file holds at least one turn.)
    lexical_saved: AtomicUsize,
    /// When a refresh last changed these indexes: a namespace quiet for a while gets its lexical
    /// file written in the background (see [`crate::MemoryBuilder::lexical_files_when_quiet`]).
    pub(crate) last_refresh: Instant,
    /// Whether a background write of the lexical file is pending.
    saving: AtomicBool,
    /// The settings of the last compile that refreshed these: what the background indexer
    /// keeps them up to date for (see [`crate::background_index`]).
    pub(crate) asked: Option<CompileConfig>,
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
        let generations = dense
            .into_iter()
            .chain(also)
            .map(|d| d.cache.write_generation())
            .collect::<Result<_, _>>()?;
        Ok(view.head()?.map(|head| FreshKey { head, generations, asked }))
    }
}

impl NamespaceIndexes {
    fn empty(namespace: &Namespace) -> NamespaceIndexes {
        NamespaceIndexes {
            corpus: Corpus::new(namespace.clone(), Vec::new(), [])
                .expect("an empty corpus is valid"),
            lexical: Bm25Index::with_analyzer(BM25, cached_analyzer()),
            ledger_head: None,
            covers: None,
            erasures_applied: None,
            dense: None,
            also_dense: Vec::new(),
            window: None,
            context_vectors: None,
            vectors_added: Vec::new(),
            analysed: Vec::new(),
            lexical_saved: AtomicUsize::new(0),
            last_refresh: Instant::now(),
            saving: AtomicBool::new(false),
            asked: None,
            text_bytes: 0,
            fresh_for: None,
            precounted: Mutex::default(),
        }
    }

    /// Turns the lexical index file held when last written or loaded by this process.
    pub(crate) fn lexical_saved(&self) -> Option<usize> {
        Some(self.lexical_saved.load(Ordering::Acquire)).filter(|&turns| turns > 0)
    }

    /// Records that the lexical file now holds `turns` turns (set under the shared lock by a
    /// background write).
    pub(crate) fn set_lexical_saved(&self, turns: usize) {
        self.lexical_saved.store(turns, Ordering::Release);
    }

    /// Whether the caller may start the background write of the lexical file (none pending).
    pub(crate) fn claim_saving(&self) -> bool {
        !self.saving.swap(true, Ordering::AcqRel)
    }

    /// The background write of the lexical file ended (written, refused or failed).
    pub(crate) fn end_saving(&self) {
        self.saving.store(false, Ordering::Release);
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
                        let analysed = &self.analysed;
                        let same_analyzer = analyzer == self.lexical.analyzer();
                        w.extend_analysed(&self.corpus, &|pos| {
                            let at = analysed.binary_search_by_key(&pos, |(p, _)| *p).ok()?;
                            same_analyzer.then(|| analysed[at].1.as_slice())
                        })
                        .map_err(lexical_err)?;
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
        self.analysed.clear();
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
    /// erasure of the namespace they do not reflect (pending ones are applied first, by
    /// [`IndexCache::refreshed`]).
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
                // Erased elsewhere, or here in place already.
                Some(at) if view.last_erasure(namespace)? == self.erasures_applied => Some(at),
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
                    // Read before the turns: what they reflect at least.
                    self.erasures_applied = view.last_erasure(namespace)?;
                    let live = view.evidence(namespace)?;
                    if let Some(saved) = lexical_file::load(view, namespace, &live)? {
                        indexed = saved.records;
                        self.lexical = saved.lexical;
                        self.window = saved.window;
                        self.set_lexical_saved(saved.records);
                    }
                    live
                }
            };
            for e in &new_records {
                self.text_bytes += e.turn.text.len();
            }
            // Kept for the window index only when few: a rebuild's window index analyses as it goes.
            let keep = self.analysed.len() + new_records.len() - indexed <= ANALYSED_KEPT;
            if !keep {
                self.analysed.clear();
            }
            for (i, e) in new_records.iter().enumerate().skip(indexed) {
                let terms = self.lexical.analyze(&turn_document(&e.turn));
                self.lexical.add_terms(e.id, &terms).map_err(|source| CompileError::Lexical {
                    namespace: namespace.clone(),
                    source,
                })?;
                if keep {
                    self.analysed.push((self.corpus.len() + i, terms));
                }
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
