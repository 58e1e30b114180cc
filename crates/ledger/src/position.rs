//! A record's position in the whole ledger, across namespaces.

/// Where a record lies in the ledger's single chain, counting every namespace's records. It
/// orders records for watermarks (what derived data has seen) and operators' reports; callers
/// that serve a tenant name records by their [`evicortex_core::TurnId`], the record's number in
/// its own namespace, which says nothing about other tenants' volume.
#[derive(
    Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct LedgerPosition(u64);

impl LedgerPosition {
    /// Wraps a raw ledger sequence number.
    pub const fn from_raw(raw: u64) -> LedgerPosition {
        LedgerPosition(raw)
    }
    /// The raw ledger sequence number.
    pub const fn raw(self) -> u64 {
        self.0
    }
}

impl std::fmt::Display for LedgerPosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "position {}", self.0)
    }
}
