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
mod namespace_indexes;

pub(crate) use dense_index::{DenseIndex, pending};
use dense_index::{refresh_dense, turn_vector};
use erase_in_place::PendingErasure;
pub(crate) use namespace_indexes::{FreshKey, NamespaceIndexes};

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
