//! Numeric ids: the ledger position of a record and the index of a turn inside its session.

use serde::{Deserialize, Serialize};

/// Position of a record in the ledger; assigned on append, never reused. The sequence number says
/// where a record is; its [`crate::EvidenceDigest`] says what it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnId(u64);

impl TurnId {
    /// Wraps a raw ledger sequence number.
    pub const fn from_raw(raw: u64) -> TurnId {
        TurnId(raw)
    }
    /// The raw ledger sequence number.
    pub const fn raw(self) -> u64 {
        self.0
    }
    /// The id that follows this one.
    pub const fn next(self) -> TurnId {
        TurnId(self.0 + 1)
    }
}

impl std::fmt::Display for TurnId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Index of a turn inside its session, as given by the source conversation.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TurnIndex(u32);

impl TurnIndex {
    /// Wraps a turn index.
    pub const fn new(raw: u32) -> TurnIndex {
        TurnIndex(raw)
    }
    /// The raw index.
    pub const fn raw(self) -> u32 {
        self.0
    }
}

impl std::fmt::Display for TurnIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}
