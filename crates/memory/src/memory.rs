//! `Memory`: the store directory, its ledger and the derived stores hooked to it.

use std::{
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, RwLock},
};

use evicortex_core::{Evidence, Namespace, Turn, TurnId};
use evicortex_ledger::{Ledger, OpenMode};

use crate::{
    AppendError, AppendReceipt, DerivedStore, EraseError, EraseReceipt, EraseTarget, ExportError,
    ExportSummary, OpenError, ReadError, Stats, VerifyError, VerifyReport, export_line,
};

/// The ledger's file name inside a store directory.
pub const LEDGER_FILE: &str = "ledger.sqlite";

/// An open store. `Send + Sync` with `&self` methods: share it in an `Arc` (the HTTP server
/// does). Appends and erasures are serialised; reads run concurrently on pooled connections.
#[derive(Debug)]
pub struct Memory {
    dir: PathBuf,
    ledger: Ledger,
    /// Stores derived from the ledger, purged on erasure. Modules that add a derived store
    /// (embedding cache, indexes) attach it in [`Memory::open`] or with [`Memory::attach`].
    derived: RwLock<Vec<Arc<dyn DerivedStore>>>,
    /// Per-namespace compiler indexes, rebuilt from the ledger (see `compile.rs`).
    pub(crate) indexes: crate::compile::IndexCache,
}

impl Memory {
    /// Opens the store in `dir`, creating the directory and an empty ledger if absent, and makes
    /// the directory private to its owner (0700). Refuses a store whose ledger fails the
    /// open-time integrity check (see [`Memory::open_read_only`]).
    pub fn open(dir: impl AsRef<Path>) -> Result<Memory, OpenError> {
        let dir = dir.as_ref();
        evicortex_ledger::create_private_dir(dir)
            .map_err(|source| OpenError::CreateDir { path: dir.to_owned(), source })?;
        Memory::open_with(dir, OpenMode::ReadWrite)
    }

    /// Opens an existing store for inspection: nothing can be written, and a failed open-time
    /// check is reported by [`Memory::open_problem`] instead of refusing, so that
    /// [`Memory::verify`] can name the first bad record.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Memory, OpenError> {
        Memory::open_with(dir.as_ref(), OpenMode::Inspect)
    }

    fn open_with(dir: &Path, mode: OpenMode) -> Result<Memory, OpenError> {
        let ledger = Ledger::open_with(&dir.join(LEDGER_FILE), mode)?;
        Ok(Memory {
            dir: dir.to_owned(),
            ledger,
            derived: RwLock::new(Vec::new()),
            indexes: Default::default(),
        })
    }

    /// The store directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The ledger, for read access beyond what `Memory` offers.
    pub fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// What the open-time integrity check found wrong (only for [`Memory::open_read_only`]).
    pub fn open_problem(&self) -> Option<&str> {
        self.ledger.open_problem()
    }

    /// Refuses, as [`Memory::open`] does, a store opened with [`Memory::open_read_only`] whose
    /// open-time check failed.
    pub fn require_intact(&self) -> Result<(), OpenError> {
        match self.ledger.open_problem() {
            None => Ok(()),
            Some(detail) => Err(OpenError::Ledger(evicortex_ledger::OpenError::Corrupted {
                path: self.ledger.path().to_owned(),
                detail: detail.to_owned(),
            })),
        }
    }

    /// Hooks a derived store so that erasures purge it.
    pub fn attach(&self, store: Arc<dyn DerivedStore>) {
        self.derived.write().unwrap_or_else(std::sync::PoisonError::into_inner).push(store);
    }

    /// Appends `turns` atomically and durably (see [`Ledger::append`]): identical turns already
    /// stored are no-ops, conflicting ones refuse the whole batch.
    pub fn append(&self, turns: &[Turn]) -> Result<AppendReceipt, AppendError> {
        Ok(self.ledger.append(turns)?)
    }

    /// Erases `target` from the ledger (a redaction record; texts scrubbed from every file),
    /// then purges every attached derived store.
    pub fn erase(&self, target: &EraseTarget) -> Result<EraseReceipt, EraseError> {
        let receipt = self.ledger.erase(target)?;
        let derived =
            self.derived.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        let mut cache_purged = false;
        for store in derived {
            store.purge(&receipt)?;
            cache_purged |= store.name() == crate::embedding_cache::CACHE_NAME;
        }
        // A caller that never attached the embedding cache still must not leave the erased
        // texts' vectors behind.
        if !cache_purged {
            crate::EmbeddingCache::purge_unattached(&self.dir, &receipt)?;
        }
        Ok(receipt)
    }

    /// Recomputes every digest and the whole chain; names the first bad record.
    pub fn verify(&self) -> Result<VerifyReport, VerifyError> {
        self.ledger.verify()
    }

    /// [`Memory::verify`] with a progress callback `(done, total)`.
    pub fn verify_with_progress(
        &self,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<VerifyReport, VerifyError> {
        self.ledger.verify_with_progress(progress)
    }

    /// Counts of turns, namespaces, sessions, erasures and bytes on disk.
    pub fn stats(&self) -> Result<Stats, ReadError> {
        Ok(Stats { ledger: self.ledger.stats()? })
    }

    /// The live turns of `namespace`, in ledger order (what indexes and the compiler read).
    pub fn evidence(&self, namespace: &Namespace) -> Result<Vec<Evidence>, ReadError> {
        self.ledger.evidence(namespace)
    }

    /// The live turns of `namespace` recorded after `after`, in ledger order (for derived stores
    /// catching up from the position they cover).
    pub fn evidence_after(
        &self,
        namespace: &Namespace,
        after: TurnId,
    ) -> Result<Vec<Evidence>, ReadError> {
        let mut out = Vec::new();
        self.ledger.for_each_evidence(Some(namespace), Some(after), |e| {
            out.push(e);
            Ok::<(), ReadError>(())
        })?;
        Ok(out)
    }

    /// The namespaces with at least one live turn, sorted.
    pub fn namespaces(&self) -> Result<Vec<Namespace>, ReadError> {
        self.ledger.namespaces()
    }

    /// The ledger head: the last record (turn or redaction), if any. Derived data records the
    /// head it covers.
    pub fn head(&self) -> Result<Option<TurnId>, ReadError> {
        self.ledger.head()
    }

    /// Writes the live turns (of `namespace`, or all) as JSONL in ledger order; `ingest` takes
    /// the output back with texts byte for byte.
    pub fn export(
        &self,
        namespace: Option<&Namespace>,
        out: &mut dyn Write,
    ) -> Result<ExportSummary, ExportError> {
        let turns = self.ledger.for_each_evidence(namespace, None, |e| {
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
