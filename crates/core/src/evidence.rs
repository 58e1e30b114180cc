//! A stored turn: the turn plus what the ledger assigned to it.

use serde::{Deserialize, Serialize};

use crate::{EvidenceDigest, Turn, TurnId};

/// A turn as read back from the ledger: its position, its content digest and the turn itself.
/// This is what retrieval, packing and citation work on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evidence {
    /// The ledger sequence number.
    pub id: TurnId,
    /// BLAKE3 of the record's canonical encoding.
    pub digest: EvidenceDigest,
    /// The turn, verbatim.
    pub turn: Turn,
}
