//! Packing ranked evidence into a reader-token budget, for the systems the evaluation runs
//! outside the compiler (controls and the comparator), and the after-packing accounting.
//!
//! Layout (the compiler's `chronological_by_session`): sessions in order of their first packed
//! item's time, each under a `Session <id> (<date>):` line, items in time order inside. Items are
//! packed greedily in rank order; an item is taken only if the WHOLE rendered context, headers and
//! citations included, still counts at most the budget in the reader's tokenizer (counted
//! exactly by re-tokenizing the rendering, never estimated).

use std::{collections::BTreeMap, sync::Arc};

use chrono::NaiveDateTime;

/// The tokenizer of the model that reads the context.
#[derive(Clone)]
pub enum ReaderTokenizer {
    /// A tiktoken encoding (`o200k_base`, `cl100k_base`).
    Tiktoken {
        /// Its name.
        name: String,
        /// The encoder.
        bpe: &'static tiktoken_rs::CoreBPE,
    },
    /// A Hugging Face `tokenizer.json`.
    HuggingFace {
        /// `hf:<path>`.
        name: String,
        /// The tokenizer.
        tokenizer: Arc<tokenizers::Tokenizer>,
    },
}

impl std::fmt::Debug for ReaderTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ReaderTokenizer({})", self.name())
    }
}

/// A reader tokenizer name that is not known.
#[derive(Debug, thiserror::Error)]
#[error("reader tokenizer {name:?}: {reason}")]
pub struct ReaderTokenizerError {
    /// The name given.
    pub name: String,
    /// Why it was refused.
    pub reason: String,
}

impl ReaderTokenizer {
    /// `o200k_base`, `cl100k_base`, or a path to a `tokenizer.json`.
    pub fn by_name(name: &str) -> Result<ReaderTokenizer, ReaderTokenizerError> {
        match name {
            "o200k_base" => Ok(ReaderTokenizer::Tiktoken {
                name: name.into(),
                bpe: tiktoken_rs::o200k_base_singleton(),
            }),
            "cl100k_base" => Ok(ReaderTokenizer::Tiktoken {
                name: name.into(),
                bpe: tiktoken_rs::cl100k_base_singleton(),
            }),
            path if path.ends_with(".json") => {
                let tokenizer = tokenizers::Tokenizer::from_file(path).map_err(|e| {
                    ReaderTokenizerError { name: name.into(), reason: e.to_string() }
                })?;
                Ok(ReaderTokenizer::HuggingFace {
                    name: format!("hf:{path}"),
                    tokenizer: Arc::new(tokenizer),
                })
            }
            _ => Err(ReaderTokenizerError {
                name: name.into(),
                reason: "expected o200k_base, cl100k_base or a tokenizer.json path".into(),
            }),
        }
    }

    /// The name recorded in reports.
    pub fn name(&self) -> &str {
        match self {
            ReaderTokenizer::Tiktoken { name, .. } | ReaderTokenizer::HuggingFace { name, .. } => {
                name
            }
        }
    }

    /// Exact token count of `text` (no special tokens added).
    pub fn count(&self, text: &str) -> Result<usize, ReaderTokenizerError> {
        match self {
            ReaderTokenizer::Tiktoken { bpe, .. } => Ok(bpe.encode_ordinary(text).len()),
            ReaderTokenizer::HuggingFace { name, tokenizer } => tokenizer
                .encode(text, false)
                .map(|e| e.len())
                .map_err(|e| ReaderTokenizerError { name: name.clone(), reason: e.to_string() }),
        }
    }
}

/// One item offered to the packer: a turn or a chunk, with the session it belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackItem {
    /// The session's id (header line).
    pub session: String,
    /// The session's date (header line) and the item's time.
    pub time: NaiveDateTime,
    /// Order inside the session (turn index, or first turn index of a chunk).
    pub order: usize,
    /// The rendered line, citation included (e.g. `[#12] 2023-05-30 21:56 user: ...`).
    pub line: String,
}

/// Whether packing may skip an item that does not fit and try the next ones.
#[derive(Copy, Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PackPolicy {
    /// Skip items that do not fit and keep trying later ones (retrieval systems).
    SkipWhatDoesNotFit,
    /// Stop at the first item that does not fit (full history: a contiguous recent window).
    StopAtFirstMiss,
}

/// What was packed: indexes into the offered items, in rank order, and the exact token count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packed {
    /// Indexes of the packed items, in the order they were offered (rank order).
    pub included: Vec<usize>,
    /// Reader tokens of the rendered context.
    pub tokens_used: usize,
    /// The rendered context.
    pub text: String,
}

/// Renders `items` (indexes into `all`) in the reader layout.
pub fn render(all: &[PackItem], items: &[usize]) -> String {
    let mut by_session: BTreeMap<(&NaiveDateTime, &str), Vec<&PackItem>> = BTreeMap::new();
    let mut first_time: BTreeMap<&str, &NaiveDateTime> = BTreeMap::new();
    for &i in items {
        let item = &all[i];
        let t = first_time.entry(item.session.as_str()).or_insert(&item.time);
        if item.time < **t {
            *t = &item.time;
        }
    }
    for &i in items {
        let item = &all[i];
        by_session
            .entry((first_time[item.session.as_str()], item.session.as_str()))
            .or_default()
            .push(item);
    }
    let mut out = String::new();
    for ((date, session), mut members) in by_session {
        members.sort_by_key(|m| (m.time, m.order));
        out.push_str(&format!("Session {session} ({}):\n", date.format("%Y-%m-%d")));
        for m in members {
            out.push_str(&m.line);
            out.push('\n');
        }
    }
    out
}

/// Packs `items` (best first) into `budget` reader tokens; `None` packs everything.
pub fn pack(
    items: &[PackItem],
    budget: Option<usize>,
    tokenizer: &ReaderTokenizer,
    policy: PackPolicy,
) -> Result<Packed, ReaderTokenizerError> {
    let Some(budget) = budget else {
        let included: Vec<usize> = (0..items.len()).collect();
        let text = render(items, &included);
        return Ok(Packed { tokens_used: tokenizer.count(&text)?, included, text });
    };
    let mut included = Vec::new();
    let mut text = String::new();
    let mut tokens_used = 0;
    for i in 0..items.len() {
        // A line that alone exceeds the budget cannot fit; skip the full re-tokenisation.
        let alone = tokenizer.count(&items[i].line)?;
        let fits = if alone > budget {
            false
        } else {
            included.push(i);
            let candidate = render(items, &included);
            let n = tokenizer.count(&candidate)?;
            if n <= budget {
                text = candidate;
                tokens_used = n;
                true
            } else {
                included.pop();
                false
            }
        };
        if !fits && policy == PackPolicy::StopAtFirstMiss {
            break;
        }
    }
    Ok(Packed { included, tokens_used, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(session: &str, day: u32, order: usize, line: &str) -> PackItem {
        PackItem {
            session: session.into(),
            time: chrono::NaiveDate::from_ymd_opt(2023, 5, day)
                .unwrap()
                .and_hms_opt(10, 0, 0)
                .unwrap(),
            order,
            line: line.into(),
        }
    }

    #[test]
    fn packs_within_budget_exactly_and_lays_out_chronologically() {
        let tok = ReaderTokenizer::by_name("o200k_base").unwrap();
        let items = vec![
            item("b", 20, 1, "[#5] user: I moved to Lisbon in May."),
            item("a", 2, 0, "[#1] user: hello there"),
            item("b", 20, 0, &format!("[#4] user: {}", "very long text ".repeat(200))),
        ];
        let all = pack(&items, None, &tok, PackPolicy::SkipWhatDoesNotFit).unwrap();
        assert_eq!(all.included, vec![0, 1, 2]);
        let packed = pack(&items, Some(40), &tok, PackPolicy::SkipWhatDoesNotFit).unwrap();
        assert_eq!(packed.included, vec![0, 1]);
        assert_eq!(packed.tokens_used, tok.count(&packed.text).unwrap());
        assert!(packed.tokens_used <= 40);
        assert_eq!(
            packed.text,
            "Session a (2023-05-02):\n[#1] user: hello there\nSession b (2023-05-20):\n[#5] user: I moved to Lisbon in May.\n"
        );
        let stop = pack(
            &[items[2].clone(), items[0].clone()],
            Some(40),
            &tok,
            PackPolicy::StopAtFirstMiss,
        )
        .unwrap();
        assert!(stop.included.is_empty());
        assert_eq!(stop.tokens_used, 0);
    }

    #[test]
    fn unknown_reader_tokenizer_is_refused() {
        assert!(ReaderTokenizer::by_name("gpt2").is_err());
    }
}
