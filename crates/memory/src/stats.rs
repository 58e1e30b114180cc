//! Store statistics, for `evicortex stats`.

use serde::Serialize;

use crate::LedgerStats;

/// Statistics of a store. Serialises flat: `turns`, `namespaces`, `sessions`, ... at the top.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// The ledger's counts.
    #[serde(flatten)]
    pub ledger: LedgerStats,
}
