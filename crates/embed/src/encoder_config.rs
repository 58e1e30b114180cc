//! `EncoderConfig`: the settings around the model that change its vectors (pooling, prefixes,
//! maximum length, overlength policy, normalisation). No `Default`: each is chosen explicitly.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use crate::error::EmbedError;

/// How token states become one vector.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// Mean of the token states, weighted by the attention mask (padding excluded).
    Mean,
    /// The state of the first (`[CLS]`) token.
    Cls,
}

/// Normalisation of the pooled vector.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Normalization {
    /// Divide by the Euclidean norm (floored at 1e-12, as the reference does).
    L2,
    /// Leave the pooled vector as it is.
    None,
}

/// What happens to text longer than the maximum length.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlength {
    /// Refuse it with its token count (the default everywhere).
    Refuse,
    /// Keep the first `max_tokens` tokens (special tokens included).
    Truncate,
    /// Split into overlapping windows of at most `max_tokens` tokens, each its own vector.
    Window {
        /// Tokens shared by consecutive windows.
        overlap_tokens: usize,
    },
}

impl fmt::Display for Overlength {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Overlength::Refuse => f.write_str("refuse"),
            Overlength::Truncate => f.write_str("truncate"),
            Overlength::Window { overlap_tokens } => write!(f, "window:{overlap_tokens}"),
        }
    }
}

/// Token overlap of `--overlength window` when none is given.
pub const DEFAULT_WINDOW_OVERLAP: usize = 64;

impl FromStr for Overlength {
    type Err = String;

    /// `refuse`, `truncate`, `window` (overlap [`DEFAULT_WINDOW_OVERLAP`]) or `window:N`.
    fn from_str(s: &str) -> Result<Overlength, String> {
        match s {
            "refuse" => Ok(Overlength::Refuse),
            "truncate" => Ok(Overlength::Truncate),
            "window" => Ok(Overlength::Window { overlap_tokens: DEFAULT_WINDOW_OVERLAP }),
            other => match other.strip_prefix("window:").map(str::parse::<usize>) {
                Some(Ok(overlap_tokens)) => Ok(Overlength::Window { overlap_tokens }),
                _ => Err(format!("{other:?} is not refuse, truncate, window or window:N")),
            },
        }
    }
}

/// Settings around the model that change its vectors. Recorded in the [`crate::EncoderIdentity`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncoderConfig {
    /// Pooling of token states.
    pub pooling: Pooling,
    /// Prefix put before query text (may be empty, but is always recorded).
    pub query_prefix: String,
    /// Prefix put before document text.
    pub document_prefix: String,
    /// Maximum length in tokens, special tokens included. Overrides whatever truncation or
    /// padding the artifact's `tokenizer.json` asks for.
    pub max_tokens: usize,
    /// Policy for longer text.
    pub overlength: Overlength,
    /// Normalisation of the pooled vector.
    pub normalization: Normalization,
}

impl EncoderConfig {
    /// The settings sentence-transformers uses for all-MiniLM-L6-v2 (`sentence_bert_config.json`
    /// max_seq_length 256, `1_Pooling` mean, `2_Normalize`), no prefixes, overlength refused.
    pub fn all_minilm_l6_v2() -> EncoderConfig {
        EncoderConfig {
            pooling: Pooling::Mean,
            query_prefix: String::new(),
            document_prefix: String::new(),
            max_tokens: 256,
            overlength: Overlength::Refuse,
            normalization: Normalization::L2,
        }
    }

    /// The settings sentence-transformers uses for all-mpnet-base-v2 (`sentence_bert_config.json`
    /// max_seq_length 384, `1_Pooling` mean, `2_Normalize`), no prefixes (the model was trained
    /// without them), overlength refused.
    pub fn all_mpnet_base_v2() -> EncoderConfig {
        EncoderConfig {
            pooling: Pooling::Mean,
            query_prefix: String::new(),
            document_prefix: String::new(),
            max_tokens: 384,
            overlength: Overlength::Refuse,
            normalization: Normalization::L2,
        }
    }

    /// The same settings with another overlength policy.
    pub fn with_overlength(mut self, overlength: Overlength) -> EncoderConfig {
        self.overlength = overlength;
        self
    }

    /// Checks the settings against a model that has `max_positions` learned positions.
    pub(crate) fn validate(&self, max_positions: usize) -> Result<(), EmbedError> {
        if self.max_tokens < 3 || self.max_tokens > max_positions {
            return Err(EmbedError::InvalidConfig {
                field: "max_tokens",
                reason: format!(
                    "{} is outside 3..={max_positions} (the model's positions)",
                    self.max_tokens
                ),
            });
        }
        if let Overlength::Window { overlap_tokens } = self.overlength
            && overlap_tokens >= self.max_tokens - 2
        {
            return Err(EmbedError::InvalidConfig {
                field: "overlength.overlap_tokens",
                reason: format!(
                    "{overlap_tokens} must be smaller than the {} content tokens of a window",
                    self.max_tokens - 2
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlength_parses_and_displays() {
        for (text, policy) in [
            ("refuse", Overlength::Refuse),
            ("truncate", Overlength::Truncate),
            ("window:10", Overlength::Window { overlap_tokens: 10 }),
        ] {
            assert_eq!(text.parse::<Overlength>().unwrap(), policy);
            assert_eq!(policy.to_string(), text);
        }
        assert_eq!(
            "window".parse::<Overlength>().unwrap(),
            Overlength::Window { overlap_tokens: DEFAULT_WINDOW_OVERLAP }
        );
        assert!("window:x".parse::<Overlength>().is_err());
        assert!("cut".parse::<Overlength>().is_err());
    }

    #[test]
    fn window_overlap_must_leave_room() {
        let config = EncoderConfig::all_minilm_l6_v2()
            .with_overlength(Overlength::Window { overlap_tokens: 254 });
        assert!(matches!(
            config.validate(512),
            Err(EmbedError::InvalidConfig { field: "overlength.overlap_tokens", .. })
        ));
        let mut config = EncoderConfig::all_minilm_l6_v2();
        config.max_tokens = 513;
        assert!(matches!(
            config.validate(512),
            Err(EmbedError::InvalidConfig { field: "max_tokens", .. })
        ));
    }
}
