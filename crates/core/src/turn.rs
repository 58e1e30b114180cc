//! One conversation turn as given to the ledger.

use serde::{Deserialize, Serialize};

use crate::{EventTime, Namespace, Role, SessionId, TurnIndex};

/// One original conversation turn, verbatim: what is appended to the ledger. Immutable once
/// stored; the ledger assigns its [`crate::TurnId`] and [`crate::EvidenceDigest`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    /// The isolation unit the turn belongs to.
    pub namespace: Namespace,
    /// The session inside the namespace.
    pub session: SessionId,
    /// The turn's index inside its session.
    pub turn: TurnIndex,
    /// Who said it.
    pub role: Role,
    /// The speaker's name where the source gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speaker: Option<String>,
    /// The verbatim text, byte for byte.
    pub text: String,
    /// When it was said.
    pub time: EventTime,
    /// Free-form source metadata (a JSON object).
    #[serde(default, skip_serializing_if = "serde_json::Map::is_empty")]
    pub meta: serde_json::Map<String, serde_json::Value>,
}
