//! Long turns as verbatim excerpts: a turn too long for its share of the budget is offered as
//! the run of its sentences that says most of what the question asks, cited with the record and
//! the run's character range. A fact stated inside a long answer then neither sinks under the
//! long-turn rule nor crowds the rest of the evidence out; the whole turn is one lookup away.

use evicortex_lexical::Bm25Index;
use serde::{Deserialize, Serialize};
use unicode_segmentation::UnicodeSegmentation;

use crate::{ReaderTokenizer, ReaderTokenizerError};

/// Where an excerpt lies in its turn's text.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Excerpt {
    /// First character (Unicode scalar value) of the excerpt, from 0.
    pub start: u32,
    /// One past its last character.
    pub end: u32,
    /// Characters in the whole turn.
    pub turn_chars: u32,
    /// The same span in bytes of the UTF-8 text (not serialised: the characters are the
    /// citation).
    #[serde(skip)]
    pub bytes: (usize, usize),
}

impl Excerpt {
    /// The excerpt's text.
    pub fn of<'t>(&self, text: &'t str) -> &'t str {
        &text[self.bytes.0..self.bytes.1]
    }
}

/// The run of consecutive sentences (UAX #29) of `text` with at most `max_tokens` reader tokens
/// (each sentence counted alone) whose distinct question terms weigh most (each term's idf in
/// `index`, counted once per run); among equal weights the run with more tokens (more of the
/// fact's surroundings), then the earliest. A sentence longer than the limit stands alone.
/// With no question term in the text, the longest opening run.
pub(crate) fn best_run(
    text: &str,
    question: &str,
    index: &Bm25Index,
    reader: &dyn ReaderTokenizer,
    max_tokens: u32,
) -> Result<Excerpt, ReaderTokenizerError> {
    let mut asked: Vec<String> = index.analyze(question);
    asked.sort();
    asked.dedup();
    let idf: Vec<f64> = asked.iter().map(|t| f64::from(index.idf(t))).collect();
    // Each sentence's byte range, tokens and held question terms.
    let mut sentences: Vec<(usize, usize, u32, Vec<usize>)> = Vec::new();
    for (start, sentence) in text.split_sentence_bound_indices() {
        let tokens = u32::try_from(reader.count(sentence)?).unwrap_or(u32::MAX);
        let terms = index.analyze(sentence);
        let held: Vec<usize> = (0..asked.len()).filter(|&i| terms.contains(&asked[i])).collect();
        sentences.push((start, start + sentence.len(), tokens, held));
    }
    let mut best: Option<(f64, u32, usize, usize)> = None;
    for first in 0..sentences.len() {
        let (mut tokens, mut held) = (0u32, vec![false; asked.len()]);
        for (last, sentence) in sentences.iter().enumerate().skip(first) {
            tokens = tokens.saturating_add(sentence.2);
            if tokens > max_tokens && last > first {
                break;
            }
            sentence.3.iter().for_each(|&t| held[t] = true);
            let weight: f64 = (0..asked.len()).filter(|&t| held[t]).map(|t| idf[t]).sum();
            if best.is_none_or(|(w, t, _, _)| weight > w || (weight == w && tokens > t)) {
                best = Some((weight, tokens, first, last));
            }
            if tokens > max_tokens {
                break;
            }
        }
    }
    let (first, last) = match best {
        Some((weight, _, first, last)) if weight > 0.0 => (first, last),
        // No question term: the longest opening run.
        _ => {
            let mut tokens = 0u32;
            let fits = sentences.iter().take_while(|s| {
                tokens = tokens.saturating_add(s.2);
                tokens <= max_tokens
            });
            (0, fits.count().saturating_sub(1))
        }
    };
    let (start, end) = match (sentences.get(first), sentences.get(last)) {
        (Some(a), Some(b)) => (a.0, b.1),
        _ => (0, text.len()),
    };
    // Spaces between sentences belong to the sentence before: the excerpt drops them.
    let end = start + text[start..end].trim_end().len();
    let chars = |byte: usize| u32::try_from(text[..byte].chars().count()).unwrap_or(u32::MAX);
    Ok(Excerpt {
        start: chars(start),
        end: chars(end),
        turn_chars: chars(text.len()),
        bytes: (start, end),
    })
}

#[cfg(test)]
mod tests {
    use evicortex_core::TurnId;
    use evicortex_lexical::{Analyzer, Bm25Params};

    use super::*;

    #[test]
    fn the_run_holding_the_question_terms_is_chosen_within_the_limit() {
        let mut index: Bm25Index<TurnId> =
            Bm25Index::with_analyzer(Bm25Params { k1: 1.2, b: 0.75 }, Analyzer::EnglishSnowball);
        index.add(TurnId::from_raw(1), "filler words everywhere").unwrap();
        let text = "Here is a long answer. It covers many things. \
            Your flight to Lisbon leaves at 9:40 from gate 12. \
            Remember your passport. Other filler follows here. More filler.";
        let reader = crate::TiktokenReader::o200k_base();
        let excerpt =
            best_run(text, "When does my flight to Lisbon leave?", &index, &reader, 20).unwrap();
        let shown = excerpt.of(text);
        assert!(shown.contains("flight to Lisbon leaves at 9:40"), "{shown}");
        assert!(reader.count(shown).unwrap() <= 24, "{shown}");
        let chars: String = text
            .chars()
            .skip(excerpt.start as usize)
            .take((excerpt.end - excerpt.start) as usize)
            .collect();
        assert_eq!(chars, shown);
        let none = best_run(text, "zebra", &index, &reader, 8).unwrap();
        assert_eq!(none.of(text), "Here is a long answer.");
    }
}
