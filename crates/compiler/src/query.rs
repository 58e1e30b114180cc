//! The question being compiled: namespace, text, as-of time and budget.

use evicortex_core::{EventTime, Namespace, TokenBudget};
use serde::{Deserialize, Serialize};

/// One question to compile. Recorded in the output.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompileQuery {
    /// Only this namespace's turns are candidates.
    pub namespace: Namespace,
    /// The question, verbatim.
    pub question: String,
    /// Only turns said at or before this instant are candidates; `None` admits every time.
    pub as_of: Option<EventTime>,
    /// The hard budget in reader tokens for the whole rendered block.
    pub budget: TokenBudget,
}
