//! How a reader decodes: greedy only, so the same prompt gives the same answer.

use serde::{Deserialize, Serialize};

/// The decoding strategy.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecodingStrategy {
    /// The most likely token at every step (temperature 0).
    Greedy,
}

/// Decoding settings; part of every answer-cache key.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecodingSettings {
    /// The strategy.
    pub strategy: DecodingStrategy,
    /// At most this many generated tokens; the prompt plus these must fit the reader's window.
    pub max_new_tokens: u32,
}

impl DecodingSettings {
    /// Greedy decoding of at most `max_new_tokens` tokens.
    pub const fn greedy(max_new_tokens: u32) -> DecodingSettings {
        DecodingSettings { strategy: DecodingStrategy::Greedy, max_new_tokens }
    }

    /// A stable text form for cache keys: `greedy;max_new_tokens=64`.
    pub fn cache_key(&self) -> String {
        let strategy = match self.strategy {
            DecodingStrategy::Greedy => "greedy",
        };
        format!("{strategy};max_new_tokens={}", self.max_new_tokens)
    }
}
