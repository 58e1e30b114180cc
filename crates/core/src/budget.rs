//! The hard prompt budget, in the reader's own tokens.

use serde::{Deserialize, Serialize};

/// A prompt budget counted in the reader's tokenizer. Packing never exceeds it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct TokenBudget(u32);

impl TokenBudget {
    /// A budget of `tokens` reader tokens.
    pub const fn new(tokens: u32) -> TokenBudget {
        TokenBudget(tokens)
    }
    /// The number of tokens.
    pub const fn tokens(self) -> u32 {
        self.0
    }
}
