//! The `Reader` seam: a chat model that reads a prompt and answers.

use std::sync::Arc;

use evicortex_compiler::ReaderTokenizer;
use serde::{Deserialize, Serialize};

use crate::{
    chat::ChatMessage, decoding::DecodingSettings, error::ReadError, identity::ReaderIdentity,
};

/// A chat model. Implementations decode deterministically and never truncate a prompt: one
/// that does not fit is refused with [`ReadError::PromptTooLong`].
pub trait Reader: Send + Sync + std::fmt::Debug {
    /// Who answers.
    fn identity(&self) -> &ReaderIdentity;

    /// The reader's own tokenizer, when it runs locally: compiled contexts for it are budgeted
    /// in it. `None` for a remote endpoint, whose tokenizer the caller must name.
    fn tokenizer(&self) -> Option<Arc<dyn ReaderTokenizer>>;

    /// Prompt plus generated tokens the reader accepts, when known.
    fn context_window(&self) -> Option<u32>;

    /// The full prompt's length in the reader's own tokens (chat template applied), when the
    /// reader can count it locally.
    fn count_prompt(&self, messages: &[ChatMessage]) -> Result<Option<u32>, ReadError>;

    /// Reads `messages` and generates the reply.
    fn read(
        &self,
        messages: &[ChatMessage],
        decoding: &DecodingSettings,
    ) -> Result<ReaderOutput, ReadError>;
}

/// Why generation stopped.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// The model ended its turn.
    Stop,
    /// `max_new_tokens` was reached.
    Length,
}

/// A reply and what it cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReaderOutput {
    /// The reply, verbatim (control tokens left out).
    pub text: String,
    /// The full prompt in the reader's tokens, chat template included.
    pub prompt_tokens: u32,
    /// Tokens generated, the end-of-turn token included.
    pub generated_tokens: u32,
    /// Why generation stopped.
    pub finish: FinishReason,
    /// Wall-clock seconds of the whole read.
    pub seconds: f64,
    /// Seconds spent on the prompt and on generation, where the reader measures them.
    pub timing: Option<ReadTiming>,
}

/// Where a local read's time went.
#[derive(Copy, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReadTiming {
    /// Tokenising and processing the prompt (up to the first generated token's logits).
    pub prompt_seconds: f64,
    /// Generating every token after that.
    pub generation_seconds: f64,
}
