//! `Memory`: the store directory, its ledger, the derived stores built from it, and the one
//! writer lock under which derived data is written and purged.

use std::{
    collections::HashSet,
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock},
};

use evicortex_compiler::Reranker;
use evicortex_core::{Evidence, Namespace, Turn, TurnId};
use evicortex_embed::{Encoder, Overlength};
use evicortex_ledger::{EvidenceLedger, Ledger, LedgerPosition, OpenMode, ScanEvidence};
use evicortex_postgres::PgLedger;

use crate::{
    AppendError, AppendReceipt, DerivedStore, DerivedStoreError, EMBEDDINGS_FILE, EraseError,
    EraseReceipt, EraseTarget, ExportError, ExportSummary, OpenError, ReadError, Stats,
    VerifyError, VerifyReport,
    background::BackgroundEmbedder,
    dense::Dense,
    derived_view::{DerivedView, WriteState},
    embedding_cache::EmbeddingCache,
    erase_documents::{orphaned_documents, target_documents},
    erasure_watch::ErasureWatch,
    error::read_class,
    export::export_line,
    group_commit::{GroupCommit, GroupCommitStats},
    index_cache::{DEFAULT_INDEX_CACHE_BYTES, IndexCache},
    pg_dense::PgDense,
    store_location::{StoreLocation, claim_derived_dir},
    token_precount::Precounts,
};

/// The ledger's file name inside a store directory.
pub const LEDGER_FILE: &str = "ledger.sqlite";

/// An open store: the ledger, and what is derived from it (the embedding cache, the in-memory
/// indexes), with the encoder that embeds turns and the reranker compile may use.
///
/// `Send + Sync` with `&self` methods, and cheap to clone (clones share everything): the HTTP
/// server shares one. Ledger writes are serialised by the ledger; writes into derived stores
/// (vectors from [`Memory::catch_up`]) and erasures share one writer lock, so an erased text's
/// vectors can never be written back after the erasure purged them.
#[derive(Debug, Clone)]
pub struct Memory {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    /// Where the derived files are: the store directory, or a PostgreSQL store's derived one.
    pub(crate) dir: PathBuf,
    pub(crate) ledger: Box<dyn EvidenceLedger>,
    /// The encoder and the cache its vectors live in; `None` for lexical-only use.
    pub(crate) dense: Option<Dense>,
    /// Also-encoders whose dense lists compile fuses beside `dense`'s, in the same cache.
    pub(crate) also_dense: Vec<Dense>,
    /// The embedding cache, when the store has one (also in `dense` with an encoder).
    pub(crate) cache: Option<Arc<EmbeddingCache>>,
    /// A PostgreSQL store's vectors in pgvector, where its dense candidates come from (with an
    /// encoder, or when the database already has them: erasures purge them).
    pub(crate) pg_dense: Option<Arc<PgDense>>,
    /// On a PostgreSQL store: up to where other processes' erasures were applied here.
    pub(crate) erasures: Option<ErasureWatch>,
    pub(crate) reranker: Option<Arc<dyn Reranker>>,
    /// Every derived store, purged on erasure: the embedding cache (when the store has one), the
    /// compile indexes, and any store a caller attaches.
    derived: RwLock<Vec<Arc<dyn DerivedStore>>>,
    pub(crate) writes: Mutex<WriteState>,
    pub(crate) indexes: Arc<IndexCache>,
    /// Concurrent appends committed together.
    appends: GroupCommit,
    /// The thread that embeds appended turns, when asked for.
    embedder: OnceLock<BackgroundEmbedder>,
    /// The background counts of reader tokens (see [`crate::token_precount`]).
    pub(crate) precounts: Arc<Precounts>,
    /// The store's writer lock, held for as long as this memory lives
    /// ([`MemoryBuilder::lock_store`]).
    _store_lock: Option<crate::StoreLock>,
    /// Fault injection: runs between the erasure check and the write of derived data.
    #[cfg(test)]
    pub(crate) before_put: TestHook,
}

/// A closure tests run at one point of the write path, to force an interleaving.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct TestHook(Mutex<Option<Box<dyn FnMut() + Send>>>);

#[cfg(test)]
impl TestHook {
    pub(crate) fn set(&self, hook: impl FnMut() + Send + 'static) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(hook));
    }

    pub(crate) fn run(&self) {
        if let Some(hook) = self.0.lock().unwrap_or_else(PoisonError::into_inner).as_mut() {
            hook();
        }
    }
}

#[cfg(test)]
impl std::fmt::Debug for TestHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestHook")
    }
}

/// A store's ledger, where its derived files go, and its PostgreSQL URL (with the password,
/// for further connections) when it is a database.
struct OpenedLedger {
    dir: PathBuf,
    ledger: Box<dyn EvidenceLedger>,
    url: Option<String>,
}

/// How to open a [`Memory`]: the store directory, and optionally the encoder (dense retrieval,
/// embedding of turns) and the reranker.
///
/// ```no_run
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// // The second stage: all-mpnet-base-v2 scores the fused top 16 by cosine
/// // (`evicortex model fetch all-mpnet-base-v2` installs it).
/// let spec: evicortex::RerankerSpec = "mpnet-cosine".parse()?;
/// let memory = evicortex::Memory::builder("store")
///     .encoder(evicortex::load_pinned_encoder(evicortex::Overlength::Refuse)?)
///     .loaded_reranker(evicortex::load_reranker(&spec)?)
///     .open()?;
/// assert!(memory.has_encoder() && memory.reranker().is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryBuilder {
    dir: PathBuf,
    derived_dir: Option<PathBuf>,
    encoder: Option<Arc<dyn Encoder>>,
    also_encoders: Vec<Arc<dyn Encoder>>,
    reranker: Option<Arc<dyn Reranker>>,
    reranker_store: Option<Arc<dyn DerivedStore>>,
    index_cache_bytes: usize,
    background_embedding: bool,
    /// `None`: not chosen, the store's default ([`MemoryBuilder::ann`]).
    ann: Option<Option<crate::AnnSettings>>,
    lexical_files_from: Option<usize>,
    lock_store: bool,
}

impl MemoryBuilder {
    /// For a PostgreSQL store: the local directory of its derived files, instead of the one
    /// [`StoreLocation::parse`] derives from the environment. Ignored for a directory store.
    pub fn derived_dir(&mut self, dir: impl AsRef<Path>) -> &mut MemoryBuilder {
        self.derived_dir = Some(dir.as_ref().to_owned());
        self
    }

    /// The encoder that embeds turns ([`Memory::catch_up`]) and questions: dense retrieval
    /// needs one. Its vectors live in the store's embedding cache, keyed by its identity.
    pub fn encoder(&mut self, encoder: Arc<dyn Encoder>) -> &mut MemoryBuilder {
        self.encoder = Some(encoder);
        self
    }

    /// The encoders of [`crate::load_store_encoders`]: the first as [`MemoryBuilder::encoder`],
    /// the others fused beside it ([`MemoryBuilder::also_encoder`]). Replaces any set before.
    pub fn encoders(&mut self, encoders: Vec<Arc<dyn Encoder>>) -> &mut MemoryBuilder {
        let mut encoders = encoders.into_iter();
        self.encoder = encoders.next();
        self.also_encoders = encoders.collect();
        self
    }

    /// The store's encoders ([`crate::load_store_encoders`]) with `overlength`, else the policy
    /// the store was last embedded with, else refuse:
    /// how every front end opens a store for dense retrieval. Returns the policy used.
    pub fn store_encoders(
        &mut self,
        overlength: Option<Overlength>,
    ) -> Result<Overlength, crate::StoreEncodersError> {
        let overlength = match overlength {
            Some(policy) => policy,
            None => {
                crate::embedding_cache::last_overlength(&self.dir)?.unwrap_or(Overlength::Refuse)
            }
        };
        self.encoders(crate::load_store_encoders(&self.dir, overlength)?);
        Ok(overlength)
    }

    /// An also-encoder whose dense list compile fuses beside the first encoder's (for example
    /// all-mpnet-base-v2 beside all-MiniLM-L6-v2), at most
    /// [`MAX_ALSO_ENCODERS`](crate::MAX_ALSO_ENCODERS). Its vectors live in the same embedding
    /// cache under its own identity; [`Memory::catch_up`] and the background embedder embed
    /// with every encoder. Needs [`MemoryBuilder::encoder`].
    pub fn also_encoder(&mut self, encoder: Arc<dyn Encoder>) -> &mut MemoryBuilder {
        self.also_encoders.push(encoder);
        self
    }

    /// The reranker compile uses when the configuration turns reranking on.
    pub fn reranker(&mut self, reranker: Arc<dyn Reranker>) -> &mut MemoryBuilder {
        self.reranker = Some(reranker);
        self.reranker_store = None;
        self
    }

    /// A reranker from [`crate::load_reranker`], with the store of what it derives from turns
    /// (the second stage's candidate vectors), which erasures then purge like every derived
    /// store.
    pub fn loaded_reranker(&mut self, loaded: crate::LoadedReranker) -> &mut MemoryBuilder {
        self.reranker = Some(loaded.reranker);
        self.reranker_store = loaded.derived;
        self
    }

    /// Embeds appended turns on a thread of the memory's own, so that [`Memory::append`]
    /// returns as soon as the turns are durable. Needs an encoder. Until a turn is embedded it
    /// is a lexical candidate only, and compiled contexts say how many turns wait
    /// ([`Coverage::dense_pending`](crate::Coverage)).
    pub fn background_embedding(&mut self) -> &mut MemoryBuilder {
        self.background_embedding = true;
        self
    }

    /// The most memory the compile indexes of all namespaces may take together (estimated), the
    /// least recently compiled namespaces being dropped first; default
    /// [`DEFAULT_INDEX_CACHE_BYTES`]. Changes speed, not results.
    pub fn index_cache_bytes(&mut self, bytes: usize) -> &mut MemoryBuilder {
        self.index_cache_bytes = bytes;
        self
    }

    /// When compile searches a namespace's vectors through an approximate index instead of
    /// scanning every one: an HNSW graph persisted in `DIR/vector-index/` (for example
    /// [`crate::AnnSettings::default`]: from [`crate::DEFAULT_ANN_THRESHOLD`] vectors) or the
    /// sign sketch of the exact index ([`crate::AnnSettings::sketch_from`]); `None`: every vector
    /// is scanned exactly whatever the size. Default for an embedded store: the sign sketch from
    /// [`crate::DEFAULT_SKETCH_FROM`] vectors, whose audit (`evicortex-bench ann run --sketch`)
    /// passed its recall@50 >= 0.99 gate at every size up to 1M, unfiltered and filtered; for a
    /// PostgreSQL store, `None` (its searches are pgvector's). Compiled contexts record which
    /// index served ([`crate::DenseIndexRef`]).
    pub fn ann(&mut self, settings: Option<crate::AnnSettings>) -> &mut MemoryBuilder {
        self.ann = Some(settings);
        self
    }

    /// The turns from which a namespace's lexical indexes (turn and context-window BM25) are
    /// written to `DIR/lexical-index/` and loaded by the next process instead of rebuilt
    /// (default [`crate::DEFAULT_LEXICAL_FILES_FROM`]; `None`: never written, and those there
    /// are not read either, though an erasure still removes them).
    pub fn lexical_files_from(&mut self, turns: Option<usize>) -> &mut MemoryBuilder {
        self.lexical_files_from = turns;
        self
    }

    /// Takes the store's writer lock ([`crate::StoreLock`]) when opening, and holds it for as
    /// long as the memory lives: a second process that opens the store so is refused at once
    /// ([`crate::StoreLockError::Busy`], naming the holder), before anything is written. Every
    /// door that writes (the servers, MCP, Python) opens its memory so.
    pub fn lock_store(&mut self) -> &mut MemoryBuilder {
        self.lock_store = true;
        self
    }

    /// Opens the store, creating the directory and an empty ledger if absent. Refuses a store
    /// whose ledger fails the open-time integrity check. The embedding cache (when there is an
    /// encoder, or when the store already has one) is opened and reconciled with the ledger:
    /// vectors of texts that an interrupted erasure left behind are dropped.
    pub fn open(&self) -> Result<Memory, OpenError> {
        self.check_encoders()?;
        // Before anything is opened: reconciling derived files writes them.
        let store_lock =
            if self.lock_store { Some(crate::StoreLock::acquire(&self.dir)?) } else { None };
        let OpenedLedger { dir, ledger, url } = self.open_ledger(OpenMode::ReadWrite)?;
        // Read before the derived files are reconciled: a later erasure is applied by a compile.
        let erasures = match &url {
            Some(_) => Some(ErasureWatch::new(ledger.head().map_err(OpenError::Read)?)),
            None => None,
        };
        let cache = if self.encoder.is_some() || dir.join(EMBEDDINGS_FILE).exists() {
            let cache = EmbeddingCache::open(&dir)?;
            cache.reconcile(&*ledger)?;
            Some(Arc::new(cache))
        } else {
            None
        };
        let dense = match (&self.encoder, &cache) {
            (Some(encoder), Some(cache)) => {
                cache.register_identity(encoder.identity())?;
                Some(Dense { encoder: Arc::clone(encoder), cache: Arc::clone(cache) })
            }
            _ => None,
        };
        let mut also_dense = Vec::with_capacity(self.also_encoders.len());
        if let Some(cache) = &cache {
            for encoder in &self.also_encoders {
                cache.register_identity(encoder.identity())?;
                also_dense.push(Dense { encoder: Arc::clone(encoder), cache: Arc::clone(cache) });
            }
        }
        let pg_dense = match &url {
            Some(url) if dense.is_some() => {
                let encoders: Vec<&Dense> = dense.iter().chain(&also_dense).collect();
                Some(Arc::new(PgDense::connect(url, &encoders)?))
            }
            Some(url) => PgDense::connect_existing(url)?.map(Arc::new),
            None => None,
        };
        crate::ann::reconcile(&dir.join(crate::VECTOR_INDEX_DIR), &*ledger)?;
        crate::lexical_file::reconcile(&dir.join(crate::LEXICAL_INDEX_DIR), &*ledger)?;
        let ann = self.ann.unwrap_or_else(|| {
            url.is_none().then(|| crate::AnnSettings::sketch_from(crate::DEFAULT_SKETCH_FROM))
        });
        let indexes = Arc::new(IndexCache::new(
            self.index_cache_bytes,
            ann,
            Some(&dir),
            self.lexical_files_from,
        ));
        let mut derived: Vec<Arc<dyn DerivedStore>> = vec![indexes.clone()];
        if let Some(cache) = &cache {
            derived.push(cache.clone());
        }
        derived.extend(self.reranker_store.clone());
        if let Some(pg_dense) = &pg_dense {
            derived.push(pg_dense.clone());
        }
        let background = self.background_embedding && dense.is_some();
        let memory = Memory::from_inner(Inner {
            dir,
            ledger,
            dense,
            also_dense,
            cache,
            pg_dense,
            erasures,
            reranker: self.reranker.clone(),
            derived: RwLock::new(derived),
            writes: Mutex::default(),
            indexes,
            appends: GroupCommit::default(),
            embedder: OnceLock::new(),
            precounts: Arc::default(),
            _store_lock: store_lock,
            #[cfg(test)]
            before_put: TestHook::default(),
        });
        if background {
            let weak = Arc::downgrade(&memory.inner);
            let round: crate::background::Round = Box::new(move |after| {
                let inner = weak.upgrade()?;
                Some(Memory { inner }.background_round(after))
            });
            let encoders = memory.inner.dense.iter().chain(&memory.inner.also_dense);
            let embedder = BackgroundEmbedder::start(encoders, round)
                .map_err(OpenError::BackgroundEmbedder)?;
            memory.inner.embedder.set(embedder).expect("a new memory has no embedder yet");
        }
        Ok(memory)
    }

    /// Also-encoders need a first one, are few, and are each another identity.
    fn check_encoders(&self) -> Result<(), OpenError> {
        if self.also_encoders.is_empty() {
            return Ok(());
        }
        let Some(first) = &self.encoder else {
            return Err(OpenError::Encoders("also-encoders were given without a first one".into()));
        };
        if self.also_encoders.len() > crate::MAX_ALSO_ENCODERS {
            return Err(OpenError::Encoders(format!(
                "{} encoders given; a compile fuses at most {}",
                self.also_encoders.len() + 1,
                crate::MAX_ALSO_ENCODERS + 1
            )));
        }
        let mut seen = HashSet::new();
        for encoder in std::iter::once(first).chain(&self.also_encoders) {
            if !seen.insert(encoder.identity_digest()) {
                return Err(OpenError::Encoders(format!(
                    "the encoder {} is given twice",
                    encoder.identity().model
                )));
            }
        }
        Ok(())
    }

    /// Opens the ledger of the store `self.dir` names (see [`StoreLocation::parse`]) and returns it
    /// with the directory of the derived files. A directory store is created when absent (unless
    /// only inspected); a PostgreSQL store's derived directory is created and claimed for its
    /// database. A PostgreSQL server that does not answer is an error naming it: never a fallback
    /// to an embedded ledger.
    fn open_ledger(&self, mode: OpenMode) -> Result<OpenedLedger, OpenError> {
        let location = match (StoreLocation::parse(&self.dir)?, &self.derived_dir) {
            (StoreLocation::Postgres { url, .. }, Some(derived)) => {
                StoreLocation::Postgres { url, derived: derived.clone() }
            }
            (location, _) => location,
        };
        match location {
            StoreLocation::Directory(dir) => {
                if mode == OpenMode::ReadWrite {
                    evicortex_ledger::create_private_dir(&dir)
                        .map_err(|source| OpenError::CreateDir { path: dir.clone(), source })?;
                }
                let ledger = Ledger::open_with(&dir.join(LEDGER_FILE), mode)?;
                Ok(OpenedLedger { dir, ledger: Box::new(ledger), url: None })
            }
            StoreLocation::Postgres { url, derived } => {
                let ledger = PgLedger::connect(&url)?;
                claim_derived_dir(&derived, &url)?;
                Ok(OpenedLedger { dir: derived, ledger: Box::new(ledger), url: Some(url) })
            }
        }
    }

    /// Opens an existing store for inspection: nothing can be written, and a failed open-time
    /// check is reported by [`Memory::open_problem`] instead of refusing, so that
    /// [`Memory::verify`] can name the first bad record. No derived store is opened.
    pub fn open_read_only(&self) -> Result<Memory, OpenError> {
        let OpenedLedger { dir, ledger, .. } = self.open_ledger(OpenMode::Inspect)?;
        let indexes =
            Arc::new(IndexCache::new(self.index_cache_bytes, self.ann.flatten(), None, None));
        Ok(Memory::from_inner(Inner {
            dir,
            ledger,
            dense: None,
            also_dense: Vec::new(),
            cache: None,
            pg_dense: None,
            erasures: None,
            reranker: self.reranker.clone(),
            derived: RwLock::new(vec![indexes.clone()]),
            writes: Mutex::default(),
            indexes,
            appends: GroupCommit::default(),
            embedder: OnceLock::new(),
            precounts: Arc::default(),
            _store_lock: None,
            #[cfg(test)]
            before_put: TestHook::default(),
        }))
    }
}

impl Memory {
    /// How to open the store in `dir` with an encoder or a reranker. `dir` may also be a
    /// `postgres://` or `postgresql://` URL: the ledger is then that database, and the derived
    /// files live in a local directory ([`StoreLocation::parse`]).
    pub fn builder(dir: impl AsRef<Path>) -> MemoryBuilder {
        MemoryBuilder {
            dir: dir.as_ref().to_owned(),
            derived_dir: None,
            encoder: None,
            also_encoders: Vec::new(),
            reranker: None,
            reranker_store: None,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
            background_embedding: false,
            ann: None,
            lexical_files_from: Some(crate::DEFAULT_LEXICAL_FILES_FROM),
            lock_store: false,
        }
    }

    /// Opens the store in `dir` without an encoder (lexical retrieval only; turns are stored but
    /// not embedded), creating it if absent. See [`MemoryBuilder::open`].
    pub fn open(dir: impl AsRef<Path>) -> Result<Memory, OpenError> {
        Memory::builder(dir).open()
    }

    /// Opens an existing store for inspection only. See [`MemoryBuilder::open_read_only`].
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Memory, OpenError> {
        Memory::builder(dir).open_read_only()
    }

    fn from_inner(inner: Inner) -> Memory {
        Memory { inner: Arc::new(inner) }
    }

    /// The store directory; for a PostgreSQL store, the local directory of its derived files.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// The ledger file; for a PostgreSQL store, its connection string without the password.
    pub fn ledger_path(&self) -> &Path {
        self.inner.ledger.location()
    }

    /// The reranker compile uses when its configuration turns reranking on, if any.
    pub fn reranker(&self) -> Option<&Arc<dyn Reranker>> {
        self.inner.reranker.as_ref()
    }

    /// The approximate index large namespaces are searched through, as the builder resolved it
    /// ([`MemoryBuilder::ann`]); `None`: every vector is scanned (or, on a PostgreSQL store,
    /// searched by pgvector).
    pub fn ann(&self) -> Option<crate::AnnSettings> {
        self.inner.indexes.ann
    }

    /// Whether this memory embeds (it was opened with an encoder).
    pub fn has_encoder(&self) -> bool {
        self.inner.dense.is_some()
    }

    /// The encoder, when the memory has one.
    pub fn encoder(&self) -> Option<&Arc<dyn Encoder>> {
        self.inner.dense.as_ref().map(|d| &d.encoder)
    }

    /// Every encoder of this memory, the leading one first, then those fused beside it.
    pub fn encoders(&self) -> Vec<&Arc<dyn Encoder>> {
        self.inner.dense.iter().chain(&self.inner.also_dense).map(|d| &d.encoder).collect()
    }

    /// What the open-time integrity check found wrong (only for [`Memory::open_read_only`]).
    pub fn open_problem(&self) -> Option<&str> {
        self.inner.ledger.open_problem()
    }

    /// Refuses, as [`Memory::open`] does, a store opened with [`Memory::open_read_only`] whose
    /// open-time check failed.
    pub fn require_intact(&self) -> Result<(), OpenError> {
        match self.inner.ledger.open_problem() {
            None => Ok(()),
            Some(detail) => Err(OpenError::Ledger(evicortex_ledger::OpenError::Corrupted {
                path: self.inner.ledger.location().to_owned(),
                detail: detail.to_owned(),
            })),
        }
    }

    /// Hooks a caller's derived store, so that erasures purge it (under the writer lock).
    pub fn attach(&self, store: Arc<dyn DerivedStore>) {
        self.inner.derived.write().unwrap_or_else(PoisonError::into_inner).push(store);
    }

    /// Appends `turns` atomically and durably: when this returns `Ok`, the whole batch is on
    /// disk; identical turns already stored are no-ops, conflicting ones refuse the whole batch.
    /// Batches of concurrent callers are committed together in one transaction (group commit:
    /// one fsync for all), each still all-or-nothing and refused alone.
    /// The turns are lexical candidates of the next compile at once; their vectors come from
    /// [`Memory::catch_up`] or the background embedder (content-addressed: a text already
    /// embedded is not embedded again).
    pub fn append(&self, turns: &[Turn]) -> Result<AppendReceipt, AppendError> {
        let receipt = self.inner.appends.append(&*self.inner.ledger, turns)?;
        if let Some(embedder) = self.inner.embedder.get() {
            embedder.notify();
        }
        Ok(receipt)
    }

    /// How many ledger transactions this memory's appends took, and how many batches they held.
    pub fn group_commit_stats(&self) -> GroupCommitStats {
        self.inner.appends.stats()
    }

    /// Checks `turns` as [`Memory::append`] would (each turn valid, no conflict within the batch
    /// or with the store) without storing anything; returns how many would be new. A concurrent
    /// writer can still make a later append conflict.
    pub fn check_append(&self, turns: &[Turn]) -> Result<usize, AppendError> {
        self.inner.ledger.check_append(turns)
    }

    /// With [`MemoryBuilder::background_embedding`]: waits until every turn appended before the
    /// call has been offered to the encoder, or `timeout` passes; returns whether it got there.
    /// Without a background embedder there is nothing to wait for.
    pub fn wait_for_embedding(&self, timeout: std::time::Duration) -> bool {
        self.inner.embedder.get().is_none_or(|e| e.wait_idle(timeout))
    }

    /// Waits until the background counts of reader tokens have finished, or `timeout` passes;
    /// returns whether they have. A compile of a namespace of at least 2,000 turns starts one in
    /// its reader's tokenizer, the first time that tokenizer is used there, so that later
    /// compiles find every turn's count cached (only their speed depends on it).
    pub fn wait_for_token_counts(&self, timeout: std::time::Duration) -> bool {
        self.inner.precounts.wait_idle(timeout)
    }

    /// Erases `target` from the ledger (a redaction record; texts scrubbed from every file),
    /// then purges every derived store, all under the writer lock. The receipt's
    /// `orphaned_texts` lists, besides the erased texts no live turn holds, the erased turns'
    /// documents (`<speaker>: <text>`, what vectors are computed from) no live turn holds.
    pub fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        let mut writes = self.lock_writes();
        let before = target_documents(&*self.inner.ledger, target).map_err(EraseError::Read)?;
        let mut receipt = self.inner.ledger.erase(target)?;
        let committed = |e: ReadError| {
            EraseError::Derived(DerivedStoreError::new("turn documents", read_class(&e), e))
        };
        let documents =
            orphaned_documents(&*self.inner.ledger, &receipt, &before).map_err(committed)?;
        let unknown = documents.is_none();
        receipt.orphaned_texts.extend(documents.into_iter().flatten());
        receipt.orphaned_texts.sort();
        receipt.orphaned_texts.dedup();
        writes.record(&receipt, unknown);
        let derived = self.inner.derived.read().unwrap_or_else(PoisonError::into_inner).clone();
        for store in derived {
            store.purge(&receipt)?;
        }
        if unknown && let Some(cache) = &self.inner.cache {
            // A turn appended during the erasure was erased with its document unread: keep only
            // the documents live turns hold.
            cache.retain_live(&*self.inner.ledger).map_err(|e| {
                EraseError::Derived(DerivedStoreError::new("embedding cache", e.class(), e))
            })?;
        }
        Ok(receipt)
    }

    /// The writer lock of derived data (see [`WriteState`]).
    pub(crate) fn lock_writes(&self) -> MutexGuard<'_, WriteState> {
        self.view().lock_writes()
    }

    /// What the derived-data caches and files read of this memory.
    pub(crate) fn view(&self) -> DerivedView<'_> {
        DerivedView {
            ledger: &*self.inner.ledger,
            indexes: &self.inner.indexes,
            writes: &self.inner.writes,
            pg_dense: self.inner.pg_dense.as_deref(),
        }
    }

    /// Recomputes every digest and the whole chain; names the first bad record.
    pub fn verify(&self) -> Result<VerifyReport, VerifyError> {
        self.inner.ledger.verify()
    }

    /// [`Memory::verify`] with a progress callback `(done, total)`.
    pub fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError> {
        self.inner.ledger.verify_with_progress(progress)
    }

    /// Counts of turns, namespaces, sessions, erasures and bytes on disk.
    pub fn stats(&self) -> Result<Stats, ReadError> {
        Ok(Stats { ledger: self.inner.ledger.stats()? })
    }

    /// Calls `f` with every live turn (of `namespace`, or of all namespaces) recorded after
    /// ledger position `after`, in ledger order, each checked against its digest and chain link;
    /// returns how many it saw. Turn ids are numbers within each turn's namespace.
    pub fn for_each_evidence<E: From<ReadError>>(
        &self,
        namespace: Option<&Namespace>,
        after: Option<LedgerPosition>,
        mut f: impl FnMut(Evidence) -> Result<(), E>,
    ) -> Result<u64, E> {
        self.inner.ledger.for_each_evidence_since(namespace, after, |_, e| f(e))
    }

    /// The live turns of `namespace`, in ledger order (what indexes and the compiler read).
    pub fn evidence(&self, namespace: &Namespace) -> Result<Vec<Evidence>, ReadError> {
        self.inner.ledger.evidence(namespace)
    }

    /// The live turns of `namespace` numbered after `after` (all when `None`), in ledger order.
    pub fn evidence_after(
        &self,
        namespace: &Namespace,
        after: Option<TurnId>,
    ) -> Result<Vec<Evidence>, ReadError> {
        self.view().evidence_after(namespace, after)
    }

    /// The namespaces with at least one live turn, sorted.
    pub fn namespaces(&self) -> Result<Vec<Namespace>, ReadError> {
        self.inner.ledger.namespaces()
    }

    /// The number of `namespace`'s last record (turn or redaction), if it has any.
    pub fn namespace_head(&self, namespace: &Namespace) -> Result<Option<TurnId>, ReadError> {
        self.inner.ledger.namespace_head(namespace)
    }

    /// The ledger head: the position of the last record (turn or redaction) of any namespace.
    pub fn head(&self) -> Result<Option<LedgerPosition>, ReadError> {
        self.inner.ledger.head()
    }

    /// Writes the live turns (of `namespace`, or all) as JSONL in ledger order; `ingest` takes
    /// the output back with texts byte for byte.
    pub fn export(
        &self,
        namespace: Option<&Namespace>,
        out: &mut dyn Write,
    ) -> Result<ExportSummary, ExportError> {
        let turns = self.inner.ledger.for_each_evidence_since(namespace, None, |_, e| {
            out.write_all(export_line(&e.turn).as_bytes()).map_err(ExportError::Write)?;
            out.write_all(b"\n").map_err(ExportError::Write)
        })?;
        out.flush().map_err(ExportError::Write)?;
        Ok(ExportSummary { turns })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Memory>();
    }
}
