//! `Memory`: the store directory, its ledger, the derived stores built from it, and the one
//! writer lock under which derived data is written and purged.

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock},
};

use evicortex_compiler::Reranker;
use evicortex_core::{Evidence, Namespace, Turn, TurnId};
use evicortex_embed::Encoder;
use evicortex_ledger::{EvidenceLedger, LedgerPosition, ScanEvidence};

use crate::{
    AppendError, AppendReceipt, DerivedStore, DerivedStoreError, EraseError, EraseReceipt,
    EraseTarget, ExportError, ExportSummary, MemoryBuilder, OpenError, ReadError, Stats,
    VerifyError, VerifyReport,
    background::BackgroundEmbedder,
    dense::Dense,
    derived_view::{DerivedView, WriteState},
    embedding_cache::EmbeddingCache,
    erase_documents::{erased_documents, target_documents},
    erasure_watch::ErasureWatch,
    export::export_line,
    group_commit::{GroupCommit, GroupCommitStats},
    index_cache::IndexCache,
    pg_dense::PgDense,
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
    pub(crate) derived: RwLock<Vec<Arc<dyn DerivedStore>>>,
    pub(crate) writes: Mutex<WriteState>,
    pub(crate) indexes: Arc<IndexCache>,
    /// Concurrent appends committed together.
    pub(crate) appends: GroupCommit,
    /// The thread that embeds appended turns, when asked for.
    pub(crate) embedder: OnceLock<BackgroundEmbedder>,
    /// The thread that indexes appended turns ahead of compiles, when asked for.
    pub(crate) indexer: OnceLock<crate::background_index::BackgroundIndexer>,
    /// The background counts of reader tokens (see [`crate::token_precount`]).
    pub(crate) precounts: Arc<Precounts>,
    /// The store's writer lock, held for as long as this memory lives
    /// ([`MemoryBuilder::lock_store`]), or why this memory writes beside the holder.
    pub(crate) store_access: crate::store_lock::StoreAccess,
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

impl Memory {
    /// How to open the store in `dir` with an encoder or a reranker. `dir` may also be a
    /// `postgres://` or `postgresql://` URL: the ledger is then that database, and the derived
    /// files live in a local directory ([`crate::StoreLocation::parse`]).
    pub fn builder(dir: impl AsRef<Path>) -> MemoryBuilder {
        MemoryBuilder::new(dir.as_ref())
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

    pub(crate) fn from_inner(inner: Inner) -> Memory {
        Memory { inner: Arc::new(inner) }
    }

    /// The store directory; for a PostgreSQL store, the local directory of its derived files.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// Why this memory, opened with [`MemoryBuilder::lock_store_or_beside`], does not hold the
    /// store's writer lock (another process holds it, named here), so embeds nothing; `None`
    /// when it holds the lock or was not asked to take it.
    pub fn store_lock_refusal(&self) -> Option<&crate::StoreLockError> {
        match &self.inner.store_access {
            crate::store_lock::StoreAccess::Beside(refusal) => refusal.as_ref(),
            _ => None,
        }
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
        if let Some(indexer) = self.inner.indexer.get() {
            indexer.notify(turns.iter().map(|t| &t.namespace));
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
    /// `erased_texts` lists, besides the erased texts, the erased turns' documents
    /// (`<speaker>: <text>`, what vectors are computed from).
    pub fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        let mut writes = self.lock_writes();
        let before = target_documents(&*self.inner.ledger, target).map_err(EraseError::Read)?;
        let mut receipt = self.inner.ledger.erase_unscrubbed(target)?;
        let documents = erased_documents(&receipt, &before);
        let unknown = documents.is_none();
        receipt.erased_texts.extend(documents.into_iter().flatten());
        receipt.erased_texts.sort();
        receipt.erased_texts.dedup();
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
        drop(writes);
        match self.inner.indexer.get() {
            // A server's erasure does not queue behind the compiles reading a namespace (its
            // p99 grew with their traffic): a compile that starts after it returns applies
            // what is pending before it reads, and the indexer's next round applies it anyway.
            Some(indexer) => {
                if self.inner.indexes.apply_pending_erasures(false) {
                    indexer.notify([]);
                }
            }
            None => {
                self.inner.indexes.apply_pending_erasures(true);
            }
        }
        // Outside the writer lock: erasures that commit while one scrubs share the next scrub.
        self.inner.ledger.scrub_erased()?;
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
