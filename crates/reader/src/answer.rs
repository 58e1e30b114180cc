//! `Answer`: what a reader replied to an answer prompt, the records it cited, whether it
//! abstained, who answered and what it cost.

use evicortex_core::TurnId;
use serde::{Deserialize, Serialize};

use crate::{
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

/// Record ids cited in `text` as `[#12]` or `[#13 #57]`, in order of appearance.
pub fn parse_citations(text: &str) -> Vec<u64> {
    let mut ids = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find("[#") {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inside = &after[..close];
        let parsed: Option<Vec<u64>> = inside
            .split([' ', ','])
            .filter(|part| !part.is_empty())
            .map(|part| part.strip_prefix('#').and_then(|digits| digits.parse().ok()))
            .collect();
        if let Some(found) = parsed {
            ids.extend(found);
            rest = &after[close + 1..];
        } else {
            rest = &after[1..];
        }
    }
    ids
}

/// `text` without its citations (`[#12]`, `[#13 #57]`), for scoring the answer's words alone:
/// record ids are not part of an answer.
pub fn strip_citations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find("[#") {
        let after = &rest[open + 1..];
        let Some(close) = after.find(']') else { break };
        let inside = &after[..close];
        let is_citation = !inside.is_empty()
            && inside.split([' ', ',']).filter(|p| !p.is_empty()).all(|part| {
                part.strip_prefix('#')
                    .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
            });
        out.push_str(&rest[..open]);
        if !is_citation {
            out.push('[');
            rest = after;
            continue;
        }
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    out.trim().to_owned()
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
    fn citations_are_parsed_from_brackets() {
        assert_eq!(parse_citations("Lisbon [#12]."), [12]);
        assert_eq!(parse_citations("A [#13 #57] and B [#2, #3]"), [13, 57, 2, 3]);
        assert_eq!(parse_citations("[#x] [#] [12] #4 [#9"), Vec::<u64>::new());
        assert_eq!(parse_citations("[[#7]]"), [7]);
    }

    #[test]
    fn citations_are_stripped_for_scoring() {
        assert_eq!(strip_citations("Lisbon [#12]."), "Lisbon .");
        assert_eq!(strip_citations("A [#13 #57] and B [#2, #3]"), "A  and B");
        assert_eq!(strip_citations("[#x] keeps [12] and [#9"), "[#x] keeps [12] and [#9");
    }

    #[test]
    fn abstention_is_the_fixed_reply() {
        assert!(is_abstention("No information available."));
        assert!(is_abstention("  no information available"));
        assert!(!is_abstention("Lisbon. No information available about Porto."));
    }
}
