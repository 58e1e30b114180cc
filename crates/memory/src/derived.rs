//! The seam for derived stores: data computed from the ledger that erasure must purge.

use crate::{EraseReceipt, ErrorClass};

/// A store of data derived from ledger turns (embedding cache, in-memory indexes, or a caller's
/// own store).
///
/// Derived data is rebuildable from the ledger alone and must forget erased turns: after the
/// ledger commits an erasure, [`crate::Memory::erase`] calls [`DerivedStore::purge`] on every
/// store the memory holds, under the same writer lock that guards every write into derived
/// stores, so nothing derived from an erased turn can be written back afterwards. A store that
/// crashes before purging must reconcile on open (drop whatever the live ledger no longer holds).
pub trait DerivedStore: Send + Sync + std::fmt::Debug {
    /// A short name for messages ("embedding cache").
    fn name(&self) -> &'static str;

    /// Physically removes everything derived from the erased turns: entries keyed by their
    /// [`evicortex_core::TurnId`] (`receipt.erased`) and entries keyed by an erased text or
    /// document (`receipt.erased_texts`; one a live turn also holds is derived again when next
    /// needed), free pages and journals included.
    fn purge(&self, receipt: &EraseReceipt) -> Result<(), DerivedStoreError>;
}

/// A derived store failed.
#[derive(Debug, thiserror::Error)]
#[error("{store}: {source}")]
pub struct DerivedStoreError {
    store: &'static str,
    class: ErrorClass,
    #[source]
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl DerivedStoreError {
    /// A failure of the store named `store`, of kind `class`, caused by `source`.
    pub fn new(
        store: &'static str,
        class: ErrorClass,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> DerivedStoreError {
        DerivedStoreError { store, class, source: source.into() }
    }

    /// The store's [`DerivedStore::name`].
    pub fn store(&self) -> &'static str {
        self.store
    }

    /// What kind of failure this is.
    pub fn class(&self) -> ErrorClass {
        self.class
    }
}
