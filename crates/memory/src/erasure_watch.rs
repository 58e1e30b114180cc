//! Erasures made by another process of a PostgreSQL store. Every server of one database keeps
//! derived files of its own (the HNSW and lexical index files; a standby's embedding cache) and
//! in-memory indexes; the embedding cache of a primary is the database's, which the erasing
//! server purges. An erasure through one server purges its own files at once
//! ([`Memory::erase`]), and the others learn of it from the ledger itself: before each compile a
//! server asks whether a redaction record follows the ledger head it last checked (two
//! indexed reads: the head, and the redactions after the position it had seen), and when one
//! does, it drops from its derived files what the erased turns left there (under its writer
//! lock, as its own erasure would) before the compile reads anything. Its in-memory indexes
//! are rebuilt by the same compile, which finds the erasure after what they cover.
//!
//! An embedded store has one writing process (its writer lock), so it needs no such check.

use std::sync::{Mutex, PoisonError};

use evicortex_ledger::LedgerPosition;

use crate::{CompileError, DerivedStoreError, Memory};

/// The ledger head up to which this process's derived files reflect every erasure.
#[derive(Debug)]
pub(crate) struct ErasureWatch {
    seen: Mutex<Option<LedgerPosition>>,
}

impl ErasureWatch {
    /// A watch for a memory whose derived files were reconciled with the ledger at `head` (as
    /// opening a store does).
    pub(crate) fn new(head: Option<LedgerPosition>) -> ErasureWatch {
        ErasureWatch { seen: Mutex::new(head) }
    }

    fn seen(&self) -> Option<LedgerPosition> {
        *self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn advance(&self, head: Option<LedgerPosition>) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if head > *seen {
            *seen = head;
        }
    }
}

impl Memory {
    /// Applies to this process's derived files the erasures recorded since it last looked (by
    /// any process of the store's database): a no-op for an embedded store.
    pub(crate) fn apply_erasures_elsewhere(&self) -> Result<(), CompileError> {
        let Some(watch) = &self.inner.erasures else { return Ok(()) };
        let ledger = &*self.inner.ledger;
        let since = watch.seen();
        let head = ledger.head()?;
        if head == since {
            return Ok(());
        }
        if ledger.erased_after(since)? {
            let _span = tracing::info_span!("apply_erasures_elsewhere").entered();
            let _writes = self.lock_writes();
            self.reconcile_derived_files().map_err(CompileError::Erasures)?;
        }
        watch.advance(head);
        Ok(())
    }

    /// What opening the store does to its derived files, again: the embedding cache keeps only
    /// the documents of live turns, and index files covering a record before their
    /// namespace's last erasure are removed.
    fn reconcile_derived_files(&self) -> Result<(), DerivedStoreError> {
        let ledger = &*self.inner.ledger;
        if let Some(cache) = &self.inner.cache {
            cache
                .reconcile(ledger)
                .map_err(|e| DerivedStoreError::new("embedding cache", e.class(), e))?;
        }
        let dir = &self.inner.dir;
        crate::ann::reconcile(&dir.join(crate::VECTOR_INDEX_DIR), ledger)
            .map_err(|e| DerivedStoreError::new("vector index files", e.class(), e))?;
        crate::lexical_file::reconcile(&dir.join(crate::LEXICAL_INDEX_DIR), ledger)
            .map_err(|e| DerivedStoreError::new("lexical index files", e.class(), e))?;
        Ok(())
    }
}
