//! `Answer`: what a reader replied to an answer prompt, the records it cited, whether it
//! abstained, who answered and what it cost.

use evicortex_core::TurnId;
use serde::{Deserialize, Serialize};

use crate::{
    citations::parse_citations,
    decoding::DecodingSettings,
    error::ReadError,
    identity::ReaderIdentity,
    prompt::{ABSTENTION_REPLY, AnswerPrompt},
    reader::{FinishReason, ReadTiming, Reader},
};

/// A reader's answer to one question.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    /// The reply, verbatim.
    pub text: String,
    /// Records the reply cites that the context holds, in order of first citation.
    pub citations: Vec<TurnId>,
    /// Record ids the reply cites that are not in the context (the reader made them up).
    pub unknown_citations: Vec<u64>,
    /// Whether the reply is the abstention ("No information available").
    pub abstained: bool,
    /// Who answered.
    pub reader: ReaderIdentity,
    /// How.
    pub decoding: DecodingSettings,
    /// The full prompt in the reader's tokens (instructions, question, context, chat template).
    pub prompt_tokens: u32,
    /// Tokens generated.
    pub generated_tokens: u32,
    /// Why generation stopped.
    pub finish: FinishReason,
    /// Wall-clock seconds of the read.
    pub seconds: f64,
    /// Prompt and generation seconds, where the reader measures them.
    pub timing: Option<ReadTiming>,
}

/// Asks `reader` the prompt's question. A prompt the reader can count is checked against its
/// window first and refused with the numbers ([`ReadError::PromptTooLong`]), never truncated.
pub fn answer(
    reader: &dyn Reader,
    prompt: &AnswerPrompt,
    decoding: &DecodingSettings,
) -> Result<Answer, ReadError> {
    if let (Some(window), Some(prompt_tokens)) =
        (reader.context_window(), reader.count_prompt(&prompt.messages)?)
        && u64::from(prompt_tokens) + u64::from(decoding.max_new_tokens) > u64::from(window)
    {
        return Err(ReadError::PromptTooLong {
            prompt_tokens,
            max_new_tokens: decoding.max_new_tokens,
            context_window: window,
        });
    }
    let output = reader.read(&prompt.messages, decoding)?;
    let mut citations = Vec::new();
    let mut unknown_citations = Vec::new();
    for id in parse_citations(&output.text) {
        let record = TurnId::from_raw(id);
        if prompt.context_records.binary_search(&record).is_ok() {
            if !citations.contains(&record) {
                citations.push(record);
            }
        } else if !unknown_citations.contains(&id) {
            unknown_citations.push(id);
        }
    }
    Ok(Answer {
        abstained: is_abstention(&output.text),
        text: output.text,
        citations,
        unknown_citations,
        reader: reader.identity().clone(),
        decoding: *decoding,
        prompt_tokens: output.prompt_tokens,
        generated_tokens: output.generated_tokens,
        finish: output.finish,
        seconds: output.seconds,
        timing: output.timing,
    })
}

/// Whether `text` is the abstention reply: it starts with "No information available", case and
/// surrounding space aside.
pub fn is_abstention(text: &str) -> bool {
    let phrase = ABSTENTION_REPLY.trim_end_matches('.').to_lowercase();
    text.trim_start().to_lowercase().starts_with(&phrase)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstention_is_the_fixed_reply() {
        assert!(is_abstention("No information available."));
        assert!(is_abstention("  no information available"));
        assert!(!is_abstention("Lisbon. No information available about Porto."));
    }
}
