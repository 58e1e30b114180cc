//! [`MemoryBuilder`]: how a [`Memory`] is opened (the store directory or a PostgreSQL URL, the
//! encoders, the reranker, the store lock, background embedding) and the checks on the way.

use std::{
    collections::HashSet,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, OnceLock, RwLock},
};

use evicortex_compiler::Reranker;
use evicortex_embed::{Encoder, Overlength};
use evicortex_ledger::{EvidenceLedger, Ledger, OpenMode};
use evicortex_postgres::{PgLedger, PgShared};
use evicortex_vector::IndexFileError;

#[cfg(test)]
use crate::memory::TestHook;
use crate::memory::{Inner, LEDGER_FILE, Memory};
use crate::{
    DerivedStore, EMBEDDINGS_FILE, OpenError,
    background::BackgroundEmbedder,
    dense::Dense,
    embedding_cache::EmbeddingCache,
    erasure_watch::ErasureWatch,
    group_commit::GroupCommit,
    index_cache::{DEFAULT_INDEX_CACHE_BYTES, IndexCache},
    pg_dense::PgDense,
    store_location::{StoreLocation, claim_derived_dir},
    store_lock::{LockRequest, StoreAccess},
};

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
    lexical_files_when_quiet: Option<std::time::Duration>,
    background_indexing: bool,
    lock: LockRequest,
}

impl MemoryBuilder {
    /// The defaults: lexical only, no reranker, no background embedding, no store lock.
    pub(crate) fn new(dir: &Path) -> MemoryBuilder {
        MemoryBuilder {
            dir: dir.to_owned(),
            derived_dir: None,
            encoder: None,
            also_encoders: Vec::new(),
            reranker: None,
            reranker_store: None,
            index_cache_bytes: DEFAULT_INDEX_CACHE_BYTES,
            background_embedding: false,
            ann: None,
            lexical_files_from: Some(crate::DEFAULT_LEXICAL_FILES_FROM),
            lexical_files_when_quiet: None,
            background_indexing: false,
            lock: LockRequest::None,
        }
    }

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

    /// Writes the lexical index files off the request path: a thread writes a namespace's file
    /// once no refresh has changed its indexes for `quiet`, instead of the compile that finds
    /// one due (serializing and syncing 100,000 turns' indexes took 0.5 to 0.9 s of a compile).
    /// A namespace under a steady stream of appends is then written when the stream pauses; a
    /// memory dropped before that writes nothing, and the next process analyses those turns
    /// again. For servers; `None` (the default) writes inside the compile, as a one-shot
    /// process needs.
    pub fn lexical_files_when_quiet(
        &mut self,
        quiet: Option<std::time::Duration>,
    ) -> &mut MemoryBuilder {
        self.lexical_files_when_quiet = quiet;
        self
    }

    /// Indexes appended turns on a thread of the memory's own, ahead of compiles: after each
    /// append, each namespace it touched, when cached, is brought to the ledger head for the
    /// settings its last compile asked for, so that a compile under a stream of appends finds
    /// its indexes current instead of indexing what arrived since the last compile in its
    /// request. What a compile returns does not change. For servers.
    pub fn background_indexing(&mut self) -> &mut MemoryBuilder {
        self.background_indexing = true;
        self
    }

    /// Takes the store's writer lock ([`crate::StoreLock`]) when opening, and holds it for as
    /// long as the memory lives: a second process that opens the store so is refused at once
    /// ([`crate::StoreLockError::Busy`], naming the holder), before anything is written. Every
    /// door that writes (the servers, MCP, Python) opens its memory so.
    pub fn lock_store(&mut self) -> &mut MemoryBuilder {
        self.lock = LockRequest::Lock;
        self
    }

    /// Opens the store beside whatever process holds its writer lock, taking no lock: the
    /// memory embeds no turn ([`Memory::catch_up`] is refused, and background embedding with
    /// it), and its open removes no derived file (the sweeps of what a crash left behind are the
    /// writer's). What it does write cannot hurt the writer: the compile index files it persists
    /// are written to a temporary file and renamed into place under the index files' lock, after
    /// the check that no erasure followed what they cover (as an erasure's purge takes that lock
    /// too), and the embedding cache's own tables are created and its encoder registered in
    /// SQLite transactions. For a process that compiles without writing turns: `evicortex
    /// compile` and `answer`.
    pub fn beside_writer(&mut self) -> &mut MemoryBuilder {
        self.lock = LockRequest::Beside;
        self
    }

    /// [`MemoryBuilder::lock_store`] when the lock is free, else [`MemoryBuilder::beside_writer`]
    /// (why the lock was not taken: [`Memory::store_lock_refusal`]).
    pub fn lock_store_or_beside(&mut self) -> &mut MemoryBuilder {
        self.lock = LockRequest::LockOrBeside;
        self
    }

    /// Opens the store, creating the directory and an empty ledger if absent. Refuses a store
    /// whose ledger fails the open-time integrity check. The embedding cache (when there is an
    /// encoder, or when the store already has one; always on a PostgreSQL primary, whose cache
    /// is its database's) is opened and reconciled with the ledger: vectors of texts that an
    /// interrupted erasure left behind are dropped.
    pub fn open(&self) -> Result<Memory, OpenError> {
        self.check_encoders()?;
        // Before anything is opened: reconciling derived files writes them.
        let store_access = StoreAccess::take(&self.dir, self.lock)?;
        // Only a process that may write the store sweeps its derived files: a sweep beside the
        // writer could remove a vector it stored for a turn appended after this open's read.
        let sweeps = !store_access.beside();
        if self.background_embedding && store_access.beside() {
            return Err(OpenError::Background {
                what: "embedder",
                source: std::io::Error::other(
                    "a memory opened beside the store's writer embeds no turn",
                ),
            });
        }
        let OpenedLedger { dir, ledger, url } = self.open_ledger(OpenMode::ReadWrite)?;
        // Read before the derived files are reconciled: a later erasure is applied by a compile.
        let erasures = match &url {
            Some(_) => Some(ErasureWatch::new(ledger.head().map_err(OpenError::Read)?)),
            None => None,
        };
        // A PostgreSQL primary's cache is its database's, opened with or without an encoder (an
        // erasure through any server purges what the others embedded); a standby, which cannot
        // write there, keeps a file of its own.
        let in_database = match &url {
            Some(url) => Some(PgShared::connect(url)?).filter(|db| !db.is_replica()),
            None => None,
        };
        let cache = match in_database {
            Some(db) => Some(crate::embedding_cache::open_in_database(db, &dir, &*ledger)?),
            None if self.encoder.is_some() || dir.join(EMBEDDINGS_FILE).exists() => {
                Some(EmbeddingCache::open(&dir)?)
            }
            None => None,
        };
        let cache = match cache {
            Some(cache) => {
                if sweeps {
                    cache.reconcile(&*ledger)?;
                }
                Some(Arc::new(cache))
            }
            None => None,
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
        let ann = self.ann.unwrap_or_else(|| {
            url.is_none().then(|| crate::AnnSettings::sketch_from(crate::DEFAULT_SKETCH_FROM))
        });
        let mut indexes =
            IndexCache::new(self.index_cache_bytes, ann, Some(&dir), self.lexical_files_from);
        indexes.lexical_quiet = self.lexical_files_when_quiet;
        // Only a holder of the store lock sees every erasure of the store go through it.
        indexes.erase_in_place = erasures.is_none() && store_access.held();
        let indexes = Arc::new(indexes);
        if sweeps {
            // Under the index files' lock, as a writer renames: a file a process beside this one
            // writes between the sweep's check and its removal is not the one removed.
            let _files = indexes.lock_files().map_err(|source| OpenError::IndexFile {
                source: IndexFileError::Io { path: indexes.files_lock_path(), source },
            })?;
            crate::ann::reconcile(&dir.join(crate::VECTOR_INDEX_DIR), &*ledger)?;
            crate::lexical_file::reconcile(&dir.join(crate::LEXICAL_INDEX_DIR), &*ledger)?;
        }
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
            indexer: OnceLock::new(),
            precounts: Arc::default(),
            store_access,
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
                .map_err(|source| OpenError::Background { what: "embedder", source })?;
            memory.inner.embedder.set(embedder).expect("a new memory has no embedder yet");
        }
        if self.background_indexing {
            let indexer =
                crate::background_index::BackgroundIndexer::start(Arc::downgrade(&memory.inner))
                    .map_err(|source| OpenError::Background { what: "indexer", source })?;
            memory.inner.indexer.set(indexer).expect("a new memory has no indexer yet");
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
            indexer: OnceLock::new(),
            precounts: Arc::default(),
            store_access: StoreAccess::Unlocked,
            #[cfg(test)]
            before_put: TestHook::default(),
        }))
    }
}
