//! The seam for derived stores: data computed from the ledger that erasure must purge.

use crate::EraseReceipt;

/// A store of data derived from ledger turns (embedding cache, vector and lexical indexes).
///
/// Derived data is rebuildable from the ledger alone, records the ledger position it covers,
/// and must forget erased turns: after the ledger commits an erasure, [`crate::Memory::erase`]
/// calls [`DerivedStore::purge`] on every attached store. A store that crashes before purging
/// must reconcile on open (drop whatever the live ledger no longer holds).
pub trait DerivedStore: Send + Sync + std::fmt::Debug {
    /// A short name for messages ("embedding cache").
    fn name(&self) -> &'static str;

    /// Physically removes everything derived from the erased turns: entries keyed by their
    /// [`evicortex_core::TurnId`] (`receipt.erased`) and entries keyed by a text no live turn
    /// still holds (`receipt.orphaned_texts`), free pages and journals included.
    fn purge(&self, receipt: &EraseReceipt) -> Result<(), DerivedStoreError>;
}

/// A derived store failed.
#[derive(Debug, thiserror::Error)]
#[error("{store}: {detail}")]
pub struct DerivedStoreError {
    /// The store's [`DerivedStore::name`].
    pub store: &'static str,
    /// What failed.
    pub detail: String,
    /// Whether the failure is about integrity (corrupted derived data) rather than I/O.
    pub corrupted: bool,
}
