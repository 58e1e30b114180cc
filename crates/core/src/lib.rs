//! EviCortex domain types shared by every crate: ids, turns, roles, event times, digests and
//! token budgets.
//!
//! This crate does no I/O and knows nothing about storage, models or HTTP. Every value that crosses
//! a crate boundary is a validated newtype, so a `Namespace` or a `TurnId` in hand is known to be
//! well formed.
//!
//! ```
//! use evicortex_core::{Namespace, Role, SessionId, Turn, TurnIndex, EventTime};
//! let turn = Turn {
//!     namespace: Namespace::new("alice").unwrap(),
//!     session: SessionId::new("s1").unwrap(),
//!     turn: TurnIndex::new(0),
//!     role: Role::User,
//!     speaker: None,
//!     text: "I moved to Lisbon in May.".to_owned(),
//!     time: EventTime::parse_rfc3339("2024-05-02T10:00:00+01:00").unwrap(),
//!     meta: serde_json::Map::new(),
//! };
//! assert_eq!(turn.time.offset_seconds(), 3600);
//! ```
#![warn(missing_docs)]

mod budget;
mod digest;
mod evidence;
mod ids;
mod namespace;
mod role;
mod time;
mod turn;

pub use crate::{
    budget::TokenBudget,
    digest::{EvidenceDigest, TextDigest},
    evidence::Evidence,
    ids::{TurnId, TurnIndex},
    namespace::{IdError, Namespace, SessionId},
    role::{Role, RoleError},
    time::{EventTime, TimeError},
    turn::Turn,
};
